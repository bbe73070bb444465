package itest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

func newModelBody(name string, up *fakeupstream.Server) map[string]any {
	return map[string]any{
		"model_name":     name,
		"litellm_params": map[string]any{"model": "openai/gpt-up", "api_base": up.URL + "/v1", "api_key": "sk-upstream-secret"},
	}
}

func chatBody(model, text string, stream bool) map[string]any {
	return map[string]any{"model": model, "stream": stream, "messages": []map[string]any{{"role": "user", "content": text}}}
}

// sseText joins the content deltas of an OpenAI chat SSE stream and checks it ends with [DONE].
func sseText(t *testing.T, body []byte) string {
	t.Helper()
	var out strings.Builder
	done := false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		m := JSON(t, []byte(data))
		require.NotContains(t, m, "error", "stream error: %s", data)
		for _, c := range m["choices"].([]any) {
			if d, ok := c.(map[string]any)["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					out.WriteString(s)
				}
			}
		}
	}
	require.True(t, done, "stream did not end with [DONE]: %s", body)
	return out.String()
}

// The main job: a model created on A is served by B on the very next call, 200 times in a
// row, without any wait between the two calls; then the same with streaming.
func TestCreateOnAServeOnBImmediately(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	for _, stream := range []bool{false, true} {
		for i := range 200 {
			name := fmt.Sprintf("model-%v-%d", stream, i)
			st, b := p.A.Do(t, "POST", "/model/new", newModelBody(name, up))
			require.Equal(t, 200, st, "create %s: %s", name, b)
			st, b = p.B.Do(t, "POST", "/v1/chat/completions", chatBody(name, "ping "+name, stream))
			require.Equal(t, 200, st, "round %d (stream=%v) on B: %s", i, stream, b)
			want := "fake reply to: ping " + name
			if stream {
				require.Equal(t, want, sseText(t, b))
			} else {
				m := JSON(t, b)
				require.Equal(t, want, m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"])
			}
		}
	}
	// the upstream saw the real upstream model name and key, never the group name
	r, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Contains(t, string(r.Body), `"gpt-up"`)
	require.Equal(t, "Bearer sk-upstream-secret", r.Header.Get("Authorization"))
}

func TestOpenAISDKOnB(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	client := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	ctx := context.Background()
	for i := range 25 {
		name := fmt.Sprintf("sdk-model-%d", i)
		st, b := p.A.Do(t, "POST", "/model/new", newModelBody(name, up))
		require.Equal(t, 200, st, "%s", b)
		res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    name,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello " + name)},
		})
		require.NoError(t, err, "round %d", i)
		require.Equal(t, "fake reply to: hello "+name, res.Choices[0].Message.Content)

		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    name,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream " + name)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		require.NoError(t, stream.Err())
		require.Equal(t, "fake reply to: stream "+name, acc.Choices[0].Message.Content)
	}
	// unknown model through the SDK: a 400 with the exact text
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "no-such-model", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	})
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.StatusCode)
	require.Contains(t, apiErr.Message, "/chat/completions: Invalid model name passed in model=no-such-model.")
}

func TestUnknownModelOnBIsNegativeCached(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	want := "/chat/completions: Invalid model name passed in model=ghost. Call /v1/models to view available models for your key."
	before := p.B.ReadThrough(t, "models")
	for range 10 {
		st, b := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("ghost", "x", false))
		require.Equal(t, 400, st)
		e := JSON(t, b)["error"].(map[string]any)
		require.Equal(t, want, e["message"])
		require.Equal(t, "400", e["code"])
	}
	after := p.B.ReadThrough(t, "models")
	// one DB read (not found), the other misses answered by the 2 s negative cache
	require.Equal(t, before["not_found"]+1, after["not_found"], "%v", after)
	require.GreaterOrEqual(t, after["negative_hits"]-before["negative_hits"], 8.0, "%v", after)
	require.Equal(t, before["budget_exhausted"], after["budget_exhausted"])

	// every route names itself in the message
	for path, prefix := range map[string]string{"/v1/responses": "/responses", "/v1/embeddings": "/embeddings", "/v1/messages": "anthropic_messages"} {
		st, b := p.B.Do(t, "POST", path, map[string]any{"model": "ghost", "input": "x", "max_tokens": 5, "messages": []any{}})
		require.Equal(t, 400, st, "%s: %s", path, b)
		require.Contains(t, string(b), prefix+": Invalid model name passed in model=ghost.")
	}
}

func TestDeleteOnAStopsBAndLagIsReported(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	body := map[string]any{"model_name": "doomed", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "still here"}}
	st, b := p.A.Do(t, "POST", "/model/new", body)
	require.Equal(t, 200, st, "%s", b)
	id := JSON(t, b)["model_id"].(string)
	st, _ = p.B.Do(t, "POST", "/v1/chat/completions", chatBody("doomed", "x", false))
	require.Equal(t, 200, st)
	before := p.B.SyncLag(t)["events_applied"].(float64)

	st, b = p.A.Do(t, "POST", "/model/delete", map[string]any{"id": id})
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "Model: "+id+" deleted successfully", JSON(t, b)["message"])
	// on A at once (writer-local apply), on B once the notification is applied
	st, _ = p.A.Do(t, "POST", "/v1/chat/completions", chatBody("doomed", "x", false))
	require.Equal(t, 400, st)
	Eventually(t, "B stops serving the deleted model", func() bool {
		st, _ := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("doomed", "x", false))
		return st == 400
	})
	lag := p.B.SyncLag(t)
	require.Greater(t, lag["events_applied"].(float64), before)
	require.Positive(t, lag["lag_ms"].(map[string]any)["samples"].(float64))
	require.Equal(t, "streaming", lag["state"])
}

func TestModelWrittenWithPSQLIsServedByBoth(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{})
	PSQL(t, p.DB, `INSERT INTO gateway.models (model_id, model_name, litellm_params, model_info)
		VALUES ('psql-1', 'from-psql', jsonb_build_object('model', 'openai/gpt-up', 'api_base', $1::text, 'api_key', 'k'), '{"id":"psql-1"}')`, up.URL+"/v1")
	for _, g := range []*Gateway{p.A, p.B} {
		st, b := g.Do(t, "POST", "/v1/chat/completions", chatBody("from-psql", "hi", false))
		require.Equal(t, 200, st, "%s: %s", g.ReplicaID, b)
	}
	// and it shows in /model/info with db_model
	st, b := p.B.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st)
	require.Contains(t, string(b), `"db_model":true`)
	require.Contains(t, string(b), `"from-psql"`)
}

func TestModelUpdateAndSecretsMasked(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	body := map[string]any{"model_name": "upd", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "v1", "api_key": "sk-very-secret-key"}}
	st, b := p.A.Do(t, "POST", "/model/new", body)
	require.Equal(t, 200, st, "%s", b)
	require.NotContains(t, string(b), "sk-very-secret-key")
	id := JSON(t, b)["model_id"].(string)

	st, b = p.A.Do(t, "PATCH", "/model/"+id+"/update", map[string]any{"litellm_params": map[string]any{"mock_response": "v2"}})
	require.Equal(t, 200, st, "%s", b)
	Eventually(t, "B serves v2", func() bool {
		_, b := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("upd", "x", false))
		return strings.Contains(string(b), `"v2"`)
	})
	st, b = p.B.Do(t, "POST", "/model/update", map[string]any{"model_info": map[string]any{"id": id}, "litellm_params": map[string]any{"mock_response": "v3"}})
	require.Equal(t, 200, st, "%s", b)
	// PATCH/POST merged: the api key survived
	var n int
	_ = n
	st, b = p.A.Do(t, "GET", "/model/info?litellm_model_id="+id, nil)
	require.Equal(t, 200, st)
	require.NotContains(t, string(b), "sk-very-secret-key")
	Eventually(t, "A sees v3 and still masks the kept key", func() bool {
		_, b := p.A.Do(t, "GET", "/model/info?litellm_model_id="+id, nil)
		return strings.Contains(string(b), `"v3"`) && strings.Contains(string(b), `"api_key":"sk****-key"`)
	})

	// an invalid update is refused and the serving version keeps serving
	st, b = p.A.Do(t, "PATCH", "/model/"+id+"/update", map[string]any{"litellm_params": map[string]any{"model": "nosuchprovider/x"}})
	require.Equal(t, 400, st, "%s", b)
	_, b = p.B.Do(t, "POST", "/v1/chat/completions", chatBody("upd", "x", false))
	require.Contains(t, string(b), `"v3"`)
}

func TestConfigModelsCannotBeEdited(t *testing.T) {
	t.Parallel()
	cfg := `
model_list:
  - model_name: cfg-model
    litellm_params:
      model: openai/cfg
      mock_response: from config
    model_info:
      id: cfg-1
`
	p := StartPair(t, GatewayOpts{Config: cfg})
	st, b := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("cfg-model", "x", false))
	require.Equal(t, 200, st, "%s", b)
	st, b = p.A.Do(t, "POST", "/model/update", map[string]any{"model_info": map[string]any{"id": "cfg-1"}, "litellm_params": map[string]any{"mock_response": "x"}})
	require.Equal(t, 400, st)
	require.Equal(t, "Can't edit model. Model in config. Store model in db via `/model/new`. to edit.", JSON(t, b)["error"].(map[string]any)["message"])
	st, _ = p.A.Do(t, "POST", "/model/delete", map[string]any{"id": "cfg-1"})
	require.Equal(t, 400, st)
	// a DB row with the same id written by psql never replaces the config model
	PSQL(t, p.DB, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('cfg-1', 'cfg-model', '{"model":"openai/cfg","mock_response":"from db"}')`)
	PSQL(t, p.DB, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('marker', 'marker', '{"model":"openai/m","mock_response":"m"}')`)
	Eventually(t, "marker applied", func() bool {
		st, _ := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("marker", "x", false))
		return st == 200
	})
	_, b = p.B.Do(t, "POST", "/v1/chat/completions", chatBody("cfg-model", "x", false))
	require.Contains(t, string(b), "from config")
}

func TestBadInputsStoreNothing(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	cases := []struct {
		name, body string
		status     int
		msg        string
	}{
		{"malformed JSON", `{"model_name": "x", `, 400, "malformed JSON"},
		{"missing model_name", `{"litellm_params": {"model": "openai/x"}}`, 400, "model_name is required"},
		{"missing litellm_params", `{"model_name": "x"}`, 400, "litellm_params is required"},
		{"unknown provider", `{"model_name": "x", "litellm_params": {"model": "nosuch/x"}}`, 400, `unknown provider "nosuch"`},
		{"bad api_base", `{"model_name": "x", "litellm_params": {"model": "openai/x", "api_base": "ftp://x"}}`, 400, "api_base"},
	}
	for _, c := range cases {
		st, b := p.A.Do(t, "POST", "/model/new", c.body)
		require.Equal(t, c.status, st, "%s: %s", c.name, b)
		require.Contains(t, JSON(t, b)["error"].(map[string]any)["message"], c.msg, c.name)
	}
	st, b := p.A.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st)
	require.Empty(t, JSON(t, b)["data"], "a refused write left a trace")

	// a virtual key on an admin route is refused, nothing stored
	st, b = p.A.Do(t, "POST", "/key/generate", map[string]any{})
	require.Equal(t, 200, st, "%s", b)
	vk := JSON(t, b)["key"].(string)
	st, _ = p.B.DoKey(t, vk, "POST", "/model/new", `{"model_name": "y", "litellm_params": {"model": "openai/y"}}`)
	require.Equal(t, 403, st)
	st, _ = p.B.DoKey(t, "", "POST", "/model/new", `{"model_name": "y", "litellm_params": {"model": "openai/y"}}`)
	require.Equal(t, 401, st)
	_, b = p.A.Do(t, "GET", "/model/info", nil)
	require.Empty(t, JSON(t, b)["data"])

	// LLM route bad inputs
	st, _ = p.B.Do(t, "POST", "/v1/chat/completions", `{"model": `)
	require.Equal(t, 400, st)
	req, _ := http.NewRequest("POST", p.B.URL+"/v1/chat/completions", strings.NewReader(strings.Repeat("x", 40<<20)))
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	resp, err := httpClient.Do(req)
	if err == nil {
		require.Equal(t, 413, resp.StatusCode)
		resp.Body.Close()
	}
}

// An invalid row written by another tool never replaces the serving deployment; the replica
// counts it in apply_errors and picks up the next valid version.
func TestInvalidRowFromPSQLKeepsServingVersion(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "sturdy", "model_info": map[string]any{"id": "sturdy-1"},
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "good version"}})
	require.Equal(t, 200, st, "%s", b)
	// B must be serving the good version before it is broken: under load B's re-read of the
	// insert can otherwise land after the UPDATE, and B never held a version to keep.
	Eventually(t, "B serves the good version", func() bool {
		_, b := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("sturdy", "x", false))
		return strings.Contains(string(b), "good version")
	})
	PSQL(t, p.DB, `UPDATE gateway.models SET litellm_params = '{"model":"nosuch/x"}' WHERE model_id = 'sturdy-1'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" counts the apply error", func() bool { return g.SyncLag(t)["apply_errors"].(float64) >= 1 })
		st, b := g.Do(t, "POST", "/v1/chat/completions", chatBody("sturdy", "x", false))
		require.Equal(t, 200, st, "%s", b)
		require.Contains(t, string(b), "good version")
	}
	PSQL(t, p.DB, `UPDATE gateway.models SET litellm_params = '{"model":"openai/x","mock_response":"fixed version"}' WHERE model_id = 'sturdy-1'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" serves the fixed version", func() bool {
			_, b := g.Do(t, "POST", "/v1/chat/completions", chatBody("sturdy", "x", false))
			return strings.Contains(string(b), "fixed version")
		})
	}
}

// supported_db_objects gates every DB path per type: with only models synced, a guardrail
// row in Postgres is never loaded (initial load, notification or read-through) and the
// guardrail API refuses to store one.
func TestSupportedDBObjectsGatesEveryPath(t *testing.T) {
	t.Parallel()
	db := pgtestNewMigratedDB(t)
	PSQL(t, db, `INSERT INTO gateway.guardrails (guardrail_id, guardrail_name, litellm_params) VALUES ('g0', 'before-start',
		'{"guardrail":"litellm_content_filter","mode":"pre_call","blocked_words":[{"keyword":"x","action":"BLOCK"}]}')`)
	cfg := "general_settings:\n  supported_db_objects: [models]\n"
	a := StartGateway(t, db, "a", GatewayOpts{Config: cfg})
	PSQL(t, db, `INSERT INTO gateway.guardrails (guardrail_id, guardrail_name, litellm_params) VALUES ('g1', 'after-start',
		'{"guardrail":"litellm_content_filter","mode":"pre_call","blocked_words":[{"keyword":"x","action":"BLOCK"}]}')`)
	// a model written after the guardrail is applied, so the guardrail notification was seen too
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('m', 'gated', '{"model":"openai/x","mock_response":"ok"}')`)
	Eventually(t, "model applied", func() bool {
		return a.SyncLag(t)["registries"].(map[string]any)["models"].(map[string]any)["count"].(float64) == 1
	})
	for _, name := range []string{"before-start", "after-start"} {
		st, b := a.Do(t, "POST", "/guardrails/apply_guardrail", map[string]any{"guardrail_name": name, "text": "x"})
		require.Equal(t, 404, st, "%s: %s", name, b)
	}
	lag := a.SyncLag(t)
	require.Zero(t, lag["registries"].(map[string]any)["guardrails"].(map[string]any)["count"].(float64))
	require.Zero(t, a.ReadThrough(t, "guardrails")["attempts"], "no read-through for an unsupported type")
	st, b := a.Do(t, "POST", "/guardrails", map[string]any{"guardrail": map[string]any{"guardrail_name": "nope",
		"litellm_params": map[string]any{"guardrail": "litellm_content_filter", "mode": "pre_call"}}})
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "supported_db_objects")
}

// The logical replication source passes the same end-to-end flow as LISTEN/NOTIFY.
func TestLogicalSourceReplicas(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	p := StartPair(t, GatewayOpts{Args: []string{"--sync-source", "logical"}})
	for _, g := range []*Gateway{p.A, p.B} {
		require.Equal(t, "logical", g.SyncLag(t)["source"])
	}
	for i := range 50 {
		name := fmt.Sprintf("logical-%d", i)
		st, b := p.A.Do(t, "POST", "/model/new", newModelBody(name, up))
		require.Equal(t, 200, st, "%s", b)
		st, b = p.B.Do(t, "POST", "/v1/chat/completions", chatBody(name, "x", i%2 == 1))
		require.Equal(t, 200, st, "round %d: %s", i, b)
	}
	PSQL(t, p.DB, `DELETE FROM gateway.models WHERE model_name = 'logical-0'`)
	Eventually(t, "delete streamed to B", func() bool {
		st, _ := p.B.Do(t, "POST", "/v1/chat/completions", chatBody("logical-0", "x", false))
		return st == 400
	})
	lag := p.B.SyncLag(t)
	require.Equal(t, "streaming", lag["state"])
	require.Positive(t, lag["events_applied"].(float64))
}
