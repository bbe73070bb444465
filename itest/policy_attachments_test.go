package itest

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// attach creates a policy attachment through g and returns its row.
func attach(t *testing.T, g *Gateway, body map[string]any) map[string]any {
	t.Helper()
	st, b := g.Do(t, "POST", "/policies/attachments", body)
	require.Equal(t, 200, st, "%s", b)
	row := JSON(t, b)
	require.NotEmpty(t, row["attachment_id"], "%s", b)
	return row
}

// tagDo is govDo with the request's metadata.tags.
func tagDo(t *testing.T, g *Gateway, key, model, text string, tags []string) (int, http.Header, []byte) {
	t.Helper()
	return postAs(t, g, key, "/v1/chat/completions", map[string]any{"model": model,
		"messages": []map[string]any{{"role": "user", "content": text}}, "metadata": map[string]any{"tags": tags}}, nil)
}

// Policy attachments (LiteLLM's policy engine attachments, issue 19): an attachment made on
// replica A makes the policy's guardrails run on B — a global one on every call (the master
// key's too), a team-, key-, model- or tag-scoped one on the calls it matches by wildcard —
// with LiteLLM's x-litellm-applied-policies and x-litellm-policy-sources on the answer; an
// attachment deleted on A stops them on B; a policy an attachment names is not deleted.
func TestPolicyAttachmentOnAEnforcedOnB(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "att-m", nil)
	govMockModel(t, a, "att-other", nil)
	for _, w := range []string{"zeus", "apollo", "hermes", "ares", "hera"} {
		createGuardrail(t, a, "no-"+w, contentFilter("pre_call", map[string]any{"blocked_words": []any{word(w, "BLOCK")}}))
	}
	glob := policyNew(t, a, map[string]any{"policy_name": "glob", "guardrails_add": []string{"no-zeus"}})
	policyNew(t, a, map[string]any{"policy_name": "team-pol", "guardrails_add": []string{"no-apollo"}})
	policyNew(t, a, map[string]any{"policy_name": "key-pol", "guardrails_add": []string{"no-hermes"}})
	policyNew(t, a, map[string]any{"policy_name": "model-pol", "guardrails_add": []string{"no-ares"}})
	policyNew(t, a, map[string]any{"policy_name": "tag-pol", "guardrails_add": []string{"no-hera"}})

	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "att-team", "team_alias": "fin-east"})
	require.Equal(t, 200, st, "%s", body)
	teamKey, _ := govKey(t, a, map[string]any{"team_id": "att-team"})
	devKey, _ := govKey(t, a, map[string]any{"key_alias": "dev-key-1"})
	plainKey, _ := govKey(t, a, map[string]any{"key_alias": "prod-1"})

	st, h, body := govDo(t, b, plainKey, "att-m", "zeus before")
	require.Equal(t, 200, st, "no attachment yet: %s", body)
	require.Empty(t, h.Get("X-Litellm-Applied-Policies"))

	// global: every call on B, the master key's included
	g := attach(t, a, map[string]any{"policy_name": "glob", "scope": "*"})
	require.Equal(t, "*", g["scope"])
	require.Equal(t, []any{}, g["teams"])
	require.Equal(t, "default_user_id", g["created_by"])
	Eventually(t, "B runs glob on every call", func() bool {
		st, _, _ := govDo(t, b, plainKey, "att-m", "zeus now")
		return st == 400
	})
	st, _, body = govDo(t, b, MasterKey, "att-other", "zeus by the admin")
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Content blocked: keyword 'zeus' detected", errorMessage(t, body))
	st, h, body = govDo(t, b, plainKey, "att-m", "plain question")
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "glob", h.Get("X-Litellm-Applied-Policies"))
	require.Equal(t, "glob=scope:*", h.Get("X-Litellm-Policy-Sources"))

	// team (by alias, wildcard), key (by alias, wildcard), model, tags
	attach(t, a, map[string]any{"policy_name": "team-pol", "teams": []string{"fin-*"}})
	attach(t, a, map[string]any{"policy_name": "key-pol", "keys": []string{"dev-key-*"}})
	attach(t, a, map[string]any{"policy_name": "model-pol", "models": []string{"att-o*"}})
	tagAtt := attach(t, a, map[string]any{"policy_name": "tag-pol", "tags": []string{"health-*"}})
	Eventually(t, "B holds the four attachments", func() bool {
		st, _, _ := tagDo(t, b, plainKey, "att-m", "hera", []string{"health-us"})
		return st == 400
	})
	st, _, body = govDo(t, b, teamKey, "att-m", "apollo via the team")
	require.Equal(t, 400, st, "the team alias fin-east matches fin-*: %s", body)
	st, _, body = govDo(t, b, plainKey, "att-m", "apollo elsewhere")
	require.Equal(t, 200, st, "a key of no team: %s", body)
	st, _, body = govDo(t, b, devKey, "att-m", "hermes by dev")
	require.Equal(t, 400, st, "dev-key-1 matches dev-key-*: %s", body)
	st, h, body = govDo(t, b, devKey, "att-m", "fine by dev")
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "glob,key-pol", h.Get("X-Litellm-Applied-Policies"))
	require.Equal(t, "glob=scope:*; key-pol=key:dev-key-1", h.Get("X-Litellm-Policy-Sources"))
	st, _, body = govDo(t, b, plainKey, "att-m", "hermes by prod")
	require.Equal(t, 200, st, "prod-1 does not match dev-key-*: %s", body)
	st, _, body = govDo(t, b, plainKey, "att-other", "ares on the other model")
	require.Equal(t, 400, st, "att-other matches att-o*: %s", body)
	st, _, body = govDo(t, b, plainKey, "att-m", "ares on att-m")
	require.Equal(t, 200, st, "%s", body)
	st, h, body = tagDo(t, b, plainKey, "att-other", "fine", []string{"x", "health-eu"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "glob,model-pol,tag-pol", h.Get("X-Litellm-Applied-Policies"))
	require.Equal(t, "glob=scope:*; model-pol=model:att-other; tag-pol=tag:health-eu", h.Get("X-Litellm-Policy-Sources"))
	st, _, body = tagDo(t, b, plainKey, "att-m", "hera", []string{"wealth"})
	require.Equal(t, 200, st, "no tag matches health-*: %s", body)

	// a key's own policies come first in the header
	ownKey, _ := govKey(t, a, map[string]any{"policies": []string{"team-pol"}})
	st, h, body = govDo(t, b, ownKey, "att-m", "fine")
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "team-pol,glob", h.Get("X-Litellm-Applied-Policies"))
	require.Equal(t, "glob=scope:*", h.Get("X-Litellm-Policy-Sources"))

	// the list, newest first; one attachment read on B
	st, body = b.Do(t, "GET", "/policies/attachments/list", nil)
	require.Equal(t, 200, st, "%s", body)
	list := JSON(t, body)
	require.Equal(t, float64(5), list["total_count"])
	require.Equal(t, "tag-pol", list["attachments"].([]any)[0].(map[string]any)["policy_name"])
	st, body = b.Do(t, "GET", "/policies/attachments/"+tagAtt["attachment_id"].(string), nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{"health-*"}, JSON(t, body)["tags"])
	require.Nil(t, JSON(t, body)["scope"])

	// a policy an attachment names is not deleted (nor renamed)
	gid := g["attachment_id"].(string)
	st, body = a.Do(t, "DELETE", "/policies/"+glob["policy_id"].(string), nil)
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, detailError(t, body), "Policy glob is still used by attachment "+gid)
	st, body = a.Do(t, "PUT", "/policies/"+glob["policy_id"].(string), map[string]any{"policy_name": "glob2"})
	require.Equal(t, 400, st, "%s", body)

	// detach on A: B's calls pass again
	st, body = a.Do(t, "DELETE", "/policies/attachments/"+gid, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, map[string]any{"message": "Attachment " + gid + " deleted successfully"}, JSON(t, body))
	Eventually(t, "B runs without glob", func() bool {
		st, _, _ := govDo(t, b, plainKey, "att-m", "zeus after")
		return st == 200
	})
	st, body = b.Do(t, "GET", "/policies/attachments/"+gid, nil)
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, "Attachment with ID "+gid+" not found", detailError(t, body))
	st, body = a.Do(t, "DELETE", "/policies/"+glob["policy_id"].(string), nil)
	require.Equal(t, 200, st, "detached, the policy can go: %s", body)
}

// Bad attachment input (issue 19): each refusal is a 400 naming the field (404 for a policy
// that does not exist, LiteLLM's text), and nothing is written.
func TestPolicyAttachmentBadInput(t *testing.T) {
	t.Parallel()
	g := StartGateway(t, pgtest.NewDB(t), "att-bad", GatewayOpts{})
	createGuardrail(t, g, "no-x", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("x", "BLOCK")}}))
	policyNew(t, g, map[string]any{"policy_name": "pol", "guardrails_add": []string{"no-x"}})
	for _, c := range []struct {
		body   any
		status int
		want   string
	}{
		{map[string]any{"scope": "*"}, 400, "policy_name"},
		{map[string]any{"policy_name": " ", "scope": "*"}, 400, "policy_name"},
		{map[string]any{"policy_name": "pol", "scope": "team"}, 400, "scope"},
		{map[string]any{"policy_name": "pol"}, 400, "scope"},
		{map[string]any{"policy_name": "pol", "teams": []string{}}, 400, "scope"},
		{map[string]any{"policy_name": "pol", "teams": []string{"a", ""}}, 400, "teams"},
		{map[string]any{"policy_name": "pol", "keys": "k"}, 400, "keys"},
		{map[string]any{"policy_name": "pol", "models": []any{1}}, 400, "models"},
		{map[string]any{"policy_name": "pol", "tags": []string{"a\nb"}}, 400, "tags"},
		{map[string]any{"policy_name": "pol", "scope": "*", "team": []string{"a"}}, 400, "team"},
		{`[{"policy_name": "pol"}]`, 400, "malformed JSON body"},
		{map[string]any{"policy_name": "nope", "scope": "*"}, 404, "Policy 'nope' not found. Create the policy first."},
	} {
		st, body := g.Do(t, "POST", "/policies/attachments", c.body)
		require.Equal(t, c.status, st, "%v: %s", c.body, body)
		require.Contains(t, errorMessage(t, body), c.want, "%v", c.body)
	}
	st, body := g.Do(t, "GET", "/policies/attachments/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, map[string]any{"attachments": []any{}, "total_count": float64(0)}, JSON(t, body), "nothing was written")
	st, body = g.Do(t, "DELETE", "/policies/attachments/a-ghost", nil)
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, "Attachment with ID a-ghost not found", detailError(t, body))
	// a call runs as before: no attachment was half-written
	govMockModel(t, g, "bad-m", nil)
	st, h, body := govDo(t, g, MasterKey, "bad-m", "x marks")
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, h.Get("X-Litellm-Applied-Policies"))
}

// /user/new's policies (issue 19): LiteLLM's generate_key_helper_fn puts them in the metadata
// of the user and of its auto-created key, so the key's calls run the policy's guardrails (on
// another replica); a policy that does not exist refuses the whole /user/new, nothing written.
func TestUserNewPoliciesReachKey(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "un-m", nil)
	createGuardrail(t, a, "no-kronos", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("kronos", "BLOCK")}}))
	policyNew(t, a, map[string]any{"policy_name": "un-pol", "guardrails_add": []string{"no-kronos"}})

	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "un-ghost", "policies": []string{"nope"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, errorMessage(t, body), "Policy 'nope' not found")
	st, body = a.Do(t, "GET", "/user/info?user_id=un-ghost", nil)
	require.Equal(t, 404, st, "nothing half-written: %s", body)

	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "un-1", "policies": []string{"un-pol"}})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	st, _, body = govDo(t, b, key, "un-m", "kronos rises")
	require.Equal(t, 400, st, "the user's key runs un-pol on B: %s", body)
	require.Equal(t, "Content blocked: keyword 'kronos' detected", errorMessage(t, body))
	st, h, body := govDo(t, b, key, "un-m", "fine")
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "un-pol", h.Get("X-Litellm-Applied-Policies"))
	require.Empty(t, h.Get("X-Litellm-Policy-Sources"), "no attachment applied")
	st, body = a.Do(t, "GET", "/user/info?user_id=un-1", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, string(body), `"policies":["un-pol"]`)
}
