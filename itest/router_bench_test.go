package itest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// BenchmarkRouterStrategies prints (never asserts) the added p50 latency of
// usage-based-routing-v2 over simple-shuffle at 32 clients, each strategy on one replica (the
// same database, the same two-deployment group, calls interleaved so both see the same load;
// goal ≤ 10 µs, loopback HTTP noise is larger: see BenchmarkRoute in pkg/router for the
// routing step alone), and the database round trips per routed call on the
// usage-based-routing-v2 replica: lease round trips of the deployments' usage windows plus
// the shared-cooldown reads of its cluster tick (goal ≤ 0.05).
//
//	go test ./itest/ -run '^$' -bench RouterStrategies -benchtime 1x
func BenchmarkRouterStrategies(b *testing.B) {
	db := pgtest.NewDB(b)
	ss := StartGateway(b, db, "ss", GatewayOpts{})
	ub := StartGateway(b, db, "ub", GatewayOpts{Config: "router_settings: {routing_strategy: usage-based-routing-v2}\n"})
	for _, id := range []string{"rb-1", "rb-2"} {
		st, body := ss.Do(b, "POST", "/model/new", map[string]any{"model_name": "rt-bench", "model_info": map[string]any{"id": id},
			"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
		require.Equal(b, 200, st, "%s", body)
	}
	Eventually(b, "model on ub", func() bool { st, _ := rtChat(b, ub, "rt-bench"); return st == 200 })
	gs := []*Gateway{ss, ub}
	const n, c = 20000, 32
	dbTrips := func() float64 {
		return metricSum(b, ub, "lockstep_router_lease_round_trips_total", "") + metricSum(b, ub, "lockstep_router_cooldown_reads_total", "")
	}
	for range b.N {
		govLoad(b, gs, []string{MasterKey}, "rt-bench", 2000, c) // warm up
		rt0, calls0, t0 := dbTrips(), metricSum(b, ub, "lockstep_router_calls_total", `outcome="routed"`), time.Now()
		all := govLoad(b, gs, []string{MasterKey}, "rt-bench", 2*n, c)
		var lss, lub []time.Duration
		for i, d := range all {
			if i%2 == 0 {
				lss = append(lss, d)
			} else {
				lub = append(lub, d)
			}
		}
		rt, calls := dbTrips()-rt0, metricSum(b, ub, "lockstep_router_calls_total", `outcome="routed"`)-calls0
		b.Logf("usage-based-routing-v2 replica: %.0f database round trips (leases + cooldown reads) for %.0f routed calls in %v = %.4f per call (goal <= 0.05)", rt, calls, time.Since(t0).Round(time.Millisecond), rt/calls)
		b.Logf("c=32, %d calls each: p50 simple-shuffle %v, usage-based-routing-v2 %v, added %v (goal <= 10us)", n, p50(lss), p50(lub), p50(lub)-p50(lss))
		b.ReportMetric(rt/calls, "roundtrips/call")
		b.ReportMetric(float64((p50(lub) - p50(lss)).Nanoseconds()), "added-p50-ns")
	}
}
