package notify

import (
	"context"
	"runtime/debug"
	"time"

	"lockstep/pkg/store"
)

// bulkRelease is the number of entries one catch-up must change before it hands the garbage
// back to the OS (debug.FreeOSMemory, a forced GC: worth it only after a bulk change).
const bulkRelease = 100000

// catchUpMode says why the change log is read.
type catchUpMode int

const (
	// catchUpStart: first subscription after the initial load; apply everything, count nothing.
	catchUpStart catchUpMode = iota
	// catchUpReconnect: after a lost subscription; apply everything, count repaired gaps.
	catchUpReconnect
	// catchUpPoll: routine poll or dropped notifications; leave changes younger than
	// PollGrace to their notification, count the rest as repaired gaps.
	catchUpPoll
	// catchUpDegraded: the poll (or a barrier) while notifications do not arrive at all
	// (StateDegraded): apply everything, no grace (no notification is on its way), count
	// nothing (it is the expected path, not a gap).
	catchUpDegraded
)

// poll runs a routine change-log catch-up (also after dropped notifications).
func (s *Syncer) poll(ctx context.Context) {
	force := s.needCatchUp.Swap(false)
	mode := catchUpPoll
	if force {
		mode = catchUpReconnect
	} else if s.State() == StateDegraded {
		mode = catchUpDegraded
	}
	if err := s.catchUpNow(ctx, mode); err != nil {
		s.needCatchUp.Store(force)
		s.log.Debug().Err(err).Msg("change-log poll failed")
	}
}

// kickNow asks the applier for a catch-up pass (pending re-reads first) as soon as it is free.
func (s *Syncer) kickNow() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// lost records that notifications were lost (buffer full) and kicks an immediate catch-up.
func (s *Syncer) lost(n int64) {
	s.dropped.Add(n)
	s.needCatchUp.Store(true)
	s.kickNow()
}

// catchUpNow reads the change log since the watermark and applies what the registries do not
// hold yet. After a reconnect (afterGap) every such change counts as a repaired gap; on a
// routine poll, changes younger than PollGrace are left to their notification and hold the
// watermark back so they are looked at again.
func (s *Syncer) catchUpNow(ctx context.Context, mode catchUpMode) error {
	afterGap := mode != catchUpPoll // no grace: no notification is on its way for these
	// retry re-reads that failed earlier (a retry may leave some pending again)
	pending := s.pending
	s.pending = map[store.ObjectType]map[string]change{}
	for typ, ids := range pending {
		if _, err := s.reread(ctx, typ, ids); err != nil {
			for t, rest := range pending { // keep every type's retries, not only this one's
				s.addPending(t, rest)
			}
			return err
		}
		delete(pending, typ)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a bulk insert's million changes
	defer cancel()
	b, err := s.cfg.Store.ChangesSince(cctx, s.watermark)
	if err != nil {
		return err
	}
	if b.HeadSeq > s.headSeq.Load() {
		s.headSeq.Store(b.HeadSeq)
	}
	if s.watermark < b.PrunedBefore {
		// The log no longer holds everything since our watermark: full versioned reconcile.
		s.log.Info().Uint64("watermark", s.watermark).Uint64("pruned_before", b.PrunedBefore).Msg("watermark older than change-log retention; full reconcile")
		return s.fullLoad(ctx, true)
	}
	want := map[store.ObjectType]map[string]change{}
	holdBack := false
	gaps := 0
	grace := b.Now.Add(-s.cfg.PollGrace) // the database's clock, like changed_at
	var maxSeq int64
	for _, c := range b.Changes {
		sink := s.sinks[c.Type]
		if sink == nil {
			continue
		}
		if c.Op == "truncate" {
			sink.Truncate(c.Version) // idempotent
			maxSeq = max(maxSeq, c.Seq)
			continue
		}
		if sink.Holds(c.ID, c.Version) {
			maxSeq = max(maxSeq, c.Seq)
			continue
		}
		if !afterGap && c.ChangedAt.After(grace) {
			holdBack = true
			continue
		}
		addChange(want, c.Type, c.ID, c.Version, c.Seq, c.Op)
		maxSeq = max(maxSeq, c.Seq)
	}
	// A repaired gap is a change the notifications missed that changed the registry; a row
	// that cannot be built (counted in apply_errors) or a delete of something never held is not.
	for typ, ids := range want {
		n, err := s.reread(ctx, typ, ids)
		if err != nil {
			return err
		}
		gaps += n
	}
	if gaps >= bulkRelease {
		// A bulk change (a million-row insert) was read and built: return what that left
		// behind (the change log read, the rows re-read) to the OS now rather than carry it at
		// the heap's high-water mark, so memory settles back near the cold-start figure. The
		// change log read is dropped first: still referenced here (b is read below), its
		// million changes (~170 MB) would survive the collection and stay resident as idle
		// heap the scavenger does not return below the next GC goal (measured: 813 MB after a
		// 1M-key insert with them kept, against 519 MB for a cold start on the same rows).
		b.Changes, want = nil, nil
		debug.FreeOSMemory()
	}
	if mode == catchUpStart || mode == catchUpDegraded {
		gaps = 0 // committed between the initial load and LISTEN, or polled while degraded: expected, not a gap
	}
	if gaps > 0 {
		s.gaps.Add(int64(gaps))
		s.log.Info().Int("changes", gaps).Bool("after_reconnect", afterGap).Msg("repaired changes missed by notifications")
	}
	if maxSeq > s.appliedSeq.Load() {
		s.appliedSeq.Store(maxSeq)
	}
	if !holdBack {
		s.watermark = b.Watermark
		s.watermarkPub.Store(b.Watermark)
	}
	return nil
}
