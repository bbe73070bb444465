package api

import (
	"context"
	"errors"
	"lockstep/pkg/format"
	"strings"

	"lockstep/pkg/a2a"
	"lockstep/pkg/guardrail"
)

// AgentModelPrefix names an agent as a model on the LLM routes (API.md "Agents and A2A":
// `model: "a2a/<agent name>"` calls an agent as a model): "a2a/<agent_name or agent_id>".
const AgentModelPrefix = "a2a/"

// agentModelSpec makes spec (an LLM route call whose model is "a2a/<agent>") call that agent
// as a model, through the same pipeline as the A2A routes: the target is the agent's
// (agentTarget: its own upstream, or its model group), model access is checked on the
// agent's model (litellm_params.model, as on POST /a2a/{agent}), and the guardrails are the
// request's plus the agent's (agentGuardrails, with every default_on one). The request body is
// sent in the route's own format, translated to the agent's deployment as for any model.
//
// An unknown agent is the route's invalid-model 400 (`Invalid model name passed in
// model=a2a/<name>`), found with the agents read-through budget (never the models one).
func (s *Server) agentModelSpec(ctx context.Context, f format.Format, spec *callSpec) error {
	name := strings.TrimPrefix(spec.model, AgentModelPrefix)
	agent, err := agentResolver{s}.ResolveAgent(ctx, name)
	if errors.Is(err, a2a.ErrAgentNotFound) {
		return invalidModel(f, spec.model)
	}
	if err != nil {
		return err
	}
	spec.model = agent.Model
	spec.resolve = func(ctx context.Context) (target, error) { return s.agentTarget(ctx, agent) }
	spec.guardrails = func(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
		rf := scanRequest(body) // not the route's: that one stays on its stack (no allocation per call)
		gs, body, err := s.requestGuardrailsOf(ctx, body, &rf)
		if err != nil {
			return nil, nil, err
		}
		own, err := s.agentGuardrails(ctx, agent)
		if err != nil {
			return nil, nil, err
		}
		for _, g := range own {
			if !containsGuardrail(gs, g.Name) {
				gs = append(gs, g)
			}
		}
		return gs, body, nil
	}
	return nil
}

func containsGuardrail(gs []*guardrail.Guardrail, name string) bool {
	for _, g := range gs {
		if g.Name == name {
			return true
		}
	}
	return false
}
