package format

import (
	"errors"
	"fmt"
	"time"
)

// UpstreamError is a failed upstream call: a non-2xx answer, a transport failure, a timeout,
// or a request that cannot be translated for the deployment's provider (400, no call made).
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
	// Local: no upstream was called — the gateway refused the client's request before any call
	// ([BadRequest]); its text is the gateway's own and gets no LiteLLM class prefix.
	Local bool
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("upstream %d: %s", e.Status, e.Message)
}

var ErrTruncated = errors.New("upstream stream ended before completion")

// BadRequest is a 400 returned before any upstream call (the client's request cannot be
// translated or read): Local, so answered with exactly this text.
func BadRequest(format string, args ...any) *UpstreamError {
	return &UpstreamError{Status: 400, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Local: true}
}
