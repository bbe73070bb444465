package itest

import (
	"fmt"
	"net/http"
	"os"
	"sort"
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
//	go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
//	LOCKSTEP_BENCH_SOURCE=logical go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
func BenchmarkPropagation(b *testing.B) {
	const writes = 1000
	const rate = 200 // per second
	for i := 0; i < b.N; i++ {
		var args []string
		if src := os.Getenv("LOCKSTEP_BENCH_SOURCE"); src != "" { // listen (default) or logical
			args = []string{"--sync-source", src}
		}
		p := StartPair(b, GatewayOpts{Args: args})
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
