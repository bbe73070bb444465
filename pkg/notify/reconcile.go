package notify

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/pkg/store"
)

// fullLoad reconciles every sink against a full load. countDrift is false for the initial load.
// The types load concurrently (each in its own snapshot, on its own pool connection; the
// watermark is the oldest snapshot's), so a cold start reads the small registries while the
// large one is built, and reads one while building another.
func (s *Syncer) fullLoad(ctx context.Context, countDrift bool) error {
	types := make([]store.ObjectType, 0, len(s.sinks))
	for t := range s.sinks {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	wms := make([]uint64, len(types))
	errs := make([]error, len(types))
	var wg sync.WaitGroup
	for i, t := range types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wms[i], errs[i] = s.load(ctx, t, countDrift)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var wm uint64
	for i, w := range wms {
		if i == 0 || w < wm {
			wm = w
		}
	}
	s.watermark = wm
	s.watermarkPub.Store(wm)
	s.reconciles.Add(1)
	return nil
}

func (s *Syncer) load(ctx context.Context, t store.ObjectType, countDrift bool) (uint64, error) {
	sink := s.sinks[t]
	start := sink.Generation()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	var prepare func([]store.Row)
	if p, ok := sink.(Preparer); ok {
		prepare = p.Prepare
	}
	snap, err := s.cfg.Store.LoadAll(lctx, t, prepare)
	cancel()
	if err != nil {
		return 0, err
	}
	d := sink.Reconcile(snap.Rows, start)
	if countDrift && d > 0 {
		s.drift.Add(int64(d))
		s.log.Warn().Str("type", string(t)).Int("drift", d).Msg("reconcile repaired drift")
	}
	storeMax(&s.headSeq, snap.HeadSeq)
	storeMax(&s.appliedSeq, snap.HeadSeq)
	return snap.Watermark, nil
}

// reconciler runs the periodic anti-entropy reconcile and prunes the change log, off the
// applier goroutine so a large full load never stalls applying changes.
func (s *Syncer) reconciler(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.State() != StateStreaming {
			continue
		}
		if _, err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("periodic reconcile failed")
		}
		if s.cfg.Retention > 0 {
			if _, err := s.cfg.Store.PruneChanges(ctx, s.cfg.Retention); err != nil {
				s.log.Debug().Err(err).Msg("prune change log failed")
			}
		}
	}
}

// Reconcile runs a full versioned reconcile and returns the drift it repaired: it loads every
// type, waits ReconcileGrace so changes committed before the snapshot but still in flight (a
// queued notification, the next poll) land through the feed, then repairs only what still
// differs — that is drift, which should stay 0 (DESIGN.md, layer 3). Runs on the caller's
// goroutine.
func (s *Syncer) Reconcile(ctx context.Context) (int64, error) {
	type pending struct {
		typ store.ObjectType
		fix func() int
	}
	var fixes []pending
	for t, sink := range s.sinks {
		gen := sink.Generation()
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		snap, err := s.cfg.Store.LoadAll(lctx, t, nil)
		cancel()
		if err != nil {
			return 0, err
		}
		if fix := sink.Diff(snap.Rows, gen); fix != nil {
			fixes = append(fixes, pending{t, fix})
		}
	}
	s.reconciles.Add(1)
	if len(fixes) == 0 {
		return 0, nil
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(s.cfg.ReconcileGrace):
	}
	var total int64
	for _, f := range fixes {
		if n := f.fix(); n > 0 {
			total += int64(n)
			s.log.Warn().Str("type", string(f.typ)).Int("drift", n).Msg("reconcile repaired drift")
		}
	}
	s.drift.Add(total)
	return total, nil
}

// storeMax raises a to v unless it already holds more (safe for concurrent callers).
func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
