package itest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// accChat posts a chat body (with extra members) with key to g's /v1/chat/completions.
func accChat(t *testing.T, g *Gateway, key, path string, extra map[string]any) (int, []byte) {
	t.Helper()
	body := map[string]any{"model": "acc-m", "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	for k, v := range extra {
		body[k] = v
	}
	return g.DoKey(t, key, "POST", path, body)
}

// accDetail is the message of an error answer in either envelope.
func accDetail(b []byte) string {
	if m := gjson.GetBytes(b, "error.message"); m.Exists() {
		return m.String()
	}
	return gjson.GetBytes(b, "detail.error").String()
}

// Issue 19 item 1, access fields: a key's allowed_routes (paths, prefixes, LiteLLM route
// groups) and /key/generate's key_type (→ allowed_routes) written on A are enforced on B, with
// LiteLLM's 403 text; an update on B lifting them is enforced on A; a key_type LiteLLM does not
// define is a 400.
func TestAccessAllowedRoutesAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "acc-m", nil)

	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"key_type": "llm_api"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{"llm_api_routes"}, JSON(t, body)["allowed_routes"], "%s", body)
	llm := JSON(t, body)["key"].(string)
	Eventually(t, "B serves the llm_api key", func() bool { st, _ := accChat(t, b, llm, "/v1/chat/completions", nil); return st == 200 })
	st, body = b.DoKey(t, llm, "GET", "/key/info?key="+llm, nil)
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Virtual key is not allowed to call this route. Only allowed to call routes: ['llm_api_routes']. Tried to call route: /key/info", accDetail(body))

	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_type": "read_only"})
	require.Equal(t, 200, st, "%s", body)
	ro := JSON(t, body)["key"].(string)
	Eventually(t, "B answers the read_only key's /key/info", func() bool {
		st, _ := b.DoKey(t, ro, "GET", "/key/info?key="+ro, nil)
		return st == 200
	})
	st, body = accChat(t, b, ro, "/v1/chat/completions", nil)
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Virtual key is not allowed to call this route. Only allowed to call routes: ['info_routes']. Tried to call route: /v1/chat/completions", accDetail(body))
	st, body = b.DoKey(t, ro, "GET", "/v1/models", nil)
	require.Equal(t, 200, st, "%s", body)

	// a path: exactly it (and paths under it); lifted by an update on B, A follows
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"allowed_routes": []string{"/v1/chat/completions"}})
	require.Equal(t, 200, st, "%s", body)
	one := JSON(t, body)["key"].(string)
	Eventually(t, "B serves /v1/chat/completions to the one-route key", func() bool {
		st, _ := accChat(t, b, one, "/v1/chat/completions", nil)
		return st == 200
	})
	st, body = accChat(t, b, one, "/chat/completions", nil)
	require.Equal(t, 403, st, "%s", body)
	require.Contains(t, accDetail(body), "Only allowed to call routes: ['/v1/chat/completions']. Tried to call route: /chat/completions")
	st, _ = a.DoKey(t, one, "GET", "/v1/models", nil)
	require.Equal(t, 403, st)
	st, body = b.Do(t, "POST", "/key/update", map[string]any{"key": one, "allowed_routes": []string{}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A lets the key call /v1/models after B's update", func() bool {
		st, _ := a.DoKey(t, one, "GET", "/v1/models", nil)
		return st == 200
	})

	// a management key: management routes, not the LLM routes
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_type": "management"})
	require.Equal(t, 200, st, "%s", body)
	mk := JSON(t, body)["key"].(string)
	Eventually(t, "B refuses the management key an LLM call", func() bool {
		st, body := accChat(t, b, mk, "/v1/chat/completions", nil)
		return st == 403 && accDetail(body) == "Virtual key is not allowed to call this route. Only allowed to call routes: ['management_routes']. Tried to call route: /v1/chat/completions"
	})

	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_type": "admin"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "key_type must be one of 'llm_api', 'management', 'read_only', 'default'")
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"allowed_routes": "llm_api_routes"})
	require.Equal(t, 400, st, "%s", body)
}

// Issue 19 item 1: object_permission.agents on a key and on a team (LiteLLM: key alone, team
// alone, both → the intersection), written on A, enforced on B's /a2a routes with LiteLLM's
// 403 `Access denied to agent: <id>`; object_permission members gating what lockstep does not
// serve are stored, models is refused as not supported yet.
func TestAccessObjectPermissionAgents(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	id1, id2 := twoMockAgents(t, a, "acc-ag")
	send := func(g *Gateway, key, agent string) (int, []byte) {
		return g.DoKey(t, key, "POST", "/a2a/"+agent, sendRequest(1, "hi"))
	}

	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"object_permission": map[string]any{"agents": []string{id1}, "mcp_servers": []string{"s1"}}})
	require.Equal(t, 200, st, "%s", body)
	kAg := JSON(t, body)["key"].(string)
	Eventually(t, "B runs agent 1 for the key", func() bool { st, _ := send(b, kAg, id1); return st == 200 })
	st, body = send(b, kAg, id2)
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Access denied to agent: "+id2, accDetail(body))
	st, body = send(b, kAg, "acc-ag2") // by name: the same agent
	require.Equal(t, 403, st, "%s", body)
	st, body = b.DoKey(t, kAg, "GET", "/a2a/"+id2+"/.well-known/agent-card.json", nil)
	require.Equal(t, 403, st, "%s", body)
	st, body = b.Do(t, "GET", "/key/info?key="+kAg, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{"s1"}, gjson.GetBytes(body, "info.object_permission.mcp_servers").Value())

	// a team's agents bind its keys; with the key's own, the intersection
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-team", "object_permission": map[string]any{"agents": []string{id2}}})
	require.Equal(t, 200, st, "%s", body)
	tk, _ := govKey(t, a, map[string]any{"team_id": "acc-team"})
	both, _ := govKey(t, a, map[string]any{"team_id": "acc-team", "object_permission": map[string]any{"agents": []string{id1}}})
	Eventually(t, "B runs agent 2 for the team key", func() bool { st, _ := send(b, tk, id2); return st == 200 })
	st, body = send(b, tk, id1)
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Access denied to agent: "+id1, accDetail(body))
	for _, id := range []string{id1, id2} {
		st, body = send(b, both, id)
		require.Equal(t, 403, st, "intersection of [1] and [2] is empty: %s", body)
	}
	// the team's restriction lifted on B: A follows
	st, body = b.Do(t, "POST", "/team/update", map[string]any{"team_id": "acc-team", "object_permission": map[string]any{"agents": []string{}}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A runs agent 1 for the team key", func() bool { st, _ := send(a, tk, id1); return st == 200 })

	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "object_permission": map[string]any{"models": []string{"m"}}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `field \"object_permission.models\" is not supported yet`)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "object_permission": map[string]any{"agentz": []string{}}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `unknown field \"agentz\" in object_permission`)
	st, body = b.Do(t, "GET", "/key/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, string(body), "acc-no")
}

// Issue 19 item 1: allowed_cache_controls (LiteLLM's cache_control_check: a request "cache"
// control outside the list → 403), permissions (stored and returned; get_spend_routes only the
// proxy admin sets), rpm_limit_type / tpm_limit_type (best_effort_throughput passes; the
// capacity-sharing types are refused), team_member_key_duration (the default and the longest
// duration of a team member's key), each written on A and in force on B.
func TestAccessKeyFieldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "acc-m", nil)

	cc, _ := govKey(t, a, map[string]any{"allowed_cache_controls": []string{"no-cache"}})
	Eventually(t, "B serves the cache-controlled key", func() bool {
		st, _ := accChat(t, b, cc, "/v1/chat/completions", map[string]any{"cache": map[string]any{"no-cache": true}})
		return st == 200
	})
	st, body := accChat(t, b, cc, "/v1/chat/completions", map[string]any{"cache": map[string]any{"no-store": true}})
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Not allowed to set no-store as a cache control. Contact admin to change permissions.", accDetail(body))
	plain, _ := govKey(t, a, map[string]any{})
	Eventually(t, "B lets a key without the list set any control", func() bool {
		st, _ := accChat(t, b, plain, "/v1/chat/completions", map[string]any{"cache": map[string]any{"no-store": true}})
		return st == 200
	})

	// permissions: stored and returned on B; an internal user may not grant itself spend routes
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"permissions": map[string]any{"get_spend_routes": true}, "rpm_limit_type": "best_effort_throughput"})
	require.Equal(t, 200, st, "%s", body)
	pk := JSON(t, body)["key"].(string)
	st, body = b.Do(t, "GET", "/key/info?key="+pk, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, true, gjson.GetBytes(body, "info.permissions.get_spend_routes").Value(), "%s", body)
	require.Equal(t, "best_effort_throughput", gjson.GetBytes(body, "info.rpm_limit_type").String())
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "acc-u", "user_role": "internal_user"})
	require.Equal(t, 200, st, "%s", body)
	uk := JSON(t, body)["key"].(string)
	Eventually(t, "B refuses the user's key a get_spend_routes grant", func() bool {
		st, body := b.DoKey(t, uk, "POST", "/key/generate", map[string]any{"permissions": map[string]any{"get_spend_routes": true}})
		return st == 403 && accDetail(body) == "only the proxy admin can set a key's permissions"
	})
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "permissions": map[string]any{"lakera_prompt_injection": false}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `field \"permissions.lakera_prompt_injection\" is not supported yet`)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "tpm_limit_type": "guaranteed_throughput"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `field \"tpm_limit_type\" is not supported yet`)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "rpm_limit_type": "fastest"})
	require.Equal(t, 400, st, "%s", body)

	// team_member_key_duration: the team's on A; a member's key made on B
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-dur", "team_member_key_duration": "1h",
		"members_with_roles": []map[string]any{{"user_id": "acc-u", "role": "user"}}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "1h", JSON(t, body)["team_member_key_duration"], "%s", body)
	expires := func(body []byte) time.Duration {
		e, err := time.Parse(time.RFC3339Nano, gjson.GetBytes(body, "expires").String())
		require.NoError(t, err, "%s", body)
		return time.Until(e)
	}
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"team_id": "acc-dur", "user_id": "acc-u"})
	require.Equal(t, 200, st, "%s", body)
	require.InDelta(t, time.Hour.Seconds(), expires(body).Seconds(), 120, "%s", body)
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"team_id": "acc-dur", "user_id": "acc-u", "duration": "30m"})
	require.Equal(t, 200, st, "%s", body)
	require.InDelta(t, (30 * time.Minute).Seconds(), expires(body).Seconds(), 120, "%s", body)
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"team_id": "acc-dur", "user_id": "acc-u", "duration": "2h"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "duration 2h is longer than the team's team_member_key_duration 1h")
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"team_id": "acc-dur"}) // a service account key
	require.Equal(t, 200, st, "%s", body)
	require.Nil(t, JSON(t, body)["expires"], "%s", body)
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-bad", "team_member_key_duration": "soon"})
	require.Equal(t, 400, st, "%s", body)
}

// Issue 19 item 1: team_member_permissions (LiteLLM TeamMemberPermissionChecks) set on A let a
// team member (role user) make, read and update the team's keys on B; a team without them
// gives members LiteLLM's default (/key/info on the team's keys, no key writes); a route that
// is not a key management route is a 400.
func TestAccessTeamMemberPermissions(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	for _, u := range []string{"acc-m1", "acc-m2", "acc-adm"} {
		st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": u, "user_role": "internal_user"})
		require.Equal(t, 200, st, "%s", body)
	}
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-tp", "team_member_permissions": []string{"/key/generate", "/key/update", "/key/info"},
		"members_with_roles": []map[string]any{{"user_id": "acc-m1", "role": "user"}, {"user_id": "acc-adm", "role": "admin"}}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-td",
		"members_with_roles": []map[string]any{{"user_id": "acc-m2", "role": "user"}}})
	require.Equal(t, 200, st, "%s", body)
	m1, _ := govKey(t, a, map[string]any{"user_id": "acc-m1", "team_id": "acc-tp"})
	m2, _ := govKey(t, a, map[string]any{"user_id": "acc-m2", "team_id": "acc-td"})
	adminKey, _ := govKey(t, a, map[string]any{"user_id": "acc-adm", "team_id": "acc-tp"})
	_, adminTok := govKey(t, a, map[string]any{"user_id": "acc-adm", "team_id": "acc-tp", "key_alias": "acc-admins"})
	_, tdTok := govKey(t, a, map[string]any{"team_id": "acc-td", "key_alias": "acc-td-key"})

	var made string
	Eventually(t, "B lets the permitted member make a team key", func() bool {
		st, body := b.DoKey(t, m1, "POST", "/key/generate", map[string]any{"team_id": "acc-tp", "key_alias": "acc-by-member"})
		if st == 200 {
			made = JSON(t, body)["key"].(string)
		}
		return st == 200
	})
	// another member's team key: readable and updatable by the permitted member
	st, body = b.DoKey(t, m1, "GET", "/key/info?key="+adminTok, nil)
	require.Equal(t, 200, st, "%s", body)
	st, body = b.DoKey(t, m1, "POST", "/key/update", map[string]any{"key": adminTok, "key_alias": "acc-renamed"})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.DoKey(t, m1, "POST", "/key/delete", map[string]any{"keys": []string{adminTok}})
	require.NotEqual(t, 200, st, "delete is not in the team's permissions: %s", body)
	st, body = b.DoKey(t, adminKey, "GET", "/key/info?key="+made, nil)
	require.Equal(t, 200, st, "the team admin reads the member's team key: %s", body)

	// the default: /key/info on the team's keys, no team key writes
	Eventually(t, "B lets a default member read its team's key", func() bool {
		st, _ := b.DoKey(t, m2, "GET", "/key/info?key="+tdTok, nil)
		return st == 200
	})
	st, body = b.DoKey(t, m2, "POST", "/key/generate", map[string]any{"team_id": "acc-td"})
	require.Equal(t, 403, st, "%s", body)
	st, body = b.DoKey(t, m2, "POST", "/key/update", map[string]any{"key": tdTok, "key_alias": "x"})
	require.Equal(t, 404, st, "%s", body)

	st, body = a.Do(t, "POST", "/team/update", map[string]any{"team_id": "acc-td", "team_member_permissions": []string{"/chat/completions"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "is not one of LiteLLM's key management routes")
}

// Issue 19 item 1: a key's organization_id (LiteLLM key organization_id) written on A binds the
// key on B by that organization's limits (rpm_limit 1: the second call is 429) and its blocked
// flag; an unknown organization and a team key naming another organization than its team's
// are 400s, nothing stored.
func TestAccessKeyOrganization(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "acc-m", nil)
	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "acc-org", "rpm_limit": 1})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "acc-org2"})
	require.Equal(t, 200, st, "%s", body)

	k, _ := govKey(t, a, map[string]any{"organization_id": "acc-org"})
	Eventually(t, "B serves the org key once", func() bool { st, _ := accChat(t, b, k, "/v1/chat/completions", nil); return st == 200 })
	st, body = accChat(t, b, k, "/v1/chat/completions", nil)
	require.Equal(t, 429, st, "the organization's rpm_limit 1 binds the key: %s", body)

	k2, _ := govKey(t, a, map[string]any{"organization_id": "acc-org2"})
	Eventually(t, "B serves the org2 key", func() bool { st, _ := accChat(t, b, k2, "/v1/chat/completions", nil); return st == 200 })
	st, body = a.Do(t, "POST", "/organization/update", map[string]any{"organization_id": "acc-org2", "blocked": true})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "B refuses the blocked organization's key", func() bool {
		st, body := accChat(t, b, k2, "/v1/chat/completions", nil)
		return st == 401 && accDetail(body) == "Authentication Error, organization acc-org2 is blocked."
	})

	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "organization_id": "acc-nope"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Organization not found, passed organization_id=acc-nope")
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-ot", "organization_id": "acc-org"})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "acc-no", "team_id": "acc-ot", "organization_id": "acc-org2"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "organization_id: a key of team acc-ot belongs to the team's organization acc-org")
	st, body = b.Do(t, "GET", "/key/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, string(body), "acc-no")
}
