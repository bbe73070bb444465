package api

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
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
