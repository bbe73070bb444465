package notify

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/jackc/pgx/v5"

	"lockstep/pkg/store"
)

// changeSource is one way of subscribing to the change log's stream: LISTEN/NOTIFY
// (listenSource, listen.go) or logical replication (logicalSource, logical.go). The listener
// loop, the applier, the catch-up and the barrier go through it and never ask which source
// runs (Config.Source picks it in New).
type changeSource interface {
	// session connects, subscribes, has the applier catch up from the watermark
	// (requestCatchUp), marks the feed streaming (streaming) and then streams events (push)
	// until the connection fails (the error says why) or ctx ends.
	session(ctx context.Context, first *bool, backoff *time.Duration) error
	// emit sends payload (a heartbeat's send time, or a barrier token) through the pool on
	// this replica's own path, so that the session hears it back in commit order.
	emit(ctx context.Context, payload string) error
	// lateVisibility reports whether a change can be streamed before its commit is visible
	// to other sessions, so that a re-read missing it must ask whether it committed.
	lateVisibility() bool
}

func (s *Syncer) listen(ctx context.Context) {
	backoff := s.cfg.BackoffMin
	first := true
	for ctx.Err() == nil {
		if !first {
			s.setState(StateReconnecting)
		}
		err := s.src.session(ctx, &first, &backoff)
		if ctx.Err() != nil {
			return
		}
		s.setState(StateReconnecting)
		s.log.Warn().Err(err).Dur("backoff", backoff).Msg("listener connection lost; reconnecting")
		// capped exponential backoff with full jitter, cancellable
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(backoff*2, s.cfg.BackoffMax)
	}
}

// feedConnConfig is the connection config of the change feed's own connection, with TCP
// keepalive: ListenURL parsed the way the pool parses its URL (store.ParseConnConfig), or a copy of the pool's own
// parsed config. Either way the pgx/pgxpool-only settings (pool_max_conns,
// default_query_exec_mode, ...) are taken out: pgconn would send them to the server as
// run-time parameters, which it refuses.
func (s *Syncer) feedConnConfig() (*pgx.ConnConfig, error) {
	var pcfg *pgx.ConnConfig
	if s.cfg.ListenURL == "" {
		pcfg = s.cfg.Store.ConnConfig()
	} else {
		var err error
		if pcfg, err = store.ParseConnConfig(s.cfg.ListenURL); err != nil {
			return nil, fmt.Errorf("listen database url: %w", err)
		}
	}
	// TCP keepalive on the feed's socket, beside the liveness probe: the kernel probes an
	// idle connection after HeartbeatTimeout, every HeartbeatInterval, 3 times (tcp(7)
	// TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT), so a peer gone without a FIN or RST also
	// fails the socket when the session is not reading (pgconn's default is 5 min).
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: s.cfg.HeartbeatTimeout, Interval: s.cfg.HeartbeatInterval, Count: 3}}
	pcfg.DialFunc = store.Dial(d)
	return pcfg, nil
}

// requestCatchUp has the applier read the change log since the watermark and waits for it.
// Both sessions call it once their subscription is in place (LISTEN done, or replication slot
// created), so that a change committed before the subscription is read from the log and one
// committed after it is streamed: nothing falls between the two.
func (s *Syncer) requestCatchUp(ctx context.Context, first bool) error {
	s.setState(StateCatchingUp)
	mode := catchUpReconnect
	if first {
		mode = catchUpStart
	}
	if err := s.runCatchUp(ctx, mode); err != nil {
		return fmt.Errorf("catch-up: %w", err)
	}
	return nil
}

// runCatchUp has the applier run one catch-up pass in mode and waits for its outcome.
func (s *Syncer) runCatchUp(ctx context.Context, mode catchUpMode) error {
	done := make(chan error, 1)
	select {
	case s.catchUp <- catchUpReq{done: done, mode: mode}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streaming records that a session has caught up and is streaming: counts a reconnect (not
// the first session), resets the backoff and the heartbeat clock, and marks the feed ready.
func (s *Syncer) streaming(first *bool, backoff *time.Duration) {
	if !*first {
		s.reconnects.Add(1)
		s.log.Info().Str("source", string(s.cfg.Source)).Msg("listener reconnected and caught up")
	}
	*first = false
	*backoff = s.cfg.BackoffMin
	s.lastHB.Store(time.Now().UnixNano())
	s.setState(StateStreaming)
	s.ready.Store(true)
}

// push hands one decoded change to the applier. It never blocks the session: on a full buffer
// the change is counted as dropped and the next change-log poll repairs it.
func (s *Syncer) push(ev event) {
	if _, ok := s.sinks[ev.Type]; !ok {
		return // type not synced here (supported_db_objects)
	}
	if ev.Seq > s.headSeq.Load() {
		s.headSeq.Store(ev.Seq)
	}
	select {
	case s.events <- ev:
	default:
		// Buffer full: count it and let the change-log catch-up repair it.
		s.lost(1)
	}
}
