package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 19 item 11: a comma-separated model on /chat/completions is LiteLLM's batch completion
// across models (route_llm_request → Router.abatch_completion), for models written on a and
// called on b: a list in the names' order, each element that model's completion or its error
// (an unknown name, a model the key may not use) in the OpenAI envelope; fastest_response
// answers the first success alone; a streamed batch is refused.
func TestBatchCompletionAcrossModels(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t)
	createModel(t, p.A, "bc-a", map[string]any{"model": "openai/m", "mock_response": "from a"})
	createModel(t, p.A, "bc-b", map[string]any{"model": "openai/m", "api_base": up.URL + "/v1", "api_key": "k"})
	key := agGenKey(t, p.A, "bc-a")
	Eventually(t, "b knows bc-a and bc-b and the key", func() bool {
		st, _, _ := fbChat(t, p.B, MasterKey, map[string]any{"model": "bc-b"}, nil)
		st2, _, _ := fbChat(t, p.B, key, map[string]any{"model": "bc-a"}, nil)
		return st == 200 && st2 == 200
	})

	st, _, b := fbChat(t, p.B, MasterKey, map[string]any{"model": "bc-a, bc-b,bc-ghost"}, nil)
	require.Equal(t, 200, st, "%s", b)
	list := gjson.ParseBytes(b)
	require.True(t, list.IsArray(), "%s", b)
	require.Len(t, list.Array(), 3, "%s", b)
	require.Equal(t, "from a", list.Get("0.choices.0.message.content").Str, "%s", b)
	require.Equal(t, "chat.completion", list.Get("1.object").Str, "%s", b)
	require.NotEmpty(t, list.Get("1.choices.0.message.content").Str, "%s", b)
	req, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "m", gjson.GetBytes(req.Body, "model").Str) // one model per upstream call
	require.Equal(t, "/chat/completions: Invalid model name passed in model=bc-ghost. Call /v1/models to view available models for your key.",
		list.Get("2.error.message").Str, "%s", b)
	require.Equal(t, "400", list.Get("2.error.code").Str)

	// each model goes through the key's access check
	st, _, b = fbChat(t, p.B, key, map[string]any{"model": "bc-a,bc-b"}, nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "from a", gjson.GetBytes(b, "0.choices.0.message.content").Str, "%s", b)
	require.Equal(t, "key_model_access_denied", gjson.GetBytes(b, "1.error.type").Str, "%s", b)

	// fastest_response: the first success, alone; not sent upstream
	st, _, b = fbChat(t, p.B, MasterKey, map[string]any{"model": "bc-ghost,bc-b", "fastest_response": true}, nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "chat.completion", gjson.GetBytes(b, "object").Str, "%s", b)
	req, _ = up.LastRequest("/v1/chat/completions")
	require.False(t, gjson.GetBytes(req.Body, "fastest_response").Exists(), "%s", req.Body)
	// every call failing: the first name's error
	st, _, b = fbChat(t, p.B, MasterKey, map[string]any{"model": "bc-ghost,bc-ghost2", "fastest_response": true}, nil)
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, fbErr(t, b)["message"], "model=bc-ghost.")

	st, _, b = fbChat(t, p.B, MasterKey, map[string]any{"model": "bc-a,bc-b", "stream": true}, nil)
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, "stream: a comma-separated model (batch completion) is answered as a list and cannot be streamed", fbErr(t, b)["message"])
}

// Issue 19 item 11: /moderations without a model uses LiteLLM's default moderation model
// (omni-moderation-latest; general_settings.moderation_model wins over any request's model);
// /v2/model/info?model= lists that group's deployments only; /model_group/info lists a
// provider wildcard group (anthropic/*) as the concrete models its provider serves (its GET
// /models), for models written on a, read on b.
func TestModerationDefaultModelInfoFilterWildcardGroups(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t)
	ant := fakeupstream.Start(t, fakeupstream.WithModels("claude-a", "claude-b"))
	createModel(t, p.A, "omni-moderation-latest", map[string]any{"model": "openai/omni-moderation-latest", "api_base": up.URL + "/v1", "api_key": "k"})
	rtNewModel(t, p.A, "mi-a", "mi-a-1", up, nil)
	rtNewModel(t, p.A, "mi-a", "mi-a-2", up, nil)
	rtNewModel(t, p.A, "mi-b", "mi-b-1", up, nil)
	createModel(t, p.A, "anthropic/*", map[string]any{"model": "anthropic/*", "api_base": ant.URL, "api_key": "sk-ant"})
	Eventually(t, "b knows every model", func() bool {
		st, b := p.B.Do(t, "GET", "/v2/model/info", nil)
		return st == 200 && len(JSON(t, b)["data"].([]any)) == 5
	})

	st, _, b := postAs(t, p.B, MasterKey, "/v1/moderations", map[string]any{"input": "hello"}, nil)
	require.Equal(t, 200, st, "%s", b)
	req, ok := up.LastRequest("/v1/moderations")
	require.True(t, ok)
	require.Equal(t, "omni-moderation-latest", gjson.GetBytes(req.Body, "model").Str)

	st, b = p.B.Do(t, "GET", "/v2/model/info?model=mi-a", nil)
	require.Equal(t, 200, st, "%s", b)
	var ids []string
	for _, d := range gjson.GetBytes(b, "data").Array() {
		ids = append(ids, d.Get("model_info.id").Str)
	}
	require.Equal(t, []string{"mi-a-1", "mi-a-2"}, ids)

	st, b = p.B.Do(t, "GET", "/model_group/info", nil)
	require.Equal(t, 200, st, "%s", b)
	var groups []string
	for _, g := range gjson.GetBytes(b, "data").Array() {
		groups = append(groups, g.Get("model_group").Str)
	}
	require.Equal(t, []string{"anthropic/claude-a", "anthropic/claude-b", "mi-a", "mi-b", "omni-moderation-latest"}, groups)
	st, b = p.B.Do(t, "GET", "/model_group/info?model_group=anthropic/claude-b", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "anthropic/claude-b", gjson.GetBytes(b, "data.0.model_group").Str, "%s", b)
	require.Equal(t, []any{"anthropic"}, JSON(t, b)["data"].([]any)[0].(map[string]any)["providers"])

	// general_settings.moderation_model is used whatever the request names
	g := StartGateway(t, "", "mod", GatewayOpts{Env: []string{"DATABASE_URL="}, Config: `general_settings:
  moderation_model: mod-fixed
model_list:
  - model_name: mod-fixed
    litellm_params: {model: openai/text-moderation-stable, api_base: ` + up.URL + `/v1, api_key: k}
`})
	for _, body := range []map[string]any{{"input": "x"}, {"input": "x", "model": "omni-moderation-latest"}} {
		st, _, b = postAs(t, g, MasterKey, "/v1/moderations", body, nil)
		require.Equal(t, 200, st, "%s", b)
		req, _ = up.LastRequest("/v1/moderations")
		require.Equal(t, "text-moderation-stable", gjson.GetBytes(req.Body, "model").Str)
	}
}
