package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/itest/pgtest"
)

// Router (issue 20): deployment caps and cooldowns shared by every replica through Postgres,
// LiteLLM's strategies, upstream error codes. See pkg/router for the rules and bounds.

func rtChat(t testing.TB, g *Gateway, model string) (int, []byte) {
	t.Helper()
	return g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
}

func rtNewModel(t testing.TB, g *Gateway, name, id string, up *fakeupstream.Server, extra map[string]any) {
	t.Helper()
	params := map[string]any{"model": "openai/m", "api_base": up.URL + "/v1", "api_key": "k"}
	for k, v := range extra {
		params[k] = v
	}
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name, "litellm_params": params, "model_info": map[string]any{"id": id}})
	require.Equal(t, 200, st, "%s", b)
}

// cooldownOn reads model_info.cooldown_until of deployment id from g's /model/info (nil when
// it is not cooling down there).
func cooldownOn(t testing.TB, g *Gateway, id string) any {
	t.Helper()
	st, b := g.Do(t, "GET", "/model/info?litellm_model_id="+id, nil)
	require.Equal(t, 200, st, "%s", b)
	data := JSON(t, b)["data"].([]any)
	require.Len(t, data, 1, "%s", b)
	return data[0].(map[string]any)["model_info"].(map[string]any)["cooldown_until"]
}

// A deployment with rpm 60 behind three replicas, offered five times that: in every fixed
// window no more than 60 (+ the documented bound) reach it, the rest go to the group's other
// deployment; a group whose only deployment is at its cap answers 429 with LiteLLM's text on
// every replica. The window is shortened to 6 s with the test knob GATEWAY_LIMIT_WINDOW (the
// same mechanism as a minute), so rpm 60 means 60 per 6 s window here.
func TestRouterDeploymentRPMAcrossReplicas(t *testing.T) {
	t.Parallel()
	const window = 6 * time.Second
	db := pgtest.NewDB(t)
	var gs []*Gateway
	for _, id := range []string{"a", "b", "c"} {
		gs = append(gs, StartGateway(t, db, id, GatewayOpts{Env: []string{"GATEWAY_LIMIT_WINDOW=" + window.String()}}))
	}
	capped, other, solo := fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t)
	rtNewModel(t, gs[0], "rt-cap", "rt-cap-60", capped, map[string]any{"rpm": 60})
	rtNewModel(t, gs[0], "rt-cap", "rt-cap-free", other, nil)
	rtNewModel(t, gs[1], "rt-solo", "rt-solo-5", solo, map[string]any{"rpm": 5})
	for _, g := range gs {
		Eventually(t, "models on "+g.ReplicaID, func() bool { st, _ := rtChat(t, g, "rt-cap"); return st == 200 })
	}
	capped.Reset()
	other.Reset()

	// 300 calls per window offered (50/s) over the three replicas, for 2.5 windows
	const perWindow = 300
	n := perWindow * 5 / 2
	tick := time.NewTicker(window / perWindow)
	defer tick.Stop()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := range n {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, b := rtChat(t, gs[i%3], "rt-cap"); st != 200 {
				bad.Add(1)
				t.Errorf("call %d: %d %s", i, st, b)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, bad.Load())
	perWin := map[int64]int{}
	for _, r := range capped.Requests() {
		perWin[r.Time.UnixNano()/int64(window)]++
	}
	// the documented bound: none over the cap at admission; at the upstream, the calls in
	// flight at a window's turn may land in the next window (a few at this rate)
	const bound = 3
	worst := 0
	for w, c := range perWin {
		worst = max(worst, c)
		require.LessOrEqual(t, c, 60+bound, "window %d: %d calls reached the rpm 60 deployment (%v)", w, c, perWin)
	}
	total := len(capped.Requests()) + len(other.Requests())
	require.Equal(t, n, total)
	require.GreaterOrEqual(t, worst, 45, "the capped deployment should be used up to its cap: %v", perWin)
	t.Logf("rpm 60 deployment, 3 replicas, %d calls offered per window: per window at the upstream %v (max %d); the other deployment took %d", perWindow, perWin, worst, len(other.Requests()))

	// a group with only a capped deployment: 429 once its cap is used, whichever replica
	admitted := 0
	var last []byte
	for i := range 12 {
		st, b := rtChat(t, gs[i%3], "rt-solo")
		if st == 200 {
			admitted++
			continue
		}
		require.Equal(t, 429, st, "%s", b)
		last = b
	}
	require.LessOrEqual(t, admitted, 5+bound)
	require.NotNil(t, last)
	e := JSON(t, last)["error"].(map[string]any)
	require.Equal(t, "rate_limit_error", e["type"])
	require.Regexp(t, `^No deployments available for selected model, Try again in \d+ seconds\. Passed model=rt-solo\. pre-call-checks=False, cooldown_list=\[\]$`, e["message"])
}

// A deployment failing on replica A cools down there (allowed_fails 1); B and C skip it
// within one cluster tick (2 s; polled) and it serves again everywhere after cooldown_time.
func TestRouterCooldownAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	cfg := "router_settings: {allowed_fails: 1, cooldown_time: 8, num_retries: 1}\n"
	var gs []*Gateway
	for _, id := range []string{"a", "b", "c"} {
		gs = append(gs, StartGateway(t, db, id, GatewayOpts{Config: cfg}))
	}
	bad, good := fakeupstream.Start(t), fakeupstream.Start(t)
	rtNewModel(t, gs[0], "rt-cool", "rt-cool-bad", bad, nil)
	rtNewModel(t, gs[0], "rt-cool", "rt-cool-good", good, nil)
	for _, g := range gs {
		Eventually(t, "models on "+g.ReplicaID, func() bool { st, _ := rtChat(t, g, "rt-cool"); return st == 200 })
		require.Nil(t, cooldownOn(t, g, "rt-cool-bad"))
	}
	bad.SetStatus(500)
	// replica A alone sees the failures (its retries go to the good deployment)
	Eventually(t, "cooldown decided on a", func() bool {
		st, b := rtChat(t, gs[0], "rt-cool")
		require.Equal(t, 200, st, "%s", b)
		return cooldownOn(t, gs[0], "rt-cool-bad") != nil
	})
	decided := time.Now()
	for _, g := range gs[1:] {
		require.Eventually(t, func() bool { return cooldownOn(t, g, "rt-cool-bad") != nil }, 2*time.Second+2*time.Second, 10*time.Millisecond,
			"replica %s did not learn the cooldown within one tick", g.ReplicaID)
		t.Logf("replica %s skips the deployment %v after replica a decided it (documented: within one 2 s tick)", g.ReplicaID, time.Since(decided).Round(time.Millisecond))
	}
	bad.Reset()
	for i := range 30 {
		st, b := rtChat(t, gs[1+i%2], "rt-cool")
		require.Equal(t, 200, st, "%s", b)
	}
	require.Empty(t, bad.Requests(), "replicas b and c kept sending to the cooled-down deployment")
	// /health and /sync/lag (the status page's source) show it too
	st, b := gs[2].Do(t, "GET", "/health?model=rt-cool", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Contains(t, string(b), `"cooldown_until"`)
	cds := gs[2].SyncLag(t)["cooldowns"].([]any)
	require.Len(t, cds, 1)
	require.Equal(t, "rt-cool-bad", cds[0].(map[string]any)["model_id"])
	require.Contains(t, cds[0].(map[string]any)["reason"], "replica a")

	// it returns after cooldown_time on every replica
	bad.SetStatus(0)
	for _, g := range gs {
		require.Eventually(t, func() bool { return cooldownOn(t, g, "rt-cool-bad") == nil }, 15*time.Second, 50*time.Millisecond)
		require.Empty(t, g.SyncLag(t)["cooldowns"])
	}
	for _, g := range gs[1:] {
		bad.Reset()
		Eventually(t, "deployment serves again on "+g.ReplicaID, func() bool {
			st, _ := rtChat(t, g, "rt-cool")
			return st == 200 && len(bad.Requests()) > 0
		})
	}
}

// LiteLLM's example config (routing_strategy: usage-based-routing-v2) loads, and the usage it
// routes by is counted over the replicas together: tokens spent on a deployment through
// replica b steer replica a's calls to the group's other deployment.
func TestRouterUsageBasedV2(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	cfg := "router_settings: {routing_strategy: usage-based-routing-v2}\n"
	gs := []*Gateway{StartGateway(t, db, "a", GatewayOpts{Config: cfg}), StartGateway(t, db, "b", GatewayOpts{Config: cfg})}
	used, fresh := fakeupstream.Start(t), fakeupstream.Start(t)
	rtNewModel(t, gs[1], "rt-usage", "rt-usage-used", used, nil)
	Eventually(t, "model on b", func() bool { st, _ := rtChat(t, gs[1], "rt-usage"); return st == 200 })
	for range 100 { // replica b spends tokens on the group's only deployment
		st, b := rtChat(t, gs[1], "rt-usage")
		require.Equal(t, 200, st, "%s", b)
	}
	rtNewModel(t, gs[1], "rt-usage", "rt-usage-fresh", fresh, nil)
	Eventually(t, "both deployments on a", func() bool {
		st, b := gs[0].Do(t, "GET", "/model/info", nil)
		return st == 200 && strings.Contains(string(b), "rt-usage-fresh") && strings.Contains(string(b), "rt-usage-used")
	})
	used.Reset()
	for range 50 { // replica a never called either; it learns their usage from the leases
		st, b := rtChat(t, gs[0], "rt-usage")
		require.Equal(t, 200, st, "%s", b)
	}
	t.Logf("replica a after 100 calls through b on one deployment: %d calls to it, %d to the fresh one", len(used.Requests()), len(fresh.Requests()))
	require.LessOrEqual(t, len(used.Requests()), 3, "replica a routed to the deployment replica b had used")
}

// Upstream error codes are kept in the envelope (context_length_exceeded, …); without one the
// code is the status (API.md).
func TestRouterUpstreamErrorCodes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t)
	rtNewModel(t, p.A, "rt-codes", "rt-codes-1", up, nil)
	Eventually(t, "model", func() bool { st, _ := rtChat(t, p.B, "rt-codes"); return st == 200 })
	for _, tc := range []struct {
		status      int
		code, ecode string
	}{
		{400, "context_length_exceeded", "context_length_exceeded"},
		{400, "content_policy_violation", "content_policy_violation"},
		{429, "rate_limit_exceeded", "rate_limit_exceeded"},
		{400, "", "400"},
	} {
		if tc.code != "" {
			up.FailWith(tc.status, tc.code, "upstream says "+tc.code)
		} else {
			up.SetStatus(tc.status)
		}
		st, b := rtChat(t, p.B, "rt-codes")
		require.Equal(t, tc.status, st, "%s", b)
		require.Equal(t, tc.ecode, JSON(t, b)["error"].(map[string]any)["code"], "%s", b)
		up.SetStatus(0)
	}
}

// Each routing strategy on a replica process, with fake upstreams slowed or failed on command.
func TestRouterStrategiesOnReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	start := func(id, strategy string) *Gateway {
		return StartGateway(t, db, id, GatewayOpts{Config: "router_settings:\n  routing_strategy: " + strategy +
			"\n  routing_strategy_args: {ttl: 1}\n  allowed_fails: 0\n  cooldown_time: 30\n"})
	}
	newGroup := func(g *Gateway, name string, deps map[string]map[string]any) map[string]*fakeupstream.Server {
		ups := map[string]*fakeupstream.Server{}
		for id, extra := range deps {
			ups[id] = fakeupstream.Start(t)
			info, _ := extra["model_info"].(map[string]any)
			delete(extra, "model_info")
			params := map[string]any{"model": "openai/m", "api_base": ups[id].URL + "/v1", "api_key": "k"}
			for k, v := range extra {
				params[k] = v
			}
			mi := map[string]any{"id": id}
			for k, v := range info {
				mi[k] = v
			}
			st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name, "litellm_params": params, "model_info": mi})
			require.Equal(t, 200, st, "%s", b)
		}
		Eventually(t, name+" on "+g.ReplicaID, func() bool { st, _ := rtChat(t, g, name); return st == 200 })
		for _, up := range ups {
			up.Reset()
		}
		return ups
	}
	load := func(g *Gateway, model string, n, c int) {
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
				for range next {
					st, b := rtChat(t, g, model)
					require.Equal(t, 200, st, "%s", b)
				}
			}()
		}
		wg.Wait()
	}

	t.Run("simple-shuffle weights and order", func(t *testing.T) {
		g := start("ss", "simple-shuffle")
		ups := newGroup(g, "rs-weight", map[string]map[string]any{"w1": {"weight": 1}, "w9": {"weight": 9}})
		load(g, "rs-weight", 200, 4)
		require.Greater(t, len(ups["w9"].Requests()), 150, "weight 9 of 10: %d", len(ups["w9"].Requests()))
		ups = newGroup(g, "rs-order", map[string]map[string]any{"o1": {"order": 1}, "o2": {"order": 2}})
		load(g, "rs-order", 20, 2)
		require.Len(t, ups["o2"].Requests(), 0, "order 2 while order 1 is healthy")
		ups["o1"].SetStatus(500) // order 1 cools down (allowed_fails 0): order 2 takes over
		ups["o1"].Reset()
		load(g, "rs-order", 20, 2)
		require.Len(t, ups["o2"].Requests(), 20)
		require.LessOrEqual(t, len(ups["o1"].Requests()), 2, "one failure per client before the cooldown")
	})
	t.Run("least-busy", func(t *testing.T) {
		g := start("lb", "least-busy")
		ups := newGroup(g, "rs-busy", map[string]map[string]any{"slow": nil, "quick": nil})
		ups["slow"].SetLatency(150 * time.Millisecond)
		load(g, "rs-busy", 120, 8)
		require.Less(t, len(ups["slow"].Requests()), 40, "the slow deployment holds calls in flight: %d of 120", len(ups["slow"].Requests()))
	})
	t.Run("latency-based-routing", func(t *testing.T) {
		g := start("lat", "latency-based-routing")
		ups := newGroup(g, "rs-lat", map[string]map[string]any{"a": nil, "b": nil})
		ups["a"].SetLatency(80 * time.Millisecond)
		load(g, "rs-lat", 40, 1)
		require.LessOrEqual(t, len(ups["a"].Requests()), 3, "the slow one: %d of 40", len(ups["a"].Requests()))
		// the upstreams swap speeds: once the samples are older than ttl (1 s) the router
		// measures again and follows
		ups["a"].SetLatency(0)
		ups["b"].SetLatency(80 * time.Millisecond)
		ups["a"].Reset()
		Eventually(t, "traffic moves to a", func() bool {
			load(g, "rs-lat", 5, 1)
			return len(ups["a"].Requests()) >= 20
		})
	})
	t.Run("cost-based-routing", func(t *testing.T) {
		g := start("cost", "cost-based-routing")
		ups := newGroup(g, "rs-cost", map[string]map[string]any{
			"cheap": {"model_info": map[string]any{"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002}},
			"dear":  {"model_info": map[string]any{"input_cost_per_token": 0.00001, "output_cost_per_token": 0.00002}}})
		load(g, "rs-cost", 20, 2)
		require.Len(t, ups["cheap"].Requests(), 20)
		ups["cheap"].FailWith(429, "rate_limit_exceeded", "slow down")
		load(g, "rs-cost", 20, 2)
		require.GreaterOrEqual(t, len(ups["dear"].Requests()), 20, "the cheap one cooled down after its 429")
	})
}

// router_settings and per-deployment routing keys are checked at start: a bad value stops
// serve with a one-line reason naming it (exit non-zero).
func TestRouterSettingsRefusedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ config, want string }{
		{"router_settings: {routing_strategy: fastest}\n", `router_settings.routing_strategy: "fastest" is not supported (supported: simple-shuffle, least-busy, latency-based-routing, usage-based-routing-v2, usage-based-routing, cost-based-routing)`},
		{"router_settings: {retry_policy: {BadRequestRetries: 1}}\n", "router_settings.retry_policy.BadRequestRetries: unknown error class (known: BadRequestErrorRetries, "},
		{"router_settings: {allowed_fails_policy: {RateLimitErrorAllowedFails: -1}}\n", "router_settings.allowed_fails_policy.RateLimitErrorAllowedFails: must be >= 0, got -1"},
		{"router_settings: {routing_strategy_args: {ttl: -5}}\n", "router_settings.routing_strategy_args.ttl: must be a number >= 0, got -5"},
		{"model_list:\n  - model_name: x\n    litellm_params: {model: openai/x, mock_response: hi, order: 0}\n", "litellm_params.order: must be an integer >= 1, got 0"},
	} {
		p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", len(c.want)))
		require.NoError(t, os.WriteFile(p, []byte(c.config), 0o600))
		code, out := runGateway(t, []string{"DATABASE_URL="}, "serve", "--config", p)
		require.NotZero(t, code, c.config)
		out = strings.TrimSpace(out)
		require.NotContains(t, out, "\n", "one line: %q", out)
		require.Contains(t, out, c.want)
	}
	// LiteLLM's example router_settings load (redis keys are LiteLLM's, ignored here)
	p := filepath.Join(dir, "litellm.yaml")
	require.NoError(t, os.WriteFile(p, []byte("router_settings:\n  routing_strategy: usage-based-routing-v2\n  redis_host: os.environ/REDIS_HOST\n  enable_pre_call_checks: true\n"), 0o600))
	g := StartGateway(t, pgtest.NewDB(t), "ex", GatewayOpts{Config: string(mustRead(t, p)), Env: []string{"REDIS_HOST=localhost"}})
	st, _ := g.Do(t, "GET", "/health/readiness", nil)
	require.Equal(t, 200, st)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return b
}
