package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
var errInlineSlow = errors.New("re-read on the listen connection cancelled: the server sent nothing for half the probe timeout")

// reloadInline is Store.ReloadOn on the listen connection, watched like a liveness probe: the
// bound counts from the last thing the connection received, not from the re-read's start (a
// reply queued behind a burst of notifications — a bulk insert's million — waits for them,
// each proving the connection alive). When nothing arrives for half of probeTimeout the
// re-read is cancelled on the server (a cancel request, on a connection of its own): a re-read
// waiting on a lock (a migration's ALTER TABLE on the table, queued behind a long
// transaction) is a slow query, not a dead connection, and must not end the session; the
// server's answer to the cancel proves the connection alive, and the change is left pending
// for the applier, which re-reads it on the pool within its own 5 s. A frozen backend or a
// lost connection answers nothing: after probeTimeout of silence the re-read's context ends,
// pgconn closes the connection and the session ends (store.ErrUnavailable).
//
// The watchdog is the session's (one per connection, inlineWatchFor), not one per re-read:
// a re-read costs an uncontended lock and two field writes, and a busy session a timer reset
// per half bound; no context, timer or allocation per re-read (a context and a timer per
// re-read, and the store's own timeout, were ~1.7 KB and four timer-heap updates per
// notification on every receiver: BenchmarkNotifyOneChange).
func (s *Syncer) reloadInline(ctx context.Context, conn *pgx.Conn, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	w := s.inlineWatchFor(ctx, conn)
	rctx := w.begin()
	rows, filtered, err := s.cfg.Store.ReloadOn(rctx, conn, typ, ids)
	if w.finish() && err != nil && !conn.IsClosed() {
		// answered (with the cancel's error): alive; not store.ErrUnavailable, so the session goes on
		return nil, nil, fmt.Errorf("%w (%v)", errInlineSlow, err)
	}
	return rows, filtered, err
}

// inlineWatchFor is the watchdog of the inline re-reads on conn under ctx (the listen
// session's), made at the session's first re-read; the previous session's is released. Only
// the listen goroutine calls it.
func (s *Syncer) inlineWatchFor(ctx context.Context, conn *pgx.Conn) *inlineWatch {
	if w := s.inline; w != nil && w.conn == conn && w.parent == ctx {
		return w
	}
	if s.inline != nil {
		s.inline.release()
	}
	s.inline = s.newInlineWatch(ctx, conn)
	return s.inline
}

// inlineWatch is the watchdog of one connection's inline re-reads (reloadInline): one timer,
// armed by a re-read when it is not armed already and re-armed, while a re-read is in
// flight, from the connection's last proof of life (Syncer.lastHB, set by every notification
// received). A check that finds no re-read in flight disarms it, so an idle session has no
// timer and a busy one about two checks per probe bound, however many re-reads it sends.
type inlineWatch struct {
	s      *Syncer
	conn   *pgx.Conn
	parent context.Context

	mu     sync.Mutex
	t      *time.Timer
	armed  bool
	ctx    context.Context    // the re-reads' context: renewed after a re-read was given up
	cancel context.CancelFunc // gives the re-read in flight up (pgconn then closes conn)
	start  int64              // unix nanos the re-read in flight was sent; 0: none in flight
	sent   bool               // a cancel request was sent for the re-read in flight
}

// newInlineWatch makes the watchdog of inline re-reads on conn (none in flight, timer disarmed).
func (s *Syncer) newInlineWatch(ctx context.Context, conn *pgx.Conn) *inlineWatch {
	w := &inlineWatch{s: s, conn: conn, parent: ctx}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.t = time.AfterFunc(time.Hour, w.check)
	w.t.Stop()
	return w
}

// begin starts watching a re-read sent now and returns the context to send it under.
func (w *inlineWatch) begin() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start, w.sent = time.Now().UnixNano(), false
	if !w.armed {
		w.armed = true
		w.t.Reset(w.s.probeTimeout() / 2)
	}
	return w.ctx
}

// check runs on the timer: with a re-read in flight, the silence so far decides between
// waiting on, asking the server to cancel, and giving the connection up.
func (w *inlineWatch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start == 0 {
		w.armed = false
		return
	}
	limit := w.s.probeTimeout()
	idle := time.Since(time.Unix(0, max(w.start, w.s.lastHB.Load())))
	switch {
	case idle >= limit:
		w.cancel()
		w.armed = false
	case idle >= limit/2 && !w.sent:
		w.sent = true
		// the cancel request gets what is left of the bound, and the silence is measured
		// again after it: an unanswered one (the host unreachable) must not stretch the bound
		cctx, cancel := context.WithTimeout(context.Background(), limit-idle)
		_ = w.conn.PgConn().CancelRequest(cctx)
		cancel()
		if idle = time.Since(time.Unix(0, max(w.start, w.s.lastHB.Load()))); idle >= limit {
			w.cancel()
			w.armed = false
			return
		}
		w.t.Reset(limit - idle)
	case w.sent:
		w.t.Reset(limit - idle)
	default:
		w.t.Reset(limit/2 - idle)
	}
}

// finish ends watching the re-read in flight once it returned (after a cancel request in
// flight is done, so that it cannot reach the next query) and reports whether a cancel
// request was sent for it. A re-read given up leaves the next one a fresh context.
func (w *inlineWatch) finish() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	sent := w.sent
	w.start, w.sent = 0, false
	if w.ctx.Err() != nil && w.parent.Err() == nil {
		w.ctx, w.cancel = context.WithCancel(w.parent)
	}
	return sent
}

// release stops the watchdog for good (its session ended).
func (w *inlineWatch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Stop()
	w.armed = false
	w.cancel()
}
