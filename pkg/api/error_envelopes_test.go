package api_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/api"
	"lockstep/pkg/provider"
	"lockstep/pkg/router"
)

// detailRoutes are the management routes answering in LiteLLM's {"detail": {"error"}} envelope.
var detailRoutes = []struct{ method, path string }{
	{"POST", "/access_group/new"},
	{"GET", "/access_group/list"},
	{"GET", "/access_group/team-a/info"},
	{"PUT", "/access_group/team-a/update"},
	{"DELETE", "/access_group/team-a/delete"},
	{"POST", "/guardrails"},
	{"GET", "/guardrails/list"},
	{"GET", "/v2/guardrails/list"},
	{"GET", "/guardrails/g1"},
	{"GET", "/guardrails/g1/info"},
	{"PUT", "/guardrails/g1"},
	{"PATCH", "/guardrails/g1"},
	{"DELETE", "/guardrails/g1"},
}

// doHeaders sends a request with the given headers (no Authorization unless set).
func (b *bundle) doHeaders(t *testing.T, hdr map[string]string, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(w, req)
	return w
}

// requireDetail asserts a {"detail": {"error": msg}} body with nothing else in it.
func requireDetail(t *testing.T, w *httptest.ResponseRecorder, status int, msg string, what string) {
	t.Helper()
	require.Equal(t, status, w.Code, "%s: %s", what, w.Body.String())
	body := gjson.Parse(w.Body.String())
	require.Equal(t, msg, body.Get("detail.error").String(), "%s: %s", what, w.Body.String())
	require.False(t, body.Get("error").Exists(), "%s: no OpenAI envelope: %s", what, w.Body.String())
	require.False(t, body.Get("type").Exists(), "%s: no Anthropic envelope: %s", what, w.Body.String())
}

// Every error of an access-group or guardrail management route is in the detail envelope,
// auth failures included: no key (401), an unknown key (401), a virtual key on these admin
// routes (403, naming the request's own path). The other routes keep their envelopes.
func TestDetailRoutesAnswerAuthErrorsInDetailEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addKey("sk-virtual")
	for _, r := range detailRoutes {
		what := r.method + " " + r.path
		w := b.doHeaders(t, nil, r.method, r.path, `{}`)
		requireDetail(t, w, 401, "Authentication Error, No api key passed in.", what+" no key")
		w = b.do(t, "sk-nope", r.method, r.path, `{}`)
		requireDetail(t, w, 401, "Authentication Error, Invalid proxy server token passed. Received API key does not exist or was deleted.", what+" unknown key")
		w = b.do(t, "sk-virtual", r.method, r.path, `{}`)
		requireDetail(t, w, 403, "Only proxy admin can be used to generate, delete, update info for new keys/users/teams. Route="+r.path+". Your role=unknown. Your user_id=unknown", what+" virtual key")
	}
	// the master key passes auth; the handler's own errors stay in the detail envelope
	w := b.do(t, "sk-master", "GET", "/guardrails/ghost", "")
	require.Equal(t, 404, w.Code, w.Body.String())
	require.NotEmpty(t, gjson.Get(w.Body.String(), "detail.error").String(), w.Body.String())
	w = b.do(t, "sk-master", "POST", "/guardrails", `{}`) // no database here
	requireDetail(t, w, 503, "no database configured: guardrails are stored in Postgres; set --database-url or general_settings.database_url", "POST /guardrails")

	// OpenAI envelope elsewhere: LLM routes, apply_guardrail, models, keys
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/chat/completions"}, {"POST", "/chat/completions"}, {"POST", "/v1/embeddings"},
		{"POST", "/v1/responses"}, {"GET", "/v1/models"}, {"POST", "/guardrails/apply_guardrail"},
		{"POST", "/apply_guardrail"}, {"GET", "/model/info"}, {"POST", "/key/generate"}, {"GET", "/sync/lag"},
	} {
		w := b.doHeaders(t, nil, r.method, r.path, `{}`)
		require.Equal(t, 401, w.Code, r.path)
		require.Equal(t, "authentication_error", gjson.Get(w.Body.String(), "error.type").String(), "%s: %s", r.path, w.Body.String())
		require.Equal(t, "401", gjson.Get(w.Body.String(), "error.code").String(), r.path)
		require.False(t, gjson.Get(w.Body.String(), "detail").Exists(), r.path)
	}
	w = b.do(t, "sk-virtual", "POST", "/key/generate", "{}")
	require.Equal(t, 403, w.Code)
	require.Equal(t, "permission_error", gjson.Get(w.Body.String(), "error.type").String(), w.Body.String())
	// a virtual key reads /model/info (filtered to what it may use) and its own /key/info
	w = b.do(t, "sk-virtual", "GET", "/model/info", "")
	require.Equal(t, 200, w.Code, w.Body.String())
	// another key's /key/info answers as an absent one would: here, without a database, 503
	// (itest/roles_test.go pins the 404 on replica processes)
	w = b.do(t, "sk-virtual", "GET", "/key/info?key=sk-other", "")
	require.Equal(t, 503, w.Code, w.Body.String())
	// Anthropic envelope on /v1/messages
	w = b.doHeaders(t, nil, "POST", "/v1/messages", `{}`)
	require.Equal(t, 401, w.Code)
	require.Equal(t, "error", gjson.Get(w.Body.String(), "type").String(), w.Body.String())
	require.Equal(t, "authentication_error", gjson.Get(w.Body.String(), "error.type").String(), w.Body.String())
}

// The 403 for a virtual key on an admin route names the path the caller sent, not the route
// pattern (":group", ":id"); an escaped path is shown as sent.
func TestAdminRouteForbiddenShowsRequestPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addKey("sk-virtual")
	for _, tc := range []struct{ method, path string }{
		{"PUT", "/access_group/team-a/update"},
		{"DELETE", "/access_group/a%2Fb%20c/delete"},
		{"GET", "/guardrails/g-42/info"},
		{"PATCH", "/model/m-7/update"},
		{"GET", "/v1/agents/agent-9"},
		{"GET", "/team/info?team_id=x"},
	} {
		w := b.do(t, "sk-virtual", tc.method, tc.path, `{}`)
		require.Equal(t, 403, w.Code, tc.path)
		path, _, _ := strings.Cut(tc.path, "?")
		want := "Only proxy admin can be used to generate, delete, update info for new keys/users/teams. Route=" + path + ". Your role=unknown. Your user_id=unknown"
		msg := gjson.Get(w.Body.String(), "detail.error").String()
		if msg == "" {
			msg = gjson.Get(w.Body.String(), "error.message").String()
		}
		require.Equal(t, want, msg, w.Body.String())
		require.NotContains(t, msg, ":", "no route pattern")
	}
}

// A body over the limit (refused by Content-Length before any route middleware runs) is
// answered in the route's envelope too.
func TestBodyLimitErrorUsesRouteEnvelope(t *testing.T) {
	t.Parallel()
	client := provider.NewClient()
	srv := api.New(api.Deps{ReplicaID: "unit", MasterKey: "sk-master", Router: router.New(setup(t).models, client, router.Settings{NumRetries: -1}),
		Client: client, Log: zerolog.Nop(), MaxBodyBytes: 64})
	big := `{"model": "m", "padding": "` + strings.Repeat("x", 200) + `"}`
	do := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(big))
		req.Header.Set("Authorization", "Bearer sk-master")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		require.Equal(t, 413, w.Code, "%s: %s", path, w.Body.String())
		return w
	}
	for _, p := range []string{"/access_group/new", "/guardrails"} {
		requireDetail(t, do(p), 413, "request body too large (limit 64 bytes)", p)
	}
	w := do("/v1/messages")
	require.Equal(t, "request_too_large", gjson.Get(w.Body.String(), "error.type").String(), w.Body.String())
	require.Equal(t, "error", gjson.Get(w.Body.String(), "type").String())
	w = do("/v1/chat/completions")
	require.Equal(t, "request_too_large", gjson.Get(w.Body.String(), "error.type").String(), w.Body.String())
	require.Equal(t, "413", gjson.Get(w.Body.String(), "error.code").String())
}

// /v1/messages errors carry Anthropic's documented error type for their status, whatever
// raised them (auth, key access, unknown model, upstream); an Anthropic upstream's own type is
// passed through. The same errors on /v1/chat/completions keep the OpenAI types.
func TestMessagesErrorTypesAreAnthropics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	up529 := fakeupstream.Start(t, fakeupstream.WithStatus(529))
	up403 := fakeupstream.Start(t, fakeupstream.WithStatus(403))
	up429 := fakeupstream.Start(t, fakeupstream.WithStatus(429))
	up500 := fakeupstream.Start(t, fakeupstream.WithStatus(500))
	deps := map[string]*router.Deployment{
		"x1":      mustDeployment(t, "x1", "x", `{"model":"openai/x","mock_response":"hi"}`, ""),
		"an529":   mustDeployment(t, "an529", "an-529", fmt.Sprintf(`{"model":"anthropic/c","api_base":%q,"api_key":"k"}`, up529.URL), ""),
		"an403":   mustDeployment(t, "an403", "an-403", fmt.Sprintf(`{"model":"anthropic/c","api_base":%q,"api_key":"k"}`, up403.URL), ""),
		"oa429":   mustDeployment(t, "oa429", "oa-429", fmt.Sprintf(`{"model":"openai/c","api_base":%q,"api_key":"k"}`, up429.URL+"/v1"), ""),
		"oa500":   mustDeployment(t, "oa500", "oa-500", fmt.Sprintf(`{"model":"openai/c","api_base":%q,"api_key":"k"}`, up500.URL+"/v1"), ""),
		"rate":    mustDeployment(t, "rate", "rate", `{"model":"openai/x","mock_response":"litellm.RateLimitError"}`, ""),
		"ise":     mustDeployment(t, "ise", "ise", `{"model":"openai/x","mock_response":"litellm.InternalServerError"}`, ""),
		"unavail": mustDeployment(t, "unavail", "unavail", `{"model":"openai/x","mock_response":"litellm.ServiceUnavailableError"}`, ""),
		"timeout": mustDeployment(t, "timeout", "timeout", `{"model":"openai/x","mock_response":"litellm.Timeout"}`, ""),
		"bad":     mustDeployment(t, "bad", "bad", `{"model":"openai/x","mock_response":"litellm.BadRequestError"}`, ""),
	}
	b.models.SetConfig(deps)
	b.addKey("sk-only-x", "x")

	msgBody := func(model string) string {
		return `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	}
	chatBody := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	}
	for _, tc := range []struct {
		name      string
		hdr       map[string]string
		model     string
		status    int
		anthropic string // type on /v1/messages
		openai    string // type on /v1/chat/completions
	}{
		{"no key", nil, "x", 401, "authentication_error", "authentication_error"},
		{"unknown key", map[string]string{"Authorization": "Bearer sk-nope"}, "x", 401, "authentication_error", "authentication_error"},
		{"unknown key in x-api-key", map[string]string{"x-api-key": "sk-nope"}, "x", 401, "authentication_error", "authentication_error"},
		{"key without access", map[string]string{"Authorization": "Bearer sk-only-x"}, "rate", 401, "authentication_error", "key_model_access_denied"},
		{"unknown model", map[string]string{"Authorization": "Bearer sk-master"}, "ghost", 400, "invalid_request_error", "invalid_request_error"},
		{"upstream 400", map[string]string{"Authorization": "Bearer sk-master"}, "bad", 400, "invalid_request_error", "invalid_request_error"},
		{"upstream 429", map[string]string{"Authorization": "Bearer sk-master"}, "rate", 429, "rate_limit_error", "rate_limit_error"},
		{"upstream 500", map[string]string{"Authorization": "Bearer sk-master"}, "ise", 500, "api_error", "internal_server_error"},
		{"upstream 503", map[string]string{"Authorization": "Bearer sk-master"}, "unavail", 503, "api_error", "service_unavailable"},
		{"upstream 504", map[string]string{"Authorization": "Bearer sk-master"}, "timeout", 504, "timeout_error", "timeout_error"},
		// an Anthropic upstream's type passes through
		{"anthropic upstream 529", map[string]string{"Authorization": "Bearer sk-master"}, "an-529", 529, "overloaded_error", "overloaded_error"},
		{"anthropic upstream 403", map[string]string{"Authorization": "Bearer sk-master"}, "an-403", 403, "permission_error", "permission_error"},
		// an OpenAI upstream's type that is not Anthropic's is replaced by the status' type
		{"openai upstream 429", map[string]string{"Authorization": "Bearer sk-master"}, "oa-429", 429, "rate_limit_error", "rate_limit_exceeded"},
		{"openai upstream 500", map[string]string{"Authorization": "Bearer sk-master"}, "oa-500", 500, "api_error", "server_error"},
	} {
		w := b.doHeaders(t, tc.hdr, "POST", "/v1/messages", msgBody(tc.model))
		require.Equal(t, tc.status, w.Code, "%s: %s", tc.name, w.Body.String())
		body := gjson.Parse(w.Body.String())
		require.Equal(t, "error", body.Get("type").String(), "%s: %s", tc.name, w.Body.String())
		require.Equal(t, tc.anthropic, body.Get("error.type").String(), "%s: %s", tc.name, w.Body.String())
		require.NotEmpty(t, body.Get("error.message").String(), tc.name)
		require.False(t, body.Get("error.code").Exists(), tc.name)

		w = b.doHeaders(t, tc.hdr, "POST", "/v1/chat/completions", chatBody(tc.model))
		require.Equal(t, tc.status, w.Code, "%s: %s", tc.name, w.Body.String())
		require.Equal(t, tc.openai, gjson.Get(w.Body.String(), "error.type").String(), "chat %s: %s", tc.name, w.Body.String())
		require.Equal(t, fmt.Sprint(tc.status), gjson.Get(w.Body.String(), "error.code").String(), tc.name)
	}
}
