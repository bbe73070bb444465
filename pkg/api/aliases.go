package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"lockstep/pkg/guardrail"
)

// aliased maps the model name a call sends to the model group that serves it: the caller's
// team's model_aliases first, then its key's aliases, each applied once when the name is in
// it (LiteLLM litellm_pre_call_utils: _update_model_if_team_alias_exists, then
// _update_model_if_key_alias_exists, which rewrite data["model"] before routing, so access,
// limits, spend and the route all see the real group). The master key and a key without
// aliases keep the name; no allocation either way.
func (p principal) aliased(model string) string {
	if p.key == nil {
		return model
	}
	if p.team != nil {
		if m, ok := p.team.Fields.ModelAliases[model]; ok && m != "" {
			model = m
		}
	}
	if m, ok := p.key.Aliases[model]; ok && m != "" {
		model = m
	}
	return model
}

// checkEnforcedParams refuses a call whose body lacks one of the key's enforced_params
// (LiteLLM auth_checks _enforced_params_check: "user", or "metadata.generation_name" one level
// down). LiteLLM raises it inside user_api_key_auth, so it answers 401 auth_error:
//
//	Authentication Error, BadRequest please pass param=user in request body. This is a required param
//	Authentication Error, BadRequest please pass param=[metadata][generation_name] in request body. This is a required param
func checkEnforcedParams(params []string, body []byte) error {
	for _, p := range params {
		top, sub, nested := strings.Cut(p, ".")
		v := gjson.GetBytes(body, gjsonEscape(top))
		if nested && v.Exists() {
			v = v.Get(gjsonEscape(sub))
		}
		if v.Exists() {
			continue
		}
		name := p
		if nested {
			name = "[" + top + "][" + sub + "]"
		}
		return &Error{Status: http.StatusUnauthorized, Type: "auth_error", Param: "None",
			Message: "Authentication Error, BadRequest please pass param=" + name + " in request body. This is a required param"}
	}
	return nil
}

// gjsonEscape escapes gjson's path characters in a member name.
func gjsonEscape(s string) string {
	if !strings.ContainsAny(s, ".*?|#@\\!=<>%") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(".*?|#@\\!=<>%", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// callerGuardrails adds the guardrails of the caller's key and of its team (LiteLLM key and
// team "guardrails", which its proxy adds to every request of the key:
// _add_guardrails_from_key_or_team_metadata) to gs, each once. A name no guardrail has is
// the request's 404 "Guardrail '<name>' not found. ..." (fails closed: a key's guardrail is
// never skipped).
func (s *Server) callerGuardrails(ctx context.Context, p principal, gs []*guardrail.Guardrail) ([]*guardrail.Guardrail, error) {
	names := p.key.Guardrails
	if p.team != nil {
		names = append(names[:len(names):len(names)], p.team.Fields.Guardrails...)
	}
	for _, n := range names {
		have := false
		for _, g := range gs {
			if g.Name == n {
				have = true
				break
			}
		}
		if have {
			continue
		}
		g, err := s.guardrailByName(ctx, n)
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, nil
}
