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
