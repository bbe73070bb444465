package registry_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// Review: Resolve races the change feed. The read-through's Load reads Postgres before the
// row commits (not found); the row commits and the feed applies it (commit → Forget(name),
// on an empty negative cache); then the fetch returns not found and stores a negative entry.
//   - Resolve returns ErrNotFound although the name is held when it returns (its contract:
//     "nil when the name is now held"); router.Group turns that into ErrUnknownModel → 404
//     for a model this replica serves, and every caller coalesced on the same fetch too.
//   - the stale negative entry then answers every later Resolve of the name for 2 s with
//     ErrNotFound (e.g. a request that missed just before the apply; recheckAccess, which calls
//     Resolve for a held model, gets no refresh).
func TestResolveNotFoundForNameAppliedDuringFetch(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	first := true
	var mu sync.Mutex
	r := registry.New(registry.Options[string]{
		Type:  store.Model,
		Build: func(r store.Row) (string, error) { return string(r.Data), nil },
		Names: func(e *registry.Entry[string]) []string { return []string{e.Value} },
		Load: func(ctx context.Context, name string) ([]store.Row, error) {
			mu.Lock()
			f := first
			first = false
			mu.Unlock()
			if f {
				once.Do(func() { close(started) })
				<-release
				return nil, store.ErrNotFound // read before the row committed
			}
			return []store.Row{row("m1", 2, "g")}, nil
		},
	})
	done := make(chan error, 1)
	go func() { done <- r.Resolve(context.Background(), "g") }()
	<-started
	// the row commits; the change feed applies it while the read-through is in flight
	require.Equal(t, 1, r.Apply([]store.Row{row("m1", 2, "g")}, nil))
	close(release)
	err := <-done
	require.True(t, r.Has("g"))
	assert.NoError(t, err, "Resolve reported not found for a name held when it returned")
	assert.NoError(t, r.Resolve(context.Background(), "g"),
		"a held name is answered not-found from a negative entry stored after the apply's Forget")
	assert.Zero(t, r.ReadThroughStats().NegativeHits, "stale negative entry served")
}

// Review: failed-version bookkeeping race. Apply checks knownBad outside the lock, builds,
// then takes the lock; a concurrent Apply can record a newer failed version in between. The
// older valid row is then applied and `delete(r.failed, id)` wipes the record of the newer,
// known-invalid version: Holds(id, v6) turns false, so the change feed re-reads v6 at the next
// poll / reconcile and counts the same invalid version again (apply_errors double-counted,
// the "counted once" promise of TestInvalidRowNeverReplacesServingEntry broken).
// Interleaving: read-through (or reconcile repair) carrying v4 passes knownBad and is in Build;
// the feed applies v6 (invalid) → failed[a]=6; the v4 apply takes the lock, v4 > v2 is newer,
// delete(failed, a).
func TestOlderValidApplyForgetsNewerFailedVersion(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	gate := make(chan struct{})
	r := registry.New(registry.Options[string]{
		Type: store.Model,
		Build: func(row store.Row) (string, error) {
			if row.Version == 4 {
				close(entered)
				<-gate
			}
			if string(row.Data) == "bad" {
				return "", errors.New("invalid")
			}
			return string(row.Data), nil
		},
		Names: func(e *registry.Entry[string]) []string { return []string{e.Value} },
	})
	require.Equal(t, 1, r.Apply([]store.Row{row("a", 2, "g")}, nil))
	done := make(chan struct{})
	go func() { defer close(done); r.Apply([]store.Row{row("a", 4, "g")}, nil) }() // slow read-through of v4
	<-entered
	require.Zero(t, r.Apply([]store.Row{row("a", 6, "bad")}, nil)) // the feed: v6 is invalid
	require.True(t, r.Holds("a", 6))
	require.Equal(t, int64(1), r.ApplyErrors())
	close(gate)
	<-done
	assert.True(t, r.Holds("a", 6), "known-invalid v6 forgotten: the feed will re-read it")
	r.Apply([]store.Row{row("a", 6, "bad")}, nil) // the next poll re-reads it
	assert.Equal(t, int64(1), r.ApplyErrors(), "the same invalid version counted twice")
}
