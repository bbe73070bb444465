package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/a2a"
	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/api"
	"lockstep/pkg/call"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// bundle is a config-only server (no database) and what it serves from.
type bundle struct {
	srv        *api.Server
	models     *registry.Registry[*router.Deployment]
	guardrails *registry.Registry[*guardrail.Guardrail]
	agents     *registry.Registry[*a2a.Agent]
	keys       *registry.Registry[*keys.Key]
	log        *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

func setup(t testing.TB) *bundle {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the server's dependencies edited by edit (when not nil).
func setupWith(t testing.TB, edit func(*api.Deps)) *bundle {
	t.Helper()
	b := &bundle{
		models:     registry.New(registry.Options[*router.Deployment]{Type: mgmt.TypeModel, Build: router.BuildRow, Names: router.Names}),
		guardrails: registry.New(registry.Options[*guardrail.Guardrail]{Type: mgmt.TypeGuardrail, Build: guardrail.BuildRow, Names: call.GuardrailNames}),
		agents:     registry.New(registry.Options[*a2a.Agent]{Type: mgmt.TypeAgent, Build: a2a.BuildRow, Names: api.AgentNames}),
		keys:       registry.New(registry.Options[*keys.Key]{Type: mgmt.TypeKey, Build: keys.BuildRow}),
		log:        &syncBuffer{},
	}
	client := provider.NewClient()
	d := api.Deps{
		ReplicaID: "unit", MasterKey: "sk-master", Router: router.New(b.models, client, router.Settings{NumRetries: -1}), Client: client,
		Guardrails: b.guardrails, Agents: b.agents, Keys: b.keys, Log: zerolog.New(b.log),
	}
	if edit != nil {
		edit(&d)
	}
	b.srv = api.New(d)
	return b
}

// do sends a request with key and returns the recorded answer.
func (b *bundle) do(t *testing.T, key, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(w, req)
	return w
}

func (b *bundle) addKey(key string, models ...string) {
	cur := map[string]*keys.Key{}
	b.keys.Load().All(func(e *registry.Entry[*keys.Key]) bool { cur[e.ID] = e.Value; return true })
	k := &keys.Key{Token: keys.Hash(key), Models: models}
	cur[k.Token] = k
	b.keys.SetConfig(cur)
}

func mustDeployment(t *testing.T, id, name, params, info string) *router.Deployment {
	t.Helper()
	var mi []byte
	if info != "" {
		mi = []byte(info)
	}
	d, err := router.Build(id, name, []byte(params), mi)
	require.NoError(t, err)
	return d
}

func card(name string) string {
	return `{"name": "` + name + `", "description": "d", "version": "1", "capabilities": {"streaming": true},
		"defaultInputModes": ["text"], "defaultOutputModes": ["text"], "skills": []}`
}

func mustAgent(t *testing.T, id, name, params string) *a2a.Agent {
	t.Helper()
	a, err := a2a.NewAgent(id, name, []byte(card(name)), []byte(params))
	require.NoError(t, err)
	return a
}

func sendRPC(method, text string) string {
	return `{"jsonrpc": "2.0", "id": 1, "method": "` + method + `", "params": {"message": {"role": "user", "messageId": "m",
		"parts": [{"kind": "text", "text": "` + text + `"}]}}}`
}

// An internal error answers 500 "internal error (request id <id>)" and logs the cause with that
// id; the cause (hosts, connection strings) never reaches the client. Store sentinels that a
// handler did not map become 400 / 409 / 404 with a short reason.
func TestErrorHandlerHidesInternalErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cause := errors.New(`query gateway.models: dial tcp db.internal:5432: postgres://gw:hunter2@db.internal/gw: connection refused`)
	b.srv.Echo().GET("/test/boom", func(echo.Context) error { return fmt.Errorf("load: %w", cause) })
	b.srv.Echo().GET("/test/panic", func(echo.Context) error { panic(cause) })
	b.srv.Echo().GET("/test/invalid", func(echo.Context) error {
		return fmt.Errorf("insert model %q: %w", "m", fmt.Errorf("%w: %s", mgmt.ErrInvalid, `invalid byte sequence for encoding "UTF8": 0x00`))
	})
	b.srv.Echo().GET("/test/invalid-bare", func(echo.Context) error { return mgmt.ErrInvalid })
	b.srv.Echo().GET("/test/conflict", func(echo.Context) error {
		return fmt.Errorf("%w: Key (agent_name)=(x) already exists.", mgmt.ErrConflict)
	})
	b.srv.Echo().GET("/test/notfound", func(echo.Context) error { return mgmt.ErrNotFound })

	for _, path := range []string{"/test/boom", "/test/panic"} {
		w := b.do(t, "sk-master", "GET", path, "")
		require.Equal(t, 500, w.Code, path)
		rid := w.Header().Get(echo.HeaderXRequestID)
		require.NotEmpty(t, rid)
		msg := gjson.Get(w.Body.String(), "error.message").String()
		require.Equal(t, "internal error (request id "+rid+")", msg, path)
		require.NotContains(t, w.Body.String(), "hunter2")
		require.NotContains(t, w.Body.String(), "db.internal")
		require.Equal(t, "internal_server_error", gjson.Get(w.Body.String(), "error.type").String())
		// the cause is in the log, with the request id
		var found bool
		for _, line := range strings.Split(b.log.String(), "\n") {
			if strings.Contains(line, `"request_id":"`+rid+`"`) && strings.Contains(line, "db.internal:5432") {
				found = true
			}
		}
		require.True(t, found, "log has the cause with request id %s:\n%s", rid, b.log.String())
	}

	w := b.do(t, "sk-master", "GET", "/test/invalid", "")
	require.Equal(t, 400, w.Code)
	require.Equal(t, `invalid value: invalid byte sequence for encoding "UTF8": 0x00`, gjson.Get(w.Body.String(), "error.message").String())
	w = b.do(t, "sk-master", "GET", "/test/invalid-bare", "")
	require.Equal(t, 400, w.Code)
	require.Equal(t, "invalid value: the database refused the value", gjson.Get(w.Body.String(), "error.message").String())
	w = b.do(t, "sk-master", "GET", "/test/conflict", "")
	require.Equal(t, 409, w.Code)
	require.Equal(t, "conflict: Key (agent_name)=(x) already exists.", gjson.Get(w.Body.String(), "error.message").String())
	w = b.do(t, "sk-master", "GET", "/test/notfound", "")
	require.Equal(t, 404, w.Code)
}

// Every ":id" route percent-decodes its parameter: an id with an escaped "/" ("a%2Fb") finds
// object "a/b". Config objects are used (no database): a read answers them, a write is refused
// with the config-object message, which shows the id was matched.
func TestPathParamsAreUnescaped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{"m/1": mustDeployment(t, "m/1", "m", `{"model":"openai/x","mock_response":"pong"}`, "")})
	b.agents.SetConfig(map[string]*a2a.Agent{"a/b": mustAgent(t, "a/b", "agent a/b", `{"model":"m"}`)})
	g, err := guardrail.Compile("g/1", []byte(`{"guardrail":"litellm_content_filter","mode":"pre_call"}`))
	require.NoError(t, err)
	b.guardrails.SetConfig(map[string]*guardrail.Guardrail{"config:g/1": g})

	w := b.do(t, "sk-master", "GET", "/v1/agents/a%2Fb", "")
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, "a/b", gjson.Get(w.Body.String(), "agent_id").String())
	for _, m := range []string{"PUT", "PATCH"} {
		w = b.do(t, "sk-master", m, "/v1/agents/a%2Fb", `{"agent_name":"x"}`)
		require.Equal(t, 400, w.Code, w.Body.String())
		require.Contains(t, w.Body.String(), "Agent in config")
	}
	w = b.do(t, "sk-master", "DELETE", "/v1/agents/a%2Fb", "")
	require.Equal(t, 400, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "Agent in config")

	for _, p := range []string{"/guardrails/config:g%2F1", "/guardrails/config:g%2F1/info"} {
		w = b.do(t, "sk-master", "GET", p, "")
		require.Equal(t, 200, w.Code, w.Body.String())
		require.Equal(t, "config:g/1", gjson.Get(w.Body.String(), "guardrail_id").String())
	}
	for _, m := range []string{"PUT", "PATCH", "DELETE"} {
		w = b.do(t, "sk-master", m, "/guardrails/config:g%2F1", `{}`)
		require.Equal(t, 400, w.Code, w.Body.String())
		require.Contains(t, w.Body.String(), "Guardrail in config", m)
	}

	w = b.do(t, "sk-master", "GET", "/a2a/a%2Fb/.well-known/agent-card.json", "")
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, "http://example.com/a2a/a%2Fb", gjson.Get(w.Body.String(), "url").String())
	w = b.do(t, "sk-master", "POST", "/a2a/a%2Fb", sendRPC("message/send", "hi"))
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Equal(t, "pong", gjson.Get(w.Body.String(), "result.parts.0.text").String(), w.Body.String())
	// an escaped "%" is decoded once, not twice
	w = b.do(t, "sk-master", "GET", "/v1/agents/a%252Fb", "")
	require.Equal(t, 404, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "Agent with id=a%2Fb not found")
}

// A virtual key restricted to models=[x] cannot reach model y through an agent whose model is
// y: message/send answers JSON-RPC -31403 with the key_model_access_denied text, message/stream
// ends "failed" with it. The key's access groups count as on the LLM routes.
func TestAgentEnforcesKeyModelAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"x1": mustDeployment(t, "x1", "x", `{"model":"openai/x","mock_response":"from x"}`, ""),
		"y1": mustDeployment(t, "y1", "y", `{"model":"openai/y","mock_response":"from y"}`, `{"access_groups":["team-y"]}`),
	})
	b.agents.SetConfig(map[string]*a2a.Agent{"agent-y": mustAgent(t, "agent-y", "agent-y", `{"model":"y"}`)})
	b.addKey("sk-only-x", "x")
	b.addKey("sk-y", "y")
	b.addKey("sk-team-y", "team-y")
	b.addKey("sk-all")

	// the same key is refused on the LLM route
	w := b.do(t, "sk-only-x", "POST", "/v1/chat/completions", `{"model":"y","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, 401, w.Code)
	denied := gjson.Get(w.Body.String(), "error.message").String()
	require.Equal(t, "key not allowed to access model. This key can only access models=['x']. Tried to access y", denied)

	w = b.do(t, "sk-only-x", "POST", "/a2a/agent-y", sendRPC("message/send", "hi"))
	require.Equal(t, 200, w.Code, w.Body.String())
	require.False(t, gjson.Get(w.Body.String(), "result").Exists(), w.Body.String())
	require.Equal(t, int64(a2a.CodeUnauthorized), gjson.Get(w.Body.String(), "error.code").Int())
	require.Equal(t, int64(-31403), gjson.Get(w.Body.String(), "error.code").Int())
	require.Equal(t, denied, gjson.Get(w.Body.String(), "error.message").String())
	require.Equal(t, "key_model_access_denied", gjson.Get(w.Body.String(), "error.data.type").String())
	require.NotContains(t, w.Body.String(), "from y")

	w = b.do(t, "sk-only-x", "POST", "/a2a/agent-y", sendRPC("message/stream", "hi"))
	require.Equal(t, 200, w.Code)
	var last string
	sc := bufio.NewScanner(strings.NewReader(w.Body.String()))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = d
		}
	}
	require.Equal(t, "failed", gjson.Get(last, "result.status.state").String(), w.Body.String())
	require.Equal(t, denied, gjson.Get(last, "result.status.message.parts.0.text").String())
	require.NotContains(t, w.Body.String(), "from y")

	for _, key := range []string{"sk-y", "sk-team-y", "sk-all", "sk-master"} {
		w = b.do(t, key, "POST", "/a2a/agent-y", sendRPC("message/send", "hi"))
		require.Equal(t, 200, w.Code, key)
		require.Equal(t, "from y", gjson.Get(w.Body.String(), "result.parts.0.text").String(), "%s: %s", key, w.Body.String())
	}
}

// The deployment's API key, echoed by the upstream in its error, never reaches a caller of the
// model: not in a plain error, not in a stream.
func TestUpstreamErrorDoesNotLeakAPIKey(t *testing.T) {
	t.Parallel()
	const key = "sk-REALKEY-abcdef0123456789"
	up := fakeupstream.Start(t, fakeupstream.WithStatus(401), fakeupstream.WithErrorMessage("Incorrect API key provided: "+key+". You can find your API key at https://platform.openai.com/account/api-keys."))
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"u1": mustDeployment(t, "u1", "up", fmt.Sprintf(`{"model":"openai/gpt-up","api_base":%q,"api_key":%q}`, "http://u:URLPASS@"+strings.TrimPrefix(up.URL, "http://")+"/v1", key), ""),
	})
	b.agents.SetConfig(map[string]*a2a.Agent{"ag": mustAgent(t, "ag", "ag", `{"model":"up"}`)})
	b.addKey("sk-any")
	for _, req := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"up","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":"up","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"up","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/a2a/ag", sendRPC("message/send", "hi")},
		{"/a2a/ag", sendRPC("message/stream", "hi")},
	} {
		w := b.do(t, "sk-any", "POST", req.path, req.body)
		out, _ := io.ReadAll(w.Body)
		require.Contains(t, string(out), "Incorrect API key provided: sk****6789", "%s %s", req.path, out)
		require.NotContains(t, string(out), "REALKEY", req.path)
		require.NotContains(t, string(out), "URLPASS", req.path)
	}
}

// /model/info masks a password inside a URL (api_base) like any other secret.
func TestModelInfoMasksURLPassword(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.models.SetConfig(map[string]*router.Deployment{
		"u1": mustDeployment(t, "u1", "up", `{"model":"openai/gpt-up","api_base":"http://u:URLPASS@host.invalid/v1","api_key":"sk-123456789012"}`, ""),
	})
	w := b.do(t, "sk-master", "GET", "/model/info", "")
	require.Equal(t, 200, w.Code)
	var got struct {
		Data []struct {
			LitellmParams map[string]any `json:"litellm_params"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	require.Equal(t, "http://u:****@host.invalid/v1", got.Data[0].LitellmParams["api_base"])
	require.Equal(t, "sk****9012", got.Data[0].LitellmParams["api_key"])
	require.NotContains(t, w.Body.String(), "URLPASS")
}

// The readiness body reports the database as connected only while the change feed has a
// connection (config-only: "Not connected").
func TestReadinessWithoutDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.do(t, "", "GET", "/health/readiness", "")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "Not connected", gjson.Get(w.Body.String(), "db").String())
}
