package policy

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/store"
)

var errMissing = errors.New("missing")

func policyRow(t *testing.T, id string, m map[string]any) store.Row {
	t.Helper()
	m["policy_id"] = id
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return store.Row{Type: store.Policy, ID: id, Data: b}
}

func lookupOf(t *testing.T, rows ...store.Row) Lookup {
	t.Helper()
	by := map[string]*Policy{}
	for _, r := range rows {
		p, err := BuildRow(r)
		require.NoError(t, err)
		by[p.Name] = p
	}
	return func(n string) (*Policy, error) {
		if p, ok := by[n]; ok {
			return p, nil
		}
		return nil, errMissing
	}
}

// LiteLLM's guardrail_policies.md examples: base → [pii, toxicity]; strict inherits base and
// adds prompt_injection; relaxed inherits base and removes toxicity; a model condition is an
// exact name or a regex matching all of the model; the policies of a caller are unioned.
func TestGuardrails(t *testing.T) {
	l := lookupOf(t,
		policyRow(t, "1", map[string]any{"policy_name": "base", "guardrails_add": []string{"pii", "toxicity"}}),
		policyRow(t, "2", map[string]any{"policy_name": "strict", "inherit": "base", "guardrails_add": []string{"prompt_injection"}}),
		policyRow(t, "3", map[string]any{"policy_name": "relaxed", "inherit": "base", "guardrails_remove": []string{"toxicity"}}),
		policyRow(t, "4", map[string]any{"policy_name": "gpt4", "guardrails_add": []string{"strict_filter"}, "condition": map[string]any{"model": "gpt-4.*"}}),
		policyRow(t, "5", map[string]any{"policy_name": "bedrock", "guardrails_add": []string{"audit"}, "condition": map[string]any{"model": []string{"bedrock/claude-3", "(bad"}}}),
		policyRow(t, "6", map[string]any{"policy_name": "loop-a", "inherit": "loop-b"}),
		policyRow(t, "7", map[string]any{"policy_name": "loop-b", "inherit": "loop-a"}),
		policyRow(t, "8", map[string]any{"policy_name": "orphan", "inherit": "gone"}),
	)
	for _, c := range []struct {
		names []string
		model string
		want  []string
	}{
		{[]string{"base"}, "m", []string{"pii", "toxicity"}},
		{[]string{"strict"}, "m", []string{"pii", "toxicity", "prompt_injection"}},
		{[]string{"relaxed"}, "m", []string{"pii"}},
		{[]string{"relaxed", "strict"}, "m", []string{"pii", "toxicity", "prompt_injection"}},
		{[]string{"gpt4"}, "gpt-4o", []string{"strict_filter"}},
		{[]string{"gpt4"}, "my-gpt-4o", nil},
		{[]string{"gpt4"}, "", nil},
		{[]string{"bedrock"}, "bedrock/claude-3", []string{"audit"}},
		{[]string{"bedrock"}, "(bad", []string{"audit"}},
		{[]string{"bedrock"}, "bedrock/claude-2", nil},
	} {
		got, err := Guardrails(c.names, c.model, l)
		require.NoError(t, err, "%v", c.names)
		require.Equal(t, c.want, got, "%v on %q", c.names, c.model)
	}
	_, err := Guardrails([]string{"loop-a"}, "m", l)
	require.ErrorContains(t, err, "circular inheritance detected")
	_, err = Guardrails([]string{"orphan"}, "m", l)
	require.ErrorIs(t, err, errMissing, "a missing parent fails, never resolves to less")
	_, err = Guardrails([]string{"nope"}, "m", l)
	require.ErrorIs(t, err, errMissing)
}

func TestParseCondition(t *testing.T) {
	for raw, want := range map[string]string{
		`{"team": "x"}`:     "condition.team is not a policy condition",
		`{"model": 1}`:      "condition.model must be a string or a list of strings",
		`[1]`:               "condition must be an object",
		`{"model": [1, 2]}`: "condition.model must be a string or a list of strings",
	} {
		_, err := ParseCondition(json.RawMessage(raw))
		require.ErrorContains(t, err, want, raw)
	}
	for _, raw := range []string{``, `null`, `{}`, `{"model": null}`} {
		c, err := ParseCondition(json.RawMessage(raw))
		require.NoError(t, err, raw)
		require.True(t, c.Matches("anything"), raw)
	}
}
