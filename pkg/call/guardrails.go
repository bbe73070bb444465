package call

import (
	"context"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/a2a"
	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
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

// defaultOn is every default_on guardrail (none without a guardrails registry).
func (p *Pipeline) defaultOn() []*registry.Entry[*guardrail.Guardrail] {
	if p.Guardrails == nil {
		return nil
	}
	return p.Guardrails.Load().ByName(DefaultOnName)
}

// resolveGuardrails is the one guardrail resolver of every call — the request's
// "guardrails", a multipart form's "guardrails" fields, the caller's key and team
// (LiteLLM _add_guardrails_from_key_or_team_metadata) and an agent's litellm_params
// guardrails: gs, then (when defaults) every default_on guardrail, then the guardrails named
// in lists, in order, each once (by name). A name no guardrail has (after read-through) is an
// *UnknownGuardrail: the call fails closed, a named guardrail is never skipped. Without a
// guardrails registry every name is unknown.
func (p *Pipeline) resolveGuardrails(ctx context.Context, gs []*guardrail.Guardrail, defaults bool, lists ...[]string) ([]*guardrail.Guardrail, error) {
	if defaults {
		for _, e := range p.defaultOn() {
			if !containsGuardrail(gs, e.Value.Name) {
				gs = append(gs, e.Value)
			}
		}
	}
	for _, names := range lists {
		for _, n := range names {
			if containsGuardrail(gs, n) {
				continue
			}
			g, err := p.guardrailByName(ctx, n)
			if err != nil {
				return nil, err
			}
			gs = append(gs, g)
		}
	}
	return gs, nil
}

// Guardrail looks a guardrail up by name, with a read-through on a miss (the same lookup as
// a call's): an *UnknownGuardrail when there is none.
func (p *Pipeline) Guardrail(ctx context.Context, name string) (*guardrail.Guardrail, error) {
	return p.guardrailByName(ctx, name)
}

// guardrailByName looks a guardrail up by name, with a read-through on a miss.
func (p *Pipeline) guardrailByName(ctx context.Context, name string) (*guardrail.Guardrail, error) {
	if p.Guardrails == nil {
		return nil, &UnknownGuardrail{Name: name}
	}
	if g := p.Guardrails.Load().ByName(name); len(g) > 0 {
		return g[0].Value, nil
	}
	if name == "" || name == DefaultOnName {
		return nil, &UnknownGuardrail{Name: name}
	}
	if err := p.Guardrails.Resolve(ctx, name); err == nil {
		if g := p.Guardrails.Load().ByName(name); len(g) > 0 {
			return g[0].Value, nil
		}
	}
	return nil, &UnknownGuardrail{Name: name}
}

func containsGuardrail(gs []*guardrail.Guardrail, name string) bool {
	for _, g := range gs {
		if g.Name == name {
			return true
		}
	}
	return false
}

// requestGuardrails resolves the guardrails a JSON request runs: every default_on guardrail
// plus the ones named in "guardrails" or "metadata.guardrails" (LiteLLM). The names are
// removed from the body before it goes upstream. rf holds body's members, already scanned
// (Scan).
func (p *Pipeline) requestGuardrails(ctx context.Context, body []byte, rf *Fields) ([]*guardrail.Guardrail, []byte, error) {
	top, meta := rf.guardrails, rf.metaGuardrails
	if len(p.defaultOn()) == 0 && !top.Exists() && !meta.Exists() {
		return nil, body, nil // hot path: nothing to do
	}
	var names []string
	for _, r := range []gjson.Result{top, meta} {
		if !r.Exists() || r.Type == gjson.Null {
			continue
		}
		if !r.IsArray() {
			return nil, nil, invalid("guardrails", "guardrails must be an array of guardrail names")
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
	gs, err := p.resolveGuardrails(ctx, nil, true, names)
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

// multipartGuardrails is requestGuardrails for a multipart/form-data request (audio
// transcriptions): every default_on guardrail plus the ones named in "guardrails" form fields
// (a JSON array of names or a comma-separated list), which are removed from the body.
func (p *Pipeline) multipartGuardrails(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
	names, found, out, err := format.MultipartGuardrails(body)
	if err != nil {
		return nil, nil, err
	}
	if !found && len(p.defaultOn()) == 0 {
		return nil, body, nil
	}
	gs, err := p.resolveGuardrails(ctx, nil, true, names)
	if err != nil {
		return nil, nil, err
	}
	return gs, out, nil
}

// agentGuardrails resolves the guardrails an agent call runs: default_on ones plus the
// agent's, after gs (the request's, when an LLM route calls the agent as a model).
func (p *Pipeline) agentGuardrails(ctx context.Context, gs []*guardrail.Guardrail, agent *a2a.Agent) ([]*guardrail.Guardrail, error) {
	return p.resolveGuardrails(ctx, gs, true, agent.Guardrails)
}

func hasMode(gs []*guardrail.Guardrail, m guardrail.Mode) bool {
	for _, g := range gs {
		if g.Runs(m) {
			return true
		}
	}
	return false
}
