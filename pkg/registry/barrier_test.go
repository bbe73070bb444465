package registry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/readthrough"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// A miss the read-through cannot settle (budget 0: it never reads) is decided by the barrier:
// the name the feed applied during the barrier is found; a name still missing after a barrier
// that succeeded is unknown; a failed barrier leaves the miss standing, with its cause, at once.
func TestResolveUsesTheBarrierWhenTheReadThroughCannotTell(t *testing.T) {
	t.Parallel()
	var loads atomic.Int64
	r := registry.New(registry.Options[string]{
		Type:  store.Model,
		Build: func(r store.Row) (string, error) { return string(r.Data), nil },
		Names: func(e *registry.Entry[string]) []string { return []string{e.Value} },
		Load: func(ctx context.Context, name string) ([]store.Row, error) {
			loads.Add(1)
			return nil, store.ErrNotFound
		},
		ReadThrough: readthrough.Options{Budget: -1},
	})
	var barriers atomic.Int64
	var fail atomic.Bool
	r.SetBarrier(func(ctx context.Context) error {
		barriers.Add(1)
		if fail.Load() {
			return errors.New("feed reconnecting")
		}
		// the feed applies a change committed before the request while the barrier runs
		r.Apply([]store.Row{row("id-1", 2, "arrives")}, nil)
		return nil
	})
	ctx := context.Background()
	require.NoError(t, r.Resolve(ctx, "arrives"))
	require.ErrorIs(t, r.Resolve(ctx, "never"), registry.ErrNotFound)
	fail.Store(true)
	start := time.Now()
	err := r.Resolve(ctx, "still-never")
	require.ErrorIs(t, err, registry.ErrNotFound)
	require.ErrorContains(t, err, "feed reconnecting")
	require.Less(t, time.Since(start), time.Second, "a failed barrier answers at once")
	require.Equal(t, int64(3), barriers.Load())
	require.Zero(t, loads.Load(), "budget -1 never reads")
	require.Equal(t, int64(3), r.ReadThroughStats().BudgetExhausted)
}

// A fetch that read the database after the request arrived and found nothing is authoritative:
// no barrier.
func TestFreshNotFoundNeedsNoBarrier(t *testing.T) {
	t.Parallel()
	r := registry.New(registry.Options[string]{
		Type:  store.Model,
		Build: func(r store.Row) (string, error) { return string(r.Data), nil },
		Load:  func(ctx context.Context, name string) ([]store.Row, error) { return nil, store.ErrNotFound },
	})
	var barriers atomic.Int64
	r.SetBarrier(func(context.Context) error { barriers.Add(1); return nil })
	require.ErrorIs(t, r.Resolve(context.Background(), "x"), registry.ErrNotFound)
	require.Zero(t, barriers.Load())
	// the negative-cache hit that follows may predate a commit: barrier
	require.ErrorIs(t, r.Resolve(context.Background(), "x"), registry.ErrNotFound)
	require.Equal(t, int64(1), barriers.Load())
}
