package itest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// TestNumbersRefusedOnEveryWritePath (issue 17, item 11a): NaN, infinite and negative
// timeouts, prices, budgets and limits are refused with a 400 naming the field on the
// management API (models, agents, keys, teams, users, organizations, customers), nothing is
// stored;
// the same values written by psql are not applied (apply_errors counted) and the serving
// version keeps serving, with its own timeout and budget.
func TestNumbersRefusedOnEveryWritePath(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	model := func(params, info map[string]any) map[string]any {
		lp := map[string]any{"model": "openai/x", "mock_response": "hi"}
		for k, v := range params {
			lp[k] = v
		}
		return map[string]any{"model_name": "num-bad", "litellm_params": lp, "model_info": info}
	}
	cases := []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/model/new", model(map[string]any{"timeout": "NaN"}, nil), "litellm_params.timeout"},
		{"/model/new", model(map[string]any{"stream_timeout": "nan"}, nil), "litellm_params.stream_timeout"},
		{"/model/new", model(map[string]any{"timeout": "-Inf"}, nil), "litellm_params.timeout"},
		{"/model/new", model(nil, map[string]any{"input_cost_per_token": -0.5}), "model_info.input_cost_per_token"},
		{"/model/new", model(nil, map[string]any{"output_cost_per_token": "NaN"}), "model_info.output_cost_per_token"},
		{"/model/new", model(nil, map[string]any{"input_cost_per_second": "Infinity"}), "model_info.input_cost_per_second"},
		{"/model/new", model(map[string]any{"input_cost_per_token": -1}, nil), "litellm_params.input_cost_per_token"},
		{"/model/new", model(map[string]any{"max_budget": "NaN"}, nil), "litellm_params.max_budget"},
		{"/model/new", model(map[string]any{"rpm": -1}, nil), "litellm_params.rpm"},
		{"/model/new", model(map[string]any{"tpm": "NaN"}, nil), "litellm_params.tpm"},
		{"/v1/agents", map[string]any{"agent_name": "a-bad", "agent_card_params": agentCard("a-bad"),
			"litellm_params": map[string]any{"model": "m", "timeout": "NaN"}}, "litellm_params.timeout"},
		{"/v1/agents", map[string]any{"agent_name": "a-bad", "agent_card_params": agentCard("a-bad"),
			"litellm_params": map[string]any{"model": "m", "input_cost_per_token": -1}}, "litellm_params.input_cost_per_token"},
		{"/key/generate", map[string]any{"max_budget": -0.5}, "max_budget"},
		{"/key/generate", map[string]any{"max_budget": "NaN"}, "max_budget"},
		{"/key/generate", map[string]any{"rpm_limit": -1}, "rpm_limit"},
		{"/key/generate", map[string]any{"tpm_limit": "NaN"}, "tpm_limit"},
		{"/key/generate", map[string]any{"max_parallel_requests": -3}, "max_parallel_requests"},
		{"/team/new", map[string]any{"team_id": "t-bad", "max_budget": -1}, "max_budget"},
		{"/team/new", map[string]any{"team_id": "t-bad", "tpm_limit": "NaN"}, "tpm_limit"},
		{"/user/new", map[string]any{"user_id": "u-bad", "max_budget": "Infinity"}, "max_budget"},
		{"/user/new", map[string]any{"user_id": "u-bad", "rpm_limit": -5}, "rpm_limit"},
		{"/organization/new", map[string]any{"organization_alias": "o-bad", "max_budget": -2}, "max_budget"},
		{"/customer/new", map[string]any{"user_id": "c-bad", "max_budget": "NaN"}, "max_budget"},
		{"/customer/new", map[string]any{"user_id": "c-bad", "max_parallel_requests": -1}, "max_parallel_requests"},
	}
	for _, c := range cases {
		st, body := p.A.Do(t, "POST", c.path, c.body)
		require.Equal(t, 400, st, "%s %v: %s", c.path, c.body, body)
		require.Contains(t, string(body), c.field, "%s %v", c.path, c.body)
	}
	require.Zero(t, agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway.models"))
	require.Zero(t, agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway.api_keys"))
	require.Zero(t, agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway.teams"))
	require.Zero(t, agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway.agents"))

	// psql: a serving model and a serving team are broken by hand; neither is applied
	up := fakeupstream.Start(t)
	st, body := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "num-ok", "model_info": map[string]any{"id": "num-ok-1"},
		"litellm_params": map[string]any{"model": "openai/up", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "num-team", "max_budget": 10})
	require.Equal(t, 200, st, "%s", body)
	key, _ := govKey(t, p.A, map[string]any{"team_id": "num-team"})
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" serves the model to the team key", func() bool {
			st, b := g.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("num-ok", "x", false))
			return st == 200 && gjson.GetBytes(b, "choices.0.message.content").String() != ""
		})
	}
	before := map[*Gateway]float64{p.A: p.A.SyncLag(t)["apply_errors"].(float64), p.B: p.B.SyncLag(t)["apply_errors"].(float64)}
	PSQL(t, p.DB, `UPDATE gateway.models SET litellm_params = jsonb_set(litellm_params, '{timeout}', '"NaN"') WHERE model_id = 'num-ok-1'`)
	PSQL(t, p.DB, `UPDATE gateway.teams SET max_budget = -1 WHERE team_id = 'num-team'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" counts both apply errors", func() bool {
			return g.SyncLag(t)["apply_errors"].(float64) >= before[g]+2
		})
	}
	PSQL(t, p.DB, `UPDATE gateway.models SET model_info = jsonb_set(model_info, '{input_cost_per_token}', '-0.5') WHERE model_id = 'num-ok-1'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" counts the price's apply error", func() bool {
			return g.SyncLag(t)["apply_errors"].(float64) >= before[g]+3
		})
		for _, stream := range []bool{false, true} {
			st, b := g.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("num-ok", "x", stream))
			require.Equal(t, 200, st, "%s: the serving version (timeout 600 s, team budget 10) still serves: %s", g.ReplicaID, b)
			require.NotContains(t, string(b), "timed out", "%s", b)
			if !stream {
				require.NotEmpty(t, gjson.GetBytes(b, "choices.0.message.content").String(), "%s", b)
			}
		}
	}
}

// TestConfigNumbersRefusedAtStart (issue 17, item 11a): a config file with a NaN timeout or a
// negative price refuses to start (exit 1), naming the field.
func TestConfigNumbersRefusedAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := "model_list:\n  - model_name: x\n    litellm_params:\n      model: openai/x\n      mock_response: hi\n"
	for name, c := range map[string]struct{ yaml, want string }{
		"timeout":  {base + "      timeout: \"NaN\"\n", "litellm_params.timeout"},
		"stream":   {base + "      stream_timeout: \"-inf\"\n", "litellm_params.stream_timeout"},
		"price":    {base + "    model_info:\n      input_cost_per_token: -0.5\n", "model_info.input_cost_per_token"},
		"budget":   {base + "      max_budget: -1\n", "litellm_params.max_budget"},
		"cooldown": {base + "router_settings:\n  cooldown_time: .nan\n", "router_settings.cooldown_time"},
	} {
		file := filepath.Join(dir, name+".yaml")
		require.NoError(t, os.WriteFile(file, []byte(c.yaml), 0o600))
		code, out := runGateway(t, []string{"DATABASE_URL="}, "serve", "--addr", "127.0.0.1:0", "--config", file)
		require.Equal(t, 1, code, "%s: %s", name, out)
		require.Contains(t, out, c.want, name)
	}
}
