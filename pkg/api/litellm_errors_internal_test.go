package api

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/router"
)

// An upstream failure's message carries its LiteLLM exception class' prefix
// (litellm/exceptions.py); one already naming a class (a mock) is kept; a router refusal
// (no deployment) is not prefixed.
func TestLiteLLMErrorPrefixTable(t *testing.T) {
	t.Parallel()
	s := New(Deps{Log: zerolog.Nop()})
	up := func(status int, code, msg string) error {
		return &router.Error{Class: router.Classify(&format.UpstreamError{Status: status, Code: code, Message: msg}),
			Err: &format.UpstreamError{Status: status, Code: code, Message: msg}}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{up(400, "context_length_exceeded", "m"), "litellm.ContextWindowExceededError: litellm.BadRequestError: m"},
		{up(400, "", "This model's maximum context length is 10"), "litellm.ContextWindowExceededError: litellm.BadRequestError: This model's maximum context length is 10"},
		{up(400, "content_policy_violation", "m"), "litellm.BadRequestError: litellm.ContentPolicyViolationError: m"},
		{up(400, "", "m"), "litellm.BadRequestError: m"},
		{up(422, "", "m"), "litellm.BadRequestError: m"},
		{up(401, "", "m"), "litellm.AuthenticationError: m"},
		{up(403, "", "m"), "litellm.PermissionDeniedError: m"},
		{up(404, "", "m"), "litellm.NotFoundError: m"},
		{up(408, "", "m"), "litellm.Timeout: m"},
		{up(504, "", "m"), "litellm.Timeout: m"},
		{up(429, "", "m"), "litellm.RateLimitError: m"},
		{up(500, "", "m"), "litellm.InternalServerError: m"},
		{up(529, "", "m"), "litellm.InternalServerError: m"},
		{up(502, "", "m"), "litellm.BadGatewayError: m"},
		{up(503, "", "m"), "litellm.ServiceUnavailableError: m"},
		{up(501, "", "m"), "litellm.APIError: m"},
		{&format.UpstreamError{Status: 502, Conn: true, Message: "m"}, "litellm.APIConnectionError: m"},
		{&format.UpstreamError{Status: 429, Message: "litellm.RateLimitError: mock"}, "litellm.RateLimitError: mock"},
		// the gateway's own refusal of a request it cannot translate: its text, no prefix
		{format.BadRequest("messages: image URLs cannot be sent to provider gemini"), "messages: image URLs cannot be sent to provider gemini"},
		{&router.NoDeploymentsError{Model: "g"}, "No deployments available for selected model, Try again in 1 seconds. Passed model=g. pre-call-checks=False, cooldown_list=[]"},
	} {
		_, body := render(t, s, "/v1/chat/completions", tc.err)
		require.Equal(t, tc.want, gjson.Get(body, "error.message").Str, body)
		_, body = render(t, s, "/v1/messages", tc.err)
		require.Equal(t, tc.want, gjson.Get(body, "error.message").Str, body)
	}
}
