package registry_test

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// Attack on the shard groups: every write path (put, delete, truncate, reconcile eviction,
// a bulk fill after the registry was emptied) leaves every snapshot published before it
// exactly as it was, while readers walk it concurrently (run with -race).
func TestPublishedSnapshotsSurviveEveryWritePath(t *testing.T) {
	t.Parallel()
	r := newReg()
	const n = 5000 // above parallelBuild: the first load is a bulk fill
	rows := make([]store.Row, 0, n)
	for i := range n {
		rows = append(rows, row(fmt.Sprint("id", i), 1, fmt.Sprint("g", i%37)))
	}
	require.Equal(t, n, r.Apply(rows, nil))
	type view struct {
		ids   []string
		names map[string]int
	}
	capture := func() view {
		s := r.Load()
		v := view{names: map[string]int{}}
		s.All(func(e *registryEntry) bool {
			v.ids = append(v.ids, e.ID+"@"+fmt.Sprint(e.Version)+"="+e.Value)
			return true
		})
		sort.Strings(v.ids)
		for _, nm := range s.Names() {
			v.names[nm] = len(s.ByName(nm))
		}
		return v
	}
	var snaps []any
	var views []view
	keep := func() { snaps = append(snaps, r.Load()); views = append(views, capture()) }
	keep()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				s := r.Load()
				s.All(func(e *registryEntry) bool { _, _ = s.ByID(e.ID); return true })
				_ = s.ByName("g3")
			}
		}()
	}
	// puts and updates across every group
	for i := range 300 {
		r.Apply([]store.Row{row(fmt.Sprint("id", i*13%n), 2, fmt.Sprint("h", i%5))}, nil)
	}
	keep()
	// deletes
	absent := map[string]int64{}
	for i := range 200 {
		absent[fmt.Sprint("id", i*7%n)] = 5
	}
	r.Apply(nil, absent)
	keep()
	// a reconcile whose snapshot lacks a tenth of the rows (evicts them)
	var fresh []store.Row
	r.Load().All(func(e *registryEntry) bool {
		if len(fresh) < 4000 {
			fresh = append(fresh, store.Row{Type: store.Model, ID: e.ID, Version: e.Version, Data: []byte(e.Value)})
		}
		return true
	})
	r.Reconcile(fresh, r.Generation())
	keep()
	// truncate everything, then a bulk fill into the emptied registry
	r.Truncate(100)
	keep()
	rows = rows[:0]
	for i := range n {
		rows = append(rows, row(fmt.Sprint("new", i), 101, fmt.Sprint("k", i%11)))
	}
	r.Apply(rows, nil)
	keep()
	stop.Store(true)
	wg.Wait()
	require.Len(t, views[0].ids, n)
	require.Empty(t, views[4].ids, "truncated")
	require.Len(t, views[5].ids, n, "the bulk fill after the truncate")
	// every snapshot still reads as when it was published
	for i := range snaps {
		s := snaps[i].(registrySnapshot)
		v := view{names: map[string]int{}}
		s.All(func(e *registryEntry) bool {
			v.ids = append(v.ids, e.ID+"@"+fmt.Sprint(e.Version)+"="+e.Value)
			return true
		})
		sort.Strings(v.ids)
		for _, nm := range s.Names() {
			v.names[nm] = len(s.ByName(nm))
		}
		require.Equal(t, views[i], v, "snapshot %d changed after it was published", i)
		require.Equal(t, len(views[i].ids), s.Len())
	}
}

type (
	registryEntry    = registry.Entry[string]
	registrySnapshot = *registry.Snapshot[string]
)
