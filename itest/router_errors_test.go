package itest

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// LiteLLM's router texts and headers on a call that failed in the router (litellm/router.py
// async_function_with_fallbacks_common_utils, router_utils/add_retry_fallback_headers.py),
// read through the official OpenAI SDK on b for models written on a: the first failure is
// answered (status and code its own) with ". Received Model Group=<g>\nAvailable Model Group
// Fallbacks=<list or None>" and, when a fallback was called and failed, "\nError doing the
// fallback: <its message>"; a group the fallbacks do not name gets LiteLLM's "No fallback
// model group found" note, repeated as the fallback error; x-litellm-attempted-fallbacks is
// on the failure too, also after a region fallback.
func TestRouterErrorTexts(t *testing.T) {
	t.Parallel()
	cfg := "router_settings:\n  num_retries: 0\n  cooldown_time: 0\n  fallbacks: [{re-a: [re-b]}, {re-us: [re-eu]}]\n"
	p := StartPair(t, GatewayOpts{Config: cfg})
	down, over, ok := fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t)
	down.FailWith(500, "server_error", "a exploded")
	over.FailWith(503, "overloaded", "b overloaded")
	rtNewModel(t, p.A, "re-a", "re-a-id", down, nil)
	rtNewModel(t, p.A, "re-b", "re-b-id", over, nil)
	rtNewModel(t, p.A, "re-x", "re-x-id", down, nil)
	rtNewModel(t, p.A, "re-us", "re-us-id", ok, map[string]any{"region_name": "us-east-1"})
	rtNewModel(t, p.A, "re-eu", "re-eu-id", over, map[string]any{"region_name": "eu-west-1"})
	st, b := p.A.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "re-cust", "allowed_model_region": "eu"})
	require.Equal(t, 200, st, "%s", b)
	Eventually(t, "b knows every model", func() bool {
		st, b := p.B.Do(t, "GET", "/model/info", nil)
		return st == 200 && len(JSON(t, b)["data"].([]any)) == 5
	})
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	call := func(model string, opts ...option.RequestOption) *openai.Error {
		t.Helper()
		_, err := oa.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}, opts...)
		var ae *openai.Error
		require.ErrorAs(t, err, &ae, model)
		return ae
	}

	// its fallback called and failed too
	ae := call("re-a")
	require.Equal(t, 500, ae.StatusCode, "%s", ae.RawJSON())
	require.Equal(t, "server_error", ae.Code, "the first failure's code")
	require.Equal(t, "litellm.InternalServerError: a exploded. Received Model Group=re-a\nAvailable Model Group Fallbacks=['re-b']\n"+
		"Error doing the fallback: litellm.ServiceUnavailableError: b overloaded", ae.Message)
	require.Equal(t, "1", ae.Response.Header.Get("x-litellm-attempted-fallbacks"))
	require.Equal(t, "re-a-id", ae.Response.Header.Get("x-litellm-model-id"), "the first call's headers")

	// the request's own fallbacks (LiteLLM lists none as available for them)
	ae = call("re-x", option.WithJSONSet("fallbacks", []string{"re-b"}))
	require.Equal(t, "litellm.InternalServerError: a exploded. Received Model Group=re-x\nAvailable Model Group Fallbacks=None\n"+
		"Error doing the fallback: litellm.ServiceUnavailableError: b overloaded", ae.Message)
	require.Equal(t, "1", ae.Response.Header.Get("x-litellm-attempted-fallbacks"))

	// fallbacks are set, but none for the group
	ae = call("re-x")
	base := "litellm.InternalServerError: a exploded" + "No fallback model group found for original model_group=re-x. Fallbacks=[{'re-a': ['re-b']}, {'re-us': ['re-eu']}]"
	require.Equal(t, base+". Received Model Group=re-x\nAvailable Model Group Fallbacks=None\nError doing the fallback: "+base, ae.Message)
	require.Equal(t, "0", ae.Response.Header.Get("x-litellm-attempted-fallbacks"))

	// a region miss falls back, the fallback fails: the header is on the failure as well
	Eventually(t, "b knows the end user", func() bool {
		st, _, _ := fbChat(t, p.B, MasterKey, map[string]any{"model": "re-us", "user": "re-cust"}, nil)
		return st == 429
	})
	ae = call("re-us", option.WithJSONSet("user", "re-cust"))
	require.Equal(t, 429, ae.StatusCode, "%s", ae.RawJSON())
	require.Equal(t, "1", ae.Response.Header.Get("x-litellm-attempted-fallbacks"))
}

// An upstream's error event in the middle of a stream reaches the client as LiteLLM's proxy
// sends it (proxy_server.py async_data_generator): data: {"error": {"message":
// "litellm.MidStreamFallbackError: litellm.<Class>: <text>", "type", "param", "code":
// "<status>"}} after the chunks already sent, read by the official OpenAI SDK on b, which
// raises it; a connection cut mid-stream is worded the same way.
func TestMidStreamErrorText(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings:\n  num_retries: 0\n  cooldown_time: 0\n"})
	rate := fakeupstream.Start(t, fakeupstream.WithStreamChunks(6), fakeupstream.WithStreamErrorAfter(2, 429, "rate_limit_error", "Rate limit reached mid-stream"))
	word := fakeupstream.Start(t, fakeupstream.WithStreamChunks(6), fakeupstream.WithStreamErrorAfter(2, "server_error", "server_error", "The server had an error"))
	cut := fakeupstream.Start(t, fakeupstream.WithStreamChunks(6), fakeupstream.WithStreamCutAfter(2))
	rtNewModel(t, p.A, "ms-rate", "ms-rate-id", rate, nil)
	rtNewModel(t, p.A, "ms-word", "ms-word-id", word, nil)
	rtNewModel(t, p.A, "ms-cut", "ms-cut-id", cut, nil)
	Eventually(t, "b knows the models", func() bool {
		st, b := p.B.Do(t, "GET", "/model/info", nil)
		return st == 200 && len(JSON(t, b)["data"].([]any)) == 3
	})
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	for _, c := range []struct{ model, want string }{
		{"ms-rate", "litellm.MidStreamFallbackError: litellm.RateLimitError: Rate limit reached mid-stream"},
		{"ms-word", "litellm.MidStreamFallbackError: litellm.InternalServerError: The server had an error"},
	} {
		s := oa.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: c.model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		chunks := 0
		for s.Next() {
			chunks++
		}
		require.Positive(t, chunks, "%s: the chunks before the error arrive", c.model)
		// the SDK raises the error event (ssestream: "received error while streaming: <error>")
		require.Error(t, s.Err(), c.model)
		require.Contains(t, s.Err().Error(), `"message":"`+c.want+`"`, c.model)
	}
	// the raw frame: LiteLLM's ProxyException shape, code the status as a string
	st, _, body := fbChat(t, p.B, MasterKey, map[string]any{"model": "ms-rate", "stream": true}, nil)
	require.Equal(t, 200, st)
	require.Contains(t, string(body), `data: {"error":{"message":"litellm.MidStreamFallbackError: litellm.RateLimitError: Rate limit reached mid-stream","type":"rate_limit_error","param":null,"code":"429"}}`)
	require.NotContains(t, string(body), "data: [DONE]")

	st, _, body = fbChat(t, p.B, MasterKey, map[string]any{"model": "ms-cut", "stream": true}, nil)
	require.Equal(t, 200, st)
	require.Contains(t, string(body), `data: {"error":{"message":"litellm.MidStreamFallbackError: litellm.APIConnectionError: `, "%s", body)
}
