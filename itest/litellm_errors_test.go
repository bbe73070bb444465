package itest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// Issue 19 item 5: an upstream failure is answered as LiteLLM's proxy answers it, the
// upstream's text behind its exception class' prefix (litellm/exceptions.py), in the same
// OpenAI envelope (status, type and code kept), read through the official OpenAI SDK on b for
// models written on a; the gateway's own texts (unknown model) stay as API.md gives them.
func TestLiteLLMErrorPrefixes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings:\n  num_retries: 0\n  cooldown_time: 0\n"})
	oa := openai.NewClient(option.WithBaseURL(p.B.URL+"/v1"), option.WithAPIKey(MasterKey), option.WithMaxRetries(0))
	// an upstream that accepts and drops every connection: no HTTP answer. (A closed port is
	// not used: a parallel test's fake upstream may be given that port again.)
	closed := fakeupstream.Start(t)
	closed.Close()
	drop, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { drop.Close() })
	go func() {
		for {
			c, err := drop.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed.URL = "http://" + drop.Addr().String()
	for _, tc := range []struct {
		name        string
		status      int
		code, msg   string
		latency     time.Duration
		wantStatus  int
		want        string
		extraParams map[string]any
		unreachable bool
	}{
		{name: "le-rate", status: 429, code: "rate_limit_exceeded", msg: "Rate limit reached for m", wantStatus: 429,
			want: "litellm.RateLimitError: Rate limit reached for m"},
		{name: "le-ctx", status: 400, code: "context_length_exceeded", msg: "This model's maximum context length is 8192 tokens.", wantStatus: 400,
			want: "litellm.ContextWindowExceededError: litellm.BadRequestError: This model's maximum context length is 8192 tokens."},
		{name: "le-policy", status: 400, code: "content_policy_violation", msg: "Your request was rejected as a result of our safety system.", wantStatus: 400,
			want: "litellm.BadRequestError: litellm.ContentPolicyViolationError: Your request was rejected as a result of our safety system."},
		{name: "le-bad", status: 400, code: "invalid_value", msg: "Invalid 'temperature'.", wantStatus: 400,
			want: "litellm.BadRequestError: Invalid 'temperature'."},
		{name: "le-auth", status: 401, code: "invalid_api_key", msg: "Incorrect API key provided.", wantStatus: 401,
			want: "litellm.AuthenticationError: Incorrect API key provided."},
		{name: "le-notfound", status: 404, code: "model_not_found", msg: "The model `m` does not exist.", wantStatus: 404,
			want: "litellm.NotFoundError: The model `m` does not exist."},
		{name: "le-ise", status: 500, code: "server_error", msg: "The server had an error.", wantStatus: 500,
			want: "litellm.InternalServerError: The server had an error."},
		{name: "le-unavail", status: 503, code: "overloaded", msg: "The engine is overloaded.", wantStatus: 503,
			want: "litellm.ServiceUnavailableError: The engine is overloaded."},
		{name: "le-timeout", latency: 2 * time.Second, extraParams: map[string]any{"timeout": 0.2}, wantStatus: 504,
			want: "litellm.Timeout: upstream call timed out after 200ms"},
		{name: "le-conn", unreachable: true, wantStatus: 502},
	} {
		up := fakeupstream.Start(t)
		if tc.status != 0 {
			up.FailWith(tc.status, tc.code, tc.msg)
		}
		if tc.latency > 0 {
			up.SetLatency(tc.latency)
		}
		if tc.unreachable {
			up = closed
		}
		rtNewModel(t, p.A, tc.name, tc.name+"-id", up, tc.extraParams)
		Eventually(t, "b knows "+tc.name, func() bool {
			st, b := p.B.Do(t, "GET", "/model/info?litellm_model_id="+tc.name+"-id", nil)
			return st == 200 && len(JSON(t, b)["data"].([]any)) == 1
		})
		_, err := oa.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: tc.name,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var ae *openai.Error
		require.ErrorAs(t, err, &ae, tc.name)
		require.Equal(t, tc.wantStatus, ae.StatusCode, "%s: %s", tc.name, ae.RawJSON())
		if tc.unreachable {
			require.Regexp(t, `^litellm\.APIConnectionError: upstream (call|request) failed: `, ae.Message, tc.name)
			continue
		}
		// LiteLLM's router suffix: the group, and no fallbacks configured
		// LiteLLM's router texts: its hint for a context-window or content-policy error without
		// the fallbacks of that kind, the group, and no fallbacks configured
		hint := ""
		switch tc.name {
		case "le-ctx":
			hint = "\nmodel=le-ctx. context_window_fallbacks=None. fallbacks=None.\n\nSet 'context_window_fallback' - https://docs.litellm.ai/docs/routing#fallbacks"
		case "le-policy":
			hint = "\nmodel=le-policy. content_policy_fallback=None. fallbacks=None.\n\nSet 'content_policy_fallback' - https://docs.litellm.ai/docs/routing#fallbacks"
		}
		require.Equal(t, tc.want+hint+". Received Model Group="+tc.name+"\nAvailable Model Group Fallbacks=None", ae.Message, "%s: %s", tc.name, ae.RawJSON())
		if tc.code != "" {
			require.Equal(t, tc.code, ae.Code, tc.name) // the upstream's code is kept
		}
	}
	// the gateway's own texts are API.md's, without a prefix
	_, err = oa.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "le-ghost",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var ae *openai.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.StatusCode)
	require.Equal(t, fmt.Sprintf("/chat/completions: Invalid model name passed in model=%s. Call /v1/models to view available models for your key.", "le-ghost"), ae.Message)
}
