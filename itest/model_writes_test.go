package itest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// An id with an escaped character in the path ("a%2Fb") addresses object "a/b" on every
// ":id" route: models, agents, guardrails, a2a.
func TestEscapedIDsInPaths(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/model/new", map[string]any{
		"model_name": "slashy", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "one"},
		"model_info": map[string]any{"id": "a/b"},
	})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "PATCH", "/model/a%2Fb/update", map[string]any{"litellm_params": map[string]any{"mock_response": "two"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "a/b", gjson.GetBytes(body, "model_id").String())
	require.Equal(t, "two", agScalar[string](t, p.DB, "SELECT litellm_params->>'mock_response' FROM gateway.models WHERE model_id = 'a/b'"))

	// guardrail and agent ids are uuids when created through the API: write these with psql
	PSQL(t, p.DB, `INSERT INTO gateway.guardrails (guardrail_id, guardrail_name, litellm_params)
		VALUES ('g/1', 'g', '{"guardrail": "litellm_content_filter", "mode": "pre_call"}')`)
	st, body = p.B.Do(t, "GET", "/guardrails/g%2F1", nil)
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "PATCH", "/guardrails/g%2F1", map[string]any{"litellm_params": map[string]any{"mode": "post_call"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "DELETE", "/guardrails/g%2F1", nil)
	require.Equal(t, 200, st, "%s", body)

	PSQL(t, p.DB, `INSERT INTO gateway.agents (agent_id, agent_name, agent_card_params, litellm_params)
		VALUES ('ag/1', 'agent', $1::jsonb, '{"model": "slashy"}')`, mustJSON(t, agentCard("agent")))
	st, body = p.B.Do(t, "GET", "/v1/agents/ag%2F1", nil)
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "PATCH", "/v1/agents/ag%2F1", map[string]any{"agent_name": "agent-2"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "agent-2", gjson.GetBytes(body, "agent_name").String())
	require.Equal(t, "two", sendText(t, p.A, "ag%2F1", "hi"))
	st, body = p.A.Do(t, "GET", "/a2a/ag%2F1/.well-known/agent-card.json", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, p.A.URL+"/a2a/ag%2F1", gjson.GetBytes(body, "url").String())
	st, body = p.B.Do(t, "DELETE", "/v1/agents/ag%2F1", nil)
	require.Equal(t, 200, st, "%s", body)

	// access groups: decoded exactly once ("%25" is a literal "%")
	st, body = p.A.Do(t, "POST", "/access_group/new", map[string]any{"access_group": "p/q", "model_names": []string{"slashy"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "GET", "/access_group/p%2Fq/info", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "p/q", gjson.GetBytes(body, "access_group").String())
	st, body = p.B.Do(t, "GET", "/access_group/p%252Fq/info", nil)
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, "Access group 'p%2Fq' not found", gjson.GetBytes(body, "detail.error").String())
}

// Wrong JSON types on model writes are 400s naming the field, never silently coerced (a
// numeric model_info.id used to be replaced by a uuid).
func TestModelWriteFieldTypes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	okParams := `{"model":"openai/x","mock_response":"hi"}`
	st, body := p.A.Do(t, "POST", "/model/new", `{"model_name":"typed","litellm_params":`+okParams+`,"model_info":{"id":"typed-1"}}`)
	require.Equal(t, 200, st, "%s", body)

	msg := func(b []byte) string { return gjson.GetBytes(b, "error.message").String() }
	for _, tc := range []struct{ path, body, want string }{
		{"/model/new", `{"model_name":"m","litellm_params":` + okParams + `,"model_info":{"id":5}}`, "model_info.id must be a string"},
		{"/model/new", `{"model_name":5,"litellm_params":` + okParams + `}`, "model_name must be a string"},
		{"/model/new", `{"model_name":"m","litellm_params":"openai/x"}`, "litellm_params must be a JSON object"},
		{"/model/new", `{"model_name":"m","litellm_params":` + okParams + `,"model_info":["x"]}`, "model_info must be a JSON object"},
		{"/model/new", `{"model_name":"m","litellm_params":` + okParams + `,"model_info":{"access_groups":"g"}}`,
			`Invalid model: model_info.access_groups must be an array of strings, got "g"`},
		{"/model/new", `{"model_name":"m","litellm_params":` + okParams + `,"model_info":{"team_id":5}}`,
			`Invalid model: model_info.team_id must be a string, got 5`},
		{"/model/update", `{"litellm_params":{"rpm":1},"model_info":{"id":5}}`, "model_info.id must be a string"},
		{"/model/update", `{"model_name":["typed"],"model_info":{"id":"typed-1"}}`, "model_name must be a string"},
		{"/model/update", `{"litellm_params":[1],"model_info":{"id":"typed-1"}}`, "litellm_params must be a JSON object"},
		{"/model/update", `{"model_info":"typed-1"}`, "model_info must be a JSON object"},
		{"/model/typed-1/update", `{"model_info":{"id":5}}`, "model_info.id must be a string"},
		{"/model/typed-1/update", `{"litellm_params":"x"}`, "litellm_params must be a JSON object"},
	} {
		method := "POST"
		if tc.path == "/model/typed-1/update" {
			method = "PATCH"
		}
		st, body := p.A.Do(t, method, tc.path, tc.body)
		require.Equal(t, 400, st, "%s %s: %s", tc.path, tc.body, body)
		require.Equal(t, tc.want, msg(body), "%s %s", tc.path, tc.body)
	}
	require.Equal(t, 1, agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway.models"), "nothing else was written")
}

// A virtual key restricted to models=[x] cannot reach model y through an agent whose model
// is y (message/send answers JSON-RPC -31403 with the key_model_access_denied text); a key
// that may use y can.
func TestAgentRespectsKeyModelAccess(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	for _, m := range []string{"x", "y"} {
		st, body := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": m, "litellm_params": map[string]any{"model": "openai/" + m, "mock_response": "from " + m}})
		require.Equal(t, 200, st, "%s", body)
	}
	createAgent(t, p.A, "agent-y", map[string]any{"model": "y"})
	keyFor := func(models ...string) string {
		st, body := p.A.Do(t, "POST", "/key/generate", map[string]any{"models": models})
		require.Equal(t, 200, st, "%s", body)
		return gjson.GetBytes(body, "key").String()
	}
	onlyX, y := keyFor("x"), keyFor("y")

	for _, g := range []*Gateway{p.A, p.B} {
		st, body := g.DoKey(t, onlyX, "POST", "/a2a/agent-y", sendRequest(1, "hi"))
		require.Equal(t, 200, st, "%s", body)
		require.Equal(t, int64(-31403), gjson.GetBytes(body, "error.code").Int(), "%s", body)
		require.Equal(t, "key not allowed to access model. This key can only access models=['x']. Tried to access y",
			gjson.GetBytes(body, "error.message").String())
		require.NotContains(t, string(body), "from y")

		st, body = g.DoKey(t, y, "POST", "/a2a/agent-y", sendRequest(1, "hi"))
		require.Equal(t, 200, st, "%s", body)
		require.Equal(t, "from y", gjson.GetBytes(body, "result.parts.0.text").String(), "%s", body)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A value Postgres refuses (a NUL byte in a text column, SQLSTATE class 22, which pkg/store
// maps to store.ErrInvalid) is a 400 "invalid value: <reason>", never a 500 echoing the
// database's error, and nothing is stored.
func TestRefusedValueIsA400WithoutInternals(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/model/new", `{"model_name":"nul\u0000name","litellm_params":{"model":"openai/x","mock_response":"hi"}}`)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, `invalid value: invalid byte sequence for encoding "UTF8": 0x00`, gjson.GetBytes(body, "error.message").String())
	for _, leak := range []string{"SQLSTATE", "127.0.0.1", "gateway.models", "pgx"} {
		require.NotContains(t, string(body), leak)
	}
	require.Equal(t, 0, agScalar[int](t, p.DB, "SELECT count(*)::int FROM gateway.models"))
}
