package provider

import (
	"lockstep/pkg/format"
	"unsafe"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"lockstep/pkg/telemetry"
)

// Response is a non-streaming answer.
type Response struct {
	// Status is the upstream HTTP status (200 for mock answers).
	Status int
	// Body is the answer in the INBOUND format: the upstream bytes verbatim on passthrough,
	// else the translation.
	Body []byte
	// ContentType is the answer's media type when it is not JSON (audio from /audio/speech).
	ContentType string
	// Usage is the call's token usage, read from the upstream's own usage fields whatever
	// its API (zero when the upstream reported none).
	Usage format.Usage

	text   string // the assistant text, when !lazy
	lazy   bool   // Text reads the text from Body, in format
	format format.Format
}

// Text is the assistant text (joined text blocks/parts; "" for embeddings), for the A2A
// bridge. A passed-through answer's text is read from Body when asked (each time): the LLM
// routes never ask, so their answers are not parsed for it.
func (r *Response) Text() string {
	if r.lazy {
		return format.AnswerText(r.format, r.Body)
	}
	return r.text
}

// WithBody returns a copy of r answering body instead (in format f, e.g. after post_call
// guardrails masked it); its Text is read from body.
func (r *Response) WithBody(f format.Format, body []byte) *Response {
	return &Response{Status: r.Status, Body: body, ContentType: r.ContentType, Usage: r.Usage, lazy: true, format: f}
}

// Stream is a streaming answer. Next returns io.EOF after the last event. Close releases the
// upstream connection; it is safe to call more than once and after EOF. A Stream is not safe
// for concurrent use.
type Stream interface {
	Next() (Event, error)
	Close() error
}

// Event is one step of a streamed answer.
type Event struct {
	// Data is the exact bytes to write to the client: one or more complete SSE frames in the
	// inbound format, each ending with its blank line. It is only valid until the next call to
	// Next or Close (buffers are reused, across streams too): write or copy it first.
	Data []byte
	// Text is the assistant text delta carried by Data, if any.
	Text string
}

// IsRetryable reports whether err is an [format.UpstreamError] worth retrying.
func IsRetryable(err error) bool {
	var ue *format.UpstreamError
	return errors.As(err, &ue) && ue.Retryable
}

func retryableStatus(code int) bool {
	return code == 408 || code == 409 || code == 429 || code >= 500
}

// Client calls upstreams. It is safe for concurrent use; share one per process.
type Client struct {
	hc *http.Client
	t  *http.Transport // hc's transport, called directly on the hot path (see roundTrip)
}

// NewClient returns a client with a pooled transport (keep-alives, 256 idle connections per
// upstream host, HTTP/2 when offered). It sets no client-wide timeout: each call is bounded by
// its deployment's Timeout/StreamTimeout and by ctx.
func NewClient() *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = 90 * time.Second
	t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	hc := &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Client{hc: hc, t: t}
}

// ErrRedirect: an upstream answered a redirect (3xx). Upstream redirects are never followed
// (API.md "Security rules"): net/http would resend the request to the new host with every
// header but Authorization and Cookie — x-api-key, api-key, x-goog-api-key and
// extra_headers included. The call fails with a 502 [format.UpstreamError] naming the status.
var ErrRedirect = errors.New("upstream redirects are not followed")

// redirectError is the error of an upstream 3xx answer: 502, not retryable (the same
// upstream answers the same), naming the status and the redirect's host (not its path or
// query, which may carry a token).
func redirectError(resp *http.Response) *format.UpstreamError {
	msg := fmt.Sprintf("upstream answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if loc, err := resp.Location(); err == nil && loc.Host != "" {
		msg += " to " + loc.Scheme + "://" + loc.Host
	}
	return &format.UpstreamError{Status: http.StatusBadGateway, Type: "upstream_redirect", Message: msg + "; " + ErrRedirect.Error()}
}

// roundTrip sends an upstream request. http.Client.Do costs, per call, a copy of the
// headers (kept for redirects), the redirect loop and its bookkeeping; an upstream LLM API
// answers its POSTs without redirects, so the pooled transport is called directly and the
// client is only used where it does more: an api_base with user:password (the client sends
// them as basic auth; it follows no redirect either). Transport errors are wrapped as the
// client wraps them (*url.Error: Post "<url, password masked>": <cause>), so messages do not
// change. A 3xx answer is not followed: its body is drained and it is a 502 (redirectError).
func (c *Client) roundTrip(req *http.Request, body []byte) (*http.Response, error) {
	var resp *http.Response
	var err error
	if req.URL.User != nil {
		if resp, err = c.hc.Do(req); err != nil {
			return nil, err
		}
	} else if resp, err = c.t.RoundTrip(req); err != nil {
		return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		return nil, redirectError(resp)
	}
	return resp, nil
}

// CloseIdleConnections closes idle upstream connections (on shutdown).
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Headers is the HTTP side of one call besides its body. In is the client's request header:
// of it only anthropic-beta reaches the upstream, and only an Anthropic one (as LiteLLM
// forwards it on /v1/messages; it turns on beta features such as extended context) — auth and
// every other client header never do. Out is the answer's header: a translated call sets
// [format.DroppedHeader] there naming what it left out. Either may be nil.
type Headers struct {
	In, Out http.Header
}

// plan decides how inbound format in is served by d: the upstream format, and whether the body
// passes through (formats match) or is translated. A format the deployment cannot serve is a
// 400 naming the provider.
func plan(d *Deployment, in format.Format) (up format.Format, pass bool, err error) {
	if !d.Supports(in) {
		return 0, false, unsupported(d, in)
	}
	switch d.wire {
	case wireNative:
		if in == format.FormatMessages && d.messages != nil {
			return format.FormatMessages, true, nil // Claude on Bedrock InvokeModel
		}
		return format.FormatNative, false, nil
	case wireAnthropic:
		if in == format.FormatMessages {
			return format.FormatMessages, true, nil
		}
		return format.FormatMessages, false, nil
	}
	switch in {
	case format.FormatResponses:
		if d.spec.responses {
			return format.FormatResponses, true, nil
		}
		return format.FormatChat, false, nil
	case format.FormatMessages:
		return format.FormatChat, false, nil
	}
	return in, true, nil
}

// unsupported is the 400 for a route the deployment's provider cannot serve.
func unsupported(d *Deployment, in format.Format) *format.RequestError {
	return format.BadRequest("%s not supported by provider %s", in.RouteName(), d.Provider)
}

// upstreamBody builds the body sent upstream.
func upstreamBody(d *Deployment, in, up format.Format, pass, stream bool, body []byte) ([]byte, *format.AnswerFixes, error) {
	if pass {
		b, err := passBody(d, in, stream, body)
		return b, nil, err
	}
	if in != format.FormatChat && in != format.FormatResponses && in != format.FormatMessages {
		return nil, nil, unsupported(d, in)
	}
	r, err := format.ParseRequest(in, body)
	if err != nil {
		return nil, nil, err
	}
	r.SetStream(stream)
	r.DropCache(body, up == format.FormatMessages)
	var b []byte
	switch up {
	case format.FormatNative:
		_, outputFormat := d.native.(OutputFormatWire)
		if err = r.DropNative(d.Provider, outputFormat); err == nil {
			b, err = d.native.Request(d, r)
		}
	case format.FormatMessages:
		b = format.RenderMessagesRequest(r, d.Model, !d.vertexAnthropic && format.AnthropicNativeJSON(d.Model))
		if d.vertexAnthropic {
			b, err = vertexAnthropicBody(b)
		}
	default:
		b = format.RenderChatRequest(r, d.Model, d.spec.maxCompletionTokens)
	}
	if err != nil {
		return nil, nil, err
	}
	return b, r.Fixes(), nil
}

func (d *Deployment) url(up format.Format, stream bool) string {
	if stream && up == format.FormatMessages && d.messagesStream != "" {
		return d.messagesStream
	}
	if stream && d.streamURL != "" { // set only where streams have their own endpoint
		return d.streamURL
	}
	return d.urls[up]
}

// send posts body to the upstream endpoint of format up (its streaming endpoint when stream
// and the native API has one). Non-2xx answers are returned as *UpstreamError with the body
// closed.
func (c *Client) send(ctx context.Context, d *Deployment, up format.Format, stream bool, body []byte, in http.Header) (*http.Response, error) {
	return c.sendTo(ctx, d, d.url(up, stream), d.endpoint(up, stream), up, body, in)
}

// sendTo posts body to u (pu: u parsed once by the deployment, or nil) with the deployment's
// headers and signer (send; native embeddings call their own endpoints).
func (c *Client) sendTo(ctx context.Context, d *Deployment, u string, pu *url.URL, up format.Format, body []byte, in http.Header) (*http.Response, error) {
	req, err := newUpstreamRequest(ctx, d, u, pu, body)
	if err != nil {
		return nil, &format.UpstreamError{Status: 502, Message: "build upstream request: " + err.Error(), Retryable: false}
	}
	req.Header = d.headers() // shared and never modified: net/http only reads request headers
	if in != nil && d.wire == wireAnthropic {
		if beta := in.Values("anthropic-beta"); len(beta) > 0 {
			req.Header = req.Header.Clone()
			req.Header["Anthropic-Beta"] = beta
		}
	}
	if d.Provider == a2aRemoteProvider { // bounds a loop back into a gateway (A2AHopsHeader)
		req.Header = req.Header.Clone()
		req.Header.Set(A2AHopsHeader, a2aHopsHeader(ctx))
	}
	if h := telemetry.UpstreamHeader(ctx, req.Header); h != nil {
		req.Header = h // tracing on: the attempt's traceparent goes upstream
	}
	if up == format.FormatTranscriptions {
		req.Header = req.Header.Clone()
		req.Header.Set("Content-Type", format.MultipartContentType(body))
	}
	if d.signer != nil {
		if len(req.Header) == len(d.headers()) {
			req.Header = req.Header.Clone()
		}
		if err := d.signer.Sign(ctx, req, body); err != nil {
			return nil, err
		}
	}
	resp, err := c.roundTrip(req, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		ue := errorFromResponse(resp)
		if d.signer != nil { // the signer's per-request token is not among d.secrets
			ue.Message = d.redactSent(req, ue.Message)
			if len(ue.Body) > 0 {
				ue.Body = []byte(d.redactSent(req, string(ue.Body)))
			}
		}
		return nil, ue
	}
	return resp, nil
}

// newUpstreamRequest is http.NewRequestWithContext(ctx, "POST", rawURL,
// bytes.NewReader(body)) without parsing the URL again (u: rawURL parsed by d.endpoint) or allocating a header
// map send replaces: the same request (method, URL, host, protocol, length, a body net/http
// knows is in memory — headers and body go out in one write — and a GetBody replaying it for
// the transport's retry on a dead pooled connection) in four allocations instead of six. A
// request signer may change the URL: signed deployments take http.NewRequest's path.
func newUpstreamRequest(ctx context.Context, d *Deployment, rawURL string, u *url.URL, body []byte) (*http.Request, error) {
	if u == nil || d.signer != nil || len(body) == 0 {
		return http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	}
	req := &http.Request{
		Method: http.MethodPost, URL: u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
	}
	return req.WithContext(ctx), nil
}

// transportError turns a failed send/read into the error the caller sees: the parent's own
// context error when the caller gave up, 504 when the deployment's timeout fired, else 502.
func transportError(parent context.Context, err error, timeout time.Duration, what string) error {
	var ue *format.UpstreamError
	if errors.As(err, &ue) {
		return ue
	}
	var re *format.RequestError
	if errors.As(err, &re) {
		return re
	}
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errIdleTimeout) {
		return &format.UpstreamError{Status: 504, Message: fmt.Sprintf("upstream %s timed out after %s", what, timeout), Retryable: true}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &format.UpstreamError{Status: 504, Message: "upstream " + what + " timed out: " + err.Error(), Retryable: true}
	}
	return &format.UpstreamError{Status: 502, Message: "upstream " + what + " failed: " + err.Error(), Retryable: true, Conn: true}
}

const maxErrorBody = 64 << 10

// errorFromResponse reads a non-2xx answer into an *UpstreamError.
func errorFromResponse(resp *http.Response) *format.UpstreamError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg, typ := errorMessage(body)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
		if msg == "" {
			msg = "status " + strconv.Itoa(resp.StatusCode)
		}
	}
	e := &format.UpstreamError{Status: resp.StatusCode, Message: msg, Type: typ, Code: format.ErrorCode(body), Retryable: retryableStatus(resp.StatusCode)}
	if len(body) > 0 {
		e.Body = body
	}
	if ms, err := strconv.ParseFloat(resp.Header.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		e.RetryAfter = time.Duration(ms * float64(time.Millisecond))
	} else if s, err := strconv.ParseFloat(resp.Header.Get("Retry-After"), 64); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s * float64(time.Second))
	}
	return e
}

// errorMessage extracts a readable message and type from an upstream error body: OpenAI and
// Anthropic {"error": {"message", "type"}}, {"error": "text"}, vLLM {"message"}, FastAPI
// {"detail"}; else the trimmed body (at most 500 bytes) when it is text.
func errorMessage(body []byte) (msg, typ string) {
	if format.ValidJSON(body) {
		j := gjson.ParseBytes(body)
		if e := j.Get("error"); e.IsObject() {
			if m := e.Get("message"); m.Type == gjson.String && m.Str != "" {
				return m.Str, e.Get("type").Str
			}
		} else if e.Type == gjson.String && e.Str != "" {
			return e.Str, j.Get("type").Str
		}
		if m := j.Get("message"); m.Type == gjson.String && m.Str != "" {
			return m.Str, j.Get("type").Str
		}
		if m := j.Get("detail"); m.Exists() {
			if m.Type == gjson.String {
				return m.Str, ""
			}
			return m.Raw, ""
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 500 {
		s = strings.ToValidUTF8(s[:500], "") + "…"
	}
	return s, ""
}

const maxResponseBody = 256 << 20

func readAll(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= maxResponseBody {
		buf := make([]byte, n)
		_, err := io.ReadFull(resp.Body, buf)
		return buf, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err == nil && len(b) > maxResponseBody {
		return nil, &format.UpstreamError{Status: 502, Message: "upstream answer larger than 256 MiB"}
	}
	return b, err
}

// Do performs a non-streaming call. body is the client's request in format in (its "model"
// is the group name; a "stream": true in it is turned off). The answer is returned in format
// in: the upstream bytes verbatim when the formats match, else translated. Errors:
// *UpstreamError (upstream non-2xx, transport failure 502, timeout 504 after d.Timeout,
// untranslatable request 400), or ctx's error when ctx ends first. The deployment's secrets
// (API key, api_base password) are redacted from an error's Message and Body.
func (c *Client) Do(ctx context.Context, d *Deployment, in format.Format, body []byte) (*Response, error) {
	return c.DoWith(ctx, d, in, body, Headers{})
}

// DoWith is Do with the call's [Headers]: the client headers forwarded upstream, and the
// answer header that gets [format.DroppedHeader] when translation left something out.
func (c *Client) DoWith(ctx context.Context, d *Deployment, in format.Format, body []byte, h Headers) (*Response, error) {
	ctx, span := startAttempt(ctx, d) // one span per upstream attempt; nil when tracing is off
	res, err := c.do(ctx, d, in, body, h)
	err = d.redactErr(err)
	endAttempt(span, res, err)
	return res, err
}

func (c *Client) do(ctx context.Context, d *Deployment, in format.Format, body []byte, h Headers) (*Response, error) {
	if d.MockResponse != nil {
		return mockDo(d, in, body)
	}
	if in == format.FormatEmbeddings && d.embedder != nil {
		return c.embed(ctx, d, body)
	}
	up, pass, err := plan(d, in)
	if err != nil {
		return nil, err
	}
	ub, x, err := upstreamBody(d, in, up, pass, false, body)
	if err == nil {
		ub, err = d.messagesBody(up, false, ub, h)
	}
	if err != nil {
		return nil, err
	}
	timeout := CallTimeout(ctx, d.Timeout)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.send(cctx, d, up, false, ub, h.In)
	if err != nil {
		return nil, transportError(ctx, err, timeout, "call")
	}
	defer resp.Body.Close()
	raw, err := readAll(resp)
	if err != nil {
		return nil, transportError(ctx, err, timeout, "call")
	}
	if pass {
		out := &Response{Status: resp.StatusCode, Body: raw, Usage: format.AnswerUsage(in, raw), lazy: true, format: in}
		if in.Passthrough() {
			if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") {
				out.ContentType = ct // audio/speech answers are audio bytes
			}
		}
		return out, nil
	}
	var res *format.Result
	if up == format.FormatNative {
		res, err = d.native.Result(raw)
	} else {
		res, err = format.ParseResult(up, raw)
	}
	if err != nil {
		var ue *format.UpstreamError
		if errors.As(err, &ue) {
			// the wire judged the answer itself (a native wire's JSON-RPC error): its status,
			// text and retryability stand, not wrapped in a second "upstream 502: ..."
			if ue.Body == nil {
				ue.Body = raw
			}
			return nil, ue
		}
		return nil, &format.UpstreamError{Status: 502, Message: "invalid upstream answer: " + err.Error(), Body: raw, Retryable: true}
	}
	res.DefaultModel(d.Model)
	x.FixResult(res)
	x.SetHeader(h.Out)
	return &Response{Status: resp.StatusCode, Body: format.RenderResult(in, res), text: res.Text(), Usage: res.Usage()}, nil
}

// Stream performs a streaming call. body is the client's request in format in; "stream":
// true is set upstream if missing. The returned Stream yields events already in format in:
// upstream SSE frames verbatim, one per event, when the formats match; else translated
// events. Errors before the first event are returned here (as for Do), so the caller can still
// retry or answer with a plain error; later failures come from Next (*UpstreamError 502/504,
// or errors.Is(err, context.Canceled) when ctx ends) and should be reported to the client
// with [ErrorEvent]. d.StreamTimeout bounds the wait for the response headers and for each
// next frame. The deployment's secrets are redacted from errors (here and from Next) and from
// the events' bytes.
func (c *Client) Stream(ctx context.Context, d *Deployment, in format.Format, body []byte) (Stream, error) {
	return c.StreamWith(ctx, d, in, body, Headers{})
}

// StreamWith is Stream with the call's [Headers] (see DoWith); the answer header is set
// before the first event.
func (c *Client) StreamWith(ctx context.Context, d *Deployment, in format.Format, body []byte, h Headers) (Stream, error) {
	ctx, span := startAttempt(ctx, d) // ends when the upstream accepted (or refused) the stream
	st, err := c.stream(ctx, d, in, body, h)
	err = d.redactErr(err)
	endAttempt(span, nil, err)
	return st, err
}

func (c *Client) stream(ctx context.Context, d *Deployment, in format.Format, body []byte, h Headers) (Stream, error) {
	if !in.Streams() {
		return nil, format.BadRequest("%s cannot be streamed", in.RouteName())
	}
	if d.MockResponse != nil {
		return mockStream(d, in, body)
	}
	up, pass, err := plan(d, in)
	if err != nil {
		return nil, err
	}
	ub, x, err := upstreamBody(d, in, up, pass, true, body)
	if err == nil {
		ub, err = d.messagesBody(up, true, ub, h)
	}
	if err != nil {
		return nil, err
	}
	hide := false
	if pass && (in == format.FormatChat || in == format.FormatCompletions) {
		ub, hide = askUsage(ub) // every call is charged (stream_usage.go)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	idle := CallTimeout(ctx, d.StreamTimeout)
	s := &httpStream{parent: ctx, ctx: sctx, cancel: cancel, idle: idle, in: in, d: d, hide: hide}
	s.timer = time.AfterFunc(idle, func() { cancel(errIdleTimeout) })
	resp, err := c.send(sctx, d, up, true, ub, h.In)
	if err != nil {
		s.timer.Stop()
		cancel(nil)
		if context.Cause(sctx) == errIdleTimeout {
			err = errIdleTimeout
		}
		return nil, transportError(ctx, err, idle, "stream")
	}
	s.timer.Stop() // Next restarts it around each read
	s.body = resp.Body
	x.SetHeader(h.Out)
	ct := resp.Header.Get("Content-Type")
	if up == format.FormatNative {
		s.rd = d.native.Frames(resp.Body)
		s.dec = d.native.Decoder(format.NewStreamRenderer(in, includeUsage(body), x, s), d.Model)
		return s, nil
	}
	if !strings.HasPrefix(ct, "text/event-stream") && strings.Contains(ct, "json") {
		// The upstream ignored "stream": replay its whole answer as a stream.
		return s.replayJSON(in, up, includeUsage(body), x)
	}
	if up == format.FormatMessages && d.messages != nil {
		s.rd = d.messages.Frames(resp.Body)
	} else {
		s.rd = newSSEReader(resp.Body)
	}
	if !pass {
		s.dec = format.NewDecoder(up, format.NewStreamRenderer(in, includeUsage(body), x, s))
	}
	return s, nil
}

// includeUsage reports a chat request's stream_options.include_usage.
func includeUsage(body []byte) bool {
	return gjson.GetBytes(body, "stream_options.include_usage").Type == gjson.True
}

// passBody is the body of a passed-through request: "model" replaced (and "stream" set as
// asked), Claude on Vertex in its rawPredict shape.
func passBody(d *Deployment, in format.Format, stream bool, body []byte) ([]byte, error) {
	if in == format.FormatTranscriptions {
		return format.RewriteMultipartModel(body, d.Model)
	}
	b, err := format.RewriteModel(body, d.Model)
	if err != nil {
		return nil, format.BadRequest("%v", err)
	}
	if in.Streams() && format.StreamRequested(b) != stream {
		b = format.SetBool(b, "stream", stream)
	}
	if d.vertexAnthropic {
		return vertexAnthropicBody(b)
	}
	return b, nil
}

// bytesView returns b as a string without copying. The string must not outlive b or see it
// modified.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
