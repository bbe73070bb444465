package format

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Guardrail walkers visit members in their own order: edits out of body order must apply.
func TestMapRequestTextOutOfOrderMembers(t *testing.T) {
	t.Parallel()
	up := func(t Text) (string, error) { return strings.ToUpper(t.Value), nil }
	out, err := MapRequestText(FormatResponses, []byte(`{"input":"a b","instructions":"c d","model":"m"}`), up)
	require.NoError(t, err)
	require.Equal(t, `{"input":"A B","instructions":"C D","model":"m"}`, string(out))
	out, err = MapRequestText(FormatMessages, []byte(`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"system":"s"}`), up)
	require.NoError(t, err)
	require.Equal(t, `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"X"}]}],"system":"S"}`, string(out))
}
