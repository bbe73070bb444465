package itest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// BenchmarkScaleOut measures what each replica costs the one Postgres, for N replicas in turn
// (LOCKSTEP_BENCH_SCALE_REPLICAS, default "2,5,10"), the figures docs/scale-out.md extrapolates
// from. For each N, on a fresh database:
//
//   - connections: server backends of the replicas (pg_stat_activity), split into change-feed
//     listeners (application_name lockstep-listener-*) and pool connections, idle and after
//     the write phase;
//   - idle load: committed transactions per second per replica over a quiet window
//     (pg_stat_database.xact_commit: heartbeats, change-log polls, gateway.replicas upserts);
//   - NOTIFY fan-out: commit latency (p50/p99) of a registry write (INSERT into gateway.models
//     from a direct connection, one transaction each, at 50/s) with N listeners;
//   - per write: database transactions caused per registry write beyond the idle load (each
//     replica re-reads the changed row);
//   - propagation: every receiving replica's lag_ms (trigger clock → applied) from /sync/lag:
//     the median of their p50s and the max of their p99s.
//
// Figures are printed, never asserted:
//
//	LOCKSTEP_BENCH_SCALE_REPLICAS=5,10,20 go test ./itest/ -run '^$' -bench ScaleOut -benchtime 1x -timeout 30m
func BenchmarkScaleOut(b *testing.B) {
	counts := []int{2, 5, 10}
	if v := os.Getenv("LOCKSTEP_BENCH_SCALE_REPLICAS"); v != "" {
		counts = nil
		for _, s := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			require.NoError(b, err, "LOCKSTEP_BENCH_SCALE_REPLICAS: %q is not a replica count", s)
			require.Positive(b, n)
			counts = append(counts, n)
		}
	}
	fmt.Printf("%-8s %-11s %-10s %-9s %-14s %-16s %-16s %-18s %-18s\n",
		"replicas", "conns idle", "listeners", "pool/rep", "conns loaded", "idle tx/s/rep", "commit p50/p99", "tx per write", "lag p50med/p99max")
	for range b.N {
		for _, n := range counts {
			scaleOut(b, n)
		}
	}
}

func scaleOut(b *testing.B, n int) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	gws := make([]*Gateway, n)
	var wg sync.WaitGroup
	for i := range n { // start in parallel: readiness dominates
		wg.Add(1)
		go func() {
			defer wg.Done()
			gws[i] = StartGateway(b, db, fmt.Sprintf("r%03d", i+1), GatewayOpts{})
		}()
	}
	wg.Wait()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(b, err)
	defer conn.Close(ctx)

	conns := func() (listeners, pool int) {
		require.NoError(b, conn.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE application_name LIKE 'lockstep-listener-%'),
			count(*) FILTER (WHERE application_name NOT LIKE 'lockstep-listener-%')
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&listeners, &pool))
		return
	}
	commits := func() int64 {
		_, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(b, err)
		var c int64
		require.NoError(b, conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&c))
		return c
	}
	// pg_stat_database is fed by every backend's pending stats, flushed at most once a second
	// by a backend that commits; a window of several seconds hides that granularity
	window := 10 * time.Second
	_, _ = conns()
	c0, t0 := commits(), time.Now()
	time.Sleep(window) // a measurement window, not a wait for a condition
	c1, t1 := commits(), time.Now()
	idlePerSec := float64(c1-c0-2) / t1.Sub(t0).Seconds() // minus this connection's own reads
	idleListeners, idlePool := conns()

	const writes = 200
	const rate = 50
	commitLat := make([]time.Duration, 0, writes)
	tick := time.NewTicker(time.Second / rate)
	cw0, tw0 := commits(), time.Now()
	for w := range writes {
		<-tick.C
		start := time.Now()
		_, err := conn.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ($1, $1, '{"model":"openai/x","mock_response":"ok"}')`,
			fmt.Sprintf("scale-%d", w))
		require.NoError(b, err)
		commitLat = append(commitLat, time.Since(start))
	}
	tick.Stop()
	// every replica holds every write
	for _, g := range gws {
		Eventually(b, g.ReplicaID+" applied every write", func() bool {
			return g.SyncLag(b)["registries"].(map[string]any)["models"].(map[string]any)["count"].(float64) >= writes
		})
	}
	cw1, tw1 := commits(), time.Now()
	loadedListeners, loadedPool := conns()
	// beyond the idle load and the benchmark's own inserts
	perWrite := (float64(cw1-cw0) - idlePerSec*tw1.Sub(tw0).Seconds() - writes) / writes

	var p50s, p99s []float64
	for _, g := range gws {
		lag := g.SyncLag(b)["lag_ms"].(map[string]any)
		p50s = append(p50s, lag["p50"].(float64))
		p99s = append(p99s, lag["p99"].(float64))
	}
	sort.Float64s(p50s)
	sort.Float64s(p99s)
	sort.Slice(commitLat, func(i, j int) bool { return commitLat[i] < commitLat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

	fmt.Printf("%-8d %-11d %-10d %-9.1f %-14d %-16.2f %-16s %-18.1f %-18s\n",
		n, idleListeners+idlePool, idleListeners, float64(loadedPool)/float64(n), loadedListeners+loadedPool,
		idlePerSec/float64(n),
		fmt.Sprintf("%.2f/%.2f ms", ms(commitLat[writes/2]), ms(commitLat[writes*99/100])),
		perWrite,
		fmt.Sprintf("%.2f/%.2f ms", p50s[len(p50s)/2], p99s[len(p99s)-1]))
	b.ReportMetric(float64(idleListeners+idlePool)/float64(n), fmt.Sprintf("conns/replica@%d", n))
	b.ReportMetric(idlePerSec/float64(n), fmt.Sprintf("idle-tx/s/replica@%d", n))
}
