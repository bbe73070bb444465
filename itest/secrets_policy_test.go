package itest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 8, input 8 (API.md "Security rules"): "os.environ/NAME" in an object stored in the
// database resolves only names matching general_settings.allowed_env_secrets (default
// *_API_KEY, *_API_BASE) and never the gateway's own settings. Through the API: 400 naming
// the variable, nothing stored. Written with psql, on two replica processes: a model row is
// not applied (counted in apply_errors, logged), the previous version keeps serving, a new
// row never serves; an agent row's call fails naming the variable; the variable's value never
// reaches the upstream. Config-file objects may name any variable.
func TestDatabaseObjectsReadOnlyAllowedEnvSecrets(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	db := pgtestNewMigratedDB(t)
	const dbSecret = "DBPASS-must-never-leave"
	dbURL := strings.Replace(db, "postgres@", "postgres:"+dbSecret+"@", 1) // trust auth ignores it
	env := []string{"DATABASE_URL=" + dbURL, "LOCKSTEP_UP_API_KEY=sk-from-env-123456", "LOCKSTEP_OTHER_TOKEN=tok-from-env-123456",
		"LOCKSTEP_CFG_VAR=sk-config-var-123456"}
	cfg := "model_list:\n  - model_name: from-config\n    litellm_params:\n      model: openai/gpt-up\n      api_base: " + up.URL + "/v1\n      api_key: os.environ/LOCKSTEP_CFG_VAR\n"
	a := StartGateway(t, "", "sec-a", GatewayOpts{Env: env, Config: cfg})
	b := StartGateway(t, "", "sec-b", GatewayOpts{Env: env, Config: cfg})

	model := func(name, apiKey string) map[string]any {
		return map[string]any{"model_name": name, "model_info": map[string]any{"id": name + "-1"},
			"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": apiKey}}
	}
	for _, name := range []string{"DATABASE_URL", "GATEWAY_MASTER_KEY", "LITELLM_MASTER_KEY", "LOCKSTEP_OTHER_TOKEN", "HOME"} {
		st, body := a.Do(t, "POST", "/model/new", model("bad", "os.environ/"+name))
		require.Equal(t, 400, st, "%s: %s", name, body)
		require.Contains(t, gjson.GetBytes(body, "error.message").String(), "environment variable "+name+" is not allowed for database objects", name)
	}
	st, body := a.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "bad-agent", "agent_card_params": agentCard("bad-agent"),
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": "os.environ/DATABASE_URL"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "environment variable DATABASE_URL is not allowed for database objects")
	require.Zero(t, agScalar[int](t, db, "SELECT count(*)::int FROM gateway.models"))
	require.Zero(t, agScalar[int](t, db, "SELECT count(*)::int FROM gateway.agents"))

	// an allowed name resolves
	st, body = a.Do(t, "POST", "/model/new", model("good", "os.environ/LOCKSTEP_UP_API_KEY"))
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("good", "hi", false))
	require.Equal(t, 200, st, "%s", body)
	req, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "Bearer sk-from-env-123456", req.Header.Get("Authorization"))

	// a config-file object may name any variable
	st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("from-config", "hi", false))
	require.Equal(t, 200, st, "%s", body)
	req, _ = up.LastRequest("/v1/chat/completions")
	require.Equal(t, "Bearer sk-config-var-123456", req.Header.Get("Authorization"))

	// psql points the serving model at the database URL: not applied, counted, the previous
	// version keeps serving with its own key; a new row naming it never serves
	errsBefore := map[*Gateway]float64{a: a.SyncLag(t)["apply_errors"].(float64), b: b.SyncLag(t)["apply_errors"].(float64)}
	PSQL(t, db, `UPDATE gateway.models SET litellm_params = jsonb_set(litellm_params, '{api_key}', '"os.environ/DATABASE_URL"') WHERE model_id = 'good-1'`)
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('evil-1', 'evil',
		jsonb_build_object('model', 'openai/gpt-up', 'api_base', $1::text, 'api_key', 'os.environ/GATEWAY_MASTER_KEY'))`, up.URL+"/v1")
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('evil-2', 'evil-db',
		jsonb_build_object('model', 'openai/gpt-up', 'api_base', $1::text, 'api_key', 'os.environ/DATABASE_URL'))`, up.URL+"/v1")
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('evil-3', 'evil-hdr',
		jsonb_build_object('model', 'openai/gpt-up', 'api_base', $1::text, 'api_key', 'sk-x',
			'extra_headers', jsonb_build_object('X-Leak', 'os.environ/DATABASE_URL')))`, up.URL+"/v1")
	PSQL(t, db, `INSERT INTO gateway.agents (agent_id, agent_name, agent_card_params, litellm_params) VALUES ('evil-agent', 'evil-agent', $1::jsonb,
		jsonb_build_object('model', 'openai/gpt-up', 'api_base', $2::text, 'api_key', 'os.environ/DATABASE_URL'))`, mustJSON(t, agentCard("evil-agent")), up.URL+"/v1")
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" counts the apply errors", func() bool {
			return g.SyncLag(t)["apply_errors"].(float64) >= errsBefore[g]+4
		})
		st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody("good", "hi", false))
		require.Equal(t, 200, st, "%s", body)
		for _, m := range []string{"evil", "evil-db", "evil-hdr"} {
			st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody(m, "hi", false))
			require.Equal(t, 400, st, "%s", body)
			st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody(m, "hi", true))
			require.Equal(t, 400, st, "%s", body)
		}
		st, body = rpc(t, g, "evil-agent", sendRequest("r1", "hi"))
		require.Contains(t, string(body), "environment variable DATABASE_URL is not allowed for database objects", "%d %s", st, body)
		require.False(t, gjson.GetBytes(body, "result").Exists(), "%s", body)
	}
	for _, r := range up.Requests() {
		for _, vals := range r.Header {
			for _, v := range vals {
				require.NotContains(t, v, dbSecret)
				require.NotContains(t, v, MasterKey)
			}
		}
		require.NotContains(t, string(r.Body), dbSecret)
		require.NotContains(t, string(r.Body), MasterKey)
		require.Contains(t, []string{"Bearer sk-from-env-123456", "Bearer sk-config-var-123456"}, r.Header.Get("Authorization"))
	}
	require.Contains(t, a.Log(), "environment variable DATABASE_URL is not allowed for database objects")
}

// general_settings.allowed_env_secrets replaces the default patterns; the gateway's own
// settings stay out of reach even of "*".
func TestAllowedEnvSecretsFromConfig(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	db := pgtestNewMigratedDB(t)
	g := StartGateway(t, db, "allow", GatewayOpts{
		Env:    []string{"CUSTOM_TOKEN=sk-custom-123456", "LOCKSTEP_UP_API_KEY=sk-no"},
		Config: "general_settings:\n  allowed_env_secrets: [\"CUSTOM_*\", \"*\"]\n",
	})
	model := func(name, apiKey string) map[string]any {
		return map[string]any{"model_name": name, "litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": apiKey}}
	}
	st, body := g.Do(t, "POST", "/model/new", model("custom", "os.environ/CUSTOM_TOKEN"))
	require.Equal(t, 200, st, "%s", body)
	for _, name := range []string{"DATABASE_URL", "GATEWAY_MASTER_KEY", "LITELLM_MASTER_KEY", "GATEWAY_LISTEN_DATABASE_URL"} {
		st, body = g.Do(t, "POST", "/model/new", model("x", "os.environ/"+name))
		require.Equal(t, 400, st, "%s: %s", name, body)
		require.Contains(t, string(body), "environment variable "+name+" is not allowed for database objects")
	}

	g2 := StartGateway(t, db, "allow-2", GatewayOpts{Env: []string{"CUSTOM_TOKEN=sk-custom-123456"},
		Config: "general_settings:\n  allowed_env_secrets: [\"CUSTOM_*\"]\n"})
	st, body = g2.Do(t, "POST", "/model/new", model("std", "os.environ/LOCKSTEP_UP_API_KEY"))
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "environment variable LOCKSTEP_UP_API_KEY is not allowed for database objects")

	code, out := runGateway(t, nil, "serve", "--addr", "127.0.0.1:0", "--config", writeTemp(t, "general_settings:\n  allowed_env_secrets: [\"[A-\"]\n"))
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "general_settings.allowed_env_secrets[0]")
}

// writeTemp writes body to a new file in the test's temp dir and returns its path.
func writeTemp(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}
