package registry_test

import (
	"fmt"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// bulkRows returns n rows in 50 name groups, versions 1..n.
func bulkRows(n int) []store.Row {
	rows := make([]store.Row, n)
	for i := range rows {
		rows[i] = row(fmt.Sprint("id-", i), int64(i+1), fmt.Sprint("g-", i%50))
	}
	return rows
}

func ids(es []*registry.Entry[string]) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.ID)
	}
	sort.Strings(out)
	return out
}

// A bulk load into an empty registry (the cold start's path: every shard filled on every
// core) serves the same entries, versions and name index as the same rows applied a few at
// a time (one put each).
func TestBulkLoadIntoEmptyMatchesPuts(t *testing.T) {
	t.Parallel()
	rows := bulkRows(10000)
	bulk, one := newReg(), newReg()
	require.Equal(t, len(rows), bulk.Reconcile(rows, bulk.Generation()))
	for lo := 0; lo < len(rows); lo += 100 {
		one.Apply(rows[lo:lo+100], nil)
	}
	require.Equal(t, one.Len(), bulk.Len())
	for _, r := range rows {
		e, ok := bulk.Load().ByID(r.ID)
		require.True(t, ok, r.ID)
		require.Equal(t, r.Version, e.Version)
		require.Equal(t, string(r.Data), e.Value)
	}
	for g := range 50 {
		name := fmt.Sprint("g-", g)
		require.Equal(t, ids(one.Load().ByName(name)), ids(bulk.Load().ByName(name)), name)
	}
	// the version guard holds on what the bulk load published
	require.Zero(t, bulk.Apply([]store.Row{row("id-7", 1, "old")}, nil))
	require.Equal(t, 1, bulk.Apply([]store.Row{row("id-7", 1_000_000, "g-moved")}, nil))
	require.Equal(t, []string{"id-7"}, ids(bulk.Load().ByName("g-moved")))
	require.NotContains(t, ids(bulk.Load().ByName("g-7")), "id-7")
}

// A large batch into an empty registry that names one id twice keeps the newer version and
// indexes it once (the bulk fill gives up and puts one by one).
func TestBulkLoadWithDuplicateIDKeepsNewest(t *testing.T) {
	t.Parallel()
	rows := append(bulkRows(5000), row("id-3", 99999, "g-new"))
	r := newReg()
	r.Apply(rows, nil)
	require.Equal(t, 5000, r.Len())
	e, ok := r.Load().ByID("id-3")
	require.True(t, ok)
	require.Equal(t, int64(99999), e.Version)
	require.Equal(t, []string{"id-3"}, ids(r.Load().ByName("g-new")))
	require.NotContains(t, ids(r.Load().ByName("g-3")), "id-3")
}

// Prepare builds the rows of a cold start's load as they stream; the reconcile then uses
// those objects (each row built once), and a registry that already holds entries does not
// build ahead (its reconcile applies only the rows that differ).
func TestPrepareBuildsOnceOnlyWhenEmpty(t *testing.T) {
	t.Parallel()
	var builds atomic.Int64
	r := registry.New(registry.Options[string]{Type: store.Model,
		Build: func(row store.Row) (string, error) { builds.Add(1); return string(row.Data), nil }})
	rows := bulkRows(5000)
	r.Prepare(rows[:2500])
	r.Prepare(rows[2500:])
	require.Equal(t, int64(5000), builds.Load())
	require.Equal(t, 5000, r.Reconcile(rows, r.Generation()))
	require.Equal(t, int64(5000), builds.Load(), "a prepared row was built again")

	builds.Store(0)
	again := bulkRows(5000)
	again[42] = row("id-42", 1_000_000, "changed")
	r.Prepare(again)
	require.Zero(t, builds.Load(), "a non-empty registry built ahead")
	require.Equal(t, 1, r.Reconcile(again, r.Generation()))
	require.Equal(t, int64(1), builds.Load())
}
