package fakeupstream

import "time"

// SetLatency changes at run time the delay before every answer (added to WithLatency's; 0 =
// none): for latency-based routing and timeout tests.
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// FailWith makes every request fail with HTTP status code and, in the OpenAI error envelope,
// the error code and message given (OpenAI's own: 400 "context_length_exceeded", 400
// "content_policy_violation", 429 "rate_limit_exceeded"); SetStatus(0) ends it.
func (s *Server) FailWith(status int, code, message string) {
	s.errCode.Store(&code)
	s.errMsg.Store(&message)
	s.status.Store(int64(status))
}

// WithStreamErrorAfter makes a streamed chat completion send n frames, then OpenAI's
// mid-stream error event, data: {"error": {"message": msg, "type": typ, "param": null,
// "code": code}}, and end there (no finish chunk, no [DONE]); code is a status or a word.
func WithStreamErrorAfter(n int, code any, typ, msg string) Option {
	return func(c *config) {
		c.errAfter = max(n, 1)
		c.errEvent = map[string]any{"message": msg, "type": typ, "param": nil, "code": code}
	}
}
