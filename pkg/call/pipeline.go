package call

import (
	"context"
	"errors"
	"net/http"

	"lockstep/pkg/a2a"
	"lockstep/pkg/accounts"
	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/policy"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/telemetry"
)

// The call pipeline (DESIGN.md "One call pipeline"). Every route that spends upstream money —
// the LLM routes and A2A message/send and message/stream — runs the same steps, in this
// order, in this package:
//
//  1. authenticate: pkg/api's auth middleware finds the caller; a route passes it as
//     Spec.Caller, A2A as a2a.Call.Caller (a Caller value);
//  2. resolve: the model group (read-through on a miss), or for an agent its model group or
//     its own upstream (agentTarget);
//  3. model access: a virtual key may call the model only if its models allow it — for an
//     agent, the agent's model, also when the agent has its own upstream (checkAccess);
//  4. limits: Pipeline.Limits.Admit (no-op when nil), released by the spend step;
//  5. guardrails pre_call (rewrites the request) and during_call (checks it while the
//     upstream works; a block cancels the call), over every request text location
//     (format.MapRequestText); the guardrails are resolved by one resolver
//     (resolveGuardrails) for requests, multipart forms, keys, teams (their guardrail
//     policies too, pkg/policy) and agents;
//  6. route: the router (retries, cooldowns) or the agent's own deployment;
//  7. guardrails post_call over every answer text location (format.MapResponseText) or,
//     streamed, every frame (format.MapStreamText): BLOCK checks each streamed text as it
//     grows (every choice, every tool call), MASK rewrites each frame, *.done and
//     response.completed repeats included;
//  8. spend: the Ticket from step 4 is told how the call ended (deployment, token usage).
//
// A route only adds its format: how it reads the request and how it writes the answer. The
// steps' refusals are this package's typed errors (errors.go); pkg/api's one error table maps
// them to a status and an envelope.

// Pipeline is the call pipeline of one replica: the registries it resolves from, the router
// and client it calls upstreams with, and the limits step. Build it once (fields set before
// the first call, never after); it is safe for concurrent use.
type Pipeline struct {
	Router *router.Router
	Client *provider.Client
	// Deployments builds an agent's own deployment under the secrets policy.
	Deployments *provider.Builder
	Guardrails  *registry.Registry[*guardrail.Guardrail]
	// Policies are LiteLLM's guardrail policies (sql/017; nil: none): a key's or team's
	// "policies" name them, and their guardrails run as the key's own (callerGuardrails).
	Policies *registry.Registry[*policy.Policy]
	// Attachments are LiteLLM's policy attachments (sql/021; nil: none): the policies they
	// attach to a call run as the caller's too (callerGuardrails, attachedPolicies).
	Attachments *registry.Registry[*policy.Attachment]
	Agents      *registry.Registry[*a2a.Agent]
	Keys        *registry.Registry[*keys.Key]
	// Teams, Users and EndUsers (nil: none): the access re-check and the end user step.
	Teams    *registry.Registry[*accounts.Team]
	Users    *registry.Registry[*accounts.User]
	EndUsers *registry.Registry[*accounts.EndUser]
	// Limits is the limits step (Admitter); nil admits every call.
	Limits Admitter
	// IDs makes the call ids (x-litellm-call-id, the spend log's request_id).
	IDs *IDs
}

// target is where a call is routed: a model group through the router, or one deployment
// called directly (an agent with its own upstream).
type target struct {
	group  []*registry.Entry[*router.Deployment]
	direct *router.Deployment
}

// Call is one request going through the pipeline; Start makes it, Do or Stream ends it.
type Call struct {
	p      *Pipeline
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
	mock      func(ctx context.Context, c *Call) error
	timeout   []string // x-litellm-timeout when the request set one; nil: the deployment's
	// rs are the caller's router_settings (x-litellm-max-retries and x-litellm-timeout from
	// them; nil: none)
	rs     *router.CallerSettings
	span   *telemetry.Span // the call's span (tracing.go); nil when tracing is off
	respID string          // the answer's id the client saw (response_id.go), for the spend log
	images int             // images an image generation answered (priced per image)
	// applied are the guardrail policies the call applied (x-litellm-applied-policies)
	applied applied
}

// Spec is what a route gives the pipeline.
type Spec struct {
	Format format.Format
	// Route is CallInfo.Route: the format's name ("chat", ...) or "a2a".
	Route  string
	Caller Caller
	// Model is the model group (or "a2a/<agent>") the body names.
	Model  string
	Body   []byte
	Stream bool
	// Header is the response header (the limits step and LiteLLM's headers write it); nil
	// when the answer's header has gone out already.
	Header http.Header
	// ReqHeader is the request's header (the end user may be named there; forwarded client
	// headers); nil: none.
	ReqHeader http.Header
	// resolve finds the call's target (step 2); nil: the model group named Model
	// (resolveGroup).
	resolve func(ctx context.Context) (target, error)
	// guardrails selects the guardrails the call runs and returns the body to send (e.g. with
	// the "guardrails" member removed); nil: the request's (requestGuardrails, or
	// multipartGuardrails for a multipart format). The LLM routes leave both nil: no
	// closures per request.
	guardrails func(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error)
}

// resolveGroup is step 2 of an LLM route: the model group (read-through on a miss); an
// unknown name is an *UnknownModel.
func (p *Pipeline) resolveGroup(ctx context.Context, f format.Format, model string) (target, error) {
	group, err := p.Router.Group(ctx, model)
	if errors.Is(err, router.ErrUnknownModel) {
		return target{}, &UnknownModel{Route: f.RouteName(), Model: model}
	}
	return target{group: group}, err
}

// Start runs steps 2–5 of sp. The returned ctx must be used for the call (a during_call
// block cancels it). On error nothing was admitted (or the admission was released). rf are
// sp.Body's members already scanned (nil: scanned here).
func (p *Pipeline) Start(ctx context.Context, sp Spec, rf *Fields) (context.Context, *Call, error) {
	ctx, span := telemetry.StartCall(ctx, sp.Route, sp.Model, sp.Stream)
	ctx, c, err := p.startSteps(ctx, sp, rf, span)
	if err != nil {
		span.EndCall(telemetry.CallResult{Err: err})
		return ctx, c, err
	}
	c.span = span
	return ctx, c, nil
}

// startSteps is Start's steps 2–5; span is the call's (each step a child span).
func (p *Pipeline) startSteps(ctx context.Context, sp Spec, rf *Fields, span *telemetry.Span) (context.Context, *Call, error) {
	var t target
	var err error
	step := span.Child("resolve")
	if sp.resolve != nil {
		t, err = sp.resolve(ctx)
	} else {
		sp.Model = sp.Caller.Aliased(sp.Model) // a key's aliases, a team's model_aliases
		t, err = p.resolveGroup(ctx, sp.Format, sp.Model)
	}
	step.EndErr(err)
	if err != nil {
		return ctx, nil, err
	}
	step = span.Child("access")
	t, err = p.checkAccess(ctx, sp.Caller, sp.Model, t)
	step.EndErr(err)
	if err != nil {
		return ctx, nil, err
	}
	who := sp.Caller
	if k := who.Key; k != nil && len(k.X().EnforcedParams) > 0 {
		if err := checkEnforcedParams(k.X().EnforcedParams, sp.Body); err != nil {
			return ctx, nil, err
		}
	}
	if k := who.Key; k != nil && len(k.X().AllowedCacheControls) > 0 {
		if err := checkCacheControls(k.X().AllowedCacheControls, sp.Body); err != nil {
			return ctx, nil, err
		}
	}
	ci := CallInfo{Key: who.Key, Route: sp.Route, Model: sp.Model, Stream: sp.Stream, Header: sp.Header,
		Team: who.Team, User: who.User, Organization: who.Org, Project: who.Project}
	if rf == nil {
		rf = new(Fields)
		*rf = Scan(sp.Body)
	}
	if ci.EndUserID, ci.EndUser, err = p.endUser(sp.ReqHeader, rf); err != nil {
		return ctx, nil, err
	}
	ci.Tags = requestTags(rf.tags)
	if eu := ci.EndUser; eu != nil && eu.AllowedModelRegion != "" && t.direct == nil && len(t.group) > 0 {
		// LiteLLM's region routing: only the deployments in the end user's region.
		if t.group = router.InRegion(t.group, eu.AllowedModelRegion); len(t.group) == 0 {
			return ctx, nil, &router.NoDeploymentsError{Model: sp.Model, PreCallChecks: true}
		}
	}
	c := &Call{p: p, f: sp.Format, target: t, body: sp.Body, hdr: provider.Headers{In: sp.ReqHeader, Out: sp.Header}}
	c.id, c.idHeader = p.IDs.newCallID()
	ci.CallID = c.id
	if p.Limits != nil {
		step = span.Child("limits")
		tk, err := p.Limits.Admit(ctx, ci)
		step.EndErr(err)
		if err != nil {
			return ctx, nil, err
		}
		c.ticket = tk
	}
	fail := func(err error) (context.Context, *Call, error) {
		c.done(nil, format.Usage{}, err)
		return ctx, nil, err
	}
	switch {
	case sp.guardrails != nil:
		c.gs, c.body, err = sp.guardrails(ctx, c.body)
	case sp.Format.Multipart():
		c.gs, c.body, err = p.multipartGuardrails(ctx, c.body)
	default:
		c.gs, c.body, err = p.requestGuardrails(ctx, c.body, rf)
	}
	if err == nil && (who.hasGuardrails() || p.attached()) {
		c.gs, c.applied, err = p.callerGuardrails(ctx, who, ci.Model, ci.Tags, c.gs)
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
// body as an *Invalid (400).
func inputErr(err error) error {
	if err == nil {
		return nil
	}
	var gb *Blocked
	var ue *format.UpstreamError
	var re *format.RequestError
	if errors.As(err, &gb) || errors.As(err, &ue) || errors.As(err, &re) {
		return err
	}
	return &Invalid{Msg: err.Error()}
}

// check returns the TextFunc applying the mode-m guardrails to one complete text: the
// masked text, or a *Blocked.
func (c *Call) check(m guardrail.Mode, input bool) format.TextFunc {
	return func(t format.Text) (string, error) { return c.apply(m, t.Value, input) }
}

func (c *Call) apply(m guardrail.Mode, text string, input bool) (string, error) {
	for _, g := range c.gs {
		if !g.Runs(m) {
			continue
		}
		out, err := g.Check(text)
		if err != nil {
			var be *guardrail.BlockedError
			if errors.As(err, &be) {
				return "", &Blocked{BlockedError: be, Input: input}
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
func (c *Call) waitDuring() error {
	if c.during == nil {
		return nil
	}
	err := <-c.during
	c.during = nil
	return err
}

// done ends the call for the limits step (once).
func (c *Call) done(d *router.Deployment, u format.Usage, err error) {
	if c.cancel != nil {
		c.cancel()
	}
	if c.ticket != nil {
		step := c.span.Child("spend")
		c.ticket.Done(Outcome{Deployment: d, Usage: u, Err: err, ResponseID: c.respID, Images: c.images})
		step.End()
		c.ticket = nil
	}
	c.endSpan(d, u, err)
}

// Do runs steps 6–8 for a non-streamed call: the answer in the call's format, post_call
// guardrails applied.
func (c *Call) Do(ctx context.Context) (*provider.Response, error) {
	var res *provider.Response
	var d *router.Deployment
	var err error
	switch {
	case c.mock != nil:
		err = c.mock(ctx, c)
	case c.target.direct != nil:
		d = c.target.direct
		res, err = c.p.Client.DoWith(ctx, d.Deployment, c.f, c.body, c.hdr)
		c.attempts = 1
	default:
		res, d, c.attempts, err = c.p.Router.DoN(ctx, c.target.group, c.f, c.body, c.hdr)
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
	if c.ticket != nil { // only the spend log reads it: no copy for an unmetered call
		c.respID = responseID(res.Body)
	}
	if c.f == format.FormatImages {
		c.images = imageCount(res.Body)
	}
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

// Stream runs steps 6–8 for a streamed call: a Stream whose events have the post_call
// guardrails applied. Errors before the first event are returned here; a post_call BLOCK
// ends the stream with a *Blocked from Next. Close ends the call.
func (c *Call) Stream(ctx context.Context) (provider.Stream, error) {
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
		st, err = c.p.Client.StreamWith(uctx, d.Deployment, c.f, c.body, c.hdr)
		c.attempts = 1
	default:
		st, d, c.attempts, err = c.p.Router.StreamN(uctx, c.target.group, c.f, c.body, c.hdr)
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
