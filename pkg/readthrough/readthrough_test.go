package readthrough_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/readthrough"
)

// fakeClock is a manually advanced clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestConcurrentMissesCoalesce(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	release := make(chan struct{})
	g := readthrough.New(func(ctx context.Context, key string) (bool, error) {
		calls.Add(1)
		<-release
		return true, nil
	}, readthrough.Options{})
	var wg sync.WaitGroup
	results := make(chan readthrough.Result, 50)
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); results <- g.Do(context.Background(), "k") }()
	}
	require.Eventually(t, func() bool { return g.Stats().Attempts == 50 }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	close(results)
	for r := range results {
		require.True(t, r.Found)
	}
	require.Equal(t, int64(1), calls.Load())
}

func TestNegativeCacheExpires(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	var calls atomic.Int64
	g := readthrough.New(func(ctx context.Context, key string) (bool, error) { calls.Add(1); return false, nil },
		readthrough.Options{Now: clk.Now})
	require.False(t, g.Do(context.Background(), "x").Found)
	r := g.Do(context.Background(), "x")
	require.True(t, r.NegativeHit)
	require.Equal(t, int64(1), calls.Load())
	clk.Add(2*time.Second + time.Millisecond)
	require.False(t, g.Do(context.Background(), "x").NegativeHit, "negative entry outlived its 2 s TTL")
	require.Equal(t, int64(2), calls.Load())
	g.Forget("x")
}

func TestForgetDropsNegativeEntry(t *testing.T) {
	t.Parallel()
	found := atomic.Bool{}
	g := readthrough.New(func(ctx context.Context, key string) (bool, error) { return found.Load(), nil }, readthrough.Options{})
	require.False(t, g.Do(context.Background(), "x").Found)
	found.Store(true)
	g.Forget("x") // the registry loaded it by notification
	require.True(t, g.Do(context.Background(), "x").Found)
}

func TestBudgetFailsClosedAndIsNotNegativeCached(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{now: time.Unix(1000, 0)}
	var calls atomic.Int64
	g := readthrough.New(func(ctx context.Context, key string) (bool, error) { calls.Add(1); return false, nil },
		readthrough.Options{Now: clk.Now})
	for i := range 20 {
		r := g.Do(context.Background(), fmt.Sprint("k", i))
		require.False(t, r.BudgetExhausted, "miss %d", i+1)
	}
	r := g.Do(context.Background(), "k20")
	require.True(t, r.BudgetExhausted, "21st distinct miss in the window must fail closed")
	require.Equal(t, int64(20), calls.Load())
	// not negative-cached: once the budget refills, the same key is fetched
	clk.Add(5 * time.Second)
	r = g.Do(context.Background(), "k20")
	require.False(t, r.NegativeHit)
	require.False(t, r.BudgetExhausted)
	require.Equal(t, int64(21), calls.Load())
	st := g.Stats()
	require.Equal(t, int64(1), st.BudgetExhausted)
	require.Equal(t, int64(21), st.NotFound)
}

func TestFetchErrorIsNotCached(t *testing.T) {
	t.Parallel()
	fail := atomic.Bool{}
	fail.Store(true)
	g := readthrough.New(func(ctx context.Context, key string) (bool, error) {
		if fail.Load() {
			return false, errors.New("db down")
		}
		return true, nil
	}, readthrough.Options{})
	r := g.Do(context.Background(), "k")
	require.Error(t, r.Err)
	require.False(t, r.Found)
	fail.Store(false)
	r = g.Do(context.Background(), "k")
	require.True(t, r.Found, "an error must not be negative-cached")
	require.Equal(t, int64(1), g.Stats().Errors)
}
