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
		if force {
			s.needCatchUp.Store(true) // never clear a request lost() made meanwhile
		}
		if ctx.Err() != nil {
			return // stopping
		}
		// Warned on the first failure in a row and every 30th after (a minute at the default
		// poll interval): a catch-up that keeps failing leaves changes to the 5-minute
		// reconcile, and must not do so silently.
		s.pollFails++
		ev := s.log.Debug()
		if s.pollFails == 1 || s.pollFails%30 == 0 {
			ev = s.log.Warn()
		}
		ev.Err(err).Int("failures_in_a_row", s.pollFails).Msg("change-log catch-up failed; retrying at the next poll")
		return
	}
	s.pollFails = 0
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
		if _, err := s.reread(ctx, typ, ids, nil); err != nil {
			for t, rest := range pending { // keep every type's retries, not only this one's
				s.addPending(t, rest)
			}
			return err
		}
		delete(pending, typ)
	}
	// The log is read, re-read and applied a page at a time (CatchUpPage changes, each page
	// read within its own bound): a bulk insert's million changes are never one read that has
	// to finish within one deadline. Such a read, retried from scratch on every poll, never
	// completes once it needs longer than its bound on a loaded database, and the rows then
	// arrive only with the 5-minute reconcile, as drift (TestBulkInsertBench once: drift_repaired
	// 1000000, gaps_repaired 0; pinned by TestCatchUpReadsTheLogInPages). Pages applied stay
	// applied when a later one fails: the next pass skips them (Sink.Holds).
	var (
		first    store.ChangeBatch // the first page's snapshot: its xmin is the next watermark
		afterSeq int64
		heldTx   uint64 // the oldest transaction of a change held back (0: none)
		gaps     int
		maxSeq   int64
	)
	for page := 0; ; page++ {
		var b store.ChangeBatch
		var err error
		wm := s.watermark
		s.unlocked(func() { // a slow read of the log must not hold up the inline applies
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			b, err = s.cfg.Store.ChangesSince(cctx, wm, afterSeq, s.cfg.CatchUpPage)
			cancel()
		})
		if err != nil {
			return err
		}
		if b.HeadSeq > s.headSeq.Load() {
			s.headSeq.Store(b.HeadSeq)
		}
		if page == 0 {
			if s.watermark < b.PrunedBefore {
				// The log no longer holds everything since our watermark: full versioned reconcile.
				s.log.Info().Uint64("watermark", s.watermark).Uint64("pruned_before", b.PrunedBefore).Msg("watermark older than change-log retention; full reconcile")
				return s.fullLoad(ctx, true)
			}
			first = b
			first.Changes = nil
		}
		n, ht, ms, err := s.applyChanges(ctx, b.Changes, afterGap, first.Now.Add(-s.cfg.PollGrace)) // the database's clock, like changed_at
		gaps += n
		if ht != 0 && (heldTx == 0 || ht < heldTx) {
			heldTx = ht
		}
		maxSeq = max(maxSeq, ms)
		if err != nil {
			s.countGaps(mode, gaps, maxSeq) // the pages applied before the failure stay applied
			return err
		}
		if !b.More || len(b.Changes) == 0 {
			break
		}
		afterSeq = b.Changes[len(b.Changes)-1].Seq
	}
	if gaps >= bulkRelease {
		// A bulk change (a million-row insert) was read and built: return what that left
		// behind (the change-log pages read, the rows re-read) to the OS now rather than carry
		// it at the heap's high-water mark, so memory settles back near the cold-start figure.
		// Nothing of it is referenced any more (measured before: 813 MB after a 1M-key insert
		// with the change log still referenced here, against 519 MB for a cold start).
		debug.FreeOSMemory()
	}
	s.countGaps(mode, gaps, maxSeq)
	// The next pass reads from the snapshot's xmin (every transaction before it has ended, so
	// a late commit is never skipped), or from the oldest transaction of a change held back,
	// so that it is looked at again — not from where this pass started: under a steady
	// stream of writes some change is always in flight at the poll, and a watermark held
	// where it was had every poll re-read everything since the last quiet moment.
	next := first.Watermark
	if heldTx != 0 {
		next = min(next, heldTx)
	}
	if next > s.watermark {
		s.watermark = next
		s.watermarkPub.Store(next)
	}
	return nil
}

// unlocked runs f with applyMu released; the caller holds it (the applier-owned state is not
// touched by f). A catch-up waiting on the database lets the listen session apply meanwhile.
func (s *Syncer) unlocked(f func()) {
	s.applyMu.Unlock()
	defer s.applyMu.Lock()
	f()
}

// countGaps records what a catch-up pass in mode applied: gaps repaired (changes the
// notifications missed that changed a registry) and the highest change-log seq looked at.
func (s *Syncer) countGaps(mode catchUpMode, gaps int, maxSeq int64) {
	if mode == catchUpStart || mode == catchUpDegraded {
		gaps = 0 // committed between the initial load and LISTEN, or polled while degraded: expected, not a gap
	}
	if gaps > 0 {
		s.gaps.Add(int64(gaps))
		s.log.Info().Int("changes", gaps).Bool("after_reconnect", mode != catchUpPoll).Msg("repaired changes missed by notifications")
	}
	if maxSeq > s.appliedSeq.Load() {
		s.appliedSeq.Store(maxSeq)
	}
}

// applyChanges re-reads and applies one page of the change log: what the registries do not
// hold yet, except (on a routine poll, !afterGap) changes younger than grace, which are left
// to their notification and hold the watermark back. Returns the registry entries changed
// (repaired gaps), the oldest transaction of a change held back (0: none), and the highest
// seq looked at.
func (s *Syncer) applyChanges(ctx context.Context, changes []store.Change, afterGap bool, grace time.Time) (gaps int, heldTx uint64, maxSeq int64, err error) {
	want := map[store.ObjectType]map[string]change{}
	for _, c := range changes {
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
			if heldTx == 0 || c.Tx < heldTx {
				heldTx = c.Tx
			}
			continue
		}
		addChange(want, c.Type, c.ID, c.Version, c.Seq, c.Op)
		maxSeq = max(maxSeq, c.Seq)
	}
	// A repaired gap is a change the notifications missed that changed the registry; a row
	// that cannot be built (counted in apply_errors) or a delete of something never held is not.
	for typ, ids := range want {
		n, err := s.reread(ctx, typ, ids, nil)
		gaps += n
		if err != nil {
			return gaps, heldTx, maxSeq, err
		}
	}
	return gaps, heldTx, maxSeq, nil
}
