// Package policy is LiteLLM's guardrail policies (litellm/proxy/policy_engine/, read at
// BerriAI/litellm commit 151c76a35f3314acfe7d395fb88b4f5a09efb5fc): a named set of guardrails
// that keys and teams attach by name. A policy's guardrails are those of the policy it
// inherits (recursively, root first) with its own guardrails_add added and guardrails_remove
// taken away; a policy whose condition does not match the call's model adds and removes
// nothing (policy_resolver.py resolve_policy_guardrails, condition_evaluator.py).
//
// This package parses gateway.policies rows (sql/017) and resolves policy names to guardrail
// names; pkg/call runs the guardrails (its one resolver), pkg/admin writes the rows.
package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// MaxDepth bounds an inheritance chain (LiteLLM PolicyValidator: max depth 100).
const MaxDepth = 100

// Policy is a gateway.policies row as served. Immutable.
type Policy struct {
	ID   string `json:"policy_id"`
	Name string `json:"policy_name"`
	// Inherit names the parent policy ("" none; LiteLLM inherit).
	Inherit string `json:"-"`
	// Add and Remove are LiteLLM's guardrails_add and guardrails_remove (guardrail names).
	Add    []string `json:"guardrails_add"`
	Remove []string `json:"guardrails_remove"`
	// Condition limits the policy to some models (nil: every call).
	Condition *Condition `json:"-"`
}

// Condition is LiteLLM's PolicyCondition: the policy applies to a call whose model matches
// one of Models — equal to it, or a regular expression matching all of it (Python
// re.fullmatch; Go's RE2 syntax here, an expression that does not compile matches only
// itself). Models nil: every call.
type Condition struct {
	Models   []string
	patterns []*regexp.Regexp // per model: nil when it does not compile
}

// ParseCondition reads a condition as LiteLLM's API takes it: null, or {"model": null |
// "<exact or regex>" | ["<exact or regex>", ...]}. Any other member, or a model that is
// neither, is an error naming it.
func ParseCondition(raw json.RawMessage) (*Condition, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("condition must be an object {\"model\": ...}")
	}
	for k := range m {
		if k != "model" {
			return nil, fmt.Errorf("condition.%s is not a policy condition (only condition.model is)", k)
		}
	}
	mr, ok := m["model"]
	if !ok || string(mr) == "null" {
		return nil, nil
	}
	var models []string
	var one string
	if err := json.Unmarshal(mr, &one); err == nil {
		models = []string{one}
	} else if err := json.Unmarshal(mr, &models); err != nil {
		return nil, fmt.Errorf("condition.model must be a string or a list of strings")
	}
	c := &Condition{Models: models, patterns: make([]*regexp.Regexp, len(models))}
	for i, p := range models {
		if re, err := regexp.Compile(`^(?:` + p + `)$`); err == nil {
			c.patterns[i] = re
		}
	}
	return c, nil
}

// Matches reports whether the condition holds for a call to model (LiteLLM
// ConditionEvaluator: no model never matches a model condition).
func (c *Condition) Matches(model string) bool {
	if c == nil || c.Models == nil {
		return true
	}
	if model == "" {
		return false
	}
	for i, p := range c.Models {
		if p == model || (c.patterns[i] != nil && c.patterns[i].MatchString(model)) {
			return true
		}
	}
	return false
}

// row is a gateway.policies row as row_to_json writes it.
type row struct {
	Policy
	InheritCol   *string         `json:"inherit"`
	ConditionCol json.RawMessage `json:"condition"`
}

// BuildRow builds a Policy from a gateway.policies row. A bad condition refuses the row (the
// serving version, if any, stays).
func BuildRow(r store.Row) (*Policy, error) {
	var x row
	if err := json.Unmarshal(r.Data, &x); err != nil {
		return nil, fmt.Errorf("policy %s: %w", r.ID, err)
	}
	p := x.Policy
	if x.InheritCol != nil {
		p.Inherit = *x.InheritCol
	}
	c, err := ParseCondition(x.ConditionCol)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", r.ID, err)
	}
	p.Condition = c
	if p.ID == "" {
		p.ID = r.ID
	}
	return &p, nil
}

// Names indexes a policy under its policy_name (keys and teams attach it by name).
func Names(e *registry.Entry[*Policy]) []string { return []string{e.Value.Name} }

// Lookup finds a policy by name; an error when there is none (the caller's *Unknown or its
// own).
type Lookup func(name string) (*Policy, error)

// Chain is the inheritance chain of the policy named name, root first (LiteLLM
// resolve_inheritance_chain). An unknown policy or parent is lookup's error; a cycle, or a
// chain longer than MaxDepth, is an error naming the policies (the admin refuses both before
// they are written; a row written around it still fails closed).
func Chain(name string, lookup Lookup) ([]*Policy, error) {
	var chain []*Policy
	seen := map[string]bool{}
	for n := name; n != ""; {
		if seen[n] {
			return nil, fmt.Errorf("circular inheritance detected: policy '%s' inherits itself", n)
		}
		if len(chain) == MaxDepth {
			return nil, fmt.Errorf("inheritance chain of policy '%s' too deep (exceeded max depth of %d)", name, MaxDepth)
		}
		seen[n] = true
		p, err := lookup(n)
		if err != nil {
			return nil, err
		}
		chain = append(chain, p)
		n = p.Inherit
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// Guardrails is the guardrail names the policies named in names resolve to for a call to
// model, each once, in order: each policy's chain (Chain) resolved by Resolved; the policies'
// sets are unioned (LiteLLM _add_guardrails_from_policies_in_metadata). model "" matches only
// unconditioned policies. Errors: Chain's.
func Guardrails(names []string, model string, lookup Lookup) ([]string, error) {
	var out []string
	for _, name := range names {
		chain, err := Chain(name, lookup)
		if err != nil {
			return nil, err
		}
		for _, g := range Resolved(chain, &model) {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

// Resolved is the guardrails of an inheritance chain (root first): each member whose
// condition matches model adds its guardrails_add, then drops its guardrails_remove (LiteLLM
// resolve_policy_guardrails). model nil: conditions are not evaluated (LiteLLM without a
// request context, /policies/{id}/resolved-guardrails).
func Resolved(chain []*Policy, model *string) []string {
	var set []string
	for _, p := range chain {
		if model != nil && !p.Condition.Matches(*model) {
			continue
		}
		for _, g := range p.Add {
			if !slices.Contains(set, g) {
				set = append(set, g)
			}
		}
		for _, g := range p.Remove {
			set = slices.DeleteFunc(set, func(x string) bool { return x == g })
		}
	}
	return set
}
