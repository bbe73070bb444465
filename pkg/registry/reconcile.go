package registry

import (
	"time"

	"lockstep/pkg/store"
)

// Generation returns the local apply generation; Diff compares against it.
func (r *Registry[T]) Generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// Diff compares the registry with a full load taken at one DB snapshot and returns the
// repair to run, or nil when they agree. startGen must be Generation() read BEFORE that
// snapshot was taken: an entry applied at a later generation may have been loaded after the
// snapshot (by a notification or read-through) and is never evicted or downgraded.
//
// The repair re-checks every difference when it runs, so it can be deferred (the change
// feed waits a moment, letting notifications in flight land, and counts as drift only what
// is still different then). It returns how many entries it changed:
//   - rows the registry lacks or holds older are applied through Apply's version guard; a
//     tombstone recorded before the snapshot that would refuse a row the snapshot shows alive
//     is stale and is dropped;
//   - entries the snapshot lacks, applied before it and not re-applied since, are evicted
//     with a tombstone.
func (r *Registry[T]) Diff(rows []store.Row, startGen uint64) func() int {
	snap := r.snap.Load()
	if snap.Len() == 0 { // the initial load: nothing to compare or evict
		if len(rows) == 0 {
			return nil
		}
		return func() int { return r.repair(rows, nil, startGen) }
	}
	seen := make(map[string]struct{}, len(rows))
	var fresh []store.Row
	for _, row := range rows {
		seen[row.ID] = struct{}{}
		if e, ok := snap.ByID(row.ID); !ok || (!e.Config && e.Version < row.Version) {
			fresh = append(fresh, row)
		}
	}
	evict := map[string]int64{}
	snap.All(func(e *Entry[T]) bool {
		if _, ok := seen[e.ID]; !ok && !e.Config && e.gen <= startGen {
			evict[e.ID] = e.Version
		}
		return true
	})
	if len(fresh) == 0 && len(evict) == 0 {
		return nil
	}
	return func() int { return r.repair(fresh, evict, startGen) }
}

func (r *Registry[T]) repair(fresh []store.Row, evict map[string]int64, startGen uint64) int {
	r.mu.Lock()
	for _, row := range fresh {
		if t, ok := r.tombs[row.ID]; ok && t.version >= row.Version && t.gen <= startGen {
			delete(r.tombs, row.ID) // the snapshot, taken after it, shows the row alive
		}
	}
	r.mu.Unlock()
	n := r.Apply(fresh, nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.edit()
	now := time.Now()
	for id, v := range evict {
		e, ok := c.next.ByID(id)
		if !ok || e.Version != v || e.gen > startGen {
			continue // gone or re-applied since the snapshot
		}
		c.remove(id)
		r.tombs[id] = tombstone{version: v + 1, gen: r.gen, at: now}
		n++
	}
	if c.dirty {
		r.gen++
	}
	c.commit()
	return n
}

// Reconcile runs Diff and its repair at once (initial load, truncate); returns the entries
// it changed.
func (r *Registry[T]) Reconcile(rows []store.Row, startGen uint64) int {
	if fix := r.Diff(rows, startGen); fix != nil {
		return fix()
	}
	return 0
}
