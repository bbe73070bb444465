package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	pipeline "lockstep/pkg/call"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/jsonscan"
	"lockstep/pkg/registry"
)

// DefaultOnName is the registry name every default_on guardrail is also indexed under, so the
// hot path finds them with one map lookup.
const DefaultOnName = "\x00default_on"

// GuardrailNames indexes a guardrail under its name (and DefaultOnName when default_on).
func GuardrailNames(e *registry.Entry[*guardrail.Guardrail]) []string {
	if e.Value.DefaultOn {
		return []string{e.Value.Name, DefaultOnName}
	}
	return []string{e.Value.Name}
}

// invalidModel is the route's refusal of a model it does not serve (pipeline.UnknownModel;
// answered 400 invalid_request_error, param model).
func invalidModel(f format.Format, model string) error {
	return &pipeline.UnknownModel{Route: f.RouteName(), Model: model}
}

func pyList(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	b.WriteByte(']')
	return b.String()
}

// llm serves one LLM route through the call pipeline (pipeline.go): auth (middleware) →
// model group (read-through on a miss) → model access → limits → guardrails → upstream
// (passthrough when formats match) → post_call guardrails → response, or an SSE stream
// flushed frame by frame.
func (s *Server) llm(f format.Format) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ctx := req.Context()
		body, err := readBody(req)
		if err != nil {
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
			}
			return badRequest("read body: %v", err)
		}
		var model string
		var rf requestFields
		if f.Multipart() {
			if err = format.CheckMultipart(body); err != nil {
				return err
			}
			if model, err = format.MultipartModel(body); err != nil {
				return err
			}
		} else {
			if rf, err = scanRequestChecked(body); err != nil {
				return bodyError(f, err)
			}
			if !isJSONObject(body) {
				return badRequest("%s: malformed JSON body: expected a JSON object", f.RouteName())
			}
			model = strings.Clone(rf.model.String()) // rf aliases the body
		}
		if model == "" {
			return invalidModel(f, "")
		}
		if f.Streams() && !streamIsBool(rf.stream) {
			return badRequest(errStreamNotBool)
		}
		stream := f.Streams() && rf.stream.Type == gjson.True // format.StreamRequested
		spec := callSpec{
			format: f, route: f.String(), who: caller(c), model: model, body: body, stream: stream,
			header: c.Response().Header(), reqHeader: c.Request().Header,
			// resolve, guardrails: nil, the model group's, the request's
		}
		if f.Multipart() {
			spec.guardrails = s.multipartGuardrails // a method value: multipart routes only
		}
		if strings.HasPrefix(model, AgentModelPrefix) && !f.Multipart() {
			if err := s.agentModelSpec(ctx, f, &spec); err != nil {
				return err
			}
		}
		return s.callWithFallbacks(ctx, c, spec, &rf)
	}
}

// answer writes a non-streamed call's answer with LiteLLM's response headers.
func (s *Server) answer(ctx context.Context, c echo.Context, call *call) error {
	res, err := call.do(ctx)
	if err != nil {
		return err
	}
	call.setHeaders(c.Response().Header(), res)
	status := res.Status
	if status == 0 {
		status = http.StatusOK
	}
	if res.ContentType != "" {
		return c.Blob(status, res.ContentType, res.Body)
	}
	// c.Blob(status, "application/json", body) without its Header.Set: the shared value
	w := c.Response()
	if h := w.Header(); h.Get(echo.HeaderContentType) == "" {
		h[echo.HeaderContentType] = jsonContentType
	}
	w.WriteHeader(status)
	_, err = w.Write(res.Body)
	return err
}

// jsonContentType is the Content-Type of a JSON answer, shared (cap 1: an Add appends to a
// copy; net/http copies it when it writes the header).
var jsonContentType = []string{echo.MIMEApplicationJSON}

// stream writes a streamed call's events as they come. A failure after the first byte (the
// upstream's, or a post_call BLOCK) ends the stream with one error event in the route's
// format, typed as the same failure would be before the stream (errorInfo).
func (s *Server) stream(ctx context.Context, c echo.Context, f format.Format, call *call) error {
	st, err := call.stream(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	w := c.Response()
	h := w.Header()
	// canonical keys, shared one-value slices (cap 1: an Add appends to a copy): no
	// canonicalisation or allocation per stream; net/http copies them when it writes
	h[echo.HeaderContentType] = sseContentType
	h["Cache-Control"] = sseNoCache
	h["Connection"] = sseKeepAlive
	h["X-Accel-Buffering"] = sseNoBuffering
	call.setHeaders(h, nil)
	w.WriteHeader(http.StatusOK)
	w.Flush()
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			ae := s.errorInfo(c, err)
			_, _ = w.Write(format.ErrorEventOf(f, ae.Status, ae.Type, ae.Message))
			w.Flush()
			return nil
		}
		if _, err := w.Write(ev.Data); err != nil {
			return nil // client went away
		}
		w.Flush()
	}
}

// the headers of an SSE answer (stream)
var (
	sseContentType = []string{"text/event-stream"}
	sseNoCache     = []string{"no-cache"}
	sseKeepAlive   = []string{"keep-alive"}
	sseNoBuffering = []string{"no"}
)

// streamCheckWindow returns the tail of text a post_call BLOCK check scans after a chunk of
// added bytes: everything when short, else the last postCallWindow bytes before the chunk
// plus the chunk, starting after a whitespace (or at least on a rune boundary) so the cut
// does not create a match that the whole text would not have.
func streamCheckWindow(text string, added int) string {
	limit := len(text) - added
	start := limit - postCallWindow
	if start <= 0 {
		return text
	}
	if i := strings.IndexAny(text[start:limit], " \t\r\n"); i >= 0 {
		return text[start+i+1:]
	}
	for start < limit && !utf8.RuneStart(text[start]) {
		start++
	}
	return text[start:]
}

// requestGuardrailsOf resolves the guardrails a request runs: every default_on guardrail plus
// the ones named in "guardrails" or "metadata.guardrails" (LiteLLM). The names are removed
// from the body before it goes upstream. An unknown name (after read-through) is a 404.
// rf holds body's members, already scanned (scanRequest).
func (s *Server) requestGuardrailsOf(ctx context.Context, body []byte, rf *requestFields) ([]*guardrail.Guardrail, []byte, error) {
	defaults := s.Guardrails.Load().ByName(DefaultOnName)
	top, meta := rf.guardrails, rf.metaGuardrails
	if len(defaults) == 0 && !top.Exists() && !meta.Exists() {
		return nil, body, nil // hot path: nothing to do
	}
	var names []string
	for _, r := range []gjson.Result{top, meta} {
		if !r.Exists() || r.Type == gjson.Null {
			continue
		}
		if !r.IsArray() {
			return nil, nil, badRequest("guardrails must be an array of guardrail names")
		}
		for _, n := range r.Array() {
			name := n.String()
			if n.IsObject() { // {"name": ...} or {"<name>": {...}} forms
				name = n.Get("name").String()
				if name == "" {
					n.ForEach(func(k, _ gjson.Result) bool { name = k.String(); return false })
				}
			}
			names = append(names, name)
		}
	}
	gs, err := s.namedGuardrails(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	if top.Exists() {
		if body, err = sjson.DeleteBytes(body, "guardrails"); err != nil {
			return nil, nil, err
		}
	}
	if meta.Exists() {
		if body, err = sjson.DeleteBytes(body, "metadata.guardrails"); err != nil {
			return nil, nil, err
		}
	}
	return gs, body, nil
}

// multipartGuardrails is requestGuardrailsOf for a multipart/form-data request (audio
// transcriptions): every default_on guardrail plus the ones named in "guardrails" form fields
// (a JSON array of names or a comma-separated list), which are removed from the body.
func (s *Server) multipartGuardrails(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
	names, found, out, err := format.MultipartGuardrails(body)
	if err != nil {
		return nil, nil, err
	}
	if !found && len(s.Guardrails.Load().ByName(DefaultOnName)) == 0 {
		return nil, body, nil
	}
	gs, err := s.namedGuardrails(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	return gs, out, nil
}

// namedGuardrails is every default_on guardrail plus the named ones (read-through on a miss;
// an unknown name is a 404), each once: the one resolver of requests, multipart forms and
// agents. Without a guardrails registry any name is unknown.
func (s *Server) namedGuardrails(ctx context.Context, names []string) ([]*guardrail.Guardrail, error) {
	if s.Guardrails == nil {
		if len(names) > 0 {
			return nil, guardrailNotFound(names[0])
		}
		return nil, nil
	}
	var gs []*guardrail.Guardrail
	seen := map[string]bool{}
	for _, e := range s.Guardrails.Load().ByName(DefaultOnName) {
		gs = append(gs, e.Value)
		seen[e.Value.Name] = true
	}
	for _, n := range names {
		if seen[n] {
			continue
		}
		g, err := s.guardrailByName(ctx, n)
		if err != nil {
			return nil, err
		}
		seen[n] = true
		gs = append(gs, g)
	}
	return gs, nil
}

func guardrailNotFound(name string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "not_found_error",
		Message: fmt.Sprintf("Guardrail '%s' not found. Please ensure the guardrail is configured in your LiteLLM proxy.", name)}
}

// guardrailByName looks a guardrail up by name, with a read-through on a miss.
func (s *Server) guardrailByName(ctx context.Context, name string) (*guardrail.Guardrail, error) {
	if g := s.Guardrails.Load().ByName(name); len(g) > 0 {
		return g[0].Value, nil
	}
	if name == "" || name == DefaultOnName {
		return nil, guardrailNotFound(name)
	}
	if err := s.Guardrails.Resolve(ctx, name); err == nil {
		if g := s.Guardrails.Load().ByName(name); len(g) > 0 {
			return g[0].Value, nil
		}
	}
	return nil, guardrailNotFound(name)
}

func hasMode(gs []*guardrail.Guardrail, m guardrail.Mode) bool {
	for _, g := range gs {
		if g.Runs(m) {
			return true
		}
	}
	return false
}

// requestFields are the members of a JSON request body the pipeline reads, taken in the one
// pass that checks the body (jsonscan.Scan: valid JSON, depth, no duplicate member anywhere,
// UTF-8), so each is the body's only member of its name: what the upstream reads too. The
// results alias the body (copy what outlives it).
type requestFields struct {
	model, stream  gjson.Result
	guardrails     gjson.Result // "guardrails"
	metaGuardrails gjson.Result // "metadata.guardrails"
	// endUser are the endUserFields: user, litellm_metadata.user, metadata.user_id,
	// safety_identifier
	endUser [len(endUserFields)]gjson.Result
	// hooks are the members read by hooks.go (fallbacks, mock_testing_fallbacks,
	// mock_testing_rate_limit_error, mock_timeout, timeout); anyHook is true when one is there
	hooks   [len(hookFields)]gjson.Result
	anyHook bool
}

// scanRequest reads body's requestFields; none when body is not a valid JSON object (for
// bodies the gateway built itself; a client's goes through scanRequestChecked).
func scanRequest(body []byte) requestFields {
	rf, _ := scanRequestChecked(body)
	return rf
}

// scanRequestChecked checks body (API.md "Request bodies", jsonscan) and reads its
// requestFields in the same pass: a *jsonscan.Error when body is not valid; no fields when it
// is valid but not an object.
func scanRequestChecked(body []byte) (requestFields, error) {
	var rf requestFields
	var meta, litellmMeta gjson.Result
	err := jsonscan.Scan(body, func(name, value []byte) {
		var dst *gjson.Result
		switch string(name) {
		case "model":
			dst = &rf.model
		case "stream":
			dst = &rf.stream
		case "user":
			dst = &rf.endUser[0]
		case "litellm_metadata":
			dst = &litellmMeta
		case "metadata":
			dst = &meta
		case "safety_identifier":
			dst = &rf.endUser[3]
		case "guardrails":
			dst = &rf.guardrails
		case hookFields[0], hookFields[1], hookFields[2], hookFields[3], hookFields[4]:
			for i, h := range hookFields {
				if h == string(name) {
					dst = &rf.hooks[i]
				}
			}
			rf.anyHook = true
		default:
			return
		}
		*dst = gjson.Parse(unsafe.String(unsafe.SliceData(value), len(value)))
	})
	if err != nil {
		return requestFields{}, err
	}
	if litellmMeta.Exists() {
		rf.endUser[1] = litellmMeta.Get("user")
	}
	if meta.Exists() {
		rf.metaGuardrails = meta.Get("guardrails")
		rf.endUser[2] = meta.Get("user_id")
	}
	return rf, nil
}

// bodyError is the 400 of a request body jsonscan refused, in route f's words: its own text
// for depth, duplicates and UTF-8 (API.md "Request bodies"), LiteLLM's for anything else.
func bodyError(f format.Format, err error) error {
	var je *jsonscan.Error
	if errors.As(err, &je) && je.Kind != jsonscan.Syntax {
		return badRequest("%s", je.Error())
	}
	return badRequest("%s: malformed JSON body: expected a JSON object", f.RouteName())
}

// errStreamNotBool is the 400 of a "stream" member that is not true, false or null (API.md
// "Request bodies": what is checked is what is sent). The gateway streams only on true, but
// lenient upstreams (pydantic-based servers such as vLLM, and LiteLLM, which tests truthiness)
// stream on "true" or 1: the answer would then pass as one non-streamed body that is neither
// charged nor guarded.
const errStreamNotBool = "stream must be a boolean"

// streamIsBool reports whether a request's "stream" member is absent, null or a boolean (an
// absent member reads as gjson.Null).
func streamIsBool(r gjson.Result) bool {
	return r.Type == gjson.True || r.Type == gjson.False || r.Type == gjson.Null
}

// isJSONObject reports whether valid JSON body is an object (first non-space byte), without
// parsing it again.
func isJSONObject(body []byte) bool {
	for _, b := range body {
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b == '{'
	}
	return false
}

// readBody reads a request body as io.ReadAll does (everything up to EOF; an error as the
// body reports it), into a buffer sized from Content-Length when the client sent one (front
// has refused one over the limit), so the body is read with one allocation and no copies.
func readBody(req *http.Request) ([]byte, error) {
	n := req.ContentLength
	if n <= 0 {
		return io.ReadAll(req.Body)
	}
	b := make([]byte, 0, n+1) // +1: room for the read that reports EOF
	for {
		m, err := req.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) { // longer than announced (a body not read through net/http)
			b = append(b, 0)[:len(b)]
		}
	}
}
