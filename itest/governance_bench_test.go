package itest

import (
	"bufio"
	"bytes"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// metricSum adds up the samples of one Prometheus metric (matching labels, "" for any) on g.
func metricSum(t testing.TB, g *Gateway, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (labels != "" && !strings.Contains(line, labels)) {
			continue
		}
		rest := strings.TrimPrefix(line, name)
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

// govLoad sends n chat calls over the replicas from c clients, call i with keys[i%len(keys)],
// and returns each call's latency.
func govLoad(b *testing.B, gs []*Gateway, keys []string, model string, n, c int) []time.Duration {
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`)
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("POST", gs[(i/len(keys))%len(gs)].URL+"/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+keys[i%len(keys)])
				start := time.Now()
				resp, err := httpClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = bufio.NewReader(resp.Body).Discard(1 << 20)
				resp.Body.Close()
				lat[i] = time.Since(start)
				if resp.StatusCode != 200 {
					b.Errorf("status %d", resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	return lat
}

func p50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkGovernance prints (never asserts) the database round trips per admitted request of a
// key with rpm_limit 100000 on 3 replicas (goal ≤ 0.05), and the added p50 latency of that
// limited key over an unlimited one at 32 clients (goal ≤ 10 µs; loopback HTTP noise is larger,
// see also BenchmarkAdmit in pkg/limits for the admission step alone).
//
//	go test ./itest/ -run '^$' -bench Governance -benchtime 1x
func BenchmarkGovernance(b *testing.B) {
	db := pgtest.NewDB(b)
	var gs []*Gateway
	for _, id := range []string{"a", "b", "c"} {
		gs = append(gs, StartGateway(b, db, id, GatewayOpts{}))
	}
	st, body := gs[0].Do(b, "POST", "/model/new", map[string]any{"model_name": "gov-bench", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
	require.Equal(b, 200, st, "%s", body)
	genKey := func(fields map[string]any) string {
		st, body := gs[0].Do(b, "POST", "/key/generate", fields)
		require.Equal(b, 200, st, "%s", body)
		return JSON(b, body)["key"].(string)
	}
	limited := genKey(map[string]any{"rpm_limit": 100000})
	unlimited := genKey(map[string]any{})
	const n, c = 20000, 32
	for range b.N {
		govLoad(b, gs, []string{unlimited, limited}, "gov-bench", 2000, c) // warm up connections and the keys on every replica
		rt0, ad0 := 0.0, 0.0
		for _, g := range gs {
			rt0 += metricSum(b, g, "lockstep_limit_lease_round_trips_total", `kind="rpm"`)
			ad0 += metricSum(b, g, "lockstep_limit_admitted_total", "")
		}
		// both keys in the same run, interleaved, so they see the same load
		all := govLoad(b, gs, []string{unlimited, limited}, "gov-bench", 2*n, c)
		var lu, ll []time.Duration
		for i, d := range all {
			if i%2 == 0 {
				lu = append(lu, d)
			} else {
				ll = append(ll, d)
			}
		}
		rt, ad := 0.0, 0.0
		for _, g := range gs {
			rt += metricSum(b, g, "lockstep_limit_lease_round_trips_total", `kind="rpm"`)
			ad += metricSum(b, g, "lockstep_limit_admitted_total", "")
		}
		b.Logf("rpm_limit 100000 on 3 replicas: %.0f lease round trips for %.0f admitted requests = %.4f per request (goal <= 0.05)", rt-rt0, ad-ad0, (rt-rt0)/(ad-ad0))
		b.Logf("c=32, %d calls each: p50 unlimited %v, limited %v, added %v (goal <= 10us)", n, p50(lu), p50(ll), p50(ll)-p50(lu))
		b.ReportMetric((rt-rt0)/(ad-ad0), "roundtrips/req")
		b.ReportMetric(float64((p50(ll) - p50(lu)).Nanoseconds()), "added-p50-ns")
	}
}
