package notify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The notification barrier (DESIGN.md "Turn 2: Notification barrier").
//
// Postgres delivers notifications to a listener in the order their transactions committed
// (PostgreSQL docs "NOTIFY": "notifications from different transactions are delivered in the
// order in which the transactions committed"). So when this replica NOTIFYs its own heartbeat
// channel with a barrier token and hears the token back on its listener connection, it has
// received the notification of every transaction that committed before the token's NOTIFY did;
// once the applier has applied everything received before the token, every registry is exact
// as of that moment. The logical source does the same with a WAL position: the token is a
// transactional logical decoding message (pg_logical_emit_message), streamed in commit order
// after every transaction that committed before it, so decoding it proves the stream has
// passed its LSN (PostgreSQL docs 55.5, 9.27.6).
//
// One barrier round is in flight at a time. Every caller that arrives while a round is in
// flight joins the next round, which is sent as soon as the one in flight completes; so a flood
// of N concurrent callers costs about two NOTIFYs, not N, and every caller's round was sent
// after it arrived (its answer covers every commit before its request).
//
// While the feed is degraded (its connection does not receive notifications, see
// StateDegraded) no token can come back; a round is then one change-log catch-up pass on the
// applier, started after every caller of the round arrived: it reads every change committed
// before it, so it proves the same thing at the cost of one change-log read per round.
//
// A round fails (ErrBarrier) when the feed is neither streaming nor degraded (reconnecting
// after an outage: the caller answers at once with what it holds, as DESIGN.md "Static
// stability" asks), when the token cannot be sent, or when it is not heard back and applied
// within BarrierTimeout.

// ErrBarrier is returned by Barrier when this replica could not prove it is up to date.
var ErrBarrier = errors.New("notification barrier failed")

// barrierPrefix marks a barrier token on the heartbeat channel (heartbeats carry bare digits).
const barrierPrefix = "b"

type barrierRound struct {
	n    uint64
	done chan struct{}
	err  error
}

type barriers struct {
	mu      sync.Mutex
	seq     uint64        // last round number sent
	flight  *barrierRound // sent, not completed
	next    *barrierRound // collecting callers, not sent yet
	wake    chan struct{} // cap 1: a round is waiting to be sent
	heard   uint64        // highest token heard back (guarded by mu)
	applied chan struct{} // cap 1: the applier should complete heard rounds
}

func newBarriers() *barriers {
	return &barriers{wake: make(chan struct{}, 1), applied: make(chan struct{}, 1)}
}

// BarrierStats counts barrier rounds for /sync/lag.
type BarrierStats struct {
	Rounds  int64 `json:"rounds"`  // tokens sent
	Waiters int64 `json:"waiters"` // Barrier calls
	Failed  int64 `json:"failed"`  // rounds that failed (not streaming, send error, timeout)
}

// Barrier returns once every change committed in Postgres before the call has been applied to
// this replica's registries (see the top of this file), or an error wrapping ErrBarrier when
// that cannot be proven: the feed is not streaming, the token could not be sent, or it did not
// come back and get applied within BarrierTimeout (or ctx ended first). It costs no DB read;
// concurrent callers share rounds.
func (s *Syncer) Barrier(ctx context.Context) error {
	s.barrierWaiters.Add(1)
	if st := s.State(); st != StateStreaming && st != StateDegraded {
		return fmt.Errorf("%w: change feed is %s", ErrBarrier, st)
	}
	b := s.bar
	b.mu.Lock()
	if b.next == nil {
		b.next = &barrierRound{done: make(chan struct{})}
	}
	r := b.next
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrBarrier, ctx.Err())
	}
}

// barrierLoop sends one round at a time: it takes the round collecting callers, sends its
// token, and waits for the applier to complete it (or for BarrierTimeout).
func (s *Syncer) barrierLoop(ctx context.Context) {
	b := s.bar
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			for _, r := range []*barrierRound{b.flight, b.next} {
				if r != nil {
					r.err = fmt.Errorf("%w: change feed stopped", ErrBarrier)
					close(r.done)
				}
			}
			b.flight, b.next = nil, nil
			b.mu.Unlock()
			return
		case <-b.wake:
		}
		b.mu.Lock()
		r := b.next
		b.next = nil
		if r != nil {
			b.seq++
			r.n = b.seq
			b.flight = r
		}
		b.mu.Unlock()
		if r == nil {
			continue
		}
		s.barrierRounds.Add(1)
		if s.State() == StateDegraded {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.BarrierTimeout)
			err := s.runCatchUp(cctx, catchUpDegraded)
			cancel()
			if err != nil {
				err = fmt.Errorf("%w: change-log catch-up: %v", ErrBarrier, err)
			}
			s.finishRound(r, err)
			continue
		}
		err := s.sendBarrier(ctx, r)
		if err == nil {
			timer := time.NewTimer(s.cfg.BarrierTimeout)
			select {
			case <-r.done:
			case <-timer.C:
				err = fmt.Errorf("%w: token not heard back within %s", ErrBarrier, s.cfg.BarrierTimeout)
			case <-ctx.Done():
				err = fmt.Errorf("%w: change feed stopped", ErrBarrier)
			}
			timer.Stop()
		}
		if err != nil {
			s.finishRound(r, err)
		}
	}
}

// sendBarrier sends round r's token on this replica's own heartbeat path.
func (s *Syncer) sendBarrier(ctx context.Context, r *barrierRound) error {
	if st := s.State(); st != StateStreaming {
		return fmt.Errorf("%w: change feed is %s", ErrBarrier, st)
	}
	sctx, cancel := context.WithTimeout(ctx, s.cfg.BarrierTimeout)
	defer cancel()
	token := barrierPrefix + strconv.FormatUint(r.n, 10)
	if err := s.src.emit(sctx, token); err != nil {
		return fmt.Errorf("%w: send token: %v", ErrBarrier, err)
	}
	return nil
}

// finishRound completes r (once) with err.
func (s *Syncer) finishRound(r *barrierRound, err error) {
	b := s.bar
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flight != r {
		return // already completed
	}
	b.flight = nil
	if err != nil {
		s.barrierFailed.Add(1)
	}
	r.err = err
	close(r.done)
	if b.next != nil {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// heardToken is called by the session when a heartbeat payload comes back; it reports whether
// the payload was a barrier token. Every change received before the token is already in the
// events buffer (or counted as dropped), so the applier completes the round after draining it.
func (s *Syncer) heardToken(payload string) bool {
	rest, ok := strings.CutPrefix(payload, barrierPrefix)
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return true
	}
	b := s.bar
	b.mu.Lock()
	if n > b.heard {
		b.heard = n
	}
	b.mu.Unlock()
	select {
	case b.applied <- struct{}{}:
	default:
	}
	return true
}

// completeBarriers runs on the applier goroutine when a token was heard: it applies every
// change buffered so far (all of those received before the token), repairs dropped or
// pending changes with a catch-up, and completes the round in flight if its token was heard.
func (s *Syncer) completeBarriers(ctx context.Context, batch []event) {
	b := s.bar
	b.mu.Lock()
	heard := b.heard
	r := b.flight
	b.mu.Unlock()
	for {
		batch = batch[:0]
	drain:
		for len(batch) < cap(batch) {
			select {
			case ev := <-s.events:
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			break
		}
		s.applyEvents(ctx, batch, mono(), nil)
	}
	var err error
	if s.needCatchUp.Load() || s.hasPending() {
		// notifications were dropped or re-reads failed: only the change log can prove the
		// registries exact
		force := s.needCatchUp.Swap(false)
		if cerr := s.catchUpNow(ctx, catchUpReconnect); cerr != nil {
			s.needCatchUp.Store(force || s.needCatchUp.Load())
			err = fmt.Errorf("%w: catch-up: %v", ErrBarrier, cerr)
		} else if s.hasPending() {
			err = fmt.Errorf("%w: changes not readable yet", ErrBarrier)
		}
	}
	if r != nil && r.n <= heard {
		s.finishRound(r, err)
	}
}

func (s *Syncer) hasPending() bool {
	for _, m := range s.pending {
		if len(m) > 0 {
			return true
		}
	}
	return false
}
