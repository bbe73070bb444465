package call

import (
	"context"
	"slices"
	"sort"
	"strings"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/policy"
	"lockstep/pkg/registry"
)

// Guardrail policies in the pipeline's one guardrail resolver (LiteLLM
// litellm/proxy/litellm_pre_call_utils.py move_guardrails_to_metadata:
// _add_guardrails_from_policies_in_metadata, then add_guardrails_from_policy_engine): the
// policies a caller's key and team name in their "policies" (sql/017), and the policies
// attached (sql/021) to every call or to the calls of a team alias, key alias, model or tag.

// applied is what a call's policies were, for its response headers (SetHeaders): the policies
// applied, in order (x-litellm-applied-policies), and "<policy>=<matched_via>" of the
// attached ones (x-litellm-policy-sources). Both nil: none.
type applied struct {
	policies, sources []string
}

// hasGuardrails reports whether the caller's key or its team names guardrails or policies.
func (who Caller) hasGuardrails() bool {
	if who.Key == nil {
		return false
	}
	x := who.Key.X()
	return len(x.Guardrails) > 0 || len(x.Policies) > 0 ||
		(who.Team != nil && (len(who.Team.Fields.Guardrails) > 0 || len(who.Team.Fields.Policies) > 0))
}

// attached reports whether any policy attachment is served (callerGuardrails has them to
// match).
func (p *Pipeline) attached() bool {
	return p.Attachments != nil && p.Attachments.Len() > 0
}

// callerGuardrails adds to gs the guardrails of the caller's key and of its team (LiteLLM key
// and team "guardrails"), then those the key's and the team's policies resolve to for a call
// to model (LiteLLM _add_guardrails_from_policies_in_metadata: key policies, then team
// policies), then those of the policies attached to the call (attachedPolicies; LiteLLM
// add_guardrails_from_policy_engine), each guardrail once. The applied policies are the key's
// and team's when they resolve to at least one guardrail (LiteLLM records them only then),
// then each attached one whose own condition matches model (LiteLLM
// get_policies_with_matching_conditions), each once.
//
// A policy no registry row has (after read-through) is an *UnknownPolicy and a guardrail a
// policy names that does not exist an *UnknownGuardrail: the call fails closed (LiteLLM logs
// a warning and runs without the policy; lockstep never runs a call without a guardrail it was
// told to run).
func (p *Pipeline) callerGuardrails(ctx context.Context, who Caller, model string, tags []string, gs []*guardrail.Guardrail) ([]*guardrail.Guardrail, applied, error) {
	var ap applied
	var own, team, ownPolicies, teamPolicies []string
	if who.Key != nil {
		x := who.Key.X()
		own, ownPolicies = x.Guardrails, x.Policies
		if who.Team != nil {
			team, teamPolicies = who.Team.Fields.Guardrails, who.Team.Fields.Policies
		}
	}
	lookup := func(n string) (*policy.Policy, error) { return p.policyByName(ctx, n) }
	var fromPolicies []string
	if len(ownPolicies) > 0 || len(teamPolicies) > 0 {
		names := append(append([]string(nil), ownPolicies...), teamPolicies...)
		var err error
		if fromPolicies, err = policy.Guardrails(names, model, lookup); err != nil {
			return nil, ap, err
		}
		if len(fromPolicies) > 0 {
			for _, n := range names {
				if !slices.Contains(ap.policies, n) {
					ap.policies = append(ap.policies, n)
				}
			}
		}
	}
	var fromAttached []string
	if p.attached() {
		names, sources, err := p.attachedPolicies(ctx, who, model, tags, lookup)
		if err != nil {
			return nil, ap, err
		}
		if fromAttached, err = policy.Guardrails(names, model, lookup); err != nil {
			return nil, ap, err
		}
		for _, n := range names {
			if !slices.Contains(ap.policies, n) {
				ap.policies = append(ap.policies, n)
			}
		}
		ap.sources = sources
	}
	gs, err := p.resolveGuardrails(ctx, gs, false, own, team, fromPolicies, fromAttached)
	return gs, ap, err
}

// attachedPolicies are the names of the policies attached to a call of who to model with tags
// whose own condition matches model (LiteLLM _match_and_track_policies), sorted by name, each
// once, and their "<name>=<matched_via>" (a matching attachment's reason, the one with the
// lowest attachment_id when several attach the policy; LiteLLM
// AttachmentRegistry.get_attached_policies_with_reasons). The context is LiteLLM's
// PolicyMatchContext: the team's team_alias, the key's key_alias (the master key has
// neither), the model and the request's metadata.tags. Errors: lookup's for an attached
// policy that does not exist (fail closed).
func (p *Pipeline) attachedPolicies(ctx context.Context, who Caller, model string, tags []string, lookup policy.Lookup) ([]string, []string, error) {
	mc := policy.Context{Model: model, Tags: tags}
	if who.Key != nil {
		mc.KeyAlias = who.Key.Alias
	}
	if who.Team != nil && who.Team.Alias != nil {
		mc.TeamAlias = *who.Team.Alias
	}
	type match struct{ id, why string }
	matched := map[string]match{}
	var names []string
	var first error
	p.Attachments.Load().All(func(e *registry.Entry[*policy.Attachment]) bool {
		a := e.Value
		ok, reason := a.Matches(mc)
		if !ok {
			return true
		}
		if m, seen := matched[a.Policy]; !seen {
			names = append(names, a.Policy)
		} else if m.id < a.ID {
			return true // the reason is the lowest attachment_id's: one answer on every replica
		}
		matched[a.Policy] = match{a.ID, reason}
		return true
	})
	sort.Strings(names)
	out := names[:0]
	var sources []string
	for _, n := range names {
		pol, err := lookup(n)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if !pol.Condition.Matches(model) {
			continue
		}
		out = append(out, n)
		sources = append(sources, n+"="+matched[n].why)
	}
	if first != nil {
		return nil, nil, first
	}
	return out, sources, nil
}

// policyByName looks a policy up by name, with a read-through on a miss: an *UnknownPolicy
// when there is none.
func (p *Pipeline) policyByName(ctx context.Context, name string) (*policy.Policy, error) {
	if p.Policies == nil || name == "" {
		return nil, &UnknownPolicy{Name: name}
	}
	if e := p.Policies.Load().ByName(name); len(e) > 0 {
		return e[0].Value, nil
	}
	if err := p.Policies.Resolve(ctx, name); err == nil {
		if e := p.Policies.Load().ByName(name); len(e) > 0 {
			return e[0].Value, nil
		}
	}
	return nil, &UnknownPolicy{Name: name}
}

// policyHeaders sets x-litellm-applied-policies (the applied policies joined by ",") and
// x-litellm-policy-sources ("<policy>=<matched_via>" joined by "; ") as LiteLLM's
// get_logging_caching_headers formats them; neither when the call applied none.
func (ap applied) policyHeaders(h map[string][]string) {
	if len(ap.policies) > 0 {
		h["X-Litellm-Applied-Policies"] = []string{strings.Join(ap.policies, ",")}
	}
	if len(ap.sources) > 0 {
		h["X-Litellm-Policy-Sources"] = []string{strings.Join(ap.sources, "; ")}
	}
}
