package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

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
		var model string
		if f.Multipart() {
			if model, err = provider.MultipartModel(body); err != nil {
				return err
			}
		} else {
			if !gjson.ValidBytes(body) || !isJSONObject(body) {
				return badRequest("%s: malformed JSON body: expected a JSON object", f.RouteName())
			}
			model = gjson.GetBytes(body, "model").String()
		}
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
		if p := caller(c); !p.canUse(model, group) {
			if group, err = s.recheckAccess(ctx, p, model); err != nil {
				return err
			}
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
				// during_call: check the input while the upstream works; a block cancels the call.
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				during = make(chan error, 1)
				in := body
				go func() {
					_, err := runInput(f, in, gs, guardrail.DuringCall, false)
					if err != nil {
						cancel()
					}
					during <- err
				}()
			}
		}
		if f.Streams() && provider.StreamRequested(body) {
			return s.stream(ctx, c, f, group, body, gs, during)
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
		if len(gs) > 0 && hasMode(gs, guardrail.PostCall) {
			if out, err = mapResponseText(f, out, func(t string) (string, error) { return checkAll(gs, guardrail.PostCall, t) }); err != nil {
				return err
			}
		}
		status := res.Status
		if status == 0 {
			status = http.StatusOK
		}
		ct := echo.MIMEApplicationJSON
		if res.ContentType != "" {
			ct = res.ContentType
		}
		return c.Blob(status, ct, out)
	}
}

func (s *Server) stream(ctx context.Context, c echo.Context, f provider.Format, group []*registry.Entry[*router.Deployment], body []byte, gs []*guardrail.Guardrail, during chan error) error {
	st, _, err := s.Router.Stream(ctx, group, f, body)
	if during != nil {
		// during_call: the upstream is already working; hold the first byte until the input
		// check is done (a block has cancelled ctx, so a failed call reports the block).
		if derr := <-during; derr != nil {
			if err == nil {
				st.Close()
			}
			return derr
		}
	}
	if err != nil {
		return err
	}
	defer st.Close()
	post := len(gs) > 0 && hasMode(gs, guardrail.PostCall)
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	w.Flush()
	var text strings.Builder // the answer so far, as the upstream wrote it (post_call only)
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
		data := ev.Data
		if post && ev.Text != "" {
			// BLOCK: re-check the tail of the whole answer, so a keyword split across chunks is
			// caught before the chunk completing it is sent; the stream then ends with an error
			// event. MASK: each chunk's text is masked on its own, as LiteLLM's content filter
			// does in its streaming hook (a masked match split across chunks goes through).
			text.WriteString(ev.Text)
			if _, err := checkAll(gs, guardrail.PostCall, streamCheckWindow(text.String(), len(ev.Text))); err != nil {
				msg := err.Error()
				var ae *Error
				if errors.As(err, &ae) {
					msg = ae.Message
				}
				_, _ = w.Write(provider.ErrorEvent(f, http.StatusBadRequest, msg))
				w.Flush()
				return nil
			}
			data = maskStreamFrames(f, data, func(t string) string {
				if out, err := checkAll(gs, guardrail.PostCall, t); err == nil {
					return out
				}
				return t
			})
		}
		if _, err := w.Write(data); err != nil {
			return nil // client went away
		}
		w.Flush()
	}
}

// postCallWindow is how much of a streamed answer (bytes before the newest chunk) each
// post_call re-check covers: far longer than any keyword, PII value or PEM key, while keeping
// the per-chunk cost bounded on long answers (a full re-scan per chunk is quadratic).
const postCallWindow = 8 << 10

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

// recheckAccess runs when a virtual key is denied a model group: this replica may hold an
// older version of the key (models just widened) or of the group's deployments (access group
// just tagged) than the writer committed. It re-reads both once through the bounded
// read-throughs (same budgets, fail closed); if that does not settle it (budget exhausted),
// it waits up to accessRecheckWait for the change feed to publish newer versions, then the
// denial stands.
func (s *Server) recheckAccess(ctx context.Context, p principal, model string) ([]*registry.Entry[*router.Deployment], error) {
	check := func() ([]*registry.Entry[*router.Deployment], principal, bool) {
		cur := s.refresh(p)
		group := s.Router.Models().Load().ByName(model)
		return group, cur, len(group) > 0 && cur.canUse(model, group)
	}
	_ = s.Keys.Resolve(ctx, p.key.Token)
	if p.key.TeamID != "" && s.Teams != nil {
		_ = s.Teams.Resolve(ctx, p.key.TeamID)
	}
	_ = s.Router.Models().Resolve(ctx, model)
	timer := time.NewTimer(accessRecheckWait)
	defer timer.Stop()
	for {
		keysChanged, modelsChanged, teamsChanged := s.Keys.Changed(), s.Router.Models().Changed(), s.teamsChanged()
		group, cur, ok := check()
		if why := cur.key.Usable(time.Now()); why != "" {
			return nil, authErr(http.StatusUnauthorized, "Authentication Error, "+why+".")
		}
		if ok {
			return group, nil
		}
		select {
		case <-keysChanged:
		case <-modelsChanged:
		case <-teamsChanged:
		case <-timer.C:
			return nil, cur.accessDenied(model, group)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// accessRecheckWait bounds how long a denied key waits for newer key/model versions.
const accessRecheckWait = 100 * time.Millisecond

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

// mapResponseText rewrites every assistant text of a non-streaming answer in format f through
// fn (post_call guardrails): chat choices[].message.content (a string or its "text" parts),
// messages content[] "text" blocks, responses output[] message items' "output_text" parts.
// The body is returned as is when nothing changed; an error from fn is returned as is.
func mapResponseText(f provider.Format, body []byte, fn func(string) (string, error)) ([]byte, error) {
	type loc struct {
		path string
		text string
	}
	var locs []loc
	add := func(path string, v gjson.Result) {
		if v.Type == gjson.String && v.Str != "" {
			locs = append(locs, loc{path, v.Str})
		}
	}
	root := gjson.ParseBytes(body)
	switch f {
	case provider.FormatCompletions:
		root.Get("choices").ForEach(func(i, ch gjson.Result) bool {
			add(fmt.Sprintf("choices.%d.text", i.Int()), ch.Get("text"))
			return true
		})
	case provider.FormatTranscriptions:
		add("text", root.Get("text"))
	case provider.FormatChat:
		root.Get("choices").ForEach(func(i, ch gjson.Result) bool {
			c := ch.Get("message.content")
			if c.Type == gjson.String {
				add(fmt.Sprintf("choices.%d.message.content", i.Int()), c)
				return true
			}
			c.ForEach(func(j, part gjson.Result) bool {
				if part.Get("type").Str == "text" {
					add(fmt.Sprintf("choices.%d.message.content.%d.text", i.Int(), j.Int()), part.Get("text"))
				}
				return true
			})
			return true
		})
	case provider.FormatMessages:
		root.Get("content").ForEach(func(i, blk gjson.Result) bool {
			if blk.Get("type").Str == "text" {
				add(fmt.Sprintf("content.%d.text", i.Int()), blk.Get("text"))
			}
			return true
		})
	case provider.FormatResponses:
		root.Get("output").ForEach(func(i, item gjson.Result) bool {
			if item.Get("type").Str != "message" {
				return true
			}
			item.Get("content").ForEach(func(j, part gjson.Result) bool {
				if part.Get("type").Str == "output_text" {
					add(fmt.Sprintf("output.%d.content.%d.text", i.Int(), j.Int()), part.Get("text"))
				}
				return true
			})
			return true
		})
	}
	out := body
	for _, l := range locs {
		masked, err := fn(l.text)
		if err != nil {
			return nil, err
		}
		if masked == l.text {
			continue
		}
		if out, err = sjson.SetBytes(out, l.path, masked); err != nil {
			return nil, fmt.Errorf("post_call guardrail: rewrite %s: %w", l.path, err)
		}
	}
	return out, nil
}

// maskStreamFrames rewrites the text delta of each SSE frame in data through mask (post_call
// MASK on a stream): chat choices[].delta.content, messages content_block_delta text_delta,
// responses response.output_text.delta. Frames are kept byte for byte unless their text
// changed; data itself is returned when nothing changed.
func maskStreamFrames(f provider.Format, data []byte, mask func(string) string) []byte {
	var out []byte // nil until a frame changes
	for pos := 0; pos < len(data); {
		n := sseFrameLen(data[pos:])
		frame := data[pos : pos+n]
		nf, changed := maskFrame(f, frame, mask)
		if changed && out == nil {
			out = append(make([]byte, 0, len(data)+64), data[:pos]...)
		}
		if out != nil {
			out = append(out, nf...)
		}
		pos += n
	}
	if out == nil {
		return data
	}
	return out
}

// sseFrameLen is the length of the first frame of b, its terminating blank line included.
func sseFrameLen(b []byte) int {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return len(b)
		}
		line := bytes.TrimRight(b[i:i+j], "\r")
		i += j + 1
		if len(line) == 0 {
			return i
		}
	}
	return len(b)
}

// maskFrame masks the text delta of one SSE frame; the frame is returned unchanged (and
// false) when there is nothing to mask.
func maskFrame(f provider.Format, frame []byte, mask func(string) string) ([]byte, bool) {
	var event string
	var data []byte
	lines := 0
	for _, line := range bytes.Split(frame, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		switch {
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if lines > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
			lines++
		}
	}
	if len(data) == 0 || data[0] != '{' || !gjson.ValidBytes(data) {
		return frame, false
	}
	root := gjson.ParseBytes(data)
	var paths []string
	switch f {
	case provider.FormatCompletions:
		root.Get("choices").ForEach(func(i, ch gjson.Result) bool {
			if ch.Get("text").Type == gjson.String {
				paths = append(paths, fmt.Sprintf("choices.%d.text", i.Int()))
			}
			return true
		})
	case provider.FormatChat:
		root.Get("choices").ForEach(func(i, ch gjson.Result) bool {
			if ch.Get("delta.content").Type == gjson.String {
				paths = append(paths, fmt.Sprintf("choices.%d.delta.content", i.Int()))
			}
			return true
		})
	case provider.FormatMessages:
		if root.Get("type").Str == "content_block_delta" && root.Get("delta.type").Str == "text_delta" {
			paths = append(paths, "delta.text")
		}
	case provider.FormatResponses:
		if root.Get("type").Str == "response.output_text.delta" {
			paths = append(paths, "delta")
		}
	}
	changed := false
	for _, p := range paths {
		t := gjson.GetBytes(data, p).Str
		m := mask(t)
		if m == t {
			continue
		}
		nd, err := sjson.SetBytes(data, p, m)
		if err != nil {
			continue
		}
		data, changed = nd, true
	}
	if !changed {
		return frame, false
	}
	var b []byte
	if event != "" {
		b = append(b, "event: "+event+"\n"...)
	}
	b = append(b, "data: "...)
	b = append(b, bytes.ReplaceAll(data, []byte("\n"), []byte("\ndata: "))...)
	return append(b, "\n\n"...), true
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
