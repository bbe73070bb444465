package registry_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// A read-through whose rows cannot be served under the requested name (e.g. a model asked
// for by its id, or an invalid row) is negative-cached like a miss, so it cannot burn the
// budget one DB read per request.
func TestReadThroughOfUnservableRowsIsNegativeCached(t *testing.T) {
	t.Parallel()
	var loads atomic.Int64
	r := registry.New(registry.Options[string]{
		Type:  store.Model,
		Build: func(r store.Row) (string, error) { return string(r.Data), nil },
		Names: func(e *registry.Entry[string]) []string { return []string{e.Value} },
		Load: func(ctx context.Context, name string) ([]store.Row, error) {
			loads.Add(1)
			return []store.Row{row("some-id", 2, "group-name")}, nil // found, but under another name
		},
	})
	for range 30 {
		require.ErrorIs(t, r.Resolve(context.Background(), "asked-name"), registry.ErrNotFound)
	}
	require.Equal(t, int64(1), loads.Load())
	st := r.ReadThroughStats()
	require.Zero(t, st.BudgetExhausted)
	require.Equal(t, int64(29), st.NegativeHits)
}
