package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/store"
)

func attachmentOf(t *testing.T, m map[string]any) *Attachment {
	t.Helper()
	m["attachment_id"] = "a1"
	b, err := json.Marshal(m)
	require.NoError(t, err)
	a, err := BuildAttachmentRow(store.Row{Type: store.PolicyAttachment, ID: "a1", Data: b})
	require.NoError(t, err)
	return a
}

// LiteLLM's wildcard rule (RouteChecks._route_matches_wildcard_pattern): a trailing "*" is a
// prefix, "*" everything, anything else exact; no value matches only "*".
func TestMatchPattern(t *testing.T) {
	for _, c := range []struct {
		value    string
		patterns []string
		want     bool
	}{
		{"fin-east", []string{"fin-*"}, true},
		{"fin-", []string{"fin-*"}, true},
		{"fi", []string{"fin-*"}, false},
		{"fin-east", []string{"fin-east"}, true},
		{"fin-east2", []string{"fin-east"}, false},
		{"x", []string{"*"}, true},
		{"", []string{"*"}, true},
		{"", []string{"fin-*", ""}, false},
		{"gpt-4", []string{"claude-*", "gpt-*"}, true},
		{"axb", []string{"a*b"}, false}, // a "*" inside a pattern is a plain character
		{"a*b", []string{"a*b"}, true},
	} {
		require.Equal(t, c.want, MatchPattern(c.value, c.patterns), "%q %v", c.value, c.patterns)
	}
}

// PolicyMatcher.scope_matches and AttachmentRegistry._describe_match_reason.
func TestAttachmentMatches(t *testing.T) {
	global := attachmentOf(t, map[string]any{"policy_name": "p", "scope": "*", "teams": []string{"nobody"}})
	ok, why := global.Matches(Context{})
	require.True(t, ok)
	require.Equal(t, "scope:*", why)

	team := attachmentOf(t, map[string]any{"policy_name": "p", "teams": []string{"fin-*"}, "models": []string{"gpt-*"}})
	ok, why = team.Matches(Context{TeamAlias: "fin-east", KeyAlias: "k", Model: "gpt-4"})
	require.True(t, ok)
	require.Equal(t, "team:fin-east+model:gpt-4", why)
	ok, _ = team.Matches(Context{TeamAlias: "fin-east", Model: "claude"})
	require.False(t, ok, "every named scope must match")
	ok, _ = team.Matches(Context{Model: "gpt-4"})
	require.False(t, ok, "no team alias matches only *")

	tags := attachmentOf(t, map[string]any{"policy_name": "p", "tags": []string{"health-*"}})
	ok, why = tags.Matches(Context{Tags: []string{"x", "health-eu", "health-us"}})
	require.True(t, ok)
	require.Equal(t, "tag:health-eu", why)
	ok, _ = tags.Matches(Context{})
	require.False(t, ok, "tags named: a call without tags does not match")

	keys := attachmentOf(t, map[string]any{"policy_name": "p", "keys": []string{"*"}})
	ok, why = keys.Matches(Context{})
	require.True(t, ok)
	require.Equal(t, "scope:default", why, "a * key pattern on a call without a key alias")
}

func TestBuildAttachmentRowRefusesNoPolicy(t *testing.T) {
	_, err := BuildAttachmentRow(store.Row{ID: "a", Data: []byte(`{"attachment_id":"a","policy_name":""}`)})
	require.Error(t, err)
	_, err = BuildAttachmentRow(store.Row{ID: "a", Data: []byte(`not json`)})
	require.Error(t, err)
}
