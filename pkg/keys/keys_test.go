package keys_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "5m": 5 * time.Minute, "1h": time.Hour, "30d": 30 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1mo": 30 * 24 * time.Hour} {
		got, err := keys.ParseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0s", "-1h", "1y", "h", "1.5h", "1000000000d", "99999999999999999999s"} {
		_, err := keys.ParseDuration(in)
		require.Error(t, err, in)
	}
}

func TestBuildRowRequiresLowercaseHexToken(t *testing.T) {
	t.Parallel()
	tok := keys.Hash("sk-abc")
	k, err := keys.BuildRow(store.Row{ID: tok, Data: []byte(`{"token":"` + tok + `","models":["a"],"blocked":false}`)})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, k.Models)
	upper := "ABCDEF" + tok[6:]
	_, err = keys.BuildRow(store.Row{ID: upper, Data: []byte(`{"token":"` + upper + `"}`)})
	require.ErrorContains(t, err, "lowercase hex sha256")
}

func TestAccess(t *testing.T) {
	t.Parallel()
	groups := func(gs ...string) func(func(string) bool) {
		return func(yield func(string) bool) {
			for _, g := range gs {
				if !yield(g) {
					return
				}
			}
		}
	}
	require.True(t, keys.ListAllows(nil, "x", nil))
	k := &keys.Key{Models: []string{"m1", "team-a"}}
	require.True(t, keys.ListAllows(k.Models, "m1", groups()))
	require.True(t, keys.ListAllows(k.Models, "m2", groups("team-b", "team-a")), "access group grants the model")
	require.False(t, keys.ListAllows(k.Models, "m2", groups("team-b")))
	require.True(t, keys.ListAllows([]string{keys.AllProxyModels}, "any", nil))
	require.Contains(t, (&keys.Key{Blocked: true}).Usable(time.Now()), "blocked")
	require.Contains(t, (&keys.Key{Expires: time.Now().Add(-time.Second)}).Usable(time.Now()), "expired")
	require.Empty(t, (&keys.Key{Expires: time.Now().Add(time.Hour)}).Usable(time.Now()))
}
