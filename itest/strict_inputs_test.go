package itest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 8, input 6: a management route answers a body field it does not know with 400 naming
// it, in its own envelope, and stores nothing (API.md "Keys": "A field is never accepted and
// then ignored."): a name LiteLLM does not define is refused (issue 19: LiteLLM's own fields are
// accepted as pkg/catalogue says; TestLiteLLMFieldsKinds pins those).
// LLM routes still pass unknown fields through to the upstream.
func TestManagementRoutesRefuseUnknownFields(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	g := p.A

	// objects the updates below address
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": "m", "model_info": map[string]any{"id": "m-1"},
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": "sk-x"}})
	require.Equal(t, 200, st, "%s", b)
	st, b = g.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"m"}})
	require.Equal(t, 200, st, "%s", b)
	key := gjson.GetBytes(b, "key").String()
	st, b = g.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "g1",
		"litellm_params": contentFilter("pre_call", map[string]any{"blocked_words": []any{word("zzz", "BLOCK")}})}})
	require.Equal(t, 200, st, "%s", b)
	gid := gjson.GetBytes(b, "guardrail_id").String()
	agentID := createAgent(t, g, "ag", map[string]any{"model": "m"})
	st, b = g.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "grp", "model_names": []string{"m"}})
	require.Equal(t, 200, st, "%s", b)
	st, b = g.Do(t, "POST", "/team/new", map[string]any{"team_id": "t1"})
	require.Equal(t, 200, st, "%s", b)
	st, b = g.Do(t, "POST", "/user/new", map[string]any{"user_id": "u1"})
	require.Equal(t, 200, st, "%s", b)
	st, b = g.Do(t, "POST", "/customer/new", map[string]any{"user_id": "c1"})
	require.Equal(t, 200, st, "%s", b)

	counts := func() map[string]int {
		out := map[string]int{}
		for _, tbl := range []string{"models", "api_keys", "guardrails", "agents", "teams", "users", "organizations", "end_users"} {
			out[tbl] = agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway."+tbl)
		}
		out["versions"] = agScalar[int](t, p.DB, `SELECT (SELECT coalesce(sum(version),0) FROM gateway.models) + (SELECT coalesce(sum(version),0) FROM gateway.api_keys)
			+ (SELECT coalesce(sum(version),0) FROM gateway.guardrails) + (SELECT coalesce(sum(version),0) FROM gateway.agents)
			+ (SELECT coalesce(sum(version),0) FROM gateway.teams) + (SELECT coalesce(sum(version),0) FROM gateway.users)
			+ (SELECT coalesce(sum(version),0) FROM gateway.end_users)`)
		return out
	}
	before := counts()

	const (
		openAI = "openai"
		detail = "detail"
	)
	card := agentCard("ag2")
	cases := []struct {
		name, method, path string
		body               any
		field, envelope    string
	}{
		{"key generate soft_budgt", "POST", "/key/generate", map[string]any{"models": []string{"m"}, "soft_budgt": 1}, "soft_budgt", openAI},
		{"key generate model_max_budgets", "POST", "/key/generate", map[string]any{"model_max_budgets": map[string]any{"m": 1}}, "model_max_budgets", openAI},
		{"key generate new_key", "POST", "/key/generate", map[string]any{"new_key": "sk-mine-123456"}, "new_key", openAI},
		{"key generate tag", "POST", "/key/generate", map[string]any{"tag": []string{"a"}}, "tag", openAI},
		{"key generate case-folded name", "POST", "/key/generate", map[string]any{"Models": []string{"m"}}, "Models", openAI},
		{"key update", "POST", "/key/update", map[string]any{"key": key, "models": []string{}, "soft_budgets": 5}, "soft_budgets", openAI},
		{"key block", "POST", "/key/block", map[string]any{"key": key, "reason": "x"}, "reason", openAI},
		{"key delete", "POST", "/key/delete", map[string]any{"keys": []string{key}, "key_aliases": []string{"x"}}, "key_aliases", openAI},
		{"model new", "POST", "/model/new", map[string]any{"model_name": "m2", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}, "tpm": 5}, "tpm", openAI},
		{"model update", "POST", "/model/update", map[string]any{"model_info": map[string]any{"id": "m-1"}, "model_name": "renamed", "extra": true}, "extra", openAI},
		{"model patch", "PATCH", "/model/m-1/update", map[string]any{"model_name": "renamed", "bogus": 1}, "bogus", openAI},
		{"model delete", "POST", "/model/delete", map[string]any{"id": "m-1", "force": true}, "force", openAI},
		{"guardrail create top", "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "g2", "litellm_params": contentFilter("pre_call", nil)}, "mode": "x"}, "mode", detail},
		{"guardrail create nested", "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "g2", "litellm_params": contentFilter("pre_call", nil), "default_on": true}}, "guardrail.default_on", detail},
		{"guardrail put", "PUT", "/guardrails/" + gid, map[string]any{"guardrail": map[string]any{"guardrail_name": "g1", "litellm_params": contentFilter("pre_call", nil), "descripton": "typo"}}, "guardrail.descripton", detail},
		{"guardrail patch", "PATCH", "/guardrails/" + gid, map[string]any{"default_on": true, "defualt_on": false}, "defualt_on", detail},
		{"agent new", "POST", "/v1/agents", map[string]any{"agent_name": "ag2", "agent_card_params": card, "litellm_params": map[string]any{"model": "m"}, "tags": []string{"x"}}, "tags", openAI},
		{"agent patch", "PATCH", "/v1/agents/" + agentID, map[string]any{"agent_name": "ag3", "owner": "me"}, "owner", openAI},
		{"access group new", "POST", "/access_group/new", map[string]any{"access_group": "grp2", "model_names": []string{"m"}, "description": "d"}, "description", detail},
		{"access group update", "PUT", "/access_group/grp/update", map[string]any{"model_names": []string{}, "model_id": "m-1"}, "model_id", detail},
		{"key regenerate", "POST", "/key/regenerate", map[string]any{"key": key, "duration": "1h"}, "duration", openAI},
		{"key unblock", "POST", "/key/unblock", map[string]any{"key": key, "why": "x"}, "why", openAI},
		{"apply guardrail", "POST", "/guardrails/apply_guardrail", map[string]any{"guardrail_name": "g1", "text": "hi", "language": "en"}, "language", openAI},
		{"team new", "POST", "/team/new", map[string]any{"team_alias": "t2", "budget_limit": 3}, "budget_limit", detail},
		{"team update", "POST", "/team/update", map[string]any{"team_id": "t1", "max_budget": 5, "tpm": 1}, "tpm", detail},
		{"team member add", "POST", "/team/member_add", map[string]any{"team_id": "t1", "member": map[string]any{"user_id": "u1", "role": "user"}, "notify": true}, "notify", detail},
		{"team member update", "POST", "/team/member_update", map[string]any{"team_id": "t1", "user_id": "u1", "max_budget_in_team": 1, "max_budget": 2}, "max_budget", detail},
		{"team block", "POST", "/team/block", map[string]any{"team_id": "t1", "reason": "x"}, "reason", detail},
		{"user new", "POST", "/user/new", map[string]any{"user_id": "u2", "user_emial": "a@b.c"}, "user_emial", detail},
		{"user update", "POST", "/user/update", map[string]any{"user_id": "u1", "max_budget": 1, "spend_cap": 2}, "spend_cap", detail},
		{"user delete", "POST", "/user/delete", map[string]any{"user_ids": []string{"u1"}, "cascade": true}, "cascade", detail},
		{"organization new", "POST", "/organization/new", map[string]any{"organization_alias": "o", "seats": 3}, "seats", detail},
		{"customer new", "POST", "/customer/new", map[string]any{"user_id": "c2", "region": "eu"}, "region", detail},
		{"end user update", "POST", "/end_user/update", map[string]any{"user_id": "c1", "blocked": true, "note": "x"}, "note", detail},
		{"customer block", "POST", "/customer/block", map[string]any{"user_ids": []string{"c1"}, "reason": "x"}, "reason", detail},
	}
	for _, c := range cases {
		st, b := g.Do(t, c.method, c.path, c.body)
		require.Equal(t, 400, st, "%s: %s", c.name, b)
		var msg string
		switch c.envelope {
		case detail:
			msg = gjson.GetBytes(b, "detail.error").String()
		default:
			msg = gjson.GetBytes(b, "error.message").String()
			require.Equal(t, "400", gjson.GetBytes(b, "error.code").String(), "%s: %s", c.name, b)
		}
		want, _ := json.Marshal(c.field)
		require.Contains(t, msg, "unknown field "+string(want), "%s: %s", c.name, b)
	}
	require.Equal(t, before, counts(), "a refused write stored something")

	// the key is unchanged and still works: nothing was half-applied by /key/update or /key/block
	st, b = g.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("m", "hi", false))
	require.Equal(t, 200, st, "%s", b)

	// LLM routes pass unknown fields through to the upstream
	up.Reset()
	body := chatBody("m", "hi", false)
	body["x_vendor_knob"] = map[string]any{"depth": 3}
	st, b = p.B.Do(t, "POST", "/v1/chat/completions", body)
	require.Equal(t, 200, st, "%s", b)
	got, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, int64(3), gjson.GetBytes(got.Body, "x_vendor_knob.depth").Int(), "%s", got.Body)
}
