package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"strings"

	pipeline "lockstep/pkg/call"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/telemetry"
)

// The call pipeline (DESIGN.md "One call pipeline"). Every route that spends upstream money —
// the four LLM routes (llm.go) and A2A message/send and message/stream (agents.go) — runs the
// same steps, in this order, in this file:
//
//  1. authenticate: the auth middleware (auth(anyKey)) puts the caller (principal) on the
//     request; A2A carries it in the context to the completer;
//  2. resolve: the model group (read-through on a miss), or for an agent its model group or
//     its own upstream (see agentTarget);
//  3. model access: a virtual key may call the model only if its models allow it — for an
//     agent, the agent's model, also when the agent has its own upstream (checkAccess);
//  4. limits: Server.Limits.Admit (no-op when nil), released by the spend step;
//  5. guardrails pre_call (rewrites the request) and during_call (checks it while the
//     upstream works; a block cancels the call), over every request text location
//     (format.MapRequestText);
//  6. route: the router (retries, cooldowns) or the agent's own deployment;
//  7. guardrails post_call over every answer text location (format.MapResponseText) or,
//     streamed, every frame (format.MapStreamText): BLOCK checks each streamed text as it
//     grows (every choice, every tool call), MASK rewrites each frame, *.done and
//     response.completed repeats included;
//  8. spend: the Ticket from step 4 is told how the call ended (deployment, token usage).
//
// A route only adds its format: how it reads the request and how it writes the answer.

// Admitter, Ticket, CallInfo and Outcome are the limits step's contract (pkg/call).
type (
	Admitter = pipeline.Admitter
	Ticket   = pipeline.Ticket
	CallInfo = pipeline.CallInfo
	Outcome  = pipeline.Outcome
)

// target is where a call is routed: a model group through the router, or one deployment
// called directly (an agent with its own upstream).
type target struct {
	group  []*registry.Entry[*router.Deployment]
	direct *router.Deployment
}

// guardrailBlock is a guardrail's BLOCK in the pipeline (pipeline.Blocked).
type guardrailBlock = pipeline.Blocked

// call is one request going through the pipeline; build it with Server.startCall.
type call struct {
	s      *Server
	f      format.Format
	target target
	gs     []*guardrail.Guardrail
	post   bool   // a post_call guardrail runs
	body   []byte // the request as sent upstream (pre_call applied)
	ticket Ticket
	hdr    provider.Headers   // the client's request header (forwarding) and the answer's
	during chan error         // during_call result, nil when none runs
	cancel context.CancelFunc // cancels the upstream call (during_call block); may be nil
	// the response headers' facts (headers.go): the call id, the deployment that answered and
	// how many upstream calls were made, the fallbacks tried before this call; mock is a
	// request hook's failure raised instead of routing (hooks.go), nil without one
	id        string
	idHeader  []string // x-litellm-call-id: id
	d         *router.Deployment
	attempts  int
	fallbacks int
	mock      func(ctx context.Context, c *call) error
	timeout   []string        // x-litellm-timeout when the request set one; nil: the deployment's
	span      *telemetry.Span // the call's span (tracing.go); nil when tracing is off
}

// callSpec is what a route gives the pipeline.
type callSpec struct {
	format format.Format
	route  string // CallInfo.Route
	who    principal
	model  string
	body   []byte
	stream bool
	header http.Header
	// reqHeader is the request's header (the end user may be named there); nil: none.
	reqHeader http.Header
	// resolve finds the call's target (step 2); nil: the model group named model
	// (resolveGroup).
	resolve func(ctx context.Context) (target, error)
	// guardrails selects the guardrails the call runs and returns the body to send (e.g. with
	// the "guardrails" member removed); nil: Server.requestGuardrailsOf. (The LLM routes leave
	// both nil: no closures per request.)
	guardrails func(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error)
}

// resolveGroup is step 2 of an LLM route: the model group (read-through on a miss); an
// unknown name is the route's invalid model error.
func (s *Server) resolveGroup(ctx context.Context, f format.Format, model string) (target, error) {
	group, err := s.Router.Group(ctx, model)
	if errors.Is(err, router.ErrUnknownModel) {
		return target{}, invalidModel(f, model)
	}
	return target{group: group}, err
}

// startCall runs steps 2–5. The returned ctx must be used for the call (a during_call block
// cancels it). On error nothing was admitted (or the admission was released).
func (s *Server) startCall(ctx context.Context, sp callSpec) (context.Context, *call, error) {
	return s.startScannedCall(ctx, sp, nil)
}

// startSteps is startScannedCall's steps 2–5 (startScannedCall, tracing.go: the call's span
// around them); span is the call's (each step a child span).
func (s *Server) startSteps(ctx context.Context, sp callSpec, rf *requestFields, span *telemetry.Span) (context.Context, *call, error) {
	var t target
	var err error
	step := span.Child("resolve")
	if sp.resolve != nil {
		t, err = sp.resolve(ctx)
	} else {
		sp.model = sp.who.aliased(sp.model) // a key's aliases, a team's model_aliases
		t, err = s.resolveGroup(ctx, sp.format, sp.model)
	}
	step.EndErr(err)
	if err != nil {
		return ctx, nil, err
	}
	step = span.Child("access")
	t, err = s.checkAccess(ctx, sp.who, sp.model, t)
	step.EndErr(err)
	if err != nil {
		return ctx, nil, err
	}
	if k := sp.who.key; k != nil && len(k.EnforcedParams) > 0 {
		if err := checkEnforcedParams(k.EnforcedParams, sp.body); err != nil {
			return ctx, nil, err
		}
	}
	if k := sp.who.key; k != nil && len(k.AllowedCacheControls) > 0 {
		if err := checkCacheControls(k.AllowedCacheControls, sp.body); err != nil {
			return ctx, nil, err
		}
	}
	ci := CallInfo{Key: sp.who.key, Route: sp.route, Model: sp.model, Stream: sp.stream, Header: sp.header,
		Team: sp.who.team, User: sp.who.user, Organization: sp.who.org}
	if rf == nil {
		rf = new(requestFields)
		*rf = scanRequest(sp.body)
	}
	if ci.EndUserID, ci.EndUser, err = s.endUser(sp.reqHeader, rf); err != nil {
		return ctx, nil, err
	}
	if eu := ci.EndUser; eu != nil && eu.AllowedModelRegion != "" && t.direct == nil && len(t.group) > 0 {
		// LiteLLM's region routing: only the deployments in the end user's region.
		if t.group = router.InRegion(t.group, eu.AllowedModelRegion); len(t.group) == 0 {
			return ctx, nil, &router.NoDeploymentsError{Model: sp.model, PreCallChecks: true}
		}
	}
	c := &call{s: s, f: sp.format, target: t, body: sp.body, hdr: provider.Headers{In: sp.reqHeader, Out: sp.header}}
	c.id, c.idHeader = s.newCallID()
	ci.CallID = c.id
	if s.Limits != nil {
		step = span.Child("limits")
		tk, err := s.Limits.Admit(ctx, ci)
		step.EndErr(err)
		if err != nil {
			return ctx, nil, err
		}
		c.ticket = tk
	}
	fail := func(err error) (context.Context, *call, error) {
		c.done(nil, format.Usage{}, err)
		return ctx, nil, err
	}
	if sp.guardrails != nil {
		c.gs, c.body, err = sp.guardrails(ctx, c.body)
	} else {
		c.gs, c.body, err = s.requestGuardrailsOf(ctx, c.body, rf)
	}
	if err == nil && sp.who.key != nil && (len(sp.who.key.Guardrails) > 0 || (sp.who.team != nil && len(sp.who.team.Fields.Guardrails) > 0)) {
		c.gs, err = s.callerGuardrails(ctx, sp.who, c.gs)
	}
	if err != nil {
		return fail(err)
	}
	if len(c.gs) == 0 {
		return ctx, c, nil // hot path: the body is not walked
	}
	c.post = hasMode(c.gs, guardrail.PostCall)
	if hasMode(c.gs, guardrail.PreCall) {
		step = span.Child("guardrails.pre_call")
		c.body, err = format.MapRequestText(c.f, c.body, c.check(guardrail.PreCall, true))
		step.EndErr(err)
		if err != nil {
			return fail(inputErr(err))
		}
	}
	if hasMode(c.gs, guardrail.DuringCall) {
		// during_call: check the input while the upstream works; a block cancels the call.
		ctx, c.cancel = context.WithCancel(ctx)
		c.during = make(chan error, 1)
		in, cancel := c.body, c.cancel
		ds := span.Child("guardrails.during_call")
		go func() {
			_, err := format.MapRequestText(c.f, in, c.check(guardrail.DuringCall, true))
			ds.EndErr(err)
			if err != nil {
				cancel()
			}
			c.during <- inputErr(err)
		}()
	}
	return ctx, c, nil
}

// inputErr turns a MapRequestText error into the pipeline's: blocks as they are, an invalid
// body as a 400.
func inputErr(err error) error {
	if err == nil {
		return nil
	}
	var gb *guardrailBlock
	var ue *format.UpstreamError
	if errors.As(err, &gb) || errors.As(err, &ue) {
		return err
	}
	return badRequest("%v", err)
}

// check returns the TextFunc applying the mode-m guardrails to one complete text: the
// masked text, or a *guardrailBlock.
func (c *call) check(m guardrail.Mode, input bool) format.TextFunc {
	return func(t format.Text) (string, error) { return c.apply(m, t.Value, input) }
}

func (c *call) apply(m guardrail.Mode, text string, input bool) (string, error) {
	for _, g := range c.gs {
		if !g.Runs(m) {
			continue
		}
		out, err := g.Check(text)
		if err != nil {
			var be *guardrail.BlockedError
			if errors.As(err, &be) {
				return "", &guardrailBlock{BlockedError: be, Input: input}
			}
			return "", err
		}
		if m != guardrail.DuringCall {
			text = out
		}
	}
	return text, nil
}

// waitDuring waits for the during_call check; its block wins over the call's own error.
func (c *call) waitDuring() error {
	if c.during == nil {
		return nil
	}
	err := <-c.during
	c.during = nil
	return err
}

// done ends the call for the limits step (once).
func (c *call) done(d *router.Deployment, u format.Usage, err error) {
	if c.cancel != nil {
		c.cancel()
	}
	if c.ticket != nil {
		step := c.span.Child("spend")
		c.ticket.Done(Outcome{Deployment: d, Usage: u, Err: err})
		step.End()
		c.ticket = nil
	}
	c.endSpan(d, u, err)
}

// do runs steps 6–8 for a non-streamed call: the answer in the call's format, post_call
// guardrails applied.
func (c *call) do(ctx context.Context) (*provider.Response, error) {
	var res *provider.Response
	var d *router.Deployment
	var err error
	switch {
	case c.mock != nil:
		err = c.mock(ctx, c)
	case c.target.direct != nil:
		d = c.target.direct
		res, err = c.s.Client.DoWith(ctx, d.Deployment, c.f, c.body, c.hdr)
		c.attempts = 1
	default:
		res, d, c.attempts, err = c.s.Router.DoN(ctx, c.target.group, c.f, c.body, c.hdr)
	}
	c.d = d
	if derr := c.waitDuring(); derr != nil {
		err = derr
	}
	if err != nil {
		c.done(d, format.Usage{}, err)
		return nil, err
	}
	usage := res.Usage
	if c.post {
		step := c.span.Child("guardrails.post_call")
		body, err := format.MapResponseText(c.f, res.Body, c.check(guardrail.PostCall, false))
		step.EndErr(err)
		if err != nil {
			c.done(d, usage, err)
			return nil, err
		}
		if len(body) != len(res.Body) || (len(body) > 0 && &body[0] != &res.Body[0]) {
			res = res.WithBody(c.f, body)
		}
	}
	c.done(d, usage, nil)
	return res, nil
}

// stream runs steps 6–8 for a streamed call: a Stream whose events have the post_call
// guardrails applied. Errors before the first event are returned here; a post_call BLOCK
// ends the stream with a *guardrailBlock from Next. Close ends the call.
func (c *call) stream(ctx context.Context) (provider.Stream, error) {
	var st provider.Stream
	var d *router.Deployment
	var err error
	uctx, up := ctx, (*upstreamCtx)(nil)
	if c.ticket != nil { // a charged call outlives its client (stream_charge.go)
		up = detachUpstream(ctx)
		uctx = up.ctx
	}
	switch {
	case c.mock != nil:
		err = c.mock(ctx, c) // the client's context: a hook has no upstream to outlive it
	case c.target.direct != nil:
		d = c.target.direct
		st, err = c.s.Client.StreamWith(uctx, d.Deployment, c.f, c.body, c.hdr)
		c.attempts = 1
	default:
		st, d, c.attempts, err = c.s.Router.StreamN(uctx, c.target.group, c.f, c.body, c.hdr)
	}
	c.d = d
	// during_call: the upstream is already working; hold the first byte until the input check
	// is done (a block has cancelled ctx, so a failed call reports the block).
	if derr := c.waitDuring(); derr != nil {
		if err == nil {
			st.Close()
		}
		err = derr
	}
	if err != nil {
		if up != nil {
			up.end()
		}
		c.done(d, format.Usage{}, err)
		return nil, err
	}
	g := newGuardedStream(c, st, d)
	if up != nil {
		up.started.Store(true)
		g.up = up
	}
	return g, nil
}

// guardedStream applies post_call guardrails to a stream and reports its end to the limits
// step.
//
// Every text of every frame is checked (format.MapStreamText). A streamed text (a delta:
// the content of one choice, one tool call's arguments, one content block, ...) is BLOCK-
// checked as the tail of its whole text so far (streamCheckWindow) when its frame arrives, so
// a keyword split across chunks is caught before the chunk completing it is sent. With a MASK
// rule in play, frames carrying deltas are held back until streamHold more bytes of their
// text have arrived (or the end comes); a frame without deltas waits behind held frames, in
// order, and releases nothing (a match can still span it): each released delta then
// carries the masked text up to its end, moved back to before any match still open there
// (guardrail.SafeCut), so a value split across chunks is masked whole and never leaves in
// pieces. A frame that repeats a whole text (*.done, response.completed) is masked whole.
type guardedStream struct {
	c     *call
	st    provider.Stream
	d     *router.Deployment
	hold  int // bytes of each streamed text held back; 0 without MASK rules
	chans map[string]*streamText
	queue []*heldFrame
	out   []byte // frames ready to return
	text  strings.Builder
	next  error // error (or io.EOF) to return once out is drained
	err   error // how the call ended, for the limits step
	ended bool

	// up is the upstream's context of a charged call (nil: not charged); frames and textBytes
	// count what the upstream streamed, for the estimate (stream_charge.go)
	up        *upstreamCtx
	frames    int
	textBytes int
}

// streamText is one streamed text (channel) of a guardedStream.
type streamText struct {
	all      strings.Builder // the whole text so far (BLOCK window)
	pending  string          // received, not yet released
	released int             // length of the text released so far
	queued   int             // held deltas of this text
}

// heldFrame is a frame whose deltas wait for more text.
type heldFrame struct {
	frame  []byte
	deltas []heldDelta
}

type heldDelta struct {
	ch  *streamText
	end int // offset in its text where this delta ends
}

// streamHold is how many bytes of each streamed text a MASK guardrail holds back: longer than
// any email, card number, phone number, SSN, IBAN or keyword a content filter masks.
const streamHold = 256

func newGuardedStream(c *call, st provider.Stream, d *router.Deployment) *guardedStream {
	g := &guardedStream{c: c, st: st, d: d}
	if c.post {
		for _, gr := range c.gs {
			if gr.Runs(guardrail.PostCall) && gr.Masks() {
				g.hold = streamHold
			}
		}
	}
	return g
}

// Next returns the next event, its texts checked and masked; a BLOCK is returned as a
// *guardrailBlock (the upstream stream is closed). Held frames make some events carry the
// frames of several upstream events.
func (g *guardedStream) Next() (provider.Event, error) {
	if !g.c.post {
		ev, err := g.st.Next()
		if err != nil {
			g.finish(err)
			return ev, err
		}
		g.count(ev)
		return ev, nil
	}
	for len(g.out) == 0 {
		if g.next != nil {
			g.finish(g.next)
			return provider.Event{}, g.next
		}
		ev, err := g.st.Next()
		if err != nil {
			g.next = err
			if ferr := g.release(true); ferr != nil {
				g.next = ferr
			}
			continue
		}
		g.count(ev)
		if err := g.add(ev.Data); err != nil {
			g.next = err
			g.out, g.queue = nil, nil
			g.st.Close()
		}
	}
	ev := provider.Event{Data: g.out, Text: g.text.String()}
	g.out = nil
	g.text.Reset()
	return ev, nil
}

// add takes the frames of one upstream event: BLOCK-checks their deltas, holds or releases.
func (g *guardedStream) add(data []byte) error {
	for pos := 0; pos < len(data); {
		n := sseFrameLen(data[pos:])
		frame := data[pos : pos+n]
		pos += n
		var deltas []heldDelta
		_, err := format.MapStreamText(g.c.f, frame, func(t format.Text) (string, error) {
			if !t.Delta {
				return t.Value, nil
			}
			ch := g.channel(t.Channel)
			ch.all.WriteString(t.Value)
			ch.pending += strings.Clone(t.Value) // t.Value aliases data, a reused buffer
			ch.queued++
			if _, err := g.c.apply(guardrail.PostCall, streamCheckWindow(ch.all.String(), len(t.Value)), false); err != nil {
				return "", err
			}
			deltas = append(deltas, heldDelta{ch: ch, end: ch.all.Len()})
			return t.Value, nil
		})
		if err != nil {
			return err
		}
		if len(deltas) == 0 {
			// No streamed text (an empty or role-only delta, a finish_reason, a ping): it
			// changes nothing for the held text, so it passes at once only when nothing is
			// held, else waits in order behind the held frames (issue 17 input 13: releasing
			// them here sent a card split around such a frame in clear).
			if len(g.queue) == 0 {
				if err := g.emit(&heldFrame{frame: frame}, true); err != nil {
					return err
				}
				continue
			}
			g.queue = append(g.queue, &heldFrame{frame: append([]byte(nil), frame...)})
			continue
		}
		g.queue = append(g.queue, &heldFrame{frame: append([]byte(nil), frame...), deltas: deltas})
		if err := g.release(false); err != nil {
			return err
		}
	}
	return nil
}

func (g *guardedStream) channel(name string) *streamText {
	if g.chans == nil {
		g.chans = map[string]*streamText{}
	}
	ch := g.chans[name]
	if ch == nil {
		ch = &streamText{}
		g.chans[name] = ch
	}
	return ch
}

// release emits held frames from the head of the queue: all of them when final, else those
// whose deltas are followed by at least hold bytes of their text.
func (g *guardedStream) release(final bool) error {
	for len(g.queue) > 0 {
		f := g.queue[0]
		if !final {
			for _, d := range f.deltas {
				if d.ch.all.Len()-d.end < g.hold {
					return nil
				}
			}
		}
		g.queue = g.queue[1:]
		if err := g.emit(f, final); err != nil {
			return err
		}
	}
	return nil
}

// emit appends frame f to the output with its texts masked: each delta carries its text's
// pending bytes up to its end (moved back before an open match, unless it is the last held
// delta of its text on a final release), complete texts are masked whole.
func (g *guardedStream) emit(f *heldFrame, final bool) error {
	i := 0
	frame, err := format.MapStreamText(g.c.f, f.frame, func(t format.Text) (string, error) {
		if !t.Delta || i >= len(f.deltas) {
			return g.c.apply(guardrail.PostCall, t.Value, false)
		}
		d := f.deltas[i]
		i++
		ch := d.ch
		ch.queued--
		cut := min(d.end-ch.released, len(ch.pending))
		if final && ch.queued == 0 {
			cut = len(ch.pending)
		} else if g.hold > 0 {
			for _, gr := range g.c.gs {
				if gr.Runs(guardrail.PostCall) {
					cut = gr.SafeCut(ch.pending, cut)
				}
			}
		}
		out, err := g.c.apply(guardrail.PostCall, ch.pending[:cut], false)
		if err != nil {
			return "", err
		}
		ch.pending, ch.released = ch.pending[cut:], ch.released+cut
		if t.Answer {
			g.text.WriteString(out)
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	g.out = append(g.out, frame...)
	return nil
}

func (g *guardedStream) finish(err error) {
	if err != io.EOF {
		g.err = err
	}
	g.end()
}

func (g *guardedStream) end() {
	if !g.ended {
		g.ended = true
		if g.up != nil {
			g.up.end()
		}
		g.c.done(g.d, g.charge(), g.err)
	}
}

// Close releases the upstream stream and ends the call (a client that went away mid-stream
// ends it with context.Canceled, charged for what the upstream generated: see drain).
func (g *guardedStream) Close() error {
	if !g.ended {
		if g.err == nil {
			g.err = context.Canceled
		}
		g.drain()
	}
	g.end()
	return g.st.Close()
}

// sseFrameLen is the length of the first SSE frame of b, its terminating blank line included.
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

// postCallWindow is how much of a streamed answer (bytes before the newest chunk) each
// post_call re-check covers: far longer than any keyword, PII value or PEM key, while keeping
// the per-chunk cost bounded on long answers (a full re-scan per chunk is quadratic).
const postCallWindow = 8 << 10
