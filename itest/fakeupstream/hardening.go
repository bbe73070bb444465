package fakeupstream

import (
	"net/http"
	"slices"
	"strings"
)

// WithEchoHeaders makes an injected error (WithStatus, SetStatus, FailNext, and GET /models)
// quote every request header in its message, "... (request headers: Name: value; ...)", as
// some upstreams and proxies echo what they were sent: for redaction tests.
func WithEchoHeaders() Option { return func(c *config) { c.echoHdrs = true } }

// WithRedirect answers every request with status code (a 3xx) and Location target + the
// request's path and query (target: another server's URL): for redirect tests.
func WithRedirect(code int, target string) Option {
	return func(c *config) { c.redirect, c.redirectTo = code, target }
}

// echo appends the request's headers to msg when WithEchoHeaders is set.
func (s *Server) echo(msg string, r *http.Request) string {
	if !s.cfg.echoHdrs {
		return msg
	}
	var parts []string
	for k, vs := range r.Header {
		for _, v := range vs {
			parts = append(parts, k+": "+v)
		}
	}
	slices.Sort(parts)
	return msg + " (request headers: " + strings.Join(parts, "; ") + ")"
}
