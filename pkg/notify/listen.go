package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"lockstep/pkg/store"
)

// listenSource is the LISTEN/NOTIFY change source (SourceListen): one dedicated connection
// LISTENs on Channel and on the replica's own channel, gateway_hb_<replica>; a heartbeat or
// barrier token is a NOTIFY on that channel through the pool.
type listenSource struct{ s *Syncer }

func (l listenSource) session(ctx context.Context, first *bool, backoff *time.Duration) error {
	return l.s.listenSession(ctx, first, backoff)
}

func (l listenSource) emit(ctx context.Context, payload string) error {
	return l.s.cfg.Store.Notify(ctx, l.s.hbChan, payload)
}

// lateVisibility: a notification is delivered after its transaction's commit is visible
// (PostgreSQL docs "NOTIFY": delivered "between transactions", after commit).
func (listenSource) lateVisibility() bool { return false }

func listenChannel(replicaID string) string { return "gateway_hb_" + sanitize(replicaID) }

// listenSession runs one listener connection until it fails.
func (s *Syncer) listenSession(ctx context.Context, first *bool, backoff *time.Duration) error {
	pcfg, err := s.feedConnConfig()
	if err != nil {
		return err
	}
	pcfg.ConnectTimeout = 5 * time.Second
	pcfg.RuntimeParams["application_name"] = "lockstep-listener-" + s.cfg.ReplicaID
	pcfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) { s.onNotification(n) }
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	pconn, err := pgx.ConnectConfig(cctx, pcfg) // pgx for the inline re-reads (inline.go)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pconn.Close(context.Background())
	defer s.spill() // what was received and not applied goes to the applier
	conn := pconn.PgConn()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = conn.Exec(lctx, fmt.Sprintf("LISTEN %s; LISTEN %s", Channel, s.hbChan)).ReadAll()
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	types := make([]store.ObjectType, 0, len(s.sinks))
	for t := range s.sinks {
		types = append(types, t)
	}
	// the inline re-reads' statements (inline.go), prepared now rather than at the first
	// change; not fatal (a pooler that keeps no prepared statements, say): a re-read that then
	// fails on this connection is re-read on the pool
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = store.PrepareReload(pctx, pconn, types)
	cancel()
	if err != nil {
		if pconn.IsClosed() {
			return err
		}
		s.log.Warn().Err(err).Msg("listen connection: re-read statements not prepared")
	}
	// LISTEN is in place: anything committed from now on is notified. Catch up on what was
	// committed before (or while disconnected), then stream.
	if err := s.requestCatchUp(ctx, *first); err != nil {
		return err
	}
	start := time.Now()
	s.streaming(first, backoff)
	sentAtStart := s.hbSent.Load()
	var lastEcho, lastProbe time.Time
	// The wait's deadline is kept across notifications until it passes: under a steady stream
	// each notification costs no timer of its own, and an idle replica wakes once per
	// HeartbeatInterval (for its probe), not more often.
	var w waitDeadline
	defer w.stop()
	for {
		heardOwn := s.hbHeard.Load() > start.UnixNano()
		if !heardOwn && time.Since(lastEcho) >= s.cfg.HeartbeatInterval {
			// Until this connection has heard one NOTIFY of its own, check that notifications
			// reach it at all (they do not through a transaction-pooling PgBouncer): a NOTIFY
			// on the replica's own channel, at most one per HeartbeatInterval, and none once
			// one came back. Every listener in the database is woken by every NOTIFY
			// (PostgreSQL's async.c signals all listening backends), so this is kept to the
			// session's start and to the degraded state, never a steady heartbeat.
			lastEcho = time.Now()
			s.echo(ctx)
		}
		// Liveness: when nothing arrived for HeartbeatInterval, a query round trip on this
		// very connection, bounded by probeTimeout, proves it alive (or fails it).
		idleSince := time.Unix(0, s.lastHB.Load())
		if time.Since(idleSince) >= s.cfg.HeartbeatInterval && time.Since(lastProbe) >= s.cfg.HeartbeatInterval {
			lastProbe = time.Now()
			if err := s.probe(ctx, conn); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("liveness probe (SELECT 1 within %s): %w", s.probeTimeout(), err)
			}
			if err := s.flushInbox(ctx, pconn); err != nil { // notifications that came during the probe
				return err
			}
			idleSince = time.Unix(0, s.lastHB.Load())
		}
		// wait for notifications until the next probe (or, until one own NOTIFY came back,
		// the next echo) is due; the checks above and below run at every notification and at
		// that deadline
		if w.ctx == nil || w.ctx.Err() != nil {
			due := idleSince.Add(s.cfg.HeartbeatInterval)
			if !heardOwn {
				due = minTime(due, lastEcho.Add(s.cfg.HeartbeatInterval))
			}
			w.renew(ctx, max(10*time.Millisecond, time.Until(due)))
		}
		err := conn.WaitForNotification(w.ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if conn.IsClosed() {
			return errors.New("listener connection closed")
		}
		if err := s.flushInbox(ctx, pconn); err != nil {
			return err
		}
		heardOwn = s.hbHeard.Load() > start.UnixNano()
		switch {
		case !heardOwn && s.hbSent.Load()-sentAtStart >= 2 && time.Since(start) > s.cfg.HeartbeatTimeout:
			// Our own NOTIFYs were committed, yet none came back on this connection since
			// LISTEN: notifications are not delivered to it. Reconnecting would not help; stay
			// connected (the probe still checks the connection), let the change-log poll keep
			// the registries in step, and say why.
			if s.State() != StateDegraded {
				s.reason.Store(degradedReason)
				s.setState(StateDegraded)
				s.log.Warn().Str("reason", degradedReason).Msg("change feed degraded: LISTEN does not receive notifications")
			}
		case heardOwn && s.State() == StateDegraded:
			s.setState(StateStreaming)
			s.log.Info().Msg("listener hears its own NOTIFY again: streaming")
		}
		if since := time.Since(time.Unix(0, s.lastHB.Load())); since > s.cfg.HeartbeatTimeout {
			return fmt.Errorf("nothing received and no probe answered for %s", since.Round(time.Millisecond))
		}
	}
}

// waitDeadline is the listen session's wait context, renewed only once its deadline passed.
type waitDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (w *waitDeadline) renew(parent context.Context, d time.Duration) {
	w.stop()
	w.ctx, w.cancel = context.WithTimeout(parent, d)
}

func (w *waitDeadline) stop() {
	if w.cancel != nil {
		w.cancel()
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// probeTimeout bounds one liveness probe: HeartbeatTimeout - HeartbeatInterval (default 2 s),
// so a connection that goes silent right after its last message is failed within
// HeartbeatTimeout (the probe starts HeartbeatInterval into the silence). At least 100 ms.
func (s *Syncer) probeTimeout() time.Duration {
	return max(100*time.Millisecond, s.cfg.HeartbeatTimeout-s.cfg.HeartbeatInterval)
}

// probe runs SELECT 1 on the listener connection within probeTimeout and records its round
// trip (heartbeat_rtt_ms) and the proof of life. A notification arriving meanwhile is
// dispatched as usual (pgconn hands it to OnNotification while reading the reply). On the
// deadline pgconn interrupts the read (its context watcher sets a deadline on the socket), so
// a frozen backend or a half-open TCP connection fails the probe in time.
//
// The deadline counts from the last thing received, not from the probe's start: a reply
// queued behind a burst of notifications (a bulk insert's million, delivered before the
// backend answers) waits for them, each proving the connection alive; a connection on which
// nothing arrives for probeTimeout fails.
func (s *Syncer) probe(ctx context.Context, conn *pgconn.PgConn) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(min(100*time.Millisecond, s.probeTimeout()/4))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if time.Since(time.Unix(0, max(t0.UnixNano(), s.lastHB.Load()))) > s.probeTimeout() {
					cancel()
					return
				}
			}
		}
	}()
	s.probing.Store(true)
	_, err := conn.Exec(pctx, "SELECT 1").ReadAll()
	s.probing.Store(false)
	if err != nil {
		return err
	}
	now := time.Now()
	s.hbRTT.Store(now.Sub(t0).Nanoseconds())
	s.lastHB.Store(now.UnixNano())
	s.probes.Add(1)
	return nil
}

// echo sends one NOTIFY on the replica's own channel through the pool, in the background
// (the session goes on waiting for it); hbSent counts the ones committed.
func (s *Syncer) echo(ctx context.Context) {
	s.wg.Add(1) // the listen goroutine holds the group: never a first Add racing Stop's Wait
	go func() {
		defer s.wg.Done()
		ectx, cancel := context.WithTimeout(ctx, s.cfg.HeartbeatInterval)
		defer cancel()
		if err := s.src.emit(ectx, strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
			if ctx.Err() == nil {
				s.log.Debug().Err(err).Msg("own NOTIFY failed")
			}
			return
		}
		s.hbSent.Add(1)
	}()
}

// degradedReason is Stats.Reason in StateDegraded.
const degradedReason = "the change feed's LISTEN connection never hears its own heartbeat NOTIFY: notifications are not delivered to it, " +
	"as happens through PgBouncer in transaction pooling mode (pool_mode = transaction); set --listen-database-url " +
	"(GATEWAY_LISTEN_DATABASE_URL) to a direct or session-pooled connection. Meanwhile the change-log poll keeps this replica in sync"

func (s *Syncer) onNotification(n *pgconn.Notification) {
	if n.Channel == s.hbChan {
		now := time.Now()
		s.lastHB.Store(now.UnixNano())
		// Delivery is proven only by a NOTIFY that reaches the connection while it waits in
		// LISTEN. One that arrives during the liveness probe's query proves nothing: through
		// a transaction-pooling PgBouncer the probe may run on the server connection that
		// holds the LISTEN, which hands over what it queued, yet no notification reaches
		// this connection between queries.
		if !s.probing.Load() {
			s.hbHeard.Store(now.UnixNano())
		}
		if strings.HasPrefix(n.Payload, barrierPrefix) {
			s.spill() // what came before the token is queued before the round can complete
		}
		s.heardToken(n.Payload) // else the echo of an own NOTIFY (see listenSession)
		return
	}
	if n.Channel != Channel {
		return
	}
	received := mono()
	// any notification proves the listener connection alive (a burst of thousands can delay
	// the heartbeat's own notification behind it)
	s.lastHB.Store(time.Now().UnixNano())
	var ev event
	if err := parseEvent(n.Payload, &ev); err != nil || ev.Type == "" || (ev.ID == "" && ev.Op != "truncate") || ev.Seq <= 0 {
		s.malformed.Add(1)
		s.log.Warn().Int("payload_bytes", len(n.Payload)).Str("payload", truncate(n.Payload, 200)).Msg("ignoring malformed notification")
		return
	}
	ev.received, ev.parsed = received, mono()
	if _, ok := s.sinks[ev.Type]; !ok {
		return // type not synced here (supported_db_objects)
	}
	if ev.Seq > s.headSeq.Load() {
		s.headSeq.Store(ev.Seq)
	}
	// applied inline or queued once the session's read returns (flushInbox); a burst beyond
	// inlineMax is queued as it arrives, in order
	s.inbox = append(s.inbox, ev)
	if len(s.inbox) > inlineMax {
		s.spill()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
