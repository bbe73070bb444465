package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// StatusClientClosedRequest is the status a request is logged and counted with when its
// client hung up before the answer was complete (nginx's 499 "client closed request"). It is
// never a 5xx: the gateway did nothing wrong (API.md "Security rules").
const StatusClientClosedRequest = 499

// errBodyTooLarge is what a read of a request body past MaxBodyBytes fails with (front's
// limitedReader). The request is answered 413 whatever the handler made of the error (see
// serveRecovering).
var errBodyTooLarge = echo.ErrStatusRequestEntityTooLarge

// bodyTooLarge reports whether err says the body limit was passed: a read past it
// (errBodyTooLarge, *http.MaxBytesError) or a Content-Length over it.
func bodyTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return true
	}
	var he *echo.HTTPError
	return errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge
}

// clientGone reports whether the client hung up: the request's context is cancelled while
// the handler still runs only when the connection closed (net/http cancels it then; a
// server shutdown does not).
func clientGone(c echo.Context) bool { return c.Request().Context().Err() != nil }

// metricMethods are the methods counted under their own name in lockstep_http_requests_total;
// any other method a client sends shares the label "other", so no request can create a series.
var metricMethods = map[string]string{
	http.MethodGet: http.MethodGet, http.MethodHead: http.MethodHead, http.MethodPost: http.MethodPost,
	http.MethodPut: http.MethodPut, http.MethodPatch: http.MethodPatch, http.MethodDelete: http.MethodDelete,
	http.MethodOptions: http.MethodOptions, http.MethodConnect: http.MethodConnect, http.MethodTrace: http.MethodTrace,
}

// metricMethod is method's label in the request metrics: itself when standard, else "other".
func metricMethod(method string) string {
	if m, ok := metricMethods[method]; ok {
		return m
	}
	return "other"
}

// isMasterKey compares a presented key with the master key in constant time (crypto/subtle)
// over their sha256 digests, so neither the key's bytes nor its length shows in the timing.
func (s *Server) isMasterKey(k string) bool {
	sum := sha256.Sum256([]byte(k))
	return subtle.ConstantTimeCompare(sum[:], s.masterSum[:]) == 1
}

// The HTTP server's default timeouts (Start; Deps.Timeouts overrides them). A slow or idle
// client can hold a connection only this long; long-running routes (the LLM routes, A2A,
// /health) are exempt from WriteTimeout (see markLongRunning).
const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout = 2 * time.Minute
	// WriteTimeout bounds writing the answer of a route that is not long-running
	// (management, metrics), counted from the end of the request headers.
	WriteTimeout = 2 * time.Minute
	// IdleTimeout bounds how long a keep-alive connection waits for its next request.
	IdleTimeout = 2 * time.Minute
)

// Timeouts are the HTTP server's timeouts; a zero field takes the default constant of the
// same name (ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout).
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// httpServer is the net/http server of Start, with the timeouts.
func (s *Server) httpServer() *http.Server {
	or := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	t := s.Timeouts
	return &http.Server{Handler: s.e, ReadHeaderTimeout: or(t.ReadHeader, ReadHeaderTimeout),
		ReadTimeout: or(t.Read, ReadTimeout), WriteTimeout: or(t.Write, WriteTimeout), IdleTimeout: or(t.Idle, IdleTimeout)}
}

// deadliner is what net/http's response writer offers to move a connection's write
// deadline (http.ResponseController uses the same method).
type deadliner interface {
	SetWriteDeadline(time.Time) error
}

// deadlinesOf returns the connection deadlines of a response writer (through echo's
// Response), nil when it has none (a test recorder).
func deadlinesOf(w http.ResponseWriter) deadliner {
	for {
		if d, ok := w.(deadliner); ok {
			return d
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

// Long-running routes (s.longRunning: the LLM routes, their Azure-style aliases, A2A and
// /health, which probes every deployment) answer for as long as the upstream takes: a stream
// lasts as long as the model writes. Their duration is bounded by the deployment's timeout
// and stream_timeout (litellm_params.timeout, .stream_timeout) and by the client hanging up,
// not by the server's WriteTimeout, which front lifts when the route starts. (ReadTimeout
// bounds reading the request only: net/http clears the read deadline once the body is read.)
func (s *Server) markLongRunning(path string) { s.longRunning[path] = true }
