package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"lockstep/pkg/store"
)

// Inline apply: the listen session applies a notification itself, re-reading the row on the
// connection that delivered it, instead of handing it to the applier goroutine and re-reading
// it through the pool.
//
// Why: with 20 replicas on 2 cores, a notification cost each receiver ~0.26 ms of CPU and 8–11
// thread wake-ups (docs/scale-out.md): the notification woke the listener, the hand-off to the
// applier woke a second thread, the pool's re-read woke a third backend-side and client-side.
// Inline, one goroutine reads the notification, sends the re-read on the same socket and reads
// its answer: no hand-off, no pool acquire, and on the server the listener's own backend —
// just woken to deliver the notification — answers the re-read, so a write wakes R backends,
// not 2R.
//
// Rules (each keeps an invariant of DESIGN.md):
//   - Order. A batch is applied inline only when the applier's queue is empty and the applier
//     is not applying (applyMu.TryLock): nothing received earlier is still waiting. Otherwise
//     the batch is queued behind the earlier ones, as every notification was before.
//   - The listener never waits on the applier: it only ever TryLocks. A catch-up, a poll or a
//     bulk batch on the applier makes the listener queue, not wait.
//   - Bounded: at most inlineMax notifications per inline batch (a burst beyond it, a bulk
//     insert's, goes to the applier, which batches and builds on every core), and the re-read
//     runs within probeTimeout, the bound of a liveness probe on this connection; an answered
//     re-read is a round trip on the connection, so it proves the connection alive like a probe.
//   - Barrier. A barrier token is heard only after every notification received before it was
//     applied or queued (spill before heardToken, onNotification), and the applier completes
//     the round under applyMu, so after any inline apply in flight.
//   - Failure. A re-read that fails leaves the changes pending and kicks the applier, which
//     re-reads them on the pool; a connection that failed ends the session (reconnect, catch-up).
//     A re-read unanswered after half of probeTimeout (waiting on a lock) is cancelled on the
//     server and counts as failed, not as a lost connection (reloadInline).
//
// The logical source keeps the hand-off: its connection streams WAL and cannot run a query.

// inlineMax is the most notifications the listen session applies itself in one batch.
const inlineMax = 64

// flushInbox applies or queues every notification the listen session received (its inbox),
// until none is left; notifications arriving during an inline re-read join the inbox and are
// flushed in the next round. An error means the connection failed (closed, or a re-read
// on it timed out or lost the server: store.ErrUnavailable) and the session must end; the
// changes it carried are pending on the applier, which re-reads them on the pool.
func (s *Syncer) flushInbox(ctx context.Context, conn *pgx.Conn) error {
	for len(s.inbox) > 0 {
		if len(s.inbox) > inlineMax || len(s.events) > 0 || !s.applyMu.TryLock() {
			s.spill()
			return nil
		}
		batch := s.inbox
		s.inbox = s.inboxSpare[:0]
		// a notification on our own channel that arrives while the re-read runs proves no
		// delivery (see onNotification): flagged as during a probe
		s.probing.Store(true)
		err := s.applyEvents(ctx, batch, mono(), conn)
		s.probing.Store(false)
		s.applyMu.Unlock()
		s.inboxSpare = batch[:0]
		switch {
		case conn.IsClosed() || errors.Is(err, store.ErrUnavailable):
			s.spill()
			if err == nil {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("re-read on the listen connection: %w", err)
		case err == nil:
			s.lastHB.Store(time.Now().UnixNano()) // a round trip answered: proof of life
			s.eventsInline.Add(int64(len(batch)))
		}
	}
	return nil
}

// spill queues the inbox for the applier, in the order received.
func (s *Syncer) spill() {
	for _, ev := range s.inbox {
		s.push(ev)
	}
	s.inbox = s.inbox[:0]
}

// errInlineSlow: the server cancelled an inline re-read this session asked it to cancel.
var errInlineSlow = errors.New("re-read on the listen connection cancelled: the server did not answer within half the probe timeout")

// reloadInline is Store.ReloadOn on the listen connection within probeTimeout. A re-read that
// has no answer after half of it is cancelled on the server (a cancel request, on a connection
// of its own): a re-read waiting on a lock (a migration's ALTER TABLE on the table, queued
// behind a long transaction) is a slow query, not a dead connection, and must not end the
// session; the server's answer to the cancel proves the connection alive, and the change is
// left pending for the applier, which re-reads it on the pool within its own 5 s. A frozen
// backend or a lost connection answers nothing: the deadline closes the connection at
// probeTimeout and the session ends, as before.
func (s *Syncer) reloadInline(ctx context.Context, on store.Querier, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	rctx, cancel := context.WithTimeout(ctx, s.probeTimeout())
	defer cancel()
	conn, ok := on.(*pgx.Conn)
	if !ok {
		return s.cfg.Store.ReloadOn(rctx, on, typ, ids)
	}
	sent := make(chan struct{})
	t := time.AfterFunc(s.probeTimeout()/2, func() {
		defer close(sent)
		_ = conn.PgConn().CancelRequest(rctx)
	})
	rows, filtered, err := s.cfg.Store.ReloadOn(rctx, on, typ, ids)
	if t.Stop() {
		return rows, filtered, err
	}
	<-sent // the cancel request is done before the connection runs anything else
	if err != nil && !conn.IsClosed() {
		// answered (with the cancel's error): alive; not store.ErrUnavailable, so the session goes on
		return nil, nil, fmt.Errorf("%w (%v)", errInlineSlow, err)
	}
	return rows, filtered, err
}
