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

// checkCacheControls refuses a call whose body's "cache" object sets a control the key's
// allowed_cache_controls does not list, with a *CacheControlRefused (LiteLLM's 403,
// hooks/cache_control_check.py):
//
//	Not allowed to set no-cache as a cache control. Contact admin to change permissions.
func checkCacheControls(allowed []string, body []byte) error {
	cache := gjson.GetBytes(body, "cache")
	if !cache.IsObject() {
		return nil
	}
	var refused error
	cache.ForEach(func(k, _ gjson.Result) bool {
		for _, a := range allowed {
			if a == k.String() {
				return true
			}
		}
		refused = &CacheControlRefused{Control: k.String()}
		return false
	})
	return refused
}
