package itest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 17, input 7 (API.md "Security rules": "A provider credential taken implicitly from
// the environment (no api_key given) obeys allowed_env_secrets for database objects, as an
// explicit os.environ/NAME does"). With allowed_env_secrets ["ALLOWED_*"] and OPENAI_API_KEY,
// AZURE_API_KEY, AZURE_AD_TOKEN in the gateway's environment: a model written through the API
// without an api_key (openai, azure), a bedrock model without AWS keys (the AWS default chain)
// and a vertex_ai model without vertex_credentials (Application Default Credentials) are
// refused with the explicit reference's 400; a psql row dropping its api_key is not applied on
// either replica (apply_errors, the previous version keeps serving with its own key); the
// environment's key never reaches the upstream. A config-file model keeps the implicit
// fallback; an allowed name (ALLOWED_*) still resolves explicitly.
func TestImplicitEnvCredentialsObeyAllowedEnvSecrets(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	db := pgtestNewMigratedDB(t)
	const envKey = "sk-env-implicit-0123456789"
	env := []string{"OPENAI_API_KEY=" + envKey, "AZURE_API_KEY=az-env-implicit-0123456789", "AZURE_AD_TOKEN=ad-env-implicit-0123456789",
		"ALLOWED_KEY=sk-allowed-0123456789"}
	cfg := "general_settings:\n  allowed_env_secrets: [\"ALLOWED_*\"]\nmodel_list:\n  - model_name: cfg-implicit\n    litellm_params:\n      model: openai/gpt-up\n      api_base: " + up.URL + "/v1\n"
	a := StartGateway(t, db, "impl-a", GatewayOpts{Env: env, Config: cfg})
	b := StartGateway(t, db, "impl-b", GatewayOpts{Env: env, Config: cfg})

	refused := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"model": "openai/gpt-4o-mini", "api_base": up.URL + "/v1"},
			"litellm_params.api_key: environment variable OPENAI_API_KEY is not allowed for database objects"},
		{map[string]any{"model": "azure/dep", "api_base": up.URL},
			"litellm_params.api_key: environment variable AZURE_API_KEY is not allowed for database objects"},
		{map[string]any{"model": "bedrock/anthropic.claude-3-haiku-20240307-v1:0", "api_base": up.URL, "aws_region_name": "us-east-1"},
			"litellm_params.aws_secret_access_key: environment variable AWS_SECRET_ACCESS_KEY is not allowed for database objects"},
		{map[string]any{"model": "vertex_ai/gemini-2.5-pro", "api_base": up.URL, "vertex_project": "p"},
			"litellm_params.vertex_credentials: environment variable GOOGLE_APPLICATION_CREDENTIALS is not allowed for database objects"},
	}
	for _, r := range refused {
		st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": "implicit", "litellm_params": r.params})
		require.Equal(t, 400, st, "%v: %s", r.params, body)
		require.Contains(t, gjson.GetBytes(body, "error.message").String(), r.want)
	}
	require.Zero(t, agScalar[int](t, db, "SELECT count(*)::int FROM gateway.models"))

	// an explicit api_key is not replaced by the environment's AZURE_AD_TOKEN
	az := fakeupstream.StartAzure(t, fakeupstream.Azure{APIVersion: "2024-10-21", APIKey: "az-explicit-0123456789"})
	st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": "az-explicit",
		"litellm_params": map[string]any{"model": "azure/dep", "api_base": az.URL, "api_key": "az-explicit-0123456789"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("az-explicit", "hi", false))
	require.Equal(t, 200, st, "%s", body)
	req, ok := az.LastRequest("/openai/deployments/dep/chat/completions")
	require.True(t, ok)
	require.Equal(t, "az-explicit-0123456789", req.Header.Get("api-key"))
	require.Empty(t, req.Header.Get("Authorization"))

	// an explicit, allowed reference resolves; then psql drops the api_key: not applied
	st, body = a.Do(t, "POST", "/model/new", map[string]any{"model_name": "explicit", "model_info": map[string]any{"id": "explicit-1"},
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": "os.environ/ALLOWED_KEY"}})
	require.Equal(t, 200, st, "%s", body)
	for _, g := range []*Gateway{a, b} {
		st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody("explicit", "hi", false))
		require.Equal(t, 200, st, "%s", body)
	}
	errsBefore := map[*Gateway]float64{a: a.SyncLag(t)["apply_errors"].(float64), b: b.SyncLag(t)["apply_errors"].(float64)}
	PSQL(t, db, `UPDATE gateway.models SET litellm_params = litellm_params - 'api_key' WHERE model_id = 'explicit-1'`)
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('implicit-2', 'implicit-psql',
		jsonb_build_object('model', 'openai/gpt-up', 'api_base', $1::text))`, up.URL+"/v1")
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" counts the apply errors", func() bool {
			return g.SyncLag(t)["apply_errors"].(float64) >= errsBefore[g]+2
		})
		up.Reset()
		st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody("explicit", "hi", true))
		require.Equal(t, 200, st, "%s", body)
		req, ok = up.LastRequest("/v1/chat/completions")
		require.True(t, ok)
		require.Equal(t, "Bearer sk-allowed-0123456789", req.Header.Get("Authorization"), "the previous version keeps serving")
		st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody("implicit-psql", "hi", false))
		require.Equal(t, 400, st, "%s", body)
		require.Contains(t, g.Log(), "environment variable OPENAI_API_KEY is not allowed for database objects")
	}

	// a config-file model keeps the implicit fallback
	st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("cfg-implicit", "hi", false))
	require.Equal(t, 200, st, "%s", body)
	req, _ = up.LastRequest("/v1/chat/completions")
	require.Equal(t, "Bearer "+envKey, req.Header.Get("Authorization"))
	for _, r := range up.Requests() {
		if r.Header.Get("Authorization") == "Bearer "+envKey {
			require.Equal(t, "gpt-up", gjson.GetBytes(r.Body, "model").Str)
		}
	}
}

// Issue 17, input 8 (API.md "Security rules": credentials, extra_headers values and cookies
// are redacted in every answer, error text, /health result and log line). A deployment with
// an api_key and extra_headers Cookie / X-Goog-Api-Key / X-Custom, in front of an upstream
// that answers 401 quoting every request header: a virtual key's /model/info and
// /v2/model/info show no header value, the chat error (plain and streamed, on the other
// replica) quotes none of them, GET /health?model= neither in its error nor in its
// litellm_params, and no replica logs one.
func TestCredentialHeadersRedactedEverywhere(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStatus(401), fakeupstream.WithEchoHeaders(), fakeupstream.WithErrorMessage("Unauthorized"))
	p := StartPair(t, GatewayOpts{})
	secrets := []string{"sk-hdr-apikey-0123456789", "cookie-secret-0123456789", "goog-secret-0123456789", "custom-secret-0123456789"}
	st, body := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "hdrs", "litellm_params": map[string]any{
		"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": secrets[0],
		"extra_headers": map[string]any{"Cookie": "session=" + secrets[1] + "; theme=dark", "X-Goog-Api-Key": secrets[2], "X-Custom": secrets[3]}}})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.A.Do(t, "POST", "/key/generate", map[string]any{"models": []string{"hdrs"}})
	require.Equal(t, 200, st, "%s", body)
	key := gjson.GetBytes(body, "key").String()
	noSecret := func(what string, b []byte) {
		t.Helper()
		for _, s := range secrets {
			require.NotContains(t, string(b), s, "%s: %s", what, b)
		}
	}
	for _, path := range []string{"/model/info", "/v2/model/info"} {
		// the model and the key were written on A: B lists the model once both reached it
		Eventually(t, "B lists hdrs on "+path, func() bool {
			st, body = p.B.DoKey(t, key, "GET", path, nil)
			return st == 200 && strings.Contains(string(body), "hdrs")
		})
		noSecret(path, body)
	}
	for _, stream := range []bool{false, true} {
		st, body = p.B.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("hdrs", "hi", stream))
		require.Equal(t, 401, st, "%s", body)
		require.Contains(t, string(body), "request headers:", "the upstream echoed the headers")
		noSecret("chat error", body)
	}
	st, body = p.A.Do(t, "GET", "/health?model=hdrs", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(1), gjson.GetBytes(body, "unhealthy_count").Int(), "%s", body)
	require.Contains(t, gjson.GetBytes(body, "unhealthy_endpoints.0.error").Str, "request headers:")
	noSecret("/health", body)
	req, ok := up.LastRequest("/v1/models")
	require.True(t, ok)
	require.Equal(t, "session="+secrets[1]+"; theme=dark", req.Header.Get("Cookie"), "the headers were sent")
	noSecret("log of a", []byte(p.A.Log()))
	noSecret("log of b", []byte(p.B.Log()))
}

// Issue 17, input 10 (API.md "Security rules": upstream redirects are not followed with
// credentials to another host). Anthropic (x-api-key) and OpenAI-compatible (Authorization,
// an api-key extra header) deployments whose upstream answers 307 to another host: every
// route, plain and streamed, answers 502 naming the status, and the other host receives
// nothing.
func TestUpstreamRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	other := fakeupstream.Start(t)
	redir := fakeupstream.Start(t, fakeupstream.WithRedirect(307, other.URL))
	p := StartPair(t, GatewayOpts{})
	createModel(t, p.A, "redir-ant", map[string]any{"model": "anthropic/claude-x", "api_base": redir.URL, "api_key": "sk-ant-redirect-0123456789"})
	createModel(t, p.A, "redir-oai", map[string]any{"model": "openai/gpt-up", "api_base": redir.URL + "/v1", "api_key": "sk-oai-redirect-0123456789",
		"extra_headers": map[string]any{"api-key": "hdr-redirect-0123456789"}})
	for _, m := range []string{"redir-ant", "redir-oai"} {
		for _, stream := range []bool{false, true} {
			st, body := p.B.Do(t, "POST", "/v1/chat/completions", chatBody(m, "hi", stream))
			require.Equal(t, 502, st, "%s %v: %s", m, stream, body)
			require.Contains(t, string(body), "upstream answered 307 Temporary Redirect")
			require.Contains(t, string(body), "upstream redirects are not followed")
			if !stream {
				require.Equal(t, "upstream_redirect", gjson.GetBytes(body, "error.type").Str, "%s", body)
			}
			st, body = p.B.Do(t, "POST", "/v1/messages", map[string]any{"model": m, "max_tokens": 10, "stream": stream,
				"messages": []map[string]any{{"role": "user", "content": "hi"}}})
			require.Equal(t, 502, st, "%s %v: %s", m, stream, body)
			require.Contains(t, string(body), "307")
		}
	}
	require.NotEmpty(t, redir.Requests())
	require.Empty(t, other.Requests(), "nothing is sent to the redirect's host")
	st, body := p.A.Do(t, "GET", "/health?model=redir-oai", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(1), gjson.GetBytes(body, "unhealthy_count").Int(), "%s", body)
	require.Contains(t, gjson.GetBytes(body, "unhealthy_endpoints.0.error").Str, "307")
	require.Empty(t, other.Requests())
}

// Issue 17, input 12 (API.md "Security rules": with LITELLM_SALT_KEY or GATEWAY_SALT_KEY set,
// provider credentials are stored encrypted). Replica A (LITELLM_SALT_KEY) and B
// (GATEWAY_SALT_KEY, same key): a model and an agent written through A are stored with no
// clear credential (api_key, extra_headers values) and serve on B with the real key; an
// update sending back the masked key keeps it; a row written in clear by psql serves. Replica
// C with another key starts with a clear one-line error naming the row, never serves it with
// an empty credential, still serves the clear row; a row C seals is an apply error on A and B
// (the previous version keeps serving); a replica without a key names the missing key.
func TestCredentialsEncryptedAtRest(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	db := pgtestNewMigratedDB(t)
	const apiKey, cookie = "sk-at-rest-0123456789", "session=at-rest-cookie-0123456789"
	a := StartGateway(t, db, "seal-a", GatewayOpts{Env: []string{"LITELLM_SALT_KEY=salt-one-0123456789"}})
	b := StartGateway(t, db, "seal-b", GatewayOpts{Env: []string{"GATEWAY_SALT_KEY=salt-one-0123456789"}})
	st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": "sealed", "model_info": map[string]any{"id": "sealed-1"},
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": apiKey,
			"extra_headers": map[string]any{"Cookie": cookie}}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "sealed-agent", "agent_card_params": agentCard("sealed-agent"),
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": apiKey}})
	require.Equal(t, 200, st, "%s", body)
	stored := agScalar[string](t, db, "SELECT litellm_params::text FROM gateway.models WHERE model_id = 'sealed-1'")
	agentStored := agScalar[string](t, db, "SELECT litellm_params::text FROM gateway.agents WHERE agent_name = 'sealed-agent'")
	for _, s := range []string{stored, agentStored} {
		require.NotContains(t, s, apiKey)
		require.NotContains(t, s, "at-rest-cookie")
		require.Contains(t, s, `"api_key": "lockstep:aes-256-gcm:v1:`)
		require.Contains(t, s, `"api_base": "`+up.URL+`/v1"`, "only credentials are sealed")
	}
	require.Contains(t, stored, `"Cookie": "lockstep:aes-256-gcm:v1:`)
	call := func(g *Gateway, model string) (int, []byte) {
		up.Reset()
		return g.Do(t, "POST", "/v1/chat/completions", chatBody(model, "hi", false))
	}
	st, body = call(b, "sealed")
	require.Equal(t, 200, st, "%s", body)
	req, _ := up.LastRequest("/v1/chat/completions")
	require.Equal(t, "Bearer "+apiKey, req.Header.Get("Authorization"))
	require.Equal(t, cookie, req.Header.Get("Cookie"))
	st, body = rpc(t, b, "sealed-agent", sendRequest("r1", "hi"))
	require.Equal(t, 200, st, "%s", body)
	require.True(t, gjson.GetBytes(body, "result").Exists(), "%s", body)

	// the masked key sent back keeps the stored one
	st, body = a.Do(t, "GET", "/model/info?litellm_model_id=sealed-1", nil)
	require.Equal(t, 200, st, "%s", body)
	masked := gjson.GetBytes(body, "data.0.litellm_params.api_key").Str
	require.Contains(t, masked, "****")
	st, body = a.Do(t, "POST", "/model/update", map[string]any{"model_info": map[string]any{"id": "sealed-1"},
		"litellm_params": map[string]any{"api_key": masked, "timeout": 30}})
	require.Equal(t, 200, st, "%s", body)
	require.NotContains(t, agScalar[string](t, db, "SELECT litellm_params::text FROM gateway.models WHERE model_id = 'sealed-1'"), apiKey)
	Eventually(t, "b applies the update", func() bool {
		st, body := b.Do(t, "GET", "/model/info?litellm_model_id=sealed-1", nil)
		return st == 200 && gjson.GetBytes(body, "data.0.litellm_params.timeout").Int() == 30
	})
	st, body = call(b, "sealed")
	require.Equal(t, 200, st, "%s", body)
	req, _ = up.LastRequest("/v1/chat/completions")
	require.Equal(t, "Bearer "+apiKey, req.Header.Get("Authorization"))

	// a clear row written by psql still loads
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('clear-1', 'clear',
		jsonb_build_object('model', 'openai/gpt-up', 'api_base', $1::text, 'api_key', 'sk-clear-psql-0123456789'))`, up.URL+"/v1")
	Eventually(t, "b serves the clear row", func() bool { st, _ := call(b, "clear"); return st == 200 })
	req, _ = up.LastRequest("/v1/chat/completions")
	require.Equal(t, "Bearer sk-clear-psql-0123456789", req.Header.Get("Authorization"))

	// another key: a clear start-up error naming the row, never an empty credential
	c := StartGateway(t, db, "seal-c", GatewayOpts{Env: []string{"LITELLM_SALT_KEY=salt-two-0123456789"}})
	require.Contains(t, c.Log(), "litellm_params.api_key cannot be decrypted with the configured salt key")
	require.Contains(t, c.Log(), "sealed-1")
	st, body = call(c, "sealed")
	require.NotEqual(t, 200, st, "%s", body)
	require.Empty(t, up.Requests(), "nothing is sent with a credential that did not decrypt")
	st, body = call(c, "clear")
	require.Equal(t, 200, st, "%s", body)

	// a row sealed with C's key is an apply error on A and B; the previous version keeps serving
	errsBefore := map[*Gateway]float64{a: a.SyncLag(t)["apply_errors"].(float64), b: b.SyncLag(t)["apply_errors"].(float64)}
	st, body = c.Do(t, "POST", "/model/new", map[string]any{"model_name": "other-key", "model_info": map[string]any{"id": "other-1"},
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": "sk-other-key-0123456789"}})
	require.Equal(t, 200, st, "%s", body)
	PSQL(t, db, `UPDATE gateway.models SET litellm_params = jsonb_set(litellm_params, '{api_key}',
		(SELECT litellm_params->'api_key' FROM gateway.models WHERE model_id = 'other-1')) WHERE model_id = 'sealed-1'`)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" counts the apply errors", func() bool {
			return g.SyncLag(t)["apply_errors"].(float64) >= errsBefore[g]+2
		})
		st, body = call(g, "sealed")
		require.Equal(t, 200, st, "%s", body)
		req, _ = up.LastRequest("/v1/chat/completions")
		require.Equal(t, "Bearer "+apiKey, req.Header.Get("Authorization"), "the previous version keeps serving")
		st, body = call(g, "other-key")
		require.NotEqual(t, 200, st, "%s", body)
		require.Contains(t, g.Log(), "cannot be decrypted with the configured salt key")
	}

	// no key at all: the row names the missing key
	d := StartGateway(t, db, "seal-d", GatewayOpts{})
	require.Contains(t, d.Log(), "litellm_params.api_key is encrypted at rest but neither LITELLM_SALT_KEY nor GATEWAY_SALT_KEY is set")
	require.False(t, strings.Contains(d.Log(), apiKey))
}
