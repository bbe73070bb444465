package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/itest/pgtest"
	"lockstep/pkg/pgcluster"
)

// Key governance (issue 9): limits and budgets hold across three replica processes sharing one
// Postgres. The window length is shortened with the GATEWAY_LIMIT_WINDOW test knob so a test
// does not wait for minute boundaries; the production default stays one minute.

type govCluster struct {
	DB string
	G  []*Gateway
}

func startGovCluster(t *testing.T, env ...string) *govCluster {
	t.Helper()
	db := pgtest.NewDB(t)
	o := GatewayOpts{Env: env}
	c := &govCluster{DB: db}
	for _, id := range []string{"a", "b", "c"} {
		c.G = append(c.G, StartGateway(t, db, id, o))
	}
	return c
}

// govDo sends a chat completion with key; returns status, headers and body.
func govDo(t testing.TB, g *Gateway, key, model, text string) (int, http.Header, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": text}}})
	req, err := http.NewRequest("POST", g.URL+"/v1/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

func govKey(t testing.TB, g *Gateway, fields map[string]any) (key, token string) {
	t.Helper()
	st, b := g.Do(t, "POST", "/key/generate", fields)
	require.Equal(t, 200, st, "%s", b)
	m := JSON(t, b)
	return m["key"].(string), m["token"].(string)
}

func govMockModel(t testing.TB, g *Gateway, name string, info map[string]any) {
	t.Helper()
	body := map[string]any{"model_name": name, "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}}
	if info != nil {
		body["model_info"] = info
	}
	st, b := g.Do(t, "POST", "/model/new", body)
	require.Equal(t, 200, st, "%s", b)
}

func govUpstreamModel(t testing.TB, g *Gateway, name string, up *fakeupstream.Server) {
	t.Helper()
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name,
		"litellm_params": map[string]any{"model": "openai/up", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
	require.Equal(t, 200, st, "%s", b)
}

// windows counts the rate-limit window rows of a key (how many windows the test touched).
func govWindows(t testing.TB, db, token, kind string) int64 {
	return agScalar[int64](t.(*testing.T), db, "SELECT count(*) FROM gateway.rate_windows WHERE token = $1 AND kind = $2", token, kind)
}

func govRateLimited(t testing.TB, h http.Header, b []byte) {
	t.Helper()
	typ, msg := agOpenAIError(t.(*testing.T), b)
	require.Equal(t, "rate_limit_error", typ)
	require.Contains(t, msg, "Rate limit exceeded for api_key: ")
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", h.Get("Retry-After"))
	require.GreaterOrEqual(t, ra, 1)
}

// rpm_limit 30, 150 calls spread over three replicas: never more than 30 admitted per window,
// at least 30 − 3 × lease size (the lease size is 1 at this limit), the rest 429 with
// Retry-After; the next window admits again. rpm_limit 1 admits exactly one per window.
func TestGovRPMAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=6s")
	govMockModel(t, c.G[0], "gov-rpm", nil)
	key, token := govKey(t, c.G[0], map[string]any{"rpm_limit": 30})
	one, oneToken := govKey(t, c.G[0], map[string]any{"rpm_limit": 1})

	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	for i := range 150 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, h, b := govDo(t, c.G[i%3], key, "gov-rpm", "hi")
			require.Equal(t, "30", h.Get("x-ratelimit-limit-requests"), "%d %s", st, b)
			require.NotEmpty(t, h.Get("x-ratelimit-remaining-requests"))
			switch st {
			case 200:
				ok.Add(1)
			case 429:
				govRateLimited(t, h, b)
				limited.Add(1)
			default:
				t.Errorf("status %d: %s", st, b)
			}
		}()
	}
	wg.Wait()
	windows := govWindows(t, c.DB, token, "rpm")
	t.Logf("rpm_limit 30: %d admitted, %d refused, over %d window(s)", ok.Load(), limited.Load(), windows)
	require.LessOrEqual(t, ok.Load(), 30*windows, "admitted beyond the limit")
	require.GreaterOrEqual(t, ok.Load(), int64(30-3*1), "under-admission beyond replicas × lease size")
	require.Equal(t, int64(150), ok.Load()+limited.Load())

	var oneOK atomic.Int64
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, _, _ := govDo(t, c.G[i%3], one, "gov-rpm", "hi"); st == 200 {
				oneOK.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, govWindows(t, c.DB, oneToken, "rpm"), oneOK.Load(), "rpm_limit 1: exactly one per window")

	// the next window admits again, on every replica
	for _, g := range c.G {
		Eventually(t, "a later window admits again on "+g.ReplicaID, func() bool {
			st, _, _ := govDo(t, g, key, "gov-rpm", "hi")
			return st == 200
		})
	}
}

// max_parallel_requests 2 across three replicas: the upstream (holding each call 200 ms)
// never sees more than 2 at once.
func TestGovParallelAcrossThreeReplicas(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithLatency(200*time.Millisecond))
	c := startGovCluster(t)
	govUpstreamModel(t, c.G[0], "gov-par", up)
	key, _ := govKey(t, c.G[0], map[string]any{"max_parallel_requests": 2})
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for round := range 3 {
		for i := range 9 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, h, b := govDo(t, c.G[(i+round)%3], key, "gov-par", "hi")
				switch st {
				case 200:
					ok.Add(1)
				case 429:
					govRateLimited(t, h, b)
					_, msg := agOpenAIError(t, b)
					require.Contains(t, msg, "Limit type: max_parallel_requests. Current limit: 2")
					limited.Add(1)
				default:
					t.Errorf("status %d: %s", st, b)
				}
			}()
		}
		wg.Wait()
	}
	t.Logf("max_parallel_requests 2: %d served, %d refused, upstream saw at most %d at once", ok.Load(), limited.Load(), up.MaxConcurrent())
	require.LessOrEqual(t, up.MaxConcurrent(), 2)
	require.Positive(t, ok.Load())
	require.Positive(t, limited.Load())
}

// tpm_limit counts the upstream's reported tokens; the overshoot is at most the calls in
// flight together (measured at the upstream).
func TestGovTPMFromUpstreamUsage(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithLatency(50*time.Millisecond))
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	govUpstreamModel(t, c.G[0], "gov-tpm", up)
	key, token := govKey(t, c.G[0], map[string]any{"tpm_limit": 300})
	var consumed, ok, perCall atomic.Int64
	var wg sync.WaitGroup
	for round := range 8 {
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, h, b := govDo(t, c.G[(i+round)%3], key, "gov-tpm", "one two three four five")
				require.Equal(t, "300", h.Get("x-ratelimit-limit-tokens"))
				require.NotEmpty(t, h.Get("x-ratelimit-remaining-tokens"))
				switch st {
				case 200:
					u := JSON(t, b)["usage"].(map[string]any)
					n := int64(u["total_tokens"].(float64))
					perCall.Store(n)
					consumed.Add(n)
					ok.Add(1)
				case 429:
					govRateLimited(t, h, b)
				default:
					t.Errorf("status %d: %s", st, b)
				}
			}()
		}
		wg.Wait()
	}
	windows := govWindows(t, c.DB, token, "tpm")
	t.Logf("tpm_limit 300: %d calls served, %d tokens, upstream saw at most %d at once", ok.Load(), consumed.Load(), up.MaxConcurrent())
	require.LessOrEqual(t, consumed.Load(), 300*windows+int64(up.MaxConcurrent())*perCall.Load(), "overshoot beyond the calls in flight")
	require.GreaterOrEqual(t, consumed.Load(), int64(300/2), "most of the limit is served")
}

// A limit raised or lowered on A applies on B and C at their next call once the change is
// applied there (the x-ratelimit-limit-requests header tells which limit a call ran under).
func TestGovLimitChangeOnAAppliesOnBAndC(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	govMockModel(t, c.G[0], "gov-chg", nil)
	key, _ := govKey(t, c.G[0], map[string]any{"rpm_limit": 1000})
	for i := range 9 {
		st, _, b := govDo(t, c.G[i%3], key, "gov-chg", "hi")
		require.Equal(t, 200, st, "%s", b)
	}
	change := func(limit int, wantStatus int) {
		st, b := c.G[0].Do(t, "POST", "/key/update", map[string]any{"key": key, "rpm_limit": limit})
		require.Equal(t, 200, st, "%s", b)
		for _, g := range c.G[1:] {
			var st int
			Eventually(t, fmt.Sprintf("rpm_limit %d applied on %s", limit, g.ReplicaID), func() bool {
				var h http.Header
				st, h, _ = govDo(t, g, key, "gov-chg", "hi")
				return h.Get("x-ratelimit-limit-requests") == strconv.Itoa(limit)
			})
			require.Equal(t, wantStatus, st, "first call under rpm_limit %d on %s", limit, g.ReplicaID)
		}
	}
	change(5, 429)    // lowered below what the window used: refused at once
	change(5000, 200) // raised: admitted at once
}

// max_budget with costs: once spend passes it every replica refuses with the exact text;
// budget_duration 2s resets it.
func TestGovBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	// the mock answers report 10 prompt and 20 completion tokens: 0.05 USD a call
	govMockModel(t, c.G[0], "gov-budget", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})
	key, token := govKey(t, c.G[0], map[string]any{"max_budget": 0.12, "budget_duration": "2s"})
	st, b := c.G[1].Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", b)
	info := JSON(t, b)["info"].(map[string]any)
	require.EqualValues(t, 0.12, info["max_budget"])
	require.Equal(t, "2s", info["budget_duration"])
	require.NotNil(t, info["budget_reset_at"])

	served := 0
	for served < 10 {
		st, _, b := govDo(t, c.G[0], key, "gov-budget", "hi")
		if st != 200 {
			require.Equal(t, 400, st, "%s", b)
			break
		}
		served++
	}
	require.GreaterOrEqual(t, served, 3) // 0, 0.05, 0.10 are below 0.12
	passed := time.Now()
	for _, g := range c.G {
		Eventually(t, "budget refusal on "+g.ReplicaID, func() bool {
			st, _, b := govDo(t, g, key, "gov-budget", "hi")
			if st != 400 {
				return false
			}
			typ, msg := agOpenAIError(t, b)
			require.Equal(t, "budget_exceeded", typ)
			require.True(t, strings.HasPrefix(msg, "Budget has been exceeded! Current cost: "), msg)
			require.True(t, strings.HasSuffix(msg, ", Max budget: 0.12"), msg)
			return true
		})
	}
	t.Logf("every replica refused within %v of the spend passing max_budget", time.Since(passed))
	// the reset: served again on every replica
	for _, g := range c.G {
		Eventually(t, "budget reset on "+g.ReplicaID, func() bool {
			st, _, _ := govDo(t, g, key, "gov-budget", "hi")
			return st == 200
		})
	}
	// spend logs: one row per call, priced
	Eventually(t, "spend logs flushed", func() bool {
		st, b := c.G[2].Do(t, "GET", "/spend/logs?api_key="+token, nil)
		require.Equal(t, 200, st, "%s", b)
		var logs []map[string]any
		require.NoError(t, json.Unmarshal(b, &logs))
		if len(logs) < served+1 {
			return false
		}
		require.Equal(t, token, logs[0]["api_key"])
		require.InDelta(t, 0.05, logs[0]["spend"].(float64), 1e-9)
		require.EqualValues(t, 30, logs[0]["total_tokens"])
		return true
	})
	require.NotContains(t, string(agScalar[string](t, c.DB, "SELECT COALESCE(string_agg(api_key, ','), '') FROM gateway.spend_logs")), key)
}

// regenerate, block and unblock on A act on C at once; /key/list never shows a raw key.
func TestGovKeyRoutesAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, cc := c.G[0], c.G[2]
	govMockModel(t, a, "gov-keys", nil)
	key, token := govKey(t, a, map[string]any{"key_alias": "ops", "rpm_limit": 100})
	custom, customToken := govKey(t, a, map[string]any{"key": "sk-my-custom-key-1"})
	require.Equal(t, "sk-my-custom-key-1", custom)
	st, b := a.Do(t, "POST", "/key/generate", map[string]any{"key": "not-sk"})
	require.Equal(t, 400, st, "%s", b)

	st, _, b = govDo(t, cc, key, "gov-keys", "hi")
	require.Equal(t, 200, st, "%s", b)

	st, b = a.Do(t, "POST", "/key/block", map[string]any{"key": key})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, true, JSON(t, b)["blocked"])
	Eventually(t, "blocked on C", func() bool { st, _, _ := govDo(t, cc, key, "gov-keys", "hi"); return st == 401 })
	st, b = a.Do(t, "POST", "/key/unblock", map[string]any{"key": key})
	require.Equal(t, 200, st, "%s", b)
	Eventually(t, "unblocked on C", func() bool { st, _, _ := govDo(t, cc, key, "gov-keys", "hi"); return st == 200 })

	st, b = a.Do(t, "POST", "/key/regenerate", map[string]any{"key": key})
	require.Equal(t, 200, st, "%s", b)
	res := JSON(t, b)
	newKey := res["key"].(string)
	require.NotEqual(t, key, newKey)
	require.NotEqual(t, token, res["token"])
	require.EqualValues(t, 100, res["rpm_limit"], "settings move with the key")
	require.Equal(t, "ops", res["key_alias"])
	Eventually(t, "old key refused on C", func() bool { st, _, _ := govDo(t, cc, key, "gov-keys", "hi"); return st == 401 })
	st, _, b = govDo(t, cc, newKey, "gov-keys", "hi")
	require.Equal(t, 200, st, "%s", b)

	st, b = cc.Do(t, "GET", "/key/list?page=1&size=10", nil)
	require.Equal(t, 200, st, "%s", b)
	for _, raw := range []string{key, newKey, custom} {
		require.NotContains(t, string(b), raw, "a raw key in /key/list")
	}
	list := JSON(t, b)
	require.EqualValues(t, 2, list["total_count"])
	var toks, aliases []string
	for _, k := range list["keys"].([]any) {
		m := k.(map[string]any)
		toks = append(toks, m["token"].(string))
		if a, ok := m["key_alias"].(string); ok {
			aliases = append(aliases, a)
		}
	}
	require.ElementsMatch(t, []string{res["token"].(string), customToken}, toks)
	require.Equal(t, []string{"ops"}, aliases)
	st, b = cc.Do(t, "GET", "/key/list?page=2&size=1", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Len(t, JSON(t, b)["keys"], 1)
}

// A replica SIGKILLed while holding parallel slots: the limit recovers within the lease expiry
// (GATEWAY_LIMIT_SLOT_TTL, 2 s here).
func TestGovKilledReplicaLeasesExpire(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithLatency(20*time.Second))
	fast := fakeupstream.Start(t)
	c := startGovCluster(t, "GATEWAY_LIMIT_SLOT_TTL=2s")
	a, b := c.G[0], c.G[1]
	govUpstreamModel(t, a, "gov-kill", up)
	govUpstreamModel(t, a, "gov-kill-fast", fast)
	key, _ := govKey(t, a, map[string]any{"max_parallel_requests": 2})
	// two calls held by the upstream on A: both slots leased by A
	for range 2 {
		go func() {
			req, _ := http.NewRequest("POST", a.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gov-kill","messages":[{"role":"user","content":"hold"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			if resp, err := httpClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	Eventually(t, "two calls in flight on A", func() bool { return len(up.Requests()) == 2 })
	st, h, body := govDo(t, b, key, "gov-kill-fast", "hi")
	require.Equal(t, 429, st, "%s", body)
	govRateLimited(t, h, body)
	killed := time.Now()
	a.Kill(t)
	Eventually(t, "slots of the killed replica expire", func() bool {
		st, _, _ := govDo(t, b, key, "gov-kill-fast", "quick")
		return st == 200
	})
	t.Logf("limit recovered %v after the kill (slot TTL 2 s)", time.Since(killed))
}

// With Postgres down, a key without limits is served as before; a limited key uses what its
// replica already leased, then is refused with 503 naming the cause (fail closed).
func TestGovDatabaseDownFailsClosedForLimitedKeysOnly(t *testing.T) {
	t.Parallel()
	c, err := pgcluster.Start()
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	db, err := c.CreateDB(context.Background(), "govdown")
	require.NoError(t, err)
	a := StartGateway(t, db, "a", GatewayOpts{Env: []string{"GATEWAY_LIMIT_WINDOW=1h"}})
	govMockModel(t, a, "gov-down", nil)
	limited, _ := govKey(t, a, map[string]any{"rpm_limit": 160}) // leases of up to 10
	free, _ := govKey(t, a, map[string]any{})
	st, _, body := govDo(t, a, limited, "gov-down", "hi")
	require.Equal(t, 200, st, "%s", body)

	require.NoError(t, c.Restart(func() {
		Eventually(t, "A notices the outage", func() bool { return a.SyncLag(t)["state"] == "reconnecting" })
		served := 0
		var last []byte
		for range 40 {
			st, _, body := govDo(t, a, limited, "gov-down", "hi")
			if st == 200 {
				served++
				continue
			}
			require.Equal(t, 503, st, "%s", body)
			last = body
			break
		}
		require.NotNil(t, last, "a limited key must be refused once its lease is used up")
		require.LessOrEqual(t, served, 11, "served beyond what the replica held")
		typ, msg := agOpenAIError(t, last)
		require.Equal(t, "service_unavailable", typ)
		require.Contains(t, msg, "database unavailable: the requests limit of this key is held in Postgres, which is unreachable")
		for range 20 {
			st, _, body := govDo(t, a, free, "gov-down", "hi")
			require.Equal(t, 200, st, "a key without limits is unaffected: %s", body)
		}
	}))
	Eventually(t, "the limited key is served again", func() bool {
		st, _, _ := govDo(t, a, limited, "gov-down", "hi")
		return st == 200
	})
}
