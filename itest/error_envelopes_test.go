package itest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// On a real replica: every error of the access-group and guardrail management routes is in
// LiteLLM's {"detail": {"error"}} envelope, auth failures included (no key, unknown key, a
// virtual key on an admin route, whose 403 names the path sent); /v1/messages answers with
// Anthropic's error types; the OpenAI routes keep theirs.
func TestErrorEnvelopesOfManagementAndMessagesRoutes(t *testing.T) {
	t.Parallel()
	g := StartGateway(t, pgtest.NewDB(t), "a", GatewayOpts{})
	agNewModel(t, g, "ee-allowed")
	agNewModel(t, g, "ee-other")
	key := agGenKey(t, g, "ee-allowed")
	st, b := g.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "ee-team", "model_names": []string{"ee-allowed"}})
	require.Equal(t, 200, st, "%s", b)

	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/access_group/new", map[string]any{"access_group": "x", "model_names": []string{"ee-other"}}},
		{"GET", "/access_group/list", nil},
		{"GET", "/access_group/ee-team/info", nil},
		{"PUT", "/access_group/ee-team/update", map[string]any{"model_names": []string{"ee-other"}}},
		{"DELETE", "/access_group/ee-team/delete", nil},
		{"POST", "/guardrails", map[string]any{}},
		{"GET", "/guardrails/list", nil},
		{"GET", "/guardrails/some-id", nil},
		{"GET", "/guardrails/some-id/info", nil},
		{"PUT", "/guardrails/some-id", map[string]any{}},
		{"PATCH", "/guardrails/some-id", map[string]any{}},
		{"DELETE", "/guardrails/some-id", nil},
	} {
		what := r.method + " " + r.path
		st, b := g.DoKey(t, "", r.method, r.path, r.body)
		require.Equal(t, 401, st, "%s: %s", what, b)
		require.Equal(t, "Authentication Error, No api key passed in.", agDetail(t, b), what)
		st, b = g.DoKey(t, "sk-no-such-key", r.method, r.path, r.body)
		require.Equal(t, 401, st, "%s: %s", what, b)
		require.Equal(t, "Authentication Error, Invalid proxy server token passed. Received API key does not exist or was deleted.", agDetail(t, b), what)
		st, b = g.DoKey(t, key, r.method, r.path, r.body)
		require.Equal(t, 403, st, "%s: %s", what, b)
		require.Equal(t, "Only proxy admin can be used to generate, delete, update info for new keys/users/teams. Route="+r.path+". Your role=unknown. Your user_id=unknown", agDetail(t, b), what)
	}
	// nothing changed through the refused calls
	st, b = g.Do(t, "GET", "/access_group/ee-team/info", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, []string{"ee-allowed"}, agStrs(JSON(t, b)["model_names"]))

	// /v1/messages: Anthropic's types by status
	msg := func(model string) map[string]any {
		return map[string]any{"model": model, "max_tokens": 5, "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	}
	for _, tc := range []struct {
		name, key, model string
		status           int
		typ              string
	}{
		{"no key", "", "ee-allowed", 401, "authentication_error"},
		{"unknown key", "sk-no-such-key", "ee-allowed", 401, "authentication_error"},
		{"key without access", key, "ee-other", 401, "authentication_error"},
		{"unknown model", MasterKey, "ee-ghost", 400, "invalid_request_error"},
	} {
		st, b := g.DoKey(t, tc.key, "POST", "/v1/messages", msg(tc.model))
		require.Equal(t, tc.status, st, "%s: %s", tc.name, b)
		m := JSON(t, b)
		require.Equal(t, "error", m["type"], "%s: %s", tc.name, b)
		e, ok := m["error"].(map[string]any)
		require.True(t, ok, "%s: %s", tc.name, b)
		require.Equal(t, tc.typ, e["type"], "%s: %s", tc.name, b)
		require.NotEmpty(t, e["message"], tc.name)
	}
	st, b = g.DoKey(t, key, "POST", "/v1/messages", msg("ee-allowed"))
	require.Equal(t, 200, st, "%s", b)

	// the OpenAI routes keep their types
	st, b = agChat(t, g, key, "ee-other")
	require.Equal(t, 401, st, "%s", b)
	typ, m := agOpenAIError(t, b)
	require.Equal(t, "key_model_access_denied", typ)
	require.Contains(t, m, "Tried to access ee-other")
	st, b = agChat(t, g, "", "ee-allowed")
	require.Equal(t, 401, st, "%s", b)
	typ, _ = agOpenAIError(t, b)
	require.Equal(t, "authentication_error", typ)
}

// Error texts reach the client as worded, with no JSON HTML escaping: ">=" stays ">=" in the
// raw body (encoding/json's default writes \u003e=), as LiteLLM's answers do.
func TestErrorTextsAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, b := p.B.Do(t, "GET", "/user/list?page=0&page_size=2", nil)
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), `page must be an integer >= 1`)
	require.NotContains(t, string(b), `\u003e`)
}
