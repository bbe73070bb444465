package router

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func fallbackSettings(t *testing.T, src string) (Settings, error) {
	t.Helper()
	var c Config
	require.NoError(t, yaml.Unmarshal([]byte(src), &c))
	return c.Settings()
}

// LiteLLM's selection (router.py async_function_with_fallbacks): a context-window or
// content-policy list, when set, decides alone for its class; else the request's fallbacks,
// else the group's entry in fallbacks, else its "*" entry, else default_fallbacks.
func TestFallbackGroups(t *testing.T) {
	s, err := fallbackSettings(t, `
fallbacks: [{a: [b, c]}, {"*": [star]}]
context_window_fallbacks: [{a: [big]}]
content_policy_fallbacks: [{a: [safe]}]
default_fallbacks: [dflt]
`)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c"}, s.FallbackGroups("a", ClassInternalServer, nil))
	require.Equal(t, []string{"b", "c"}, s.FallbackGroups("a", ClassRateLimit, nil))
	require.Equal(t, []string{"big"}, s.FallbackGroups("a", ClassContextWindow, nil))
	require.Equal(t, []string{"safe"}, s.FallbackGroups("a", ClassContentPolicy, nil))
	require.Nil(t, s.FallbackGroups("z", ClassContextWindow, nil), "context_window_fallbacks set without an entry: none")
	require.Equal(t, []string{"star"}, s.FallbackGroups("z", ClassInternalServer, nil))
	require.Equal(t, []string{"req"}, s.FallbackGroups("a", ClassInternalServer, []string{"req"}))
	require.Nil(t, s.FallbackGroups("a", ClassOther, nil))

	s, err = fallbackSettings(t, "default_fallbacks: [dflt]\n")
	require.NoError(t, err)
	require.Equal(t, []string{"dflt"}, s.FallbackGroups("z", ClassContextWindow, nil), "no context_window_fallbacks: the generic ones")
}

func TestFallbackSettingsErrors(t *testing.T) {
	for src, want := range map[string]string{
		"fallbacks: {a: [b]}\n":                  `router_settings.fallbacks: must be a list of {"<model group>": ["<fallback model group>", ...]}, got map[a:[b]]`,
		"fallbacks: [{a: [b], c: [d]}]\n":        "router_settings.fallbacks[0]: must be a mapping of one model group to its list of fallback model groups, got map[a:[b] c:[d]]",
		"fallbacks: [{a: b}]\n":                  "router_settings.fallbacks[0].a: must be a list of model group names, got b",
		"context_window_fallbacks: [{a: [1]}]\n": "router_settings.context_window_fallbacks[0].a[0]: must be a model group name, got 1",
		"content_policy_fallbacks: [x]\n":        "router_settings.content_policy_fallbacks[0]: must be a mapping of one model group to its list of fallback model groups, got x",
		"default_fallbacks: x\n":                 "router_settings.default_fallbacks: must be a list of model group names, got x",
		`default_fallbacks: [""]` + "\n":         "router_settings.default_fallbacks[0]: must be a model group name, got ",
	} {
		_, err := fallbackSettings(t, src)
		require.EqualError(t, err, want, src)
	}
}
