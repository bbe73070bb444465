package call

import (
	"lockstep/pkg/router"
)

// FallbackError is a call that failed in the router, answered with the texts LiteLLM's router
// appends to the message of such a failure (litellm/router.py
// async_function_with_fallbacks_common_utils; litellm.expose_router_debug_in_errors, on by
// default), whether fallbacks were tried or none applied. Err is the first failure (LiteLLM
// raises the original exception): its status, type and code are the answer's. The message is
// rendered by the API (pkg/api litellm_errors.go) as
//
//	<first failure's message><Note>. Received Model Group=<Group>
//	Available Model Group Fallbacks=<Available>[
//	Error doing the fallback: <the last fallback's failure, or the first one's message again>]
type FallbackError struct {
	Err   error
	Group string
	// Note is what LiteLLM appends to the first failure's message before the suffix: a
	// context-window (content-policy) error without context_window_fallbacks
	// (content_policy_fallbacks) gets "\nmodel=<g>. context_window_fallbacks=None.
	// fallbacks=<fallbacks>.\n\nSet 'context_window_fallback' - <docs>"; a group fallbacks
	// has no entry for gets "No fallback model group found for original model_group=<g>.
	// Fallbacks=<fallbacks>".
	Note string
	// Available is the group's fallbacks from the router's fallbacks (default_fallbacks as
	// its "*" entry) as Python prints the list, "None" when they did not apply (none set, no
	// entry, a request's own fallbacks, context_window_fallbacks, content_policy_fallbacks:
	// LiteLLM fills it only from its general fallbacks lookup).
	Available string
	// Again: LiteLLM raised the first failure again inside its fallback handling (the list
	// for the error's class has no entry for the group), so "Error doing the fallback" repeats
	// its message.
	Again bool
	// Last is the last fallback's failure (nil: no fallback was called).
	Last error
}

func (e *FallbackError) Error() string { return e.Err.Error() }
func (e *FallbackError) Unwrap() error { return e.Err }

// fallbackPlan is LiteLLM's handling of a failure of class c of the group: the groups to try
// (router.Settings.FallbackGroups) and the texts of a FallbackError should they all fail.
func fallbackPlan(s router.Settings, group string, c router.Class, request []string) ([]string, FallbackError) {
	fe := FallbackError{Group: group, Available: "None"}
	groups := s.FallbackGroups(group, c, request)
	if len(request) > 0 { // LiteLLM's "non-standard" fallbacks: a list of model names, run as given
		return groups, fe
	}
	general := s.Fallbacks
	if len(s.DefaultFallbacks) > 0 { // LiteLLM appends {"*": default_fallbacks} to fallbacks
		general = append(general[:len(general):len(general)], router.FallbackEntry{Group: "*", Fallbacks: s.DefaultFallbacks})
	}
	repr := "None"
	switch {
	case request != nil:
		repr = "[]"
	case len(general) > 0:
		repr = pyRepr(nil, general)
	}
	for _, k := range []struct {
		class router.Class
		list  router.FallbackList
		name  string // LiteLLM's word in its hint
		field string
	}{{router.ClassContextWindow, s.ContextWindowFallbacks, "context_window_fallback", "context_window_fallbacks"},
		{router.ClassContentPolicy, s.ContentPolicyFallbacks, "content_policy_fallback", "content_policy_fallback"}} {
		if c != k.class {
			continue
		}
		if k.list != nil {
			_, fe.Again = k.list.Lookup(group)
			fe.Again = !fe.Again
			return groups, fe
		}
		fe.Note += "\nmodel=" + group + ". " + k.field + "=None. fallbacks=" + repr +
			".\n\nSet '" + k.name + "' - https://docs.litellm.ai/docs/routing#fallbacks"
	}
	if request == nil && len(general) == 0 {
		return groups, fe // no fallbacks at all: the suffix alone
	}
	fb, ok := general.Lookup(group)
	if request != nil || !ok {
		fe.Note += "No fallback model group found for original model_group=" + group + ". Fallbacks=" + repr
		fe.Again = true
		return groups, fe
	}
	fe.Available = pyList(fb)
	return groups, fe
}
