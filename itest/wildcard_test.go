package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Wildcard model groups: "acc-wild/*" with litellm_params.model "openai/*" routes
// "acc-wild/some-model" to upstream model "some-model"; an exact group of the same name wins;
// "*" catches the rest; a key's wildcard pattern grants the names it matches.
func TestWildcardModelGroups(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up, catchAll := fakeupstream.Start(t), fakeupstream.Start(t)
	// in this order: were "*" written first, B could route acc-wild/some-model through it
	// before it holds acc-wild/* (B applies the writes in commit order)
	for _, g := range []struct{ name, base string }{{"acc-wild/*", up.URL + "/v1"}, {"*", catchAll.URL + "/v1"}} {
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": g.name,
			"litellm_params": map[string]any{"model": "openai/*", "api_base": g.base, "api_key": "sk-up"}})
		require.Equal(t, 200, st, "%s", b)
	}

	Eventually(t, "B routes acc-wild/some-model through the wildcard group", func() bool {
		st, _ := agChat(t, p.B, MasterKey, "acc-wild/some-model")
		return st == 200
	})
	r, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "some-model", gjson.GetBytes(r.Body, "model").Str, "upstream sees the model the request named after the prefix")

	st, b := agChat(t, p.B, MasterKey, "gpt-unknown")
	require.Equal(t, 200, st, "%s", b)
	r, ok = catchAll.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "gpt-unknown", gjson.GetBytes(r.Body, "model").Str)

	// an exact group of the same name wins over the wildcard
	st, b = p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "acc-wild/some-model",
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "from the exact group"}})
	require.Equal(t, 200, st, "%s", b)
	st, b = agChat(t, p.A, MasterKey, "acc-wild/some-model")
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "from the exact group", gjson.GetBytes(b, "choices.0.message.content").Str)
	Eventually(t, "B serves the exact group", func() bool {
		_, b := agChat(t, p.B, MasterKey, "acc-wild/some-model")
		return gjson.GetBytes(b, "choices.0.message.content").Str == "from the exact group"
	})

	// a key limited to the wildcard pattern may use what it matches, nothing else
	key := agGenKey(t, p.A, "acc-wild/*")
	st, b = agChat(t, p.B, key, "acc-wild/another")
	require.Equal(t, 200, st, "%s", b)
	st, b = agChat(t, p.B, key, "gpt-unknown")
	require.Equal(t, 401, st, "%s", b)
}
