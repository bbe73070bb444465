package itest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// catModel adds a model group whose answer names it ("from <name>"), so a test sees which
// group served a call.
func catModel(t *testing.T, g *Gateway, name string) {
	t.Helper()
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name,
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "from " + name}})
	require.Equal(t, 200, st, "%s", b)
}

// catServedBy reports whether a chat call with key for model is answered 200 by group.
func catServedBy(t *testing.T, g *Gateway, key, model, group string) bool {
	st, _, b := govDo(t, g, key, model, "hi")
	return st == 200 && strings.Contains(string(b), "from "+group)
}

// Issue 19 item 1, the five fields named: aliases on /key/generate and /user/new, model_aliases
// on /team/new and /team/update are honoured (the alias is mapped to the real model group
// before routing, on the other replica); user_name on /user/new is stored and returned; spend
// on /user/update sets the user's spend; budget_id on /end_user/new naming no budget is refused
// naming it and nothing is stored (budgets as objects, item 9, are budgets_test.go).
func TestLiteLLMFieldsNamedInIssue(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	catModel(t, a, "cat-real")
	catModel(t, a, "cat-other")

	// key aliases: made on A, applied on B; the key's models name the real group
	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"cat-real"},
		"aliases": map[string]string{"cat-nick": "cat-real"}})
	require.Equal(t, 200, st, "%s", body)
	k := JSON(t, body)
	require.Equal(t, map[string]any{"cat-nick": "cat-real"}, k["aliases"], "%s", body)
	key := k["key"].(string)
	Eventually(t, "B serves cat-nick from cat-real for the key", func() bool { return catServedBy(t, b, key, "cat-nick", "cat-real") })
	plain, _ := govKey(t, a, map[string]any{"models": []string{"cat-real"}})
	Eventually(t, "B knows the plain key", func() bool { return catServedBy(t, b, plain, "cat-real", "cat-real") })
	st, _, _ = govDo(t, b, plain, "cat-nick", "hi")
	require.NotEqual(t, 200, st, "a key without the alias does not get it")
	st, body = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, map[string]any{"cat-nick": "cat-real"}, JSON(t, body)["info"].(map[string]any)["aliases"])

	// team model_aliases: /team/new on A, a team key served on B; /team/update on B replaces
	// them, A follows
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "cat-team", "models": []string{"cat-real", "cat-other"},
		"model_aliases": map[string]string{"team-nick": "cat-real"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, map[string]any{"team-nick": "cat-real"}, JSON(t, body)["model_aliases"], "%s", body)
	tkey, _ := govKey(t, a, map[string]any{"team_id": "cat-team"})
	Eventually(t, "B serves team-nick from cat-real", func() bool { return catServedBy(t, b, tkey, "team-nick", "cat-real") })
	st, body = b.Do(t, "POST", "/team/update", map[string]any{"team_id": "cat-team", "model_aliases": map[string]string{"team-nick": "cat-other"}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A serves team-nick from cat-other after B's update", func() bool { return catServedBy(t, a, tkey, "team-nick", "cat-other") })
	st, body = a.Do(t, "GET", "/team/info?team_id=cat-team", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, map[string]any{"team-nick": "cat-other"}, JSON(t, body)["team_info"].(map[string]any)["model_aliases"])

	// /user/new: user_name stored and returned; aliases go to the user's key
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "cat-u", "user_name": "Cat User",
		"aliases": map[string]string{"u-nick": "cat-real"}})
	require.Equal(t, 200, st, "%s", body)
	u := JSON(t, body)
	require.Equal(t, "Cat User", u["user_name"], "%s", body)
	ukey := u["key"].(string)
	Eventually(t, "B serves u-nick for the user's key", func() bool { return catServedBy(t, b, ukey, "u-nick", "cat-real") })
	st, body = b.Do(t, "GET", "/user/info?user_id=cat-u", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "Cat User", JSON(t, body)["user_info"].(map[string]any)["user_name"], "%s", body)

	// /user/update spend: set on A, read on B (the user has spent on its key above)
	st, body = a.Do(t, "POST", "/user/update", map[string]any{"user_id": "cat-u", "spend": 7.5})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "B reads the user's spend 7.5", func() bool {
		st, body := b.Do(t, "GET", "/user/info?user_id=cat-u", nil)
		return st == 200 && JSON(t, body)["user_info"].(map[string]any)["spend"] == 7.5
	})
	st, body = b.Do(t, "POST", "/user/update", map[string]any{"user_id": "cat-u", "spend": 0})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A reads the user's spend reset to 0", func() bool {
		st, body := a.Do(t, "GET", "/user/info?user_id=cat-u", nil)
		return st == 200 && JSON(t, body)["user_info"].(map[string]any)["spend"] == 0.0
	})

	// budget_id on /end_user/new: a budget that does not exist is refused naming it, nothing
	// stored (budgets as objects, issue 19 item 9: budgets_test.go); null passes
	st, body = a.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "cat-eu", "budget_id": "b1"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Budget not found, passed budget_id=b1")
	st, body = b.Do(t, "GET", "/end_user/info?end_user_id=cat-eu", nil)
	require.Equal(t, 404, st, "%s", body)
	st, body = a.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "cat-eu", "budget_id": nil, "alias": "eu"})
	require.Equal(t, 200, st, "%s", body)
}

// Issue 19 item 1, each kind: a stored field is kept and returned by another replica's info
// and list answers, and merged on update; a field that would limit a caller and that lockstep
// does not enforce yet is a 400 naming it with nothing stored (its LiteLLM default passes); a
// name LiteLLM does not define stays a 400 "unknown field".
func TestLiteLLMFieldsKinds(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B

	// stored: tags and send_invite_email on a key, tags on a team, soft_budget on an org
	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "cat-stored", "tags": []string{"prod", "eu"},
		"send_invite_email": true, "soft_budget": 2.5, "models": []string{}, "config": map[string]any{},
		"permissions": map[string]any{}, "allowed_cache_controls": []string{}, "model_max_budget": map[string]any{}, "key_type": "default"})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	st, body = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	info := JSON(t, body)["info"].(map[string]any)
	require.Equal(t, []any{"prod", "eu"}, info["tags"])
	require.Equal(t, true, info["send_invite_email"])
	require.EqualValues(t, 2.5, info["soft_budget"])
	require.NotContains(t, info, "litellm_fields")
	// update merges: tags replaced, send_invite_email kept
	st, body = b.Do(t, "POST", "/key/update", map[string]any{"key": key, "tags": []string{"dev"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "GET", "/key/list", nil)
	require.Equal(t, 200, st, "%s", body)
	found := false
	for _, k := range JSON(t, body)["keys"].([]any) {
		km := k.(map[string]any)
		if km["key_alias"] == "cat-stored" {
			found = true
			require.Equal(t, []any{"dev"}, km["tags"])
			require.Equal(t, true, km["send_invite_email"])
		}
	}
	require.True(t, found, "%s", body)

	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "cat-t2", "tags": []string{"x"}, "soft_budget": 1})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "GET", "/team/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, string(body), `"tags":["x"]`)

	// not yet supported: refused naming the field; nothing stored
	for _, c := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/user/update", map[string]any{"user_id": "cat-no", "permissions": map[string]any{"pii": true}}, "permissions.pii"},
	} {
		st, body := a.Do(t, "POST", c.path, c.body)
		require.Equal(t, 400, st, "%s %v: %s", c.path, c.body, body)
		require.Contains(t, string(body), `field \"`+c.field+`\" is not supported yet`, "%s", body)
	}
	st, body = b.Do(t, "GET", "/key/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, string(body), "cat-no")
	st, _ = b.Do(t, "GET", "/team/info?team_id=cat-no", nil)
	require.Equal(t, 404, st)

	// a name LiteLLM does not define: still unknown
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"rpm_limt": 1})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `unknown field \"rpm_limt\"`)
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "cat-typo", "model_alias": map[string]string{}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `unknown field \"model_alias\"`)
}

// Issue 19 item 6: /organization/member_add, PATCH /organization/member_update and DELETE
// /organization/member_delete as LiteLLM's, and /organization/list rows carrying
// litellm_budget_table and members, a change on one replica listed by the other.
func TestOrganizationMembersAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "cat-org", "organization_alias": "o", "max_budget": 10})
	require.Equal(t, 200, st, "%s", body)

	st, body = a.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "cat-org",
		"member": []map[string]any{{"user_id": "cat-om1", "role": "org_admin"}, {"user_email": "om2@x.io", "role": "internal_user"}}})
	require.Equal(t, 200, st, "%s", body)
	res := JSON(t, body)
	require.Equal(t, "cat-org", res["organization_id"])
	require.Len(t, res["updated_users"].([]any), 2, "%s", body)
	ms := res["updated_organization_memberships"].([]any)
	require.Len(t, ms, 2)
	require.Equal(t, "cat-om1", ms[0].(map[string]any)["user_id"])
	require.Equal(t, "org_admin", ms[0].(map[string]any)["user_role"])
	require.Equal(t, "cat-org", ms[0].(map[string]any)["organization_id"])
	// the users were created, on every replica
	st, body = b.Do(t, "GET", "/user/info?user_id=cat-om1", nil)
	require.Equal(t, 200, st, "%s", body)

	members := func(g *Gateway) map[string]string {
		st, body := g.Do(t, "GET", "/organization/list", nil)
		require.Equal(t, 200, st, "%s", body)
		var rows []map[string]any
		require.NoError(t, json.Unmarshal(body, &rows))
		for _, r := range rows {
			if r["organization_id"] != "cat-org" {
				continue
			}
			require.EqualValues(t, 10, r["litellm_budget_table"].(map[string]any)["max_budget"], "%s", body)
			out := map[string]string{}
			for _, m := range r["members"].([]any) {
				mm := m.(map[string]any)
				out[mm["user_id"].(string)] = mm["user_role"].(string)
			}
			return out
		}
		t.Fatalf("cat-org not listed: %s", body)
		return nil
	}
	Eventually(t, "B lists both members", func() bool { return len(members(b)) == 2 })
	require.Equal(t, "org_admin", members(b)["cat-om1"])

	// a member already in: 400; a bad role: 400; an unknown organization: 404
	st, body = b.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "cat-org", "member": map[string]any{"user_id": "cat-om1", "role": "internal_user"}})
	require.Equal(t, 400, st, "%s", body)
	st, body = b.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "cat-org", "member": map[string]any{"user_id": "cat-om3", "role": "admin"}})
	require.Equal(t, 400, st, "%s", body)
	st, body = b.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "cat-nope", "member": map[string]any{"user_id": "cat-om3", "role": "internal_user"}})
	require.Equal(t, 404, st, "%s", body)

	// update on B, seen on A
	st, body = b.Do(t, "PATCH", "/organization/member_update", map[string]any{"organization_id": "cat-org", "user_id": "cat-om1", "role": "internal_user_viewer"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "internal_user_viewer", JSON(t, body)["user_role"])
	Eventually(t, "A lists the new role", func() bool { return members(a)["cat-om1"] == "internal_user_viewer" })

	// delete by email on A, gone on B
	st, body = a.Do(t, "DELETE", "/organization/member_delete", map[string]any{"organization_id": "cat-org", "user_email": "om2@x.io"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "internal_user", JSON(t, body)["user_role"])
	Eventually(t, "B lists one member", func() bool { return len(members(b)) == 1 })
	st, body = b.Do(t, "DELETE", "/organization/member_delete", map[string]any{"organization_id": "cat-org", "user_email": "om2@x.io"})
	require.Equal(t, 400, st, "%s", body)
	// max_budget_in_organization is honoured (TestOrgMemberBudget); a bad one writes nothing
	st, body = a.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "cat-org", "member": map[string]any{"user_id": "cat-om4", "role": "internal_user"}, "max_budget_in_organization": -5})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "max_budget_in_organization")
	require.Len(t, members(a), 1)
}

// catRefusedWithin reports the first non-200 answer among n calls of key to model on g.
func catRefusedWithin(t *testing.T, g *Gateway, key, model string, n int) (int, []byte) {
	t.Helper()
	for i := 0; i < n; i++ {
		st, _, b := govDo(t, g, key, model, "hi")
		if st != 200 {
			return st, b
		}
	}
	return 200, nil
}

// Issue 19 item 1, honoured limits: a key's and a team's model_rpm_limit is a per-model window
// held cluster-wide (a key made on A, its window spent on B, refused on A too) that leaves the
// key's other models alone; a key's enforced_params refuse a call lacking them on the other
// replica with LiteLLM's text.
func TestLiteLLMFieldsHonouredLimits(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	catModel(t, a, "cat-real")
	catModel(t, a, "cat-other")

	key, tok := govKey(t, a, map[string]any{"model_rpm_limit": map[string]int{"cat-real": 1}, "model_tpm_limit": map[string]int{"cat-other": 100000}})
	Eventually(t, "B serves the key", func() bool { return catServedBy(t, b, key, "cat-other", "cat-other") })
	// rpm 1: at most two calls pass even across a window edge
	st, body := catRefusedWithin(t, b, key, "cat-real", 3)
	require.Equal(t, 429, st, "%s", body)
	require.Contains(t, string(body), "Rate limit exceeded for model_per_key: "+tok+":cat-real. Limit type: requests.")
	st, body = catRefusedWithin(t, a, key, "cat-real", 2)
	require.Equal(t, 429, st, "the window is the cluster's: %s", body)
	require.True(t, catServedBy(t, a, key, "cat-other", "cat-other"), "another model of the key is not limited")

	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "cat-lim", "model_rpm_limit": map[string]int{"cat-real": 1}})
	require.Equal(t, 200, st, "%s", body)
	tkey, _ := govKey(t, a, map[string]any{"team_id": "cat-lim"})
	Eventually(t, "B serves the team key", func() bool { return catServedBy(t, b, tkey, "cat-other", "cat-other") })
	st, body = catRefusedWithin(t, b, tkey, "cat-real", 3)
	require.Equal(t, 429, st, "%s", body)
	require.Contains(t, string(body), "Rate limit exceeded for model_per_team: cat-lim:cat-real.")
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "cat-lim2", "model_rpm_limit": map[string]int{"cat-real": -1}})
	require.Equal(t, 400, st, "%s", body)

	ekey, _ := govKey(t, a, map[string]any{"enforced_params": []string{"user", "metadata.generation_name"}})
	Eventually(t, "B knows the enforced key", func() bool {
		st, _, _ := govDo(t, b, ekey, "cat-real", "hi")
		return st == 401
	})
	st, _, body = govDo(t, b, ekey, "cat-real", "hi")
	require.Equal(t, 401, st, "%s", body)
	require.Contains(t, string(body), "Authentication Error, BadRequest please pass param=user in request body. This is a required param")
	req := chatBody("cat-real", "hi", false)
	req["user"] = "cat-eu"
	st, body = b.DoKey(t, ekey, "POST", "/v1/chat/completions", req)
	require.Equal(t, 401, st, "%s", body)
	require.Contains(t, string(body), "param=[metadata][generation_name] in request body")
	req["metadata"] = map[string]any{"generation_name": "g"}
	st, body = b.DoKey(t, ekey, "POST", "/v1/chat/completions", req)
	require.Equal(t, 200, st, "%s", body)
}

// Issue 19 item 1: a key's and a team's guardrails (made on A) run on every call of the key on
// B, besides the request's own; another key is not held to them.
func TestLiteLLMFieldsGuardrails(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	catModel(t, a, "cat-real")
	st, body := a.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "cat-g",
		"litellm_params": contentFilter("pre_call", map[string]any{"blocked_words": []any{word("zzz", "BLOCK")}})}})
	require.Equal(t, 200, st, "%s", body)
	gkey, _ := govKey(t, a, map[string]any{"guardrails": []string{"cat-g"}})
	plain, _ := govKey(t, a, map[string]any{})
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "cat-gt", "guardrails": []string{"cat-g"}})
	require.Equal(t, 200, st, "%s", body)
	tkey, _ := govKey(t, a, map[string]any{"team_id": "cat-gt"})
	for _, k := range []string{gkey, tkey} {
		Eventually(t, "B serves the key", func() bool { return catServedBy(t, b, k, "cat-real", "cat-real") })
		st, _, body := govDo(t, b, k, "cat-real", "say zzz")
		require.Equal(t, 400, st, "the key's (team's) guardrail blocks on B: %s", body)
	}
	Eventually(t, "B serves the plain key", func() bool { return catServedBy(t, b, plain, "cat-real", "cat-real") })
	st, _, body = govDo(t, b, plain, "cat-real", "say zzz")
	require.Equal(t, 200, st, "%s", body)
	// a key naming a guardrail that does not exist fails closed
	nkey, _ := govKey(t, a, map[string]any{"guardrails": []string{"cat-none"}})
	Eventually(t, "B refuses the key's missing guardrail", func() bool {
		st, _, _ := govDo(t, b, nkey, "cat-real", "hi")
		return st == 404
	})
}
