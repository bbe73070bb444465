package itest

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkPropagation: 1000 model writes on A at a steady rate (200/s); for each, the time
// from A's response (the write committed and applied on A: read-your-writes) until B serves
// it from its registry. B is probed with /model/info?litellm_model_id=, which reads only the
// registry (no read-through), so this measures the change feed alone. Also prints B's own
// lag_ms (trigger clock_timestamp → applied) from /sync/lag. Figures are printed, not asserted.
//
// LOCKSTEP_BENCH_REPLICAS=N (default 2) starts N replicas on the database: A writes, B is
// probed as above, and every replica but A reports its own lag_ms from /sync/lag (each
// replica's p50/p99 of change written → applied over the run); the line printed gives the
// median of their p50s and the highest of their p99s (probing 19 replicas over HTTP at this
// rate would measure the probes, not the feed).
//
//	go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
//	LOCKSTEP_BENCH_SOURCE=logical go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
//	LOCKSTEP_BENCH_REPLICAS=20 go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
func BenchmarkPropagation(b *testing.B) {
	const writes = 1000
	const rate = 200 // per second
	for i := 0; i < b.N; i++ {
		var args []string
		if src := os.Getenv("LOCKSTEP_BENCH_SOURCE"); src != "" { // listen (default) or logical
			args = []string{"--sync-source", src}
		}
		p := StartPair(b, GatewayOpts{Args: args})
		others := []*Gateway{p.B}
		if v := os.Getenv("LOCKSTEP_BENCH_REPLICAS"); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(b, err, "LOCKSTEP_BENCH_REPLICAS")
			for r := 2; r < n; r++ {
				others = append(others, StartGateway(b, p.DB, fmt.Sprintf("r%d", r), GatewayOpts{Args: args}))
			}
		}
		lat := make([]time.Duration, writes)
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / rate)
		start := time.Now()
		for w := range writes {
			<-tick.C
			id := fmt.Sprintf("prop-%d-%d", i, w)
			st, body := p.A.Do(b, "POST", "/model/new", map[string]any{
				"model_name": "prop-" + id, "model_info": map[string]any{"id": id},
				"litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"},
			})
			require.Equal(b, 200, st, "%s", body)
			committed := time.Now()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if servesFromRegistry(b, p.B, id) {
						lat[w] = time.Since(committed)
						return
					}
					if time.Since(committed) > 10*time.Second {
						lat[w] = -1
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
			}()
		}
		tick.Stop()
		wg.Wait()
		elapsed := time.Since(start)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		require.GreaterOrEqual(b, lat[0], time.Duration(0), "a write never reached B")
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		p50, p99, mx := lat[writes/2], lat[writes*99/100], lat[writes-1]
		lag := p.B.SyncLag(b)["lag_ms"].(map[string]any)
		b.Logf("propagation A→B over %d writes at %d/s (%.1fs): p50 %.2f ms, p99 %.2f ms, max %.2f ms (probe resolution ~0.3 ms); B /sync/lag lag_ms: %v",
			writes, rate, elapsed.Seconds(), ms(p50), ms(p99), ms(mx), lag)
		fmt.Printf("propagation A→B: writes=%d rate=%d/s p50=%.2fms p99=%.2fms max=%.2fms | B lag_ms p50=%v p99=%v max=%v samples=%v\n",
			writes, rate, ms(p50), ms(p99), ms(mx), lag["p50"], lag["p99"], lag["max"], lag["samples"])
		if len(others) > 1 {
			var p50s, p99s []float64
			for _, g := range others {
				l := g.SyncLag(b)["lag_ms"].(map[string]any)
				p50s = append(p50s, l["p50"].(float64))
				p99s = append(p99s, l["p99"].(float64))
			}
			sort.Float64s(p50s)
			sort.Float64s(p99s)
			fmt.Printf("propagation A→%d replicas (lag_ms from each replica's /sync/lag): median p50=%.2fms, max p99=%.2fms, median p99=%.2fms\n",
				len(others), p50s[len(p50s)/2], p99s[len(p99s)-1], p99s[len(p99s)/2])
			b.ReportMetric(p99s[len(p99s)-1], "cluster-max-p99-ms")
		}
		b.ReportMetric(ms(p50), "p50-ms")
		b.ReportMetric(ms(p99), "p99-ms")
		b.ReportMetric(ms(mx), "max-ms")
	}
}

func servesFromRegistry(b *testing.B, g *Gateway, id string) bool {
	req, _ := http.NewRequest("GET", g.URL+"/model/info?litellm_model_id="+id, nil)
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	resp, err := httpClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode == 200 && strings.Contains(sb.String(), id)
}
