package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Unified access groups (LiteLLM_AccessGroupTable, /v1/access_group; issue 19): written on one
// replica, in force on the other.

// ugChat is a chat call with key on g for model.
func ugChat(t *testing.T, g *Gateway, key, model string) (int, []byte) {
	t.Helper()
	return g.DoKey(t, key, "POST", "/v1/chat/completions", map[string]any{"model": model, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
}

// ugGroup creates a unified access group through g and returns its answer.
func ugGroup(t *testing.T, g *Gateway, body map[string]any) map[string]any {
	t.Helper()
	st, b := g.Do(t, "POST", "/v1/access_group", body)
	require.Equal(t, 201, st, "%s", b)
	return JSON(t, b)
}

// ugGroupCount is how many unified access groups g's registry holds.
func ugGroupCount(t *testing.T, g *Gateway) float64 {
	t.Helper()
	return g.SyncLag(t)["registries"].(map[string]any)["access_groups"].(map[string]any)["count"].(float64)
}

// A group made on A narrows a key without models (and a team) to its models on B at once (the
// first call on B reads the key and the group through); one with models of its own is widened;
// a model removed from the group on A is refused on B; the group's assigned_key_ids /
// assigned_team_ids are its holders and writing them attaches and detaches; deleting the group
// detaches it everywhere. Bad input is a 400 naming the field, nothing written.
func TestUnifiedAccessGroupsAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	for _, m := range []string{"ug-m1", "ug-m2"} {
		govMockModel(t, a, m, nil)
	}

	g := ugGroup(t, a, map[string]any{"access_group_name": "ug-1", "description": "first", "access_model_names": []string{"ug-m1"}})
	gid := g["access_group_id"].(string)
	for k, v := range map[string]any{"access_group_name": "ug-1", "description": "first", "access_model_names": []any{"ug-m1"},
		"access_mcp_server_ids": []any{}, "access_agent_ids": []any{}, "assigned_key_ids": []any{}, "assigned_team_ids": []any{},
		"created_by": "default_user_id"} {
		require.Equal(t, v, g[k], "%s in %v", k, g)
	}
	require.NotEmpty(t, g["created_at"])
	require.NotContains(t, g, "version")

	// bad input: 400 naming the field, 409 for a name in use; nothing written
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"description": "no name"}, "access_group_name"},
		{map[string]any{"access_group_name": "ug-x", "access_model_names": "ug-m1"}, "access_model_names"},
		{map[string]any{"access_group_name": "ug-x", "access_model_name": []string{"ug-m1"}}, "access_model_name"},
		{map[string]any{"access_group_name": "ug-x", "access_agent_ids": []string{""}}, "access_agent_ids[0]"},
		{map[string]any{"access_group_name": "ug-x", "assigned_team_ids": []string{"ug-no-team"}}, "Unknown team ids: ug-no-team"},
		{map[string]any{"access_group_name": "ug-x", "assigned_key_ids": []string{"ug-no-key"}}, "Unknown key ids: ug-no-key"},
	} {
		st, body := b.Do(t, "POST", "/v1/access_group", c.body)
		require.Equal(t, 400, st, "%v: %s", c.body, body)
		require.Contains(t, string(body), c.want)
	}
	st, body := b.Do(t, "POST", "/v1/access_group", map[string]any{"access_group_name": "ug-1"})
	require.Equal(t, 409, st, "%s", body)
	require.Equal(t, "Access group 'ug-1' already exists", accDetail(body))
	st, body = b.Do(t, "GET", "/v1/unified_access_group", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, gjson.ParseBytes(body).Array(), 1, "no refused write left a group: %s", body)

	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "ug-ghost", "access_group_ids": []string{"ug-ghost-group"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, accDetail(body), "access_group_ids: access group 'ug-ghost-group' not found")
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "ug-ghost", "access_group_ids": "ug-1"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "access_group_ids")
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "ug-ghost", "access_group_ids": []string{gid, gid}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "access_group_ids")
	st, body = b.Do(t, "GET", "/key/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, string(body), "ug-ghost")

	// a key without models is narrowed to the group's; one with models is widened by it
	narrow, narrowTok := govKey(t, a, map[string]any{"access_group_ids": []string{gid}})
	st, body = ugChat(t, b, narrow, "ug-m1")
	require.Equal(t, 200, st, "B serves the group's model at once: %s", body)
	st, body = ugChat(t, b, narrow, "ug-m2")
	require.Equal(t, 401, st, "a key with groups and no models is narrowed: %s", body)
	st, body = b.DoKey(t, narrow, "GET", "/v1/models", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{"ug-m1"}, gjson.GetBytes(body, "data.#.id").Value(), "the key lists its group's models only")
	wide, _ := govKey(t, a, map[string]any{"models": []string{"ug-m2"}, "access_group_ids": []string{gid}})
	for _, m := range []string{"ug-m1", "ug-m2"} {
		st, body = ugChat(t, b, wide, m)
		require.Equal(t, 200, st, "%s: %s", m, body)
	}
	st, body = b.Do(t, "GET", "/key/info?key="+narrow, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{gid}, gjson.GetBytes(body, "info.access_group_ids").Value())

	// a team's groups narrow its keys the same way
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "ug-team", "access_group_ids": []string{gid}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "ug-team-bad", "access_group_ids": []string{"ug-nope"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, accDetail(body), "access_group_ids")
	tk, _ := govKey(t, a, map[string]any{"team_id": "ug-team"})
	Eventually(t, "B serves the team's group model", func() bool { st, _ := ugChat(t, b, tk, "ug-m1"); return st == 200 })
	st, body = ugChat(t, b, tk, "ug-m2")
	require.Equal(t, 401, st, "%s", body)

	// holders answered on B
	st, body = b.Do(t, "GET", "/v1/access_group/"+gid, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, gjson.GetBytes(body, "assigned_key_ids").Array(), 2, "%s", body)
	require.Contains(t, string(body), narrowTok)
	require.Equal(t, []any{"ug-team"}, gjson.GetBytes(body, "assigned_team_ids").Value())

	// a model moved out of the group on A is refused on B, the new one served
	st, body = a.Do(t, "PUT", "/v1/access_group/"+gid, map[string]any{"access_model_names": []string{"ug-m2"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "first", JSON(t, body)["description"], "a field not sent keeps its value")
	Eventually(t, "B refuses the removed model", func() bool { st, _ := ugChat(t, b, narrow, "ug-m1"); return st == 401 })
	st, body = ugChat(t, b, narrow, "ug-m2")
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "PUT", "/v1/access_group/ug-nope", map[string]any{"description": "x"})
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, "Access group 'ug-nope' not found", accDetail(body))
	st, body = a.Do(t, "PUT", "/v1/access_group/"+gid, map[string]any{"assigned_team_ids": []string{"ug-team", "ug-nope"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, accDetail(body), "Unknown team ids: ug-nope")

	// assigned_key_ids written on the group: detach the narrowed key on B, attach a plain key
	plain, plainTok := govKey(t, a, map[string]any{})
	st, body = b.Do(t, "PUT", "/v1/unified_access_group/"+gid, map[string]any{"assigned_key_ids": []string{plainTok}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{plainTok}, JSON(t, body)["assigned_key_ids"])
	Eventually(t, "A narrows the newly attached key", func() bool { st, _ := ugChat(t, a, plain, "ug-m1"); return st == 401 })
	Eventually(t, "A frees the detached key", func() bool { st, _ := ugChat(t, a, narrow, "ug-m1"); return st == 200 })

	// delete: the group leaves its keys and team, then goes, on every replica
	st, body = b.Do(t, "DELETE", "/v1/access_group/"+gid, nil)
	require.Equal(t, 204, st, "%s", body)
	for _, gw := range []*Gateway{a, b} {
		Eventually(t, gw.ReplicaID+" dropped the group", func() bool { return ugGroupCount(t, gw) == 0 })
	}
	st, body = a.Do(t, "GET", "/key/info?key="+plain, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{}, gjson.GetBytes(body, "info.access_group_ids").Value())
	Eventually(t, "A frees the key the deleted group narrowed", func() bool { st, _ := ugChat(t, a, plain, "ug-m1"); return st == 200 })
	st, body = a.Do(t, "DELETE", "/v1/access_group/"+gid, nil)
	require.Equal(t, 404, st, "%s", body)
}

// A group's access_agent_ids grant its keys those agents on B (by agent_id); a key naming a
// group is restricted to the groups' agents even when they grant none (LiteLLM
// AgentRequestHandler). A key's agent_id names the agent owning it: an unknown agent is a 400;
// the agent's require_trace_id_on_calls_by_agent makes the key's calls without
// x-litellm-trace-id a 400 (LiteLLM common_checks).
func TestUnifiedAccessGroupAgentsAndAgentKeys(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	mock := map[string]any{"model": "openai/x", "mock_response": "agent says hi"}
	id1 := createAgent(t, a, "ug-ag1", mock)
	id2 := createAgent(t, a, "ug-ag2", mock)
	send := func(g *Gateway, key, agent string) (int, []byte) {
		return g.DoKey(t, key, "POST", "/a2a/"+agent, sendRequest(1, "hi"))
	}

	ag := ugGroup(t, a, map[string]any{"access_group_name": "ug-agents", "access_agent_ids": []string{id1}})
	models := ugGroup(t, a, map[string]any{"access_group_name": "ug-models-only", "access_model_names": []string{"m"}})
	k, _ := govKey(t, a, map[string]any{"access_group_ids": []string{ag["access_group_id"].(string)}})
	Eventually(t, "B runs the group's agent for the key", func() bool { st, _ := send(b, k, id1); return st == 200 })
	st, body := send(b, k, id2)
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Access denied to agent: "+id2, accDetail(body))
	km, _ := govKey(t, a, map[string]any{"access_group_ids": []string{models["access_group_id"].(string)}})
	Eventually(t, "B holds the models-only group", func() bool { return ugGroupCount(t, b) == 2 })
	for _, id := range []string{id1, id2} {
		st, body = send(b, km, id)
		require.Equal(t, 403, st, "a group granting no agents restricts the key to none: %s", body)
	}

	// a team's groups restrict its keys' agents the same way
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "ug-ag-team", "access_group_ids": []string{ag["access_group_id"].(string)}})
	require.Equal(t, 200, st, "%s", body)
	tk, _ := govKey(t, a, map[string]any{"team_id": "ug-ag-team"})
	Eventually(t, "B runs the team group's agent", func() bool { st, _ := send(b, tk, id1); return st == 200 })
	st, body = send(b, tk, id2)
	require.Equal(t, 403, st, "%s", body)

	// agent_id: the agent owning the key
	traced := createAgent(t, a, "ug-traced", map[string]any{"model": "openai/x", "mock_response": "hi", "require_trace_id_on_calls_by_agent": true})
	st, body = a.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "ug-bad", "agent_card_params": agentCard("ug-bad"),
		"litellm_params": map[string]any{"model": "openai/x", "require_trace_id_on_calls_by_agent": "yes"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "require_trace_id_on_calls_by_agent")
	govMockModel(t, a, "ug-am", nil)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "ug-agentless", "agent_id": "ug-no-agent"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "agent_id: agent 'ug-no-agent' not found", accDetail(body))
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "ug-agentless", "agent_id": "ug-traced"})
	require.Equal(t, 400, st, "an agent is named by its agent_id: %s", body)
	ak, _ := govKey(t, a, map[string]any{"agent_id": traced})
	chat := map[string]any{"model": "ug-am", "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	Eventually(t, "B holds the agent's key", func() bool {
		st, _, _ := postAs(t, b, ak, "/v1/chat/completions", chat, map[string]string{"x-litellm-trace-id": "t-1"})
		return st == 200
	})
	st, _, body = postAs(t, b, ak, "/v1/chat/completions", chat, nil)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Requests made with this agent's key must include the x-litellm-trace-id header.", accDetail(body))
	st, body = b.Do(t, "GET", "/key/info?key="+ak, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, traced, gjson.GetBytes(body, "info.agent_id").String())
	free, _ := govKey(t, a, map[string]any{"agent_id": id1}) // an agent without the rule
	Eventually(t, "B serves the untraced agent's key", func() bool {
		st, _, _ := postAs(t, b, free, "/v1/chat/completions", chat, nil)
		return st == 200
	})
	// the rule lifted on B holds on A (PATCH merges litellm_params' keys)
	st, body = b.Do(t, "PATCH", "/v1/agents/"+traced, map[string]any{"litellm_params": map[string]any{"require_trace_id_on_calls_by_agent": false}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A drops the trace-id rule", func() bool {
		st, _, _ := postAs(t, a, ak, "/v1/chat/completions", chat, nil)
		return st == 200
	})
}
