package call

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/router"
)

// fallbackPlan gives LiteLLM's router texts for each way a failure meets the fallbacks
// (router.py async_function_with_fallbacks_common_utils).
func TestFallbackPlanTexts(t *testing.T) {
	t.Parallel()
	general := router.Settings{Fallbacks: router.FallbackList{{Group: "a", Fallbacks: []string{"b", "c"}}}}
	for _, c := range []struct {
		name    string
		s       router.Settings
		group   string
		class   router.Class
		request []string
		groups  []string
		want    FallbackError
	}{
		{"none configured", router.Settings{}, "a", router.ClassInternalServer, nil, nil,
			FallbackError{Group: "a", Available: "None"}},
		{"the group's entry", general, "a", router.ClassRateLimit, nil, []string{"b", "c"},
			FallbackError{Group: "a", Available: "['b', 'c']"}},
		{"no entry for the group", general, "x", router.ClassRateLimit, nil, nil,
			FallbackError{Group: "x", Available: "None", Again: true,
				Note: "No fallback model group found for original model_group=x. Fallbacks=[{'a': ['b', 'c']}]"}},
		{"default_fallbacks as the * entry", router.Settings{DefaultFallbacks: []string{"d"}}, "x", router.ClassInternalServer, nil, []string{"d"},
			FallbackError{Group: "x", Available: "['d']"}},
		{"the request's own", general, "a", router.ClassInternalServer, []string{"r"}, []string{"r"},
			FallbackError{Group: "a", Available: "None"}},
		{"context window without context_window_fallbacks", general, "a", router.ClassContextWindow, nil, []string{"b", "c"},
			FallbackError{Group: "a", Available: "['b', 'c']",
				Note: "\nmodel=a. context_window_fallbacks=None. fallbacks=[{'a': ['b', 'c']}].\n\nSet 'context_window_fallback' - https://docs.litellm.ai/docs/routing#fallbacks"}},
		{"content policy, its list without the group", router.Settings{ContentPolicyFallbacks: router.FallbackList{{Group: "z", Fallbacks: []string{"y"}}}}, "a", router.ClassContentPolicy, nil, nil,
			FallbackError{Group: "a", Available: "None", Again: true}},
		{"context window, its list with the group", router.Settings{ContextWindowFallbacks: router.FallbackList{{Group: "a", Fallbacks: []string{"big"}}}}, "a", router.ClassContextWindow, nil, []string{"big"},
			FallbackError{Group: "a", Available: "None"}},
	} {
		groups, fe := fallbackPlan(c.s, c.group, c.class, c.request)
		require.Equal(t, c.groups, groups, c.name)
		require.Equal(t, c.want, fe, c.name)
	}
}
