package api

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"lockstep/pkg/keys"
	"lockstep/pkg/telemetry"
)

// front is the one middleware every request passes (registered first with e.Use). It does,
// in this order, what five middlewares did: the request id (x-request-id: the client's, else
// a new one, echoed in the answer), the access log and request metrics, panic recovery, the
// body limit and path parameter unescaping. One middleware instead of a chain because echo
// builds the chain anew for each request (a closure per middleware per request).
func (s *Server) front(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
		rc := &requestContext{Context: req.Context(), base: &s.Log}
		var span *telemetry.Span // the request's server span; nil: tracing off
		rc.Context, span = startServerSpan(rc.Context, req, c.Path())
		rid := req.Header.Get(echo.HeaderXRequestID)
		if rid == "" {
			// the id's bytes live in rc (allocated anyway) and are never changed: the string
			// views them instead of copying them into an allocation of its own
			fillRequestID(&rc.ridBytes)
			rid = unsafe.String(&rc.ridBytes[0], len(rc.ridBytes))
		}
		rc.rid[0] = rid
		c.Response().Header()[echo.HeaderXRequestID] = rc.rid[:]
		c.SetRequest(req.WithContext(rc))
		err := s.serveRecovering(c, next)
		rc.endAuthSpan(err)
		if err != nil {
			c.Error(err)
		}
		status := c.Response().Status
		if req.Context().Err() != nil {
			// the client hung up (net/http cancels the context when the connection closes):
			// 499, logged at info, never a 5xx (API.md "Security rules")
			status = StatusClientClosedRequest
		}
		s.metrics.observe(c.Path(), metricMethod(req.Method), status, time.Since(start))
		span.EndServer(status)
		ev := s.Log.Info()
		if status >= 500 {
			ev = s.Log.Warn()
		}
		// the path may carry a raw virtual key (/key/{key}/regenerate): logged as sk-…abcd
		ev.Str("request_id", rid).Str("method", req.Method).Str("path", keys.RedactText(req.URL.Path)).Int("status", status).
			Dur("duration", time.Since(start)).Int64("bytes_out", c.Response().Size).Msg("request")
		return nil
	}
}

// serveRecovering runs the rest of the request (body limit, deadlines, path parameters, sync
// token, next); a panic is logged with its stack and returned as the error (a 500 naming the
// request id), except http.ErrAbortHandler, which net/http uses to abort a response on purpose.
//
// Body limit (API.md "Security rules": "A body over the limit is 413 in the route's envelope,
// chunked or not"): a Content-Length over MaxBodyBytes is refused at once; a body without one
// (chunked) fails its read past the limit, and the request is then answered 413 whatever
// error the handler made of that read ("read body: ...", "malformed JSON body: ...").
func (s *Server) serveRecovering(c echo.Context, next echo.HandlerFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("%v", r)
			}
			stack := make([]byte, 4<<10)
			stack = stack[:runtime.Stack(stack, false)]
			zerolog.Ctx(c.Request().Context()).Error().Err(e).Bytes("stack", stack).Msg("panic")
			err = e
		}
	}()
	req := c.Request()
	if req.ContentLength > s.MaxBodyBytes {
		return echo.ErrStatusRequestEntityTooLarge
	}
	lr := limitedReaders.Get().(*limitedReader)
	lr.reset(req.Body, s.MaxBodyBytes)
	defer limitedReaders.Put(lr)
	req.Body = lr
	if s.longRunning[c.Path()] {
		if d := deadlinesOf(c.Response().Writer); d != nil {
			_ = d.SetWriteDeadline(time.Time{})
		}
	}
	unescapeParams(c)
	if err = s.awaitSyncToken(c); err == nil {
		err = next(c)
	}
	if lr.exceeded && err != nil {
		return errBodyTooLarge
	}
	return err
}

// limitedReader fails a body read past the limit with 413 (errBodyTooLarge), for bodies
// without a Content-Length or with a wrong one, and records that it did (exceeded). Pooled:
// one per request in flight.
type limitedReader struct {
	io.ReadCloser
	limit, read int64
	exceeded    bool
}

var limitedReaders = sync.Pool{New: func() any { return &limitedReader{} }}

func (r *limitedReader) reset(body io.ReadCloser, limit int64) {
	r.ReadCloser, r.limit, r.read, r.exceeded = body, limit, 0, false
}

func (r *limitedReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	r.read += int64(n)
	if r.read > r.limit {
		r.exceeded = true
		return n, errBodyTooLarge
	}
	return n, err
}

// fillRequestID writes into b 32 random characters [0-9A-Za-z], the shape of echo's request ids,
// from the runtime's ChaCha8 generator (lock-free; request ids name requests, they are not
// secrets).
func fillRequestID(b *[32]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	for i := 0; i < len(b); {
		r := rand.Uint64()
		for j := 0; j < 10 && i < len(b); j++ { // 10 × 6 bits of each 64
			b[i] = alphabet[int(r&63)%len(alphabet)]
			r >>= 6
			i++
		}
	}
}

// requestContext is the request's context: its parent plus the request id. Code that logs
// with zerolog.Ctx(ctx) gets a logger carrying "request_id", built on first use: most
// requests log nothing but their access line, which front writes itself.
type requestContext struct {
	context.Context
	base *zerolog.Logger
	rid  [1]string // the id; also the x-request-id header value (a slice of it, no copy)
	// ridBytes holds a generated id's characters (rid[0] views them)
	ridBytes [32]byte
	// who is the caller, recorded by auth (setCaller) when hasWho
	who    principal
	hasWho bool
	// authSpan is the open "auth" span (tracing.go); nil when tracing is off
	authSpan *telemetry.Span
	log      atomic.Pointer[zerolog.Logger]
}

// zerologKey is the key zerolog.Ctx looks its logger up under (zerolog's unexported
// ctxKey{}), learned once by asking zerolog.Ctx on a context that records the key.
var zerologKey = func() any {
	p := &keyProbe{Context: context.Background()}
	zerolog.Ctx(p)
	return p.key
}()

type keyProbe struct {
	context.Context
	key any
}

func (p *keyProbe) Value(k any) any { p.key = k; return nil }

// Value answers zerolog's key with the request's logger, anything else from the parent.
func (rc *requestContext) Value(k any) any {
	if k == zerologKey && zerologKey != nil {
		return rc.logger()
	}
	return rc.Context.Value(k)
}

func (rc *requestContext) logger() *zerolog.Logger {
	if l := rc.log.Load(); l != nil {
		return l
	}
	l := rc.base.With().Str("request_id", rc.rid[0]).Logger()
	if rc.log.CompareAndSwap(nil, &l) {
		return &l
	}
	return rc.log.Load()
}
