package call

import (
	"strings"

	"github.com/tidwall/gjson"
)

// checkEnforcedParams refuses a call whose body lacks one of the key's enforced_params
// (LiteLLM auth_checks _enforced_params_check: "user", or "metadata.generation_name" one level
// down) with a *MissingParam. LiteLLM raises it inside user_api_key_auth, so it answers 401
// auth_error:
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
		return &MissingParam{Name: name}
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
