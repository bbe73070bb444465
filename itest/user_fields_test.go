package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Issue 19, user fields: /user/new on A gives the auto-created key the body's
// allowed_cache_controls, model_rpm_limit, guardrails, object_permission and permissions, as
// LiteLLM's generate_key_helper_fn (request_type "user") does, and B enforces them as the
// key's own; "spend" is the user's and the key's spend total; "organizations" makes the user
// an internal_user member of each; the user's own copies are returned by B's /user/info and
// /user/list.
func TestUserNewKeyFieldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	catModel(t, a, "uf-real")
	catModel(t, a, "uf-other")
	mock := map[string]any{"model": "openai/x", "mock_response": "agent says hi"}
	id1 := createAgent(t, a, "uf-ag1", mock)
	id2 := createAgent(t, a, "uf-ag2", mock)
	st, body := a.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "uf-g",
		"litellm_params": contentFilter("pre_call", map[string]any{"blocked_words": []any{word("zzz", "BLOCK")}})}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "uf-org", "organization_alias": "o"})
	require.Equal(t, 200, st, "%s", body)

	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "uf-u",
		"allowed_cache_controls": []string{"no-cache"}, "model_rpm_limit": map[string]int{"uf-real": 1},
		"model_tpm_limit": map[string]int{"uf-other": 100000}, "guardrails": []string{"uf-g"},
		"object_permission": map[string]any{"agents": []string{id1}}, "permissions": map[string]any{"get_spend_routes": true},
		"spend": 2.5, "organizations": []string{"uf-org", "uf-org"}})
	require.Equal(t, 200, st, "%s", body)
	u := JSON(t, body)
	key, tok := u["key"].(string), u["token"].(string)
	Eventually(t, "B serves the user's key", func() bool { return catServedBy(t, b, key, "uf-other", "uf-other") })

	// allowed_cache_controls: a control outside the list is LiteLLM's 403
	st, body = b.DoKey(t, key, "POST", "/v1/chat/completions", map[string]any{"model": "uf-other",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "cache": map[string]any{"no-store": true}})
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Not allowed to set no-store as a cache control. Contact admin to change permissions.", accDetail(body))
	// guardrails: the key's guardrail blocks on B
	st, _, body = govDo(t, b, key, "uf-other", "say zzz")
	require.Equal(t, 400, st, "the user's key runs uf-g: %s", body)
	// object_permission.agents: agent 1 only
	st, body = b.DoKey(t, key, "POST", "/a2a/"+id1, sendRequest(1, "hi"))
	require.Equal(t, 200, st, "%s", body)
	st, body = b.DoKey(t, key, "POST", "/a2a/"+id2, sendRequest(2, "hi"))
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Access denied to agent: "+id2, accDetail(body))
	// model_rpm_limit: the key's per-model window, held cluster-wide, the other model free
	st, body = catRefusedWithin(t, b, key, "uf-real", 3)
	require.Equal(t, 429, st, "%s", body)
	require.Contains(t, string(body), "Rate limit exceeded for model_per_key: "+tok+":uf-real. Limit type: requests.")
	st, body = catRefusedWithin(t, a, key, "uf-real", 2)
	require.Equal(t, 429, st, "the window is the cluster's: %s", body)
	require.True(t, catServedBy(t, a, key, "uf-other", "uf-other"))

	// the key as B shows it: permissions, limits, spend
	st, body = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, true, gjson.GetBytes(body, "info.permissions.get_spend_routes").Value(), "%s", body)
	require.EqualValues(t, 1, gjson.GetBytes(body, "info.model_rpm_limit.uf-real").Int(), "%s", body)
	require.EqualValues(t, 100000, gjson.GetBytes(body, "info.model_tpm_limit.uf-other").Int(), "%s", body)
	require.GreaterOrEqual(t, gjson.GetBytes(body, "info.spend").Float(), 2.5, "%s", body)

	// the user as B shows it: its own copies (not permissions, which LiteLLM keeps on the key)
	st, body = b.Do(t, "GET", "/user/info?user_id=uf-u", nil)
	require.Equal(t, 200, st, "%s", body)
	ui := gjson.GetBytes(body, "user_info")
	require.Equal(t, []any{"no-cache"}, ui.Get("allowed_cache_controls").Value(), "%s", body)
	require.Equal(t, []any{"uf-g"}, ui.Get("guardrails").Value(), "%s", body)
	require.EqualValues(t, 1, ui.Get("model_rpm_limit.uf-real").Int(), "%s", body)
	require.Equal(t, []any{id1}, ui.Get("object_permission.agents").Value(), "%s", body)
	require.False(t, ui.Get("permissions").Exists(), "%s", body)
	require.GreaterOrEqual(t, ui.Get("spend").Float(), 2.5, "%s", body)
	st, body = b.Do(t, "GET", "/user/list", nil)
	require.Equal(t, 200, st, "%s", body)
	found := false
	for _, r := range gjson.GetBytes(body, "users").Array() {
		if r.Get("user_id").String() == "uf-u" {
			found = true
			require.Equal(t, []any{"uf-g"}, r.Get("guardrails").Value(), "%s", r.Raw)
		}
	}
	require.True(t, found, "%s", body)

	// organizations: an internal_user member, once
	st, body = b.Do(t, "GET", "/organization/info?organization_id=uf-org", nil)
	require.Equal(t, 200, st, "%s", body)
	members := gjson.GetBytes(body, "members").Array()
	require.Len(t, members, 1, "%s", body)
	require.Equal(t, "uf-u", members[0].Get("user_id").String())
	require.Equal(t, "internal_user", members[0].Get("user_role").String())
}

// Issue 19, user fields: on /user/update (made on B) allowed_cache_controls, permissions,
// model_rpm_limit, model_tpm_limit, guardrails, object_permission, duration and team_id are
// kept on the user and returned by A's /user/info and /user/list; as in LiteLLM, whose call
// path reads them from keys and teams only, they change nothing for the user's keys.
func TestUserUpdateStoredFields(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	catModel(t, a, "uf-real")
	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "uf-s"})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)

	st, body = b.Do(t, "POST", "/user/update", map[string]any{"user_id": "uf-s",
		"allowed_cache_controls": []string{"no-cache"}, "permissions": map[string]any{"get_spend_routes": false},
		"model_rpm_limit": map[string]int{"uf-real": 1}, "model_tpm_limit": map[string]int{"uf-real": 1},
		"guardrails": []string{"uf-none"}, "object_permission": map[string]any{"mcp_servers": []string{"s1"}},
		"duration": "1h", "team_id": "uf-legacy-team", "policies": []string{"uf-no-policy"}, "agent_id": "uf-no-agent"})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A returns the stored fields", func() bool {
		st, body := a.Do(t, "GET", "/user/info?user_id=uf-s", nil)
		ui := gjson.GetBytes(body, "user_info")
		return st == 200 && ui.Get("duration").String() == "1h" && ui.Get("team_id").String() == "uf-legacy-team" &&
			ui.Get("guardrails.0").String() == "uf-none" && ui.Get("allowed_cache_controls.0").String() == "no-cache" &&
			ui.Get("model_rpm_limit.uf-real").Int() == 1 && ui.Get("model_tpm_limit.uf-real").Int() == 1 &&
			ui.Get("permissions.get_spend_routes").Exists() && ui.Get("object_permission.mcp_servers.0").String() == "s1" &&
			ui.Get("policies.0").String() == "uf-no-policy" && ui.Get("agent_id").String() == "uf-no-agent"
	})
	st, body = a.Do(t, "GET", "/user/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, string(body), `"uf-legacy-team"`)

	// the user's key is not held to them (LiteLLM enforces none per user): a missing guardrail,
	// an rpm of 1 and a cache control outside the list all pass
	Eventually(t, "A serves the user's key", func() bool { return catServedBy(t, a, key, "uf-real", "uf-real") })
	st, body = catRefusedWithin(t, a, key, "uf-real", 3)
	require.Equal(t, 200, st, "%s", body)
	st, body = a.DoKey(t, key, "POST", "/v1/chat/completions", map[string]any{"model": "uf-real",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "cache": map[string]any{"no-store": true}})
	require.Equal(t, 200, st, "%s", body)
	// the user's team memberships are untouched by the legacy team_id
	st, body = a.Do(t, "GET", "/user/info?user_id=uf-s", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, gjson.GetBytes(body, "teams").Array(), "%s", body)
}

// Issue 19, user fields: a bad value is a 400 naming the field, an unknown organization a 404
// naming it, and nothing of the user (row, key, memberships, spend) is written on any replica.
func TestUserFieldsRefused(t *testing.T) {
	t.Parallel()
	a, b := pairWithOrg(t, "uf-org1")

	for _, c := range []struct {
		body       map[string]any
		status     int
		want       string
		notWritten string
	}{
		{map[string]any{"model_rpm_limit": map[string]int{"m": -1}}, 400, `model_rpm_limit[\"m\"] must be an integer >= 0`, ""},
		{map[string]any{"model_tpm_limit": []int{1}}, 400, "model_tpm_limit must be an object of integers", ""},
		{map[string]any{"guardrails": "g"}, 400, "guardrails", ""},
		{map[string]any{"allowed_cache_controls": map[string]any{}}, 400, "allowed_cache_controls", ""},
		{map[string]any{"permissions": map[string]any{"pii": true}}, 400, `field \"permissions.pii\" is not supported yet`, ""},
		{map[string]any{"permissions": map[string]any{"get_spend_routes": "yes"}}, 400, "permissions.get_spend_routes must be true or false", ""},
		{map[string]any{"object_permission": map[string]any{"models": []string{"m"}}}, 400, `field \"object_permission.models\" is not supported yet`, ""},
		{map[string]any{"object_permission": map[string]any{"agents": "a"}}, 400, "object_permission.agents must be a list of strings", ""},
		{map[string]any{"spend": -1}, 400, "spend must be a number >= 0", ""},
		{map[string]any{"spend": "1"}, 400, "spend", ""},
		{map[string]any{"organizations": "uf-org1"}, 400, "organizations", ""},
		// the first organization exists, the second does not: neither membership is written
		{map[string]any{"organizations": []string{"uf-org1", "uf-nope"}, "spend": 3}, 404, "Organization not found, passed organization_id=uf-nope", "uf-org1"},
		// an empty id names its index; a stored object_permission member of the wrong LiteLLM type
		// is refused; neither writes the membership with the first organization
		{map[string]any{"organizations": []string{"uf-org1", ""}}, 400, "organizations[1] must be a non-empty organization id", "uf-org1"},
		{map[string]any{"organizations": []string{"uf-org1"}, "object_permission": map[string]any{"mcp_servers": "srv"}}, 400,
			"object_permission.mcp_servers must be a list of strings", "uf-org1"},
		{map[string]any{"organizations": []string{"uf-org1"}, "object_permission": map[string]any{"mcp_tool_search_enabled": "yes"}}, 400,
			"object_permission.mcp_tool_search_enabled must be true or false", "uf-org1"},
	} {
		c.body["user_id"] = "uf-bad"
		st, body := a.Do(t, "POST", "/user/new", c.body)
		require.Equal(t, c.status, st, "%v: %s", c.body, body)
		require.Contains(t, string(body), c.want, "%v", c.body)
		st, body = b.Do(t, "GET", "/user/info?user_id=uf-bad", nil)
		require.Equal(t, 404, st, "%v: nothing stored: %s", c.body, body)
		if c.notWritten != "" {
			st, body = b.Do(t, "GET", "/organization/info?organization_id="+c.notWritten, nil)
			require.Equal(t, 200, st, "%s", body)
			require.Empty(t, gjson.GetBytes(body, "members").Array(), "%s", body)
		}
	}
	st, body := b.Do(t, "GET", "/key/list?user_id=uf-bad", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, gjson.GetBytes(body, "keys").Array(), "no key was made: %s", body)

	// /user/update: refused naming the field, the user unchanged
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "uf-upd", "auto_create_key": false})
	require.Equal(t, 200, st, "%s", body)
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"duration": "soon", "guardrails": []string{"g"}}, "duration"},
		{map[string]any{"team_id": 5, "guardrails": []string{"g"}}, "team_id"},
		{map[string]any{"allowed_cache_controls": "no-cache", "guardrails": []string{"g"}}, "allowed_cache_controls"},
		{map[string]any{"model_rpm_limit": map[string]int{"m": -2}, "guardrails": []string{"g"}}, "model_rpm_limit"},
		{map[string]any{"object_permission": map[string]any{"blocked_tools": []string{"t"}}, "guardrails": []string{"g"}}, `field \"object_permission.blocked_tools\" is not supported yet`},
		{map[string]any{"agent_id": 7, "guardrails": []string{"g"}}, "agent_id"},
		{map[string]any{"policies": "p", "guardrails": []string{"g"}}, "policies"},
		{map[string]any{"object_permission": map[string]any{"vector_stores": 7}, "guardrails": []string{"g"}}, "object_permission.vector_stores must be a list of strings"},
	} {
		c.body["user_id"] = "uf-upd"
		st, body := b.Do(t, "POST", "/user/update", c.body)
		require.Equal(t, 400, st, "%v: %s", c.body, body)
		require.Contains(t, string(body), c.want, "%v", c.body)
	}
	st, body = a.Do(t, "GET", "/user/info?user_id=uf-upd", nil)
	require.Equal(t, 200, st, "%s", body)
	require.False(t, gjson.GetBytes(body, "user_info.guardrails").Exists(), "nothing stored: %s", body)
}

// Issue 19, self-service: an internal_user setting the user fields on itself (/user/update
// with permissions, model_rpm_limit, spend, max_budget, user_role; /user/new with a role,
// organizations and permissions) is refused on B in LiteLLM's words and changes nothing: its
// user row, its key's model_rpm_limit and the organization's members stay as the admin left
// them (API.md "Roles and self-service": no role raises its own role, limits or budget).
func TestUserFieldsSelfServiceRefused(t *testing.T) {
	t.Parallel()
	a, b := pairWithOrg(t, "uh-org")
	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "uh-u", "user_role": "internal_user",
		"max_budget": 1, "model_rpm_limit": map[string]int{"uh-m": 1}, "spend": 0.5})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	Eventually(t, "B serves the user's key", func() bool {
		st, _ := b.DoKey(t, key, "GET", "/key/info", nil)
		return st == 200
	})

	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/user/update", map[string]any{"user_id": "uh-u", "permissions": map[string]any{"get_spend_routes": true}}},
		{"/user/update", map[string]any{"user_id": "uh-u", "model_rpm_limit": map[string]int{"uh-m": 1000000}}},
		{"/user/update", map[string]any{"user_id": "uh-u", "spend": 0, "max_budget": 1e9}},
		{"/user/update", map[string]any{"user_id": "uh-u", "user_role": "proxy_admin"}},
		{"/user/new", map[string]any{"user_id": "uh-u2", "user_role": "proxy_admin", "organizations": []string{"uh-org"},
			"permissions": map[string]any{"get_spend_routes": true}}},
	} {
		st, body := b.DoKey(t, key, "POST", c.path, c.body)
		require.Equal(t, 403, st, "%s %v: %s", c.path, c.body, body)
		require.Contains(t, string(body), "Only proxy admin can be used to generate, delete, update info for new keys/users/teams", "%s", body)
	}
	st, body = a.Do(t, "GET", "/user/info?user_id=uh-u", nil)
	require.Equal(t, 200, st, "%s", body)
	u := gjson.GetBytes(body, "user_info")
	require.Equal(t, "internal_user", u.Get("user_role").String(), "%s", body)
	require.Equal(t, 1.0, u.Get("max_budget").Float(), "%s", body)
	require.Equal(t, 0.5, u.Get("spend").Float(), "%s", body)
	require.Equal(t, int64(1), u.Get("model_rpm_limit.uh-m").Int(), "%s", body)
	require.False(t, u.Get("permissions").Exists(), "%s", body)
	require.Equal(t, int64(1), gjson.GetBytes(body, "keys.0.model_rpm_limit.uh-m").Int(), "%s", body)
	st, body = a.Do(t, "GET", "/user/info?user_id=uh-u2", nil)
	require.Equal(t, 404, st, "%s", body)
	st, body = a.Do(t, "GET", "/organization/info?organization_id=uh-org", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, gjson.GetBytes(body, "members").Array(), "%s", body)
}

// pairWithOrg starts two replicas and creates organization orgID on the first.
func pairWithOrg(t *testing.T, orgID string) (a, b *Gateway) {
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/organization/new", map[string]any{"organization_id": orgID, "organization_alias": "o"})
	require.Equal(t, 200, st, "%s", body)
	return p.A, p.B
}

// Issue 19, organizations: /user/delete on A takes the user out of every organization it
// joined (LiteLLM's delete_user deletes its LiteLLM_OrganizationMembership rows), so B's
// /organization/info no longer lists it and a new user of the same id joins afresh.
func TestUserDeleteLeavesOrganizations(t *testing.T) {
	t.Parallel()
	a, b := pairWithOrg(t, "ud-org")
	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ud-u", "organizations": []string{"ud-org"}, "auto_create_key": false})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ud-keep", "organizations": []string{"ud-org"}, "auto_create_key": false})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/user/delete", map[string]any{"user_ids": []string{"ud-u"}})
	require.Equal(t, 200, st, "%s", body)
	members := func() []string {
		st, body := b.Do(t, "GET", "/organization/info?organization_id=ud-org", nil)
		require.Equal(t, 200, st, "%s", body)
		var ids []string
		for _, m := range gjson.GetBytes(body, "members").Array() {
			ids = append(ids, m.Get("user_id").String())
		}
		return ids
	}
	Eventually(t, "B's organization lists only ud-keep", func() bool {
		m := members()
		return len(m) == 1 && m[0] == "ud-keep"
	})
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ud-u", "organizations": []string{"ud-org"}, "auto_create_key": false})
	require.Equal(t, 200, st, "a new user of the id joins afresh: %s", body)
	Eventually(t, "B lists both", func() bool { return len(members()) == 2 })
}

// Issue 19, agent_id on /user/new: GenerateRequestBase's agent_id goes to the auto-created key
// (generate_key_helper_fn), checked as /key/generate checks a key's: an unknown agent is a 400
// naming it and writes no user; a known one makes the key the agent's key on B, where the
// agent's require_trace_id_on_calls_by_agent holds; the user does not keep it.
func TestUserNewAgentIDReachesKey(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "ua-m", nil)
	traced := createAgent(t, a, "ua-traced", map[string]any{"model": "openai/x", "mock_response": "hi", "require_trace_id_on_calls_by_agent": true})

	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ua-none", "agent_id": "ua-no-agent"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "agent_id: agent 'ua-no-agent' not found", accDetail(body))
	st, body = b.Do(t, "GET", "/user/info?user_id=ua-none", nil)
	require.Equal(t, 404, st, "no user written: %s", body)
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ua-none", "agent_id": 7})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "agent_id")

	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ua-u", "agent_id": traced})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	chat := map[string]any{"model": "ua-m", "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	Eventually(t, "B serves the user's key with a trace id", func() bool {
		st, _, _ := postAs(t, b, key, "/v1/chat/completions", chat, map[string]string{"x-litellm-trace-id": "t-1"})
		return st == 200
	})
	st, _, body = postAs(t, b, key, "/v1/chat/completions", chat, nil)
	require.Equal(t, 400, st, "the agent's rule holds for the auto-created key on B: %s", body)
	require.Equal(t, "Requests made with this agent's key must include the x-litellm-trace-id header.", accDetail(body))
	st, body = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, traced, gjson.GetBytes(body, "info.agent_id").String())
	st, body = b.Do(t, "GET", "/user/info?user_id=ua-u", nil)
	require.Equal(t, 200, st, "%s", body)
	require.False(t, gjson.GetBytes(body, "user_info.agent_id").Exists(), "the user keeps no agent_id: %s", body)
}
