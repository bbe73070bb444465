package limits

import (
	"context"
	"sync"
	"time"
)

// Parallel slots (max_parallel_requests): leased from the key's row like window units, given
// back on completion, renewed while held and expired when a replica dies.

type slots struct {
	mu       sync.Mutex
	max      int       // the key's max_parallel_requests as last seen
	held     int       // slots this replica leased
	inflight int       // calls running on this replica
	expires  time.Time // local clock (conservative): held slots count until then
	pending  chan struct{}
	denied   bool // the last acquire granted nothing: the key's slots are all held cluster-wide
	lastErr  error
	errAt    time.Time
}

// slotChunk is how many slots a replica leases (and keeps spare) at once: exact (1) for small
// limits, an eighth of the limit for large ones.
func slotChunk(max int) int {
	if max <= 8 {
		return 1
	}
	return max / 8
}

func (l *Limiter) takeSlot(ctx context.Context, ks *keyState, maxSlots int) error {
	s := &ks.slots
	tried := false
	// A waiter whose lease was granted may see another waiter take the slot first; it then
	// leases again. It is refused only when an acquire granted nothing (all slots are held).
	for range 16 {
		now := l.clock()
		s.mu.Lock()
		s.max = maxSlots
		if s.held > 0 && !now.Before(s.expires) {
			s.held = 0 // our lease expired (renewal failed): the database no longer counts it
		}
		if s.inflight < s.held && s.held <= maxSlots {
			s.inflight++
			s.mu.Unlock()
			return nil
		}
		ch := s.pending
		if ch == nil {
			if tried && s.denied || s.lastErr != nil && now.Sub(s.errAt) < errRetryWindow {
				err := s.lastErr
				s.mu.Unlock()
				if err != nil {
					return &UnavailableError{Kind: KindParallel, Err: err}
				}
				return &LimitError{Kind: KindParallel, Limit: int64(maxSlots), RetryAfter: time.Second}
			}
			want := slotChunk(maxSlots)
			if s.held > maxSlots { // the limit was lowered: give back the excess first
				want = maxSlots - s.held
				s.held = maxSlots
			}
			tried = true
			ch = make(chan struct{})
			s.pending = ch
			go l.leaseSlots(ks, want, maxSlots, ch)
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return &LimitError{Kind: KindParallel, Limit: int64(maxSlots), RetryAfter: time.Second}
}

// leaseSlots runs one slot lease operation (want > 0: lease more; want < 0: give back).
func (l *Limiter) leaseSlots(ks *keyState, want, maxSlots int, ch chan struct{}) {
	s := &ks.slots
	sent := l.clock()
	l.rtSlots.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.LeaseTimeout)
	held, err := l.cfg.Store.LeaseSlots(ctx, ks.token, l.cfg.ReplicaID, want, maxSlots, l.cfg.SlotTTL)
	cancel()
	s.mu.Lock()
	if err != nil {
		l.leaseErrs.Add(1)
		s.lastErr, s.errAt = err, l.clock()
		l.cfg.Log.Warn().Err(err).Msg("parallel-slot lease failed")
	} else {
		s.lastErr = nil
		if want > 0 {
			s.denied = held <= s.held
		}
		s.held, s.expires = held, sent.Add(l.cfg.SlotTTL)
	}
	s.pending = nil
	close(ch)
	var next chan struct{}
	n := 0
	if want < 0 { // after an acquire the waiter has not taken its slot yet: nothing is spare
		n, next = l.startRelease(s, maxSlots)
	}
	s.mu.Unlock()
	if next != nil {
		go l.leaseSlots(ks, n, maxSlots, next)
	}
}

// startRelease decides, under s.mu, to give back the spare slots: they stop counting locally
// at once (so no call is admitted on a slot being given back) and the returned operation
// (n < 0 slots, its pending channel) must be run with leaseSlots. nil when nothing is spare or
// an operation is already running (it gives back the spare slots when it ends).
func (l *Limiter) startRelease(s *slots, maxSlots int) (int, chan struct{}) {
	keep := slotChunk(maxSlots) - 1
	if maxSlots <= 8 {
		keep = 0
	}
	extra := s.held - s.inflight - keep
	if extra <= 0 || s.pending != nil {
		return 0, nil
	}
	s.held -= extra
	s.pending = make(chan struct{})
	return -extra, s.pending
}

func (l *Limiter) freeSlot(ks *keyState, maxSlots int) {
	s := &ks.slots
	s.mu.Lock()
	if s.inflight > 0 {
		s.inflight--
	}
	n, ch := l.startRelease(s, maxSlots)
	s.mu.Unlock()
	if ch != nil {
		go l.leaseSlots(ks, n, maxSlots, ch)
	}
}

// renewSlots extends this replica's slot leases (one statement) and notes the new expiry of
// every key holding slots.
func (l *Limiter) renewSlots(ctx context.Context) {
	holding := false
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		ks.slots.mu.Lock()
		holding = holding || ks.slots.held > 0
		ks.slots.mu.Unlock()
		return !holding
	})
	if !holding {
		return
	}
	sent := l.clock()
	l.rtSlots.Add(1)
	rctx, cancel := context.WithTimeout(ctx, l.cfg.LeaseTimeout)
	err := l.cfg.Store.RenewSlots(rctx, l.cfg.ReplicaID, l.cfg.SlotTTL)
	cancel()
	if err != nil {
		l.leaseErrs.Add(1)
		l.cfg.Log.Warn().Err(err).Msg("renew parallel-slot leases failed")
		return
	}
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		ks.slots.mu.Lock()
		if ks.slots.held > 0 && ks.slots.pending == nil {
			ks.slots.expires = sent.Add(l.cfg.SlotTTL)
		}
		maxSlots := ks.slots.max
		n, ch := l.startRelease(&ks.slots, maxSlots)
		ks.slots.mu.Unlock()
		if ch != nil { // spare slots an acquire left behind
			go l.leaseSlots(ks, n, maxSlots, ch)
		}
		return true
	})
}

// giveBackSlots returns every slot this replica holds (on Stop), so other replicas need not
// wait for the lease to expire.
func (l *Limiter) giveBackSlots() {
	l.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		ks.slots.mu.Lock()
		held := ks.slots.held
		ks.slots.held = 0
		ks.slots.mu.Unlock()
		if held > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.LeaseTimeout)
			_, _ = l.cfg.Store.LeaseSlots(ctx, ks.token, l.cfg.ReplicaID, -held, 0, l.cfg.SlotTTL)
			cancel()
		}
		return true
	})
}
