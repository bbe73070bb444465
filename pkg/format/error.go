package format

import (
	"errors"
	"fmt"
	"time"
)

// UpstreamError is a failed upstream call: a non-2xx answer, a transport failure or a
// timeout (and pkg/router's refusal of a group none of whose deployments serves the route:
// 400, no call made). A client's request refused before any call is a [RequestError].
type UpstreamError struct {
	// Status is the upstream HTTP status; 502 for transport failures and unparsable answers,
	// 504 for timeouts.
	Status int
	// Message is a readable text: the upstream's error.message (OpenAI and Anthropic), message
	// or detail (vLLM, FastAPI), else the start of the body or the status text.
	Message string
	// Type is the upstream's error.type when it sent one (e.g. "rate_limit_error").
	Type string
	// Code is the upstream's error.code when it sent one (OpenAI: "context_length_exceeded",
	// "content_policy_violation", "rate_limit_exceeded"); "" when none. The error envelope
	// keeps it; without one the envelope's code is the status (API.md "LLM routes").
	Code string
	// Body is the upstream error body (at most 64 KiB), nil when there was none.
	Body []byte
	// Retryable is true for 408, 409, 429, 5xx, transport failures and timeouts: another
	// attempt (or another deployment) may succeed.
	Retryable bool
	// RetryAfter is the upstream's Retry-After (or retry-after-ms) hint, 0 when absent.
	RetryAfter time.Duration
	// Conn: the upstream gave no HTTP answer (the connection failed or broke), Status is 502;
	// LiteLLM's APIConnectionError.
	Conn bool
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("upstream %d: %s", e.Status, e.Message)
}

var ErrTruncated = errors.New("upstream stream ended before completion")

// RequestError is a client's request refused before any upstream call: the body is invalid
// for its route, or cannot be translated for the deployment's provider. It never reached an
// upstream, so it is not an [UpstreamError]: pkg/api's error table answers it with HTTP 400,
// type invalid_request_error and exactly its Message (the gateway's own text: no LiteLLM
// class prefix; A2A -32603); the router classifies it as a 400 (pkg/router.Classify: not
// retryable, LiteLLM's BadRequestError policy entry); pkg/provider redacts it like an
// upstream's message.
type RequestError struct {
	// Message names what was wrong ("messages: image URLs cannot be sent to provider x; ...").
	Message string
}

// Error is the text this error had as a 400 UpstreamError, kept byte-identical (span status,
// cooldown reasons and A2A's -32603 message show it).
func (e *RequestError) Error() string { return "upstream 400: " + e.Message }

// Status is the HTTP status the request is answered with: 400.
func (e *RequestError) Status() int { return 400 }

// BadRequest is a [RequestError] returned before any upstream call (the client's request is
// invalid or cannot be translated); format and args as fmt.Sprintf.
func BadRequest(format string, args ...any) *RequestError {
	return &RequestError{Message: fmt.Sprintf(format, args...)}
}
