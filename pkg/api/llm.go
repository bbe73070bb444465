package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
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

func invalidModel(f provider.Format, model string) *Error {
	if model == "" {
		model = "None"
	}
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "model",
		Message: fmt.Sprintf("%s: Invalid model name passed in model=%s. Call /v1/models to view available models for your key.", f.RouteName(), model)}
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

// llm serves one LLM route: auth → model group (read-through on a miss) → guardrails →
// upstream (passthrough when formats match) → response or SSE stream flushed frame by frame.
func (s *Server) llm(f provider.Format) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ctx := req.Context()
		body, err := io.ReadAll(req.Body)
		if err != nil {
			if strings.Contains(err.Error(), "too large") {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
			}
			return badRequest("read body: %v", err)
		}
		if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
			return badRequest("%s: malformed JSON body: expected a JSON object", f.RouteName())
		}
		model := gjson.GetBytes(body, "model").String()
		if model == "" {
			return invalidModel(f, "")
		}
		group, err := s.Router.Group(ctx, model)
		if errors.Is(err, router.ErrUnknownModel) {
			return invalidModel(f, model)
		}
		if err != nil {
			return err
		}
		if p := caller(c); p.key != nil && !p.key.CanUse(model, groupAccess(group)) {
			return &Error{Status: http.StatusUnauthorized, Type: "key_model_access_denied", Param: "model",
				Message: fmt.Sprintf("key not allowed to access model. This key can only access models=%s. Tried to access %s", pyList(p.key.Models), model)}
		}
		gs, body, err := s.requestGuardrails(ctx, body)
		if err != nil {
			return err
		}
		var during chan error
		if len(gs) > 0 {
			if body, err = runInput(f, body, gs, guardrail.PreCall, true); err != nil {
				return err
			}
			if hasMode(gs, guardrail.DuringCall) {
				during = make(chan error, 1)
				in := body
				go func() { _, err := runInput(f, in, gs, guardrail.DuringCall, false); during <- err }()
			}
		}
		if provider.StreamRequested(body) && f != provider.FormatEmbeddings {
			return s.stream(c, f, group, body, gs, during)
		}
		res, _, err := s.Router.Do(ctx, group, f, body)
		if during != nil {
			if derr := <-during; derr != nil {
				return derr
			}
		}
		if err != nil {
			return err
		}
		out := res.Body
		if len(gs) > 0 && hasMode(gs, guardrail.PostCall) && res.Text != "" {
			masked, err := checkAll(gs, guardrail.PostCall, res.Text)
			if err != nil {
				return err
			}
			if masked != res.Text {
				out = replaceOutputText(f, out, masked)
			}
		}
		status := res.Status
		if status == 0 {
			status = http.StatusOK
		}
		return c.Blob(status, echo.MIMEApplicationJSON, out)
	}
}

func (s *Server) stream(c echo.Context, f provider.Format, group []*registry.Entry[*router.Deployment], body []byte, gs []*guardrail.Guardrail, during chan error) error {
	ctx := c.Request().Context()
	st, _, err := s.Router.Stream(ctx, group, f, body)
	if err != nil {
		return err
	}
	defer st.Close()
	if during != nil {
		// during_call: the upstream is already working; hold the first byte until the input check is done.
		if derr := <-during; derr != nil {
			return derr
		}
	}
	post := len(gs) > 0 && hasMode(gs, guardrail.PostCall)
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	var text strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			status, msg := http.StatusBadGateway, err.Error()
			var ue *provider.UpstreamError
			if errors.As(err, &ue) {
				status, msg = ue.Status, ue.Message
			}
			_, _ = w.Write(provider.ErrorEvent(f, status, msg))
			w.Flush()
			return nil
		}
		if post && ev.Text != "" {
			text.WriteString(ev.Text)
			if _, err := checkAll(gs, guardrail.PostCall, text.String()); err != nil {
				_, _ = w.Write(provider.ErrorEvent(f, http.StatusBadRequest, err.(*Error).Message))
				w.Flush()
				return nil
			}
		}
		if _, err := w.Write(ev.Data); err != nil {
			return nil // client went away
		}
		w.Flush()
	}
}

// requestGuardrails resolves the guardrails a request runs: every default_on guardrail plus
// the ones named in "guardrails" or "metadata.guardrails" (LiteLLM). The names are removed
// from the body before it goes upstream. An unknown name (after read-through) is a 404.
func (s *Server) requestGuardrails(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
	snap := s.Guardrails.Load()
	defaults := snap.ByName(DefaultOnName)
	top := gjson.GetBytes(body, "guardrails")
	meta := gjson.GetBytes(body, "metadata.guardrails")
	if len(defaults) == 0 && !top.Exists() && !meta.Exists() {
		return nil, body, nil // hot path: nothing to do
	}
	var gs []*guardrail.Guardrail
	seen := map[string]bool{}
	for _, e := range defaults {
		gs = append(gs, e.Value)
		seen[e.Value.Name] = true
	}
	var names []string
	for _, r := range []gjson.Result{top, meta} {
		if !r.Exists() {
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
	for _, n := range names {
		if seen[n] {
			continue
		}
		g, err := s.guardrailByName(ctx, n)
		if err != nil {
			return nil, nil, err
		}
		seen[n] = true
		gs = append(gs, g)
	}
	var err error
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

// checkAll runs every guardrail of mode m over text; a block becomes a 400.
func checkAll(gs []*guardrail.Guardrail, m guardrail.Mode, text string) (string, error) {
	for _, g := range gs {
		if !g.Runs(m) {
			continue
		}
		out, err := g.Check(text)
		if err != nil {
			return "", blockedErr(err)
		}
		text = out
	}
	return text, nil
}

func blockedErr(err error) error {
	var be *guardrail.BlockedError
	if errors.As(err, &be) {
		return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: be.Message}
	}
	return err
}

// runInput applies mode-m guardrails to every text of the request body; with rewrite the
// masked texts replace the originals (pre_call), else only blocks count (during_call).
func runInput(f provider.Format, body []byte, gs []*guardrail.Guardrail, m guardrail.Mode, rewrite bool) ([]byte, error) {
	if !hasMode(gs, m) {
		return body, nil
	}
	out, err := provider.MapRequestText(f, body, func(t string) (string, error) { return checkAll(gs, m, t) })
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			return nil, ae
		}
		return nil, badRequest("%v", err)
	}
	if !rewrite {
		return body, nil
	}
	return out, nil
}

// replaceOutputText writes a post_call-masked answer text back into a non-streaming response.
func replaceOutputText(f provider.Format, body []byte, text string) []byte {
	var path string
	switch f {
	case provider.FormatChat:
		path = "choices.0.message.content"
	case provider.FormatMessages:
		path = "content.0.text"
	case provider.FormatResponses:
		// first output_text part of the first message item
		res := gjson.GetBytes(body, "output")
		res.ForEach(func(i, item gjson.Result) bool {
			if item.Get("type").String() != "message" {
				return true
			}
			item.Get("content").ForEach(func(j, part gjson.Result) bool {
				if part.Get("type").String() == "output_text" {
					path = fmt.Sprintf("output.%d.content.%d.text", i.Int(), j.Int())
					return false
				}
				return true
			})
			return path == ""
		})
	}
	if path == "" {
		return body
	}
	out, err := sjson.SetBytes(body, path, text)
	if err != nil {
		return body
	}
	return out
}
