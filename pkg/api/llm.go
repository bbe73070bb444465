package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	pipeline "lockstep/pkg/call"
	"lockstep/pkg/format"
	"lockstep/pkg/jsonscan"
)

// invalidModel is the route's refusal of a model it does not serve (pipeline.UnknownModel;
// answered 400 invalid_request_error, param model).
func invalidModel(f format.Format, model string) error {
	return &pipeline.UnknownModel{Route: f.RouteName(), Model: model}
}

// llm serves one LLM route: it decodes the request (body, model, stream), runs it through
// the call pipeline (pipeline.Pipeline.Serve: model group → model access → limits →
// guardrails → upstream, passthrough when formats match → post_call guardrails, with the
// request's hooks and fallbacks) and renders the answer, or an SSE stream flushed frame by
// frame.
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
		var rf pipeline.Fields
		if f.Multipart() {
			if err = format.CheckMultipart(body); err != nil {
				return err
			}
			if model, err = format.MultipartModel(body); err != nil {
				return err
			}
		} else {
			if rf, err = pipeline.ScanChecked(body); err != nil {
				return bodyError(f, err)
			}
			if !isJSONObject(body) {
				return badRequest("%s: malformed JSON body: expected a JSON object", f.RouteName())
			}
			model = strings.Clone(rf.Model.String()) // rf aliases the body
		}
		if f == format.FormatModerations {
			if model, body, err = s.moderationModel(model, body); err != nil {
				return err
			}
			rf = pipeline.Scan(body)
		}
		if model == "" {
			return invalidModel(f, "")
		}
		if f.Streams() && !streamIsBool(rf.Stream) {
			return badRequest(errStreamNotBool)
		}
		stream := f.Streams() && rf.Stream.Type == gjson.True // format.StreamRequested
		spec := pipeline.Spec{
			Format: f, Route: f.String(), Caller: caller(c).Caller, Model: model, Body: body, Stream: stream,
			Header: c.Response().Header(), ReqHeader: c.Request().Header,
		}
		if f == format.FormatChat && strings.IndexByte(model, ',') >= 0 {
			return s.batchCompletion(ctx, c, spec) // LiteLLM's batch completion across models
		}
		if strings.HasPrefix(model, pipeline.AgentModelPrefix) && !f.Multipart() {
			if err := s.pipe.AgentModel(ctx, &spec); err != nil {
				return err
			}
		}
		failed, err := s.pipe.Serve(ctx, spec, &rf, func(ctx context.Context, call *pipeline.Call) error {
			if stream {
				return s.stream(ctx, c, f, call)
			}
			return s.answer(ctx, c, call)
		})
		if failed != nil {
			// LiteLLM's proxy adds its headers to its error answers too, unless the answer has
			// started (a stream ends with an error event): no x-litellm-response-cost
			if w := c.Response(); !w.Committed {
				failed.SetHeaders(w.Header(), nil)
			}
		}
		return err
	}
}

// DefaultModerationModel is the model of a /moderations request naming none, as LiteLLM's
// moderation() leaves it to OpenAI's default (https://platform.openai.com/docs/api-reference/moderations).
const DefaultModerationModel = "omni-moderation-latest"

// moderationModel is the model a /moderations call uses and its body naming it: LiteLLM's
// proxy sets data["model"] = general_settings.moderation_model or the request's model
// (litellm/proxy/proxy_server.py moderations), and a request naming none gets OpenAI's
// default model, DefaultModerationModel; it is routed like any model name (a model group of
// that name, else a wildcard group such as openai/*).
func (s *Server) moderationModel(model string, body []byte) (string, []byte, error) {
	want := model
	switch {
	case s.ModerationModel != "":
		want = s.ModerationModel
	case want == "":
		want = DefaultModerationModel
	}
	if want == model {
		return model, body, nil
	}
	out, err := sjson.SetBytes(body, "model", want)
	if err != nil {
		return "", nil, badRequest("%v", err)
	}
	return want, out, nil
}

// answer writes a non-streamed call's answer with LiteLLM's response headers.
func (s *Server) answer(ctx context.Context, c echo.Context, call *pipeline.Call) error {
	res, err := call.Do(ctx)
	if err != nil {
		return err
	}
	call.SetHeaders(c.Response().Header(), res)
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
func (s *Server) stream(ctx context.Context, c echo.Context, f format.Format, call *pipeline.Call) error {
	st, err := call.Stream(ctx)
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
	call.SetHeaders(h, nil)
	w.WriteHeader(http.StatusOK)
	w.Flush()
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			ae := s.errorInfo(c, err)
			var ue *format.UpstreamError
			if errors.As(err, &ue) {
				ae.Message = midStreamMessage(ae.Message)
			}
			_, _ = w.Write(format.ErrorEventOf(f, ae.Status, ae.Type, ae.Message))
			w.Flush()
			return nil
		}
		data := ev.Data
		if at, end, ue := format.StreamError(f, data); ue != nil {
			// the upstream's own error event: worded as LiteLLM's proxy words it
			out := append(append([]byte(nil), data[:at]...), format.ErrorEventOf(f, ue.Status, ue.Type, midStreamMessage(liteLLMMessage(ue, ue)))...)
			data = append(out, data[end:]...)
		}
		if _, err := w.Write(data); err != nil {
			return nil // client went away
		}
		w.Flush()
	}
}

// midStreamMessage is the message of an upstream failure after a stream's first byte, as
// LiteLLM's proxy sends it (proxy_server.py async_data_generator: data: {"error":
// ProxyException(message=e.message, ...)}): its streaming wrapper raises the mapped failure
// as a MidStreamFallbackError (litellm/exceptions.py: message "litellm.MidStreamFallbackError:
// " + the mapped exception's, "litellm.<Class>: <upstream text>"; status the original's).
func midStreamMessage(msg string) string { return "litellm.MidStreamFallbackError: " + msg }

// the headers of an SSE answer (stream)
var (
	sseContentType = []string{"text/event-stream"}
	sseNoCache     = []string{"no-cache"}
	sseKeepAlive   = []string{"keep-alive"}
	sseNoBuffering = []string{"no"}
)

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
