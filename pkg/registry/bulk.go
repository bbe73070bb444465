package registry

import (
	"runtime"
	"sync"

	"lockstep/pkg/store"
)

// Bulk paths: the initial full load of a large registry (a million keys) builds each object
// while the load streams (Prepare), and publishes into an empty snapshot by filling its
// shards on every core (fillEmpty) instead of one put at a time.

// prebuilt is a row's Build outcome, computed by Prepare while the load streamed; it replaces
// the row's Cols (the typed columns are garbage as soon as the object is built).
type prebuilt[T any] struct {
	val T
	err error
}

// Prepare builds rows of a full load as they are read (store.Store.LoadAll's prepare: called
// per chunk, concurrently across the load's partitions), so a cold start builds on every core
// while Postgres streams, and holds each row's typed columns only until its object is built.
// Only an empty registry (a cold start) builds ahead: a periodic reconcile applies the few rows
// that differ, and building every row for it would waste the work. Apply then takes each
// row's outcome as if Build had run there.
func (r *Registry[T]) Prepare(rows []store.Row) {
	if r.snap.Load().Len() > 0 {
		return
	}
	for i := range rows {
		if _, ok := rows[i].Cols.(*prebuilt[T]); ok {
			continue
		}
		v, err := r.opts.Build(rows[i])
		rows[i].Cols = &prebuilt[T]{val: v, err: err}
	}
}

// built returns row's outcome from Prepare, if it ran.
func built[T any](row store.Row) (T, error, bool) {
	if p, ok := row.Cols.(*prebuilt[T]); ok {
		return p.val, p.err, true
	}
	var zero T
	return zero, nil, false
}

// fillEmpty puts entries into the edit's empty snapshot, filling the id (and name) shards on
// every core: each worker owns the shards i with i % workers == w, so no two write one map.
// The name lists are built by appending in place (each list is new in this edit), not copied
// per put. Entries must have distinct ids (a full load's rows do: one per primary key); when
// two share one, fillEmpty leaves the edit empty and returns false (the caller puts them one
// by one).
func (c *cow[T]) fillEmpty(entries []*Entry[T]) bool {
	workers := max(1, min(runtime.GOMAXPROCS(0), len(entries)/parallelBuild))
	hashes := make([]uint64, len(entries))
	names := make([][]string, len(entries)) // each entry's names, for this fill only
	per := make([][shards]int, workers)     // per worker: its entries per id shard
	var wg sync.WaitGroup
	chunk := (len(entries) + workers - 1) / workers
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * chunk; i < min(len(entries), (w+1)*chunk); i++ {
				e := entries[i]
				h := hashOf(e.ID)
				hashes[i] = h
				per[w][h%shards]++
				names[i] = c.r.namesOf(e)
			}
		}()
	}
	wg.Wait()
	var count [shards]int
	for w := range per {
		for s := range shards {
			count[s] += per[w][s]
		}
	}
	for gi := range groups { // every group made here: the workers below fill shards of one group at once
		c.next.groups[gi] = new(shardGroup[T])
		c.groupsCopied.set(gi)
	}
	for s := range shards { // every shard made by the workers below (marked here: a bitset's words are shared)
		c.idsCopied.set(s)
		if c.r.opts.Names != nil {
			c.namesCopied.set(s)
		}
	}
	dup := make([]bool, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := w; s < shards; s += workers {
				g := c.next.groups[s/perGroup]
				g.ids[s%perGroup] = newIndex[T](count[s])
				if c.r.opts.Names != nil {
					g.names[s%perGroup] = map[string][]*Entry[T]{}
				}
			}
			for i, e := range entries {
				if s := hashes[i] % shards; int(s)%workers == w && c.next.idIndex(s).set(e, hashes[i]) {
					dup[w] = true
				}
				for _, n := range names[i] {
					if s := shardOf(n); s%workers == w {
						m := c.next.nameMap(s)
						m[n] = append(m[n], e)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, d := range dup {
		if d {
			c.next, c.groupsCopied, c.idsCopied, c.namesCopied = &Snapshot[T]{}, bitset{}, bitset{}, bitset{}
			return false
		}
	}
	c.next.n = len(entries)
	for i, e := range entries {
		c.names = append(append(c.names, names[i]...), e.ID)
	}
	c.dirty = len(entries) > 0
	return true
}
