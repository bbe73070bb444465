package registry_test

import (
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
