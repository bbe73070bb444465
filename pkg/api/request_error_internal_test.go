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
// as it was when it was a 400 *format.UpstreamError of type invalid_request_error: status,
// envelope (OpenAI, Anthropic, detail routes), the LiteLLM prefix applied only when it failed
// inside a routed call, and A2A's -32603.
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
		was := &format.UpstreamError{Status: 400, Message: msg, Type: "invalid_request_error"}
		now := format.BadRequest("%s", msg)
		require.Equal(t, was.Error(), now.Error())
		routed := func(err error) error {
			return &router.Error{Class: router.Classify(err), Deployment: "d1", Attempts: 1, Err: err}
		}
		require.Equal(t, router.Classify(was), router.Classify(now), msg)
		for _, pair := range [][2]error{
			{was, now},
			{routed(was), routed(now)},
			{fmt.Errorf("translate: %w", was), fmt.Errorf("translate: %w", now)},
		} {
			for _, path := range []string{"/v1/chat/completions", "/v1/messages", "/detail"} {
				wantStatus, wantBody := render(t, s, path, pair[0])
				gotStatus, gotBody := render(t, s, path, pair[1])
				require.Equal(t, wantStatus, gotStatus, path)
				require.Equal(t, wantBody, gotBody, path)
			}
			// A2A: a 400 upstream error fell through a2aError to the handler's -32603
			want := &a2a.Error{Code: a2a.CodeInternalError, Message: "Internal error: " + pair[0].Error()}
			require.Equal(t, pair[0], a2aError(pair[0], &a2a.Agent{Model: "m"}), "the former error passed through")
			require.Equal(t, want, a2aError(pair[1], &a2a.Agent{Model: "m"}))
		}
	}
}
