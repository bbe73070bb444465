package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
	conn, err := pgconn.ConnectConfig(cctx, pcfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = conn.Exec(lctx, fmt.Sprintf("LISTEN %s; LISTEN %s", Channel, s.hbChan)).ReadAll()
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// LISTEN is in place: anything committed from now on is notified. Catch up on what was
	// committed before (or while disconnected), then stream.
	if err := s.requestCatchUp(ctx, *first); err != nil {
		return err
	}
	s.streaming(first, backoff)
	start := time.Now()
	sentAtStart := s.hbSent.Load()
	var lastPing time.Time
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := conn.WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if conn.IsClosed() {
			return errors.New("listener connection closed")
		}
		heardOwn := s.hbHeard.Load() > start.UnixNano()
		switch {
		case !heardOwn && s.hbSent.Load()-sentAtStart >= 2 && time.Since(start) > s.cfg.HeartbeatTimeout:
			// Our own heartbeats were committed, yet none came back on this connection since
			// LISTEN: notifications are not delivered to it. Reconnecting would not help; stay
			// connected, let the change-log poll keep the registries in step, and say why.
			if s.State() != StateDegraded {
				s.reason.Store(degradedReason)
				s.state.Store(StateDegraded)
				s.log.Warn().Str("reason", degradedReason).Msg("change feed degraded: LISTEN does not receive notifications")
			}
			// the connection may still die: check it is alive, at the heartbeat's pace
			if time.Since(lastPing) >= s.cfg.HeartbeatInterval {
				lastPing = time.Now()
				pctx, cancel := context.WithTimeout(ctx, s.cfg.HeartbeatTimeout)
				_, err := conn.Exec(pctx, "SELECT 1").ReadAll()
				cancel()
				if err != nil {
					return fmt.Errorf("degraded listener connection: %w", err)
				}
			}
		case heardOwn && s.State() == StateDegraded:
			s.state.Store(StateStreaming)
			s.log.Info().Msg("listener hears its own heartbeat again: streaming")
		case s.State() != StateDegraded:
			if since := time.Since(time.Unix(0, s.lastHB.Load())); since > s.cfg.HeartbeatTimeout {
				return fmt.Errorf("no heartbeat for %s", since.Round(time.Millisecond))
			}
		}
	}
}

// degradedReason is Stats.Reason in StateDegraded.
const degradedReason = "the change feed's LISTEN connection never hears its own heartbeat NOTIFY: notifications are not delivered to it, " +
	"as happens through PgBouncer in transaction pooling mode (pool_mode = transaction); set --listen-database-url " +
	"(GATEWAY_LISTEN_DATABASE_URL) to a direct or session-pooled connection. Meanwhile the change-log poll keeps this replica in sync"

func (s *Syncer) onNotification(n *pgconn.Notification) {
	if n.Channel == s.hbChan {
		now := time.Now()
		s.lastHB.Store(now.UnixNano())
		s.hbHeard.Store(now.UnixNano())
		if s.heardToken(n.Payload) {
			return
		}
		if sent, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			s.hbRTT.Store(now.UnixNano() - sent)
		}
		return
	}
	if n.Channel != Channel {
		return
	}
	// any notification proves the listener connection alive (a burst of thousands can delay
	// the heartbeat's own notification behind it)
	s.lastHB.Store(time.Now().UnixNano())
	var ev event
	if err := json.Unmarshal([]byte(n.Payload), &ev); err != nil || ev.Type == "" || (ev.ID == "" && ev.Op != "truncate") || ev.Seq <= 0 {
		s.malformed.Add(1)
		s.log.Warn().Int("payload_bytes", len(n.Payload)).Str("payload", truncate(n.Payload, 200)).Msg("ignoring malformed notification")
		return
	}
	s.push(ev)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
