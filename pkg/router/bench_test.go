package router_test

import (
	"context"
	"fmt"
	"lockstep/pkg/format"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lockstep/pkg/limits"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// leaseStore is limits.Store in memory that counts lease round trips (the database's part of
// deployment caps and usage-based-routing-v2).
type leaseStore struct {
	mu    sync.Mutex
	used  map[string]int64
	start time.Time
	trips atomic.Int64
}

func (s *leaseStore) LeaseWindow(_ context.Context, token, kind string, limit, want int64, window time.Duration) (store.WindowGrant, error) {
	s.trips.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if ws := now.Truncate(window); !ws.Equal(s.start) {
		s.start, s.used = ws, map[string]int64{}
	}
	k := token + "/" + kind
	g := min(want, max(0, limit-s.used[k]))
	s.used[k] += g
	return store.WindowGrant{Granted: g, Used: s.used[k], WindowStart: s.start, DBNow: now}, nil
}
func (s *leaseStore) LeaseSlots(context.Context, string, string, int, int, time.Duration) (int, error) {
	return 0, nil
}
func (s *leaseStore) RenewSlots(context.Context, string, time.Duration) error { return nil }
func (s *leaseStore) PruneLimits(context.Context, time.Duration) error        { return nil }

// BenchmarkRoute prints the routing step alone (Router.Do on two mock deployments, 32
// goroutines): p50 per call of simple-shuffle and of usage-based-routing-v2 (every deployment's
// tokens counted through a lease store), the added p50 (goal ≤ 10 µs), and the lease round
// trips per routed call (goal ≤ 0.05).
//
//	go test ./pkg/router/ -run '^$' -bench Route -benchtime 20000x
func BenchmarkRoute(b *testing.B) {
	p50s := map[string]time.Duration{}
	for _, strategy := range []string{router.SimpleShuffle, router.UsageBasedV2} {
		b.Run(strategy, func(b *testing.B) {
			r, g := build(b, router.Settings{RoutingStrategy: strategy}, mock("a", ""), mock("b", ""))
			ls := &leaseStore{}
			r.Share(router.Shared{Limiter: limits.New(limits.Config{Store: ls})})
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(max(1, 32/max(1, runtimeProcs())))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					t0 := time.Now()
					if _, _, err := r.Do(context.Background(), g, format.FormatChat, body); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p50s[strategy] = lat[len(lat)/2]
			b.ReportMetric(float64(ls.trips.Load())/float64(len(lat)), "roundtrips/call")
			b.Logf("%s: %d calls, p50 %v, lease round trips %d (%.4f per call)", strategy, len(lat), lat[len(lat)/2], ls.trips.Load(), float64(ls.trips.Load())/float64(len(lat)))
		})
	}
	if a, u := p50s[router.SimpleShuffle], p50s[router.UsageBasedV2]; a > 0 && u > 0 {
		fmt.Printf("added p50 of usage-based-routing-v2 over simple-shuffle at 32 goroutines: %v (goal <= 10us)\n", u-a)
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
