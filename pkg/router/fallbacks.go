package router

import (
	"fmt"
	"strings"
)

// Fallbacks (LiteLLM Router fallbacks, context_window_fallbacks, content_policy_fallbacks,
// default_fallbacks; litellm/router.py async_function_with_fallbacks): when a call to a model
// group fails after its retries, the caller (pkg/api) runs the whole call again for each
// fallback model group in turn. Each list is LiteLLM's shape, a list of one-member mappings
// {"<model group>": ["<fallback group>", …]}; "*" matches any group. default_fallbacks is a
// list of groups, LiteLLM's {"*": default_fallbacks} appended to fallbacks.

// FallbackList is one of fallbacks, context_window_fallbacks, content_policy_fallbacks: the
// entries in order (the first entry naming a group wins, as LiteLLM reads them).
type FallbackList []FallbackEntry

// FallbackEntry is one {"<group>": [fallbacks…]} mapping.
type FallbackEntry struct {
	Group     string // a model group name, or "*"
	Fallbacks []string
}

// Lookup returns the fallbacks of group: its own entry, else the "*" entry; ok false when
// neither exists.
func (l FallbackList) Lookup(group string) ([]string, bool) {
	var star []string
	found := false
	for _, e := range l {
		if e.Group == group {
			return e.Fallbacks, true
		}
		if e.Group == "*" && !found {
			star, found = e.Fallbacks, true
		}
	}
	return star, found
}

// FallbackGroups returns the model groups to try, in order, after a call to group failed with
// class c, as LiteLLM picks them: a context-window error uses context_window_fallbacks when
// set (no entry for group there: no fallback at all), a content-policy error
// content_policy_fallbacks likewise; otherwise (or when that list is not set) fallbacks (the
// request's own when it sent one, else router_settings.fallbacks with default_fallbacks as
// its "*" entry). request is the request's fallbacks (nil: none sent). Failures that are not
// the upstream's (ClassOther) have none.
func (s Settings) FallbackGroups(group string, c Class, request []string) []string {
	if c == ClassOther {
		return nil
	}
	switch {
	case c == ClassContextWindow && s.ContextWindowFallbacks != nil:
		fb, _ := s.ContextWindowFallbacks.Lookup(group)
		return fb
	case c == ClassContentPolicy && s.ContentPolicyFallbacks != nil:
		fb, _ := s.ContentPolicyFallbacks.Lookup(group)
		return fb
	}
	if request != nil {
		return request
	}
	if fb, ok := s.Fallbacks.Lookup(group); ok {
		return fb
	}
	return s.DefaultFallbacks
}

// fallbackList validates one fallbacks setting as decoded from YAML: a list of one-member
// mappings of a group name to a list of group names. Errors name router_settings.<field>[i].
func fallbackList(field string, v any) (FallbackList, error) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("router_settings.%s: must be a list of {\"<model group>\": [\"<fallback model group>\", ...]}, got %v", field, v)
	}
	out := FallbackList{}
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("router_settings.%s[%d]: must be a mapping of one model group to its list of fallback model groups, got %v", field, i, it)
		}
		for g, fv := range m {
			names, err := groupNames(fmt.Sprintf("router_settings.%s[%d].%s", field, i, g), fv)
			if err != nil {
				return nil, err
			}
			if strings.TrimSpace(g) == "" {
				return nil, fmt.Errorf("router_settings.%s[%d]: the model group name is empty", field, i)
			}
			out = append(out, FallbackEntry{Group: g, Fallbacks: names})
		}
	}
	return out, nil
}

// groupNames validates a list of model group names.
func groupNames(where string, v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be a list of model group names, got %v", where, v)
	}
	out := make([]string, 0, len(list))
	for j, x := range list {
		s, ok := x.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("%s[%d]: must be a model group name, got %v", where, j, x)
		}
		out = append(out, s)
	}
	return out, nil
}
