package registry_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func newReg() *registry.Registry[string] {
	return registry.New(registry.Options[string]{
		Type:  store.Model,
		Build: func(r store.Row) (string, error) { return string(r.Data), nil },
		Names: func(e *registry.Entry[string]) []string { return []string{e.Value} },
	})
}

func row(id string, v int64, name string) store.Row {
	return store.Row{Type: store.Model, ID: id, Version: v, Data: []byte(name)}
}

func TestVersionGuard(t *testing.T) {
	t.Parallel()
	r := newReg()
	require.Equal(t, 1, r.Apply([]store.Row{row("a", 5, "g")}, nil))
	require.Zero(t, r.Apply([]store.Row{row("a", 4, "old")}, nil), "older version applied")
	require.Zero(t, r.Apply([]store.Row{row("a", 5, "same")}, nil), "same version re-applied")
	require.Equal(t, 1, r.Apply(nil, map[string]int64{"a": 6}))
	require.Zero(t, r.Apply([]store.Row{row("a", 5, "g")}, nil), "resurrected below tombstone")
	require.Equal(t, 1, r.Apply([]store.Row{row("a", 7, "new")}, nil))
	e, ok := r.Load().ByID("a")
	require.True(t, ok)
	require.Equal(t, "new", e.Value)
	require.Len(t, r.Load().ByName("new"), 1)
	require.Empty(t, r.Load().ByName("g"))
}

func TestConfigEntriesAreNeverTouchedByDBSync(t *testing.T) {
	t.Parallel()
	r := newReg()
	r.SetConfig(map[string]string{"cfg": "from-config"})
	require.Zero(t, r.Apply([]store.Row{row("cfg", 99, "from-db")}, nil))
	require.Zero(t, r.Apply(nil, map[string]int64{"cfg": 100}))
	require.Zero(t, r.Reconcile(nil, r.Generation()))
	e, ok := r.Load().ByID("cfg")
	require.True(t, ok)
	require.Equal(t, "from-config", e.Value)
	require.True(t, e.Config)
}

func TestSnapshotsAreImmutable(t *testing.T) {
	t.Parallel()
	r := newReg()
	r.Apply([]store.Row{row("a", 1, "g")}, nil)
	before := r.Load()
	r.Apply([]store.Row{row("b", 2, "g")}, nil)
	require.Equal(t, 1, before.Len())
	require.Len(t, before.ByName("g"), 1)
	require.Len(t, r.Load().ByName("g"), 2)
}

// BenchmarkLookupUnderWrites: lock-free group lookups on all cores while a writer applies a
// change every iteration of its own loop.
func BenchmarkLookupUnderWrites(b *testing.B) {
	r := newReg()
	rows := make([]store.Row, 0, 1000)
	for i := range 1000 {
		rows = append(rows, row(fmt.Sprint("id", i), int64(i+1), fmt.Sprint("group", i%100)))
	}
	r.Apply(rows, nil)
	var stop atomic.Bool
	var writes atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		v := int64(10000)
		for !stop.Load() {
			v++
			r.Apply([]store.Row{row(fmt.Sprint("id", v%1000), v, fmt.Sprint("group", v%100))}, nil)
			writes.Add(1)
			runtime.Gosched()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if len(r.Load().ByName("group42")) == 0 && i < 0 {
				b.Fatal("unreachable")
			}
		}
	})
	b.StopTimer()
	stop.Store(true)
	<-done
	b.ReportMetric(float64(writes.Load()), "writes")
}

func TestShardedIndexStaysConsistent(t *testing.T) {
	t.Parallel()
	r := newReg()
	var rows []store.Row
	for i := range 5000 {
		rows = append(rows, row(fmt.Sprint("id", i), int64(2*i+2), fmt.Sprint("group", i%37)))
	}
	require.Equal(t, 5000, r.Apply(rows, nil))
	require.Equal(t, 5000, r.Len())
	total := 0
	for _, n := range r.Load().Names() {
		total += len(r.Load().ByName(n))
	}
	require.Equal(t, 5000, total)
	// move every entry to another group, delete a third
	rows = rows[:0]
	absent := map[string]int64{}
	for i := range 5000 {
		if i%3 == 0 {
			absent[fmt.Sprint("id", i)] = 1_000_000
			continue
		}
		rows = append(rows, row(fmt.Sprint("id", i), 20_000+int64(2*i), fmt.Sprint("other", i%11)))
	}
	r.Apply(rows, absent)
	require.Equal(t, len(rows), r.Len())
	total = 0
	for _, n := range r.Load().Names() {
		require.NotContains(t, n, "group", "stale name index entry")
		total += len(r.Load().ByName(n))
	}
	require.Equal(t, len(rows), total)
	count := 0
	r.Load().All(func(*registry.Entry[string]) bool { count++; return true })
	require.Equal(t, len(rows), count)
}

// BenchmarkApplyLargeRegistry: the cost of one change in a 200k-entry registry (sharded
// copy-on-write copies 1/256 of it).
func BenchmarkApplyLargeRegistry(b *testing.B) {
	r := newReg()
	rows := make([]store.Row, 0, 200_000)
	for i := range 200_000 {
		rows = append(rows, row(fmt.Sprint("key", i), 2, fmt.Sprint("k", i)))
	}
	r.Apply(rows, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Apply([]store.Row{row(fmt.Sprint("key", i%200_000), int64(4+2*i), fmt.Sprint("k", i%200_000))}, nil)
	}
}

// A large batch is built on every core: every valid row lands, every invalid one is counted
// once and leaves the serving entry alone, and the batch is published once.
func TestApplyLargeBatchBuildsInParallel(t *testing.T) {
	t.Parallel()
	r := registry.New(registry.Options[string]{
		Type: store.Model,
		Build: func(row store.Row) (string, error) {
			if string(row.Data) == "bad" {
				return "", errors.New("bad row")
			}
			return string(row.Data), nil
		},
	})
	r.Apply([]store.Row{{ID: "bad-7", Version: 1, Data: []byte("serving")}}, nil)
	const n = 20_000
	rows := make([]store.Row, n)
	for i := range rows {
		data := fmt.Sprint("v", i)
		if i%1000 == 7 {
			data = "bad"
		}
		rows[i] = store.Row{ID: fmt.Sprint("id-", i), Version: 2, Data: []byte(data)}
	}
	rows[7].ID = "bad-7"
	changed := r.Load()
	require.Equal(t, n-n/1000, r.Apply(rows, nil))
	require.Equal(t, int64(n/1000), r.ApplyErrors())
	e, ok := r.Load().ByID("bad-7")
	require.True(t, ok)
	require.Equal(t, "serving", e.Value, "an invalid row never replaces a serving one")
	e, ok = r.Load().ByID("id-12345")
	require.True(t, ok)
	require.Equal(t, "v12345", e.Value)
	require.NotSame(t, changed, r.Load())
	require.Zero(t, r.Apply(rows, nil), "re-applying the same versions changes nothing")
	require.Equal(t, int64(n/1000), r.ApplyErrors(), "known-bad versions are not built again")
}
