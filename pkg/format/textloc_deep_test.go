package format

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tool-call arguments are JSON text inside a string, walked member by member when they parse:
// 12 MiB of "[" there (a valid body: one string) was a Go stack overflow in gjson.ValidBytes
// and then in the walk. jsonscan.CheckNesting refuses it first: the arguments are one text.
func TestMapRequestTextDeepArguments(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 12<<20)
	body := []byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"` +
		deep + `"}}]}]}`)
	var seen []int
	_, err := MapRequestText(FormatChat, body, func(tx Text) (string, error) {
		seen = append(seen, len(tx.Value))
		return tx.Value, nil
	})
	require.NoError(t, err)
	require.Equal(t, []int{len(deep)}, seen)
	// duplicate names inside arguments are not members of the body: still walked string by string
	body = []byte(`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":\"x\",\"a\":\"y\"}"}}]}]}`)
	var texts []string
	_, err = MapRequestText(FormatChat, body, func(tx Text) (string, error) {
		texts = append(texts, tx.Value)
		return tx.Value, nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "x", "a", "y"}, texts)
}
