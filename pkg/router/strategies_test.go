package router_test

import (
	"context"
	"errors"
	"fmt"
	"lockstep/pkg/format"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// dep is one deployment of group "grp" for build: its litellm_params and model_info.
type dep struct {
	id, params, info string
}

func mock(id, extra string) dep {
	return dep{id: id, params: `{"model":"openai/m","mock_response":"ok"` + extra + `}`}
}

func upstream(id string, up *fakeupstream.Server, extra string) dep {
	return dep{id: id, params: fmt.Sprintf(`{"model":"openai/m","api_base":%q,"api_key":"k"%s}`, up.URL+"/v1", extra)}
}

func build(t testing.TB, s router.Settings, deps ...dep) (*router.Router, []*registry.Entry[*router.Deployment]) {
	t.Helper()
	reg := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	cfg := map[string]*router.Deployment{}
	for _, d := range deps {
		var info []byte
		if d.info != "" {
			info = []byte(d.info)
		}
		dd, err := router.Build(d.id, "grp", []byte(d.params), info)
		require.NoError(t, err, d.id)
		cfg[d.id] = dd
	}
	reg.SetConfig(cfg)
	r := router.New(reg, provider.NewClient(), s)
	g, err := r.Group(context.Background(), "grp")
	require.NoError(t, err)
	return r, g
}

// count sends n calls and counts the deployments that answered.
func count(t testing.TB, r *router.Router, g []*registry.Entry[*router.Deployment], n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		_, d, err := r.Do(context.Background(), g, format.FormatChat, body)
		require.NoError(t, err)
		got[d.ModelID]++
	}
	return got
}

func TestShuffleWeights(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{}, mock("light", `,"weight":1`), mock("heavy", `,"weight":9`))
	got := count(t, r, g, 2000)
	require.InDelta(t, 1800, got["heavy"], 120, "%v", got)
	// rpm as the weight when no weight is set (LiteLLM simple_shuffle)
	r, g = build(t, router.Settings{}, mock("small", `,"rpm":100000`), mock("big", `,"rpm":900000`))
	got = count(t, r, g, 2000)
	require.InDelta(t, 1800, got["big"], 120, "%v", got)
}

func TestLeastBusy(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{RoutingStrategy: router.LeastBusy}, mock("a", ""), mock("b", ""))
	st, d, err := r.Stream(context.Background(), g, format.FormatChat, body)
	require.NoError(t, err)
	busy := d.ModelID
	got := count(t, r, g, 50)
	require.Zero(t, got[busy], "the deployment with a call in flight got %v", got)
	require.NoError(t, st.Close())
	got = count(t, r, g, 200)
	require.Greater(t, got[busy], 40, "idle again: %v", got)
}

func TestLatencyBased(t *testing.T) {
	t.Parallel()
	slow, fast := fakeupstream.Start(t, fakeupstream.WithLatency(40*time.Millisecond)), fakeupstream.Start(t)
	r, g := build(t, router.Settings{RoutingStrategy: router.LatencyBased}, upstream("slow", slow, ""), upstream("fast", fast, ""))
	got := count(t, r, g, 40)
	// each is tried once (no samples = 0), then the fast one is lowest
	require.LessOrEqual(t, got["slow"], 2, "%v", got)
	// lowest_latency_buffer: every deployment within lowest × (1 + buffer) is picked from
	r, g = build(t, router.Settings{RoutingStrategy: router.LatencyBased, LowestLatencyBuffer: 1e9}, upstream("slow", slow, ""), upstream("fast", fast, ""))
	got = count(t, r, g, 40)
	require.Greater(t, got["slow"], 5, "%v", got)
	// ttl: samples older than ttl are forgotten, so the slow one is tried again
	r, g = build(t, router.Settings{RoutingStrategy: router.LatencyBased, LatencyTTL: time.Nanosecond}, upstream("slow", slow, ""), upstream("fast", fast, ""))
	got = count(t, r, g, 20)
	require.Greater(t, got["slow"], 2, "%v", got)
}

func TestUsageBasedV2(t *testing.T) {
	t.Parallel()
	// without caps: the deployment with the fewest tokens this minute, so usage stays even
	r, g := build(t, router.Settings{RoutingStrategy: router.UsageBasedV2}, mock("a", ""), mock("b", ""), mock("c", ""))
	got := count(t, r, g, 300)
	for _, id := range []string{"a", "b", "c"} {
		require.InDelta(t, 100, got[id], 3, "%v", got)
	}
	// a deployment at its tpm cap is skipped (each mock call reports 30 tokens)
	r, g = build(t, router.Settings{RoutingStrategy: router.UsageBasedV2}, mock("capped", `,"tpm":90`), mock("free", ""))
	got = count(t, r, g, 100)
	require.LessOrEqual(t, got["capped"], 4, "%v", got)
}

func TestCostBased(t *testing.T) {
	t.Parallel()
	cheap := mock("cheap", "")
	cheap.info = `{"input_cost_per_token":0.000001,"output_cost_per_token":0.000002}`
	dear := mock("dear", "")
	dear.info = `{"input_cost_per_token":0.00001,"output_cost_per_token":0.00002}`
	unpriced := mock("unpriced", "")
	r, g := build(t, router.Settings{RoutingStrategy: router.CostBased}, unpriced, dear, cheap)
	require.Equal(t, map[string]int{"cheap": 30}, count(t, r, g, 30))
	// the cheapest at its rpm cap: the next cheapest
	cheap.params = `{"model":"openai/m","mock_response":"ok","rpm":5}`
	r, g = build(t, router.Settings{RoutingStrategy: router.CostBased}, unpriced, dear, cheap)
	require.Equal(t, map[string]int{"cheap": 5, "dear": 25}, count(t, r, g, 30))
}

func TestOrderTiers(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{}, mock("first", `,"order":1,"rpm":10`), mock("second", `,"order":2`), mock("none", ""))
	// order 1 takes everything until its cap, then order 2; unordered ones only after those
	require.Equal(t, map[string]int{"first": 10, "second": 20}, count(t, r, g, 30))
}

func TestCapsAnswerNoDeployments(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{}, mock("only", `,"rpm":3`))
	count(t, r, g, 3)
	_, _, err := r.Do(context.Background(), g, format.FormatChat, body)
	var nd *router.NoDeploymentsError
	require.ErrorAs(t, err, &nd)
	require.Equal(t, router.ClassRateLimit, router.Classify(err))
	require.Regexp(t, `^No deployments available for selected model, Try again in \d+ seconds\. Passed model=grp\. pre-call-checks=False, cooldown_list=\[\]$`, err.Error())
}

func TestMaxParallelRequests(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{}, mock("one", `,"max_parallel_requests":1`), mock("other", ""))
	var held []provider.Stream
	for onOne := false; !onOne; {
		st, d, err := r.Stream(context.Background(), g, format.FormatChat, body)
		require.NoError(t, err)
		held, onOne = append(held, st), d.ModelID == "one"
	}
	// "one" holds its one call: every other call goes to "other"
	require.Equal(t, map[string]int{"other": 30}, count(t, r, g, 30))
	for _, st := range held {
		require.NoError(t, st.Close())
	}
	r, g = build(t, router.Settings{}, mock("single", `,"max_parallel_requests":1`))
	st, _, err := r.Stream(context.Background(), g, format.FormatChat, body)
	require.NoError(t, err)
	_, _, err = r.Stream(context.Background(), g, format.FormatChat, body)
	var nd *router.NoDeploymentsError
	require.ErrorAs(t, err, &nd)
	require.NoError(t, st.Close())
	_, _, err = r.Do(context.Background(), g, format.FormatChat, body)
	require.NoError(t, err, "the slot is free again after Close")
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		s      router.Settings
		want   int // upstream calls
	}{
		{"400 not retried by default", 400, router.Settings{NumRetries: 3}, 1},
		{"BadRequestErrorRetries", 400, router.Settings{RetryPolicy: map[router.Class]int{router.ClassBadRequest: 2}}, 3},
		{"500 retried num_retries times", 500, router.Settings{NumRetries: 2}, 3},
		{"InternalServerErrorRetries overrides", 500, router.Settings{NumRetries: 2, RetryPolicy: map[router.Class]int{router.ClassInternalServer: 0}}, 1},
		{"RateLimitErrorRetries", 429, router.Settings{NumRetries: 1, RetryPolicy: map[router.Class]int{router.ClassRateLimit: 3}}, 4},
		{"AuthenticationErrorRetries", 401, router.Settings{RetryPolicy: map[router.Class]int{router.ClassAuthentication: 1}}, 2},
	} {
		up := fakeupstream.Start(t, fakeupstream.WithStatus(tc.status))
		r, g := build(t, tc.s, upstream("d", up, ""))
		_, _, err := r.Do(context.Background(), g, format.FormatChat, body)
		var re *router.Error
		require.ErrorAs(t, err, &re, tc.name)
		require.Equal(t, tc.want, re.Attempts, tc.name)
		require.Len(t, up.Requests(), tc.want, tc.name)
	}
}

func TestAllowedFailsPolicy(t *testing.T) {
	t.Parallel()
	bad, good := fakeupstream.Start(t, fakeupstream.WithStatus(500)), fakeupstream.Start(t)
	r, g := build(t, router.Settings{NumRetries: 1, AllowedFails: 100, CooldownTime: time.Minute,
		AllowedFailsPolicy: map[router.Class]int{router.ClassInternalServer: 0}}, upstream("bad", bad, ""), upstream("good", good, ""))
	count(t, r, g, 20)
	require.Len(t, bad.Requests(), 1, "the first 500 cools it down (InternalServerErrorAllowedFails 0)")
	cd, ok := r.CooldownOf("bad")
	require.True(t, ok)
	require.WithinDuration(t, time.Now().Add(time.Minute), cd.Until, 5*time.Second)
	require.Contains(t, cd.Reason, "internal_server")
	// a 400 never cools a deployment down (LiteLLM _is_cooldown_required)
	bad400 := fakeupstream.Start(t, fakeupstream.WithStatus(400))
	r, g = build(t, router.Settings{AllowedFails: -1}, upstream("bad", bad400, ""), upstream("good", good, ""))
	for range 10 {
		_, _, _ = r.Do(context.Background(), g, format.FormatChat, body)
	}
	_, ok = r.CooldownOf("bad")
	require.False(t, ok)
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  *format.UpstreamError
		want router.Class
	}{
		{&format.UpstreamError{Status: 400, Code: "context_length_exceeded", Message: "x"}, router.ClassContextWindow},
		{&format.UpstreamError{Status: 400, Message: "This model's maximum context length is 8192 tokens"}, router.ClassContextWindow},
		{&format.UpstreamError{Status: 400, Type: "invalid_request_error", Message: "prompt is too long: 210000 tokens > 200000 maximum"}, router.ClassContextWindow},
		{&format.UpstreamError{Status: 400, Code: "content_policy_violation", Message: "x"}, router.ClassContentPolicy},
		{&format.UpstreamError{Status: 400, Code: "content_filter", Message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."}, router.ClassContentPolicy},
		{&format.UpstreamError{Status: 400, Message: "bad"}, router.ClassBadRequest},
		{&format.UpstreamError{Status: 401}, router.ClassAuthentication},
		{&format.UpstreamError{Status: 404}, router.ClassNotFound},
		{&format.UpstreamError{Status: 504}, router.ClassTimeout},
		{&format.UpstreamError{Status: 429, Code: "rate_limit_exceeded"}, router.ClassRateLimit},
		{&format.UpstreamError{Status: 503}, router.ClassInternalServer},
	} {
		require.Equal(t, tc.want, router.Classify(tc.err), "%+v", tc.err)
		require.Equal(t, tc.want, router.Classify(fmt.Errorf("wrapped: %w", tc.err)), "%+v", tc.err)
	}
	require.Equal(t, router.ClassOther, router.Classify(context.Canceled))
	// Do's error says the class and unwraps to the upstream's
	up := fakeupstream.Start(t)
	up.FailNext(1, 400)
	r, g := build(t, router.Settings{}, upstream("d", up, ""))
	_, _, err := r.Do(context.Background(), g, format.FormatChat, body)
	var re *router.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, router.ClassBadRequest, re.Class)
	require.Equal(t, "d", re.Deployment)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.True(t, errors.Is(err, re.Err))
}

func TestModelGroupAlias(t *testing.T) {
	t.Parallel()
	r, _ := build(t, router.Settings{ModelGroupAlias: map[string]string{"gpt-4": "grp"}}, mock("a", ""))
	g, err := r.Group(context.Background(), "gpt-4")
	require.NoError(t, err)
	require.Equal(t, "a", g[0].Value.ModelID)
}

func TestBuildRoutingParams(t *testing.T) {
	t.Parallel()
	for params, want := range map[string]string{
		`{"model":"openai/m","mock_response":"x","order":0}`:                   "litellm_params.order: must be an integer >= 1, got 0",
		`{"model":"openai/m","mock_response":"x","order":1.5}`:                 "litellm_params.order: must be an integer >= 1, got 1.5",
		`{"model":"openai/m","mock_response":"x","weight":-1}`:                 "litellm_params.weight: must be a number > 0, got -1",
		`{"model":"openai/m","mock_response":"x","weight":"2"}`:                `litellm_params.weight: must be a number > 0, got "2"`,
		`{"model":"openai/m","mock_response":"x","max_parallel_requests":0}`:   "litellm_params.max_parallel_requests: must be an integer >= 1, got 0",
		`{"model":"openai/m","mock_response":"x","max_parallel_requests":"a"}`: `litellm_params.max_parallel_requests must be a finite number >= 0, got "a"`, // pkg/numbers, first
	} {
		_, err := router.Build("id", "grp", []byte(params), nil)
		require.EqualError(t, err, want, params)
	}
	d, err := router.Build("id", "grp", []byte(`{"model":"openai/m","mock_response":"x","order":2,"weight":0.5,"max_parallel_requests":7}`), []byte(`{"input_cost_per_token":1,"output_cost_per_token":2}`))
	require.NoError(t, err)
	require.Equal(t, router.Params{Order: 2, Weight: 0.5, MaxParallel: 7, Cost: 3}, d.Routing)
}

func TestConfigSettings(t *testing.T) {
	t.Parallel()
	n := func(v int) *int { return &v }
	f := func(v float64) *float64 { return &v }
	s, err := router.Config{RoutingStrategy: "usage-based-routing-v2", NumRetries: n(0), AllowedFails: n(1), CooldownTime: f(0.5),
		RoutingStrategyArgs: map[string]any{"ttl": 30, "lowest_latency_buffer": 0.5},
		RetryPolicy:         map[string]int{"BadRequestErrorRetries": 1, "ContentPolicyViolationErrorRetries": 0},
		AllowedFailsPolicy:  map[string]int{"RateLimitErrorAllowedFails": 10},
		ModelGroupAlias:     map[string]any{"a": "grp", "b": map[string]any{"model": "grp", "hidden": true}}}.Settings()
	require.NoError(t, err)
	require.Equal(t, router.Settings{RoutingStrategy: router.UsageBasedV2, NumRetries: -1, AllowedFails: 1, CooldownTime: 500 * time.Millisecond,
		LatencyTTL: 30 * time.Second, LowestLatencyBuffer: 0.5,
		RetryPolicy:        map[router.Class]int{router.ClassBadRequest: 1, router.ClassContentPolicy: 0},
		AllowedFailsPolicy: map[router.Class]int{router.ClassRateLimit: 10},
		ModelGroupAlias:    map[string]string{"a": "grp", "b": "grp"}}, s)
	for _, tc := range []struct {
		c    router.Config
		want string
	}{
		{router.Config{RoutingStrategy: "fastest"}, `router_settings.routing_strategy: "fastest" is not supported (supported: simple-shuffle, least-busy, latency-based-routing, usage-based-routing-v2, usage-based-routing, cost-based-routing)`},
		{router.Config{RetryPolicy: map[string]int{"BadRequestRetries": 1}}, "router_settings.retry_policy.BadRequestRetries: unknown error class (known: BadRequestErrorRetries, AuthenticationErrorRetries, TimeoutErrorRetries, RateLimitErrorRetries, ContentPolicyViolationErrorRetries, InternalServerErrorRetries)"},
		{router.Config{RetryPolicy: map[string]int{"TimeoutErrorRetries": -1}}, "router_settings.retry_policy.TimeoutErrorRetries: must be >= 0, got -1"},
		{router.Config{AllowedFailsPolicy: map[string]int{"TimeoutErrorRetries": 1}}, "router_settings.allowed_fails_policy.TimeoutErrorRetries: unknown error class (known: BadRequestErrorAllowedFails, AuthenticationErrorAllowedFails, TimeoutErrorAllowedFails, RateLimitErrorAllowedFails, ContentPolicyViolationErrorAllowedFails, InternalServerErrorAllowedFails)"},
		{router.Config{RoutingStrategyArgs: map[string]any{"ttl": "1h"}}, "router_settings.routing_strategy_args.ttl: must be a number >= 0, got 1h"},
		{router.Config{RoutingStrategyArgs: map[string]any{"tll": 1}}, "router_settings.routing_strategy_args.tll: unknown argument (known: ttl, lowest_latency_buffer, max_latency_list_size)"},
		{router.Config{CooldownTime: f(-1)}, "router_settings.cooldown_time: must be a finite number >= 0 seconds, got -1"},
		{router.Config{AllowedFails: n(-1)}, "router_settings.allowed_fails: must be >= 0, got -1"},
		{router.Config{ModelGroupAlias: map[string]any{"a": 3}}, "router_settings.model_group_alias.a: must be a model group name or {model, hidden}, got 3"},
	} {
		_, err := tc.c.Settings()
		require.EqualError(t, err, tc.want)
	}
}

// fakeCooldowns is router.CooldownStore in memory, as Postgres would hold it for all replicas.
type fakeCooldowns struct {
	mu   sync.Mutex
	rows []store.Cooldown
	at   []time.Time
}

func (f *fakeCooldowns) InsertCooldown(_ context.Context, c store.Cooldown) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows, f.at = append(f.rows, c), append(f.at, time.Now())
	return nil
}

func (f *fakeCooldowns) ActiveCooldowns(context.Context) ([]store.Cooldown, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Cooldown
	for i, c := range f.rows {
		if left := time.Until(f.at[i].Add(c.Remaining)); left > 0 {
			c.Remaining = left
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeCooldowns) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.rows)
}

// A cooldown decided by one router is one event row; another router sharing the table skips
// the deployment after its Tick, until the cooldown ends.
func TestSharedCooldowns(t *testing.T) {
	t.Parallel()
	shared := &fakeCooldowns{}
	bad, good := fakeupstream.Start(t, fakeupstream.WithStatus(503)), fakeupstream.Start(t)
	s := router.Settings{NumRetries: 1, AllowedFails: 1, CooldownTime: 300 * time.Millisecond}
	a, ga := build(t, s, upstream("bad", bad, ""), upstream("good", good, ""))
	b, gb := build(t, s, upstream("bad", bad, ""), upstream("good", good, ""))
	a.Share(router.Shared{Cooldowns: shared, ReplicaID: "A"})
	b.Share(router.Shared{Cooldowns: shared, ReplicaID: "B"})
	for shared.len() == 0 {
		_, _, err := a.Do(context.Background(), ga, format.FormatChat, body)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return shared.len() == 1 }, time.Second, time.Millisecond)
	for range 20 { // still cooling: no second event however many calls
		_, _, _ = a.Do(context.Background(), ga, format.FormatChat, body)
	}
	require.Equal(t, 1, shared.len())
	b.Tick(context.Background())
	cd, ok := b.CooldownOf("bad")
	require.True(t, ok)
	require.Contains(t, cd.Reason, "replica A")
	bad.Reset()
	got := count(t, b, gb, 20)
	require.Equal(t, 20, got["good"])
	require.Empty(t, bad.Requests())
	// it returns after cooldown_time
	require.Eventually(t, func() bool { _, ok := b.CooldownOf("bad"); return !ok }, 2*time.Second, 5*time.Millisecond)
	bad.SetStatus(0)
	got = count(t, b, gb, 40)
	require.Positive(t, got["bad"])
}

// A stream's tokens (its usage frames) count against the deployment's tpm when it is closed.
func TestStreamTokensCountAgainstTPM(t *testing.T) {
	t.Parallel()
	r, g := build(t, router.Settings{}, mock("capped", `,"tpm":90,"order":1`), mock("free", `,"order":2`))
	sbody := []byte(`{"model":"grp","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	got := map[string]int{}
	for range 10 {
		st, d, err := r.Stream(context.Background(), g, format.FormatChat, sbody)
		require.NoError(t, err)
		for {
			if _, err := st.Next(); err != nil {
				break
			}
		}
		require.NoError(t, st.Close())
		got[d.ModelID]++
	}
	// 30 tokens a call: three fill tpm 90 (a fourth may be admitted on the last positive lease)
	require.LessOrEqual(t, got["capped"], 4, "%v", got)
	require.GreaterOrEqual(t, got["capped"], 3, "%v", got)
}
