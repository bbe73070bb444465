package api

import (
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/a2a"
	"lockstep/pkg/format"
	"lockstep/pkg/router"
)

// A client's request refused before any call (*format.RequestError) is answered byte for byte
// as it was when it was a 400 *format.UpstreamError marked Local: status 400, type
// invalid_request_error, exactly its text (no LiteLLM class prefix, also when it failed
// inside a routed call), in each envelope (OpenAI, Anthropic, detail routes); A2A -32603 with
// the error's text, as the former error fell through a2aError.
func TestRequestErrorAnsweredAsTheFormer400UpstreamError(t *testing.T) {
	t.Parallel()
	s := New(Deps{Log: zerolog.Nop()})
	s.detail = map[string]string{"/detail": "things"}
	for _, msg := range []string{
		"messages: image URLs cannot be sent to provider bedrock; send the image as a base64 data: URL",
		"tools: not supported by provider text-completion-openai (a completions model takes a prompt)",
		"input: This model's maximum context length is 10", // classified as a context window, as before
		"litellm.BadRequestError: already prefixed",
	} {
		now := format.BadRequest("%s", msg)
		// the former answer: the error table's for a 400 of that type and text
		was := &Error{Status: 400, Type: "invalid_request_error", Message: msg}
		require.Equal(t, "upstream 400: "+msg, now.Error(), "the former error's text")
		require.Equal(t, router.Classify(&format.UpstreamError{Status: 400, Message: msg, Type: "invalid_request_error"}), router.Classify(now), msg)
		routed := &router.Error{Class: router.Classify(now), Deployment: "d1", Attempts: 1, Err: now}
		for _, err := range []error{now, routed, fmt.Errorf("translate: %w", now)} {
			for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/detail"} {
				wantStatus, wantBody := render(t, s, path, was)
				gotStatus, gotBody := render(t, s, path, err)
				require.Equal(t, wantStatus, gotStatus, path)
				require.Equal(t, wantBody, gotBody, path)
			}
			// A2A: a 400 upstream error fell through a2aError to the handler's -32603
			want := &a2a.Error{Code: a2a.CodeInternalError, Message: "Internal error: " + err.Error()}
			require.Equal(t, want, a2aError(err, &a2a.Agent{Model: "m"}))
		}
	}
	status, body := render(t, s, "/v1/chat/completions", format.BadRequest("input: must be a non-empty string or array"))
	require.Equal(t, 400, status)
	require.Equal(t, `{"error":{"code":"400","message":"input: must be a non-empty string or array","param":null,"type":"invalid_request_error"}}`+"\n", body)
}
