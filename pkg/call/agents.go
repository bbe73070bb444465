package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/sjson"

	"lockstep/pkg/a2a"
	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// AgentModelPrefix names an agent as a model on the LLM routes (API.md "Agents and A2A":
// `model: "a2a/<agent name>"` calls an agent as a model): "a2a/<agent_name or agent_id>".
const AgentModelPrefix = "a2a/"

// AgentModel makes sp (an LLM route call whose Model is "a2a/<agent>") call that agent as a
// model, through the same pipeline as the A2A routes: the target is the agent's
// (agentTarget: its own upstream, or its model group), model access is checked on the
// agent's model (litellm_params.model, as on POST /a2a/{agent}), and the guardrails are the
// request's plus the agent's (with every default_on one). The request body is sent in the
// route's own format, translated to the agent's deployment as for any model.
//
// An unknown agent is the route's *UnknownModel (`Invalid model name passed in
// model=a2a/<name>`), found with the agents read-through budget (never the models one).
func (p *Pipeline) AgentModel(ctx context.Context, sp *Spec) error {
	name := strings.TrimPrefix(sp.Model, AgentModelPrefix)
	agent, err := p.ResolveAgent(ctx, name)
	if errors.Is(err, a2a.ErrAgentNotFound) {
		return &UnknownModel{Route: sp.Format.RouteName(), Model: sp.Model}
	}
	if err != nil {
		return err
	}
	sp.Model = agent.Model
	sp.resolve = func(ctx context.Context) (target, error) { return p.agentTarget(ctx, agent) }
	sp.guardrails = func(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
		rf := Scan(body) // not the route's: that one stays on its stack (no allocation per call)
		gs, body, err := p.requestGuardrails(ctx, body, &rf)
		if err != nil {
			return nil, nil, err
		}
		if gs, err = p.agentGuardrails(ctx, gs, agent); err != nil {
			return nil, nil, err
		}
		return gs, body, nil
	}
	return nil
}

// ResolveAgent finds an agent by agent_id, then agent_name, with a read-through (the AGENTS
// budget: the store matches either column) on a miss; a2a.ErrAgentNotFound when there is none
// (a2a.Resolver). It never touches the models registry, so an unknown agent cannot spend a
// models read-through.
func (p *Pipeline) ResolveAgent(ctx context.Context, idOrName string) (*a2a.Agent, error) {
	reg := p.Agents
	if reg == nil || idOrName == "" {
		return nil, a2a.ErrAgentNotFound
	}
	if a := lookupAgent(reg.Load(), idOrName); a != nil {
		return a, nil
	}
	// Resolve fails closed: an exhausted budget or a DB error leaves the miss standing.
	if reg.Resolve(ctx, idOrName) != nil {
		return nil, a2a.ErrAgentNotFound
	}
	if a := lookupAgent(reg.Load(), idOrName); a != nil {
		return a, nil
	}
	return nil, a2a.ErrAgentNotFound
}

var _ a2a.Resolver = (*Pipeline)(nil)

func lookupAgent(snap *registry.Snapshot[*a2a.Agent], idOrName string) *a2a.Agent {
	if e, ok := snap.ByID(idOrName); ok {
		return e.Value
	}
	if es := snap.ByName(idOrName); len(es) > 0 {
		return es[0].Value
	}
	return nil
}

// StartAgent starts the pipeline (Start) for one A2A message to agent: its text becomes the
// user message of an OpenAI chat request to the agent's model, made by who, with the A2A
// request's header and (message/send) the response's. The guardrails are the agent's plus
// every default_on one.
func (p *Pipeline) StartAgent(ctx context.Context, who Caller, header, respHeader http.Header, agent *a2a.Agent, text string, stream bool) (context.Context, *Call, error) {
	body := format.ChatRequest(agent.Model, text)
	if stream {
		// the usage chunk tells the limits step what the call cost
		body, _ = sjson.SetRawBytes(body, "stream_options", []byte(`{"include_usage":true}`))
		body, _ = sjson.SetBytes(body, "stream", true)
		// a stream's header went out with its first event already
		respHeader = nil
	}
	return p.Start(ctx, Spec{
		Format: format.FormatChat, Route: "a2a", Caller: who, Model: agent.Model, Body: body, Stream: stream,
		Header: respHeader, ReqHeader: header,
		resolve: func(ctx context.Context) (target, error) { return p.agentTarget(ctx, agent) },
		guardrails: func(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
			gs, err := p.agentGuardrails(ctx, nil, agent)
			return gs, body, err
		},
	}, nil)
}

// agentTarget is the resolve step for an agent: where its model is served.
//   - an agent with its own upstream (litellm_params api_base, api_key, custom_llm_provider or
//     mock_response; a2a.Agent.OwnUpstream) is called directly, as LiteLLM calls a model from
//     its litellm_params, without spending a models read-through;
//   - otherwise litellm_params.model is a model group of this gateway (read-through on a miss),
//     served by the router with its retries and cooldowns;
//   - failing that, a "provider/model" is called at the provider's default endpoint with its
//     environment key (OPENAI_API_KEY, ...), as LiteLLM would.
func (p *Pipeline) agentTarget(ctx context.Context, agent *a2a.Agent) (target, error) {
	newDeployment := p.Deployments.NewDeployment // a database agent: the secrets policy applies
	if agent.FromConfig {
		newDeployment = p.Deployments.NewConfigDeployment
	}
	direct := func() (target, error) {
		d, err := newDeployment(agent.DeploymentID(), agent.Name, agent.LitellmParams)
		if err != nil {
			return target{}, fmt.Errorf("agent %q: %w", agent.Name, err)
		}
		return target{direct: &router.Deployment{Deployment: d, LitellmParams: agent.LitellmParams, ModelInfo: json.RawMessage("{}")}}, nil
	}
	if agent.OwnUpstream() {
		return direct()
	}
	group, err := p.Router.Group(ctx, agent.Model)
	if err == nil {
		return target{group: group}, nil
	}
	if !errors.Is(err, router.ErrUnknownModel) {
		return target{}, err
	}
	if t, derr := direct(); derr == nil && t.direct.APIKey != "" {
		return t, nil
	}
	return target{}, fmt.Errorf("agent %q: model %q is not served by this gateway (not a model group; no api_base or api_key in the agent's litellm_params)", agent.Name, agent.Model)
}
