package itest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// router_settings on a key and on a team (issue 19 item 1; LiteLLM's per-key/team router
// settings, route_llm_request.py router_settings_override): written on replica a, in force
// for that caller's calls on replica b; the key's settings win over its team's as a whole;
// members LiteLLM does not apply per call are a 400 naming them.
func TestCallerRouterSettings(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Config: "router_settings: {num_retries: 0, cooldown_time: 0}\n"})
	a, b := p.A, p.B
	down, ok, ok2, slow := fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t), fakeupstream.Start(t)
	down.FailWith(500, "server_error", "upstream exploded")
	slow.SetLatency(3 * time.Second)
	rtNewModel(t, a, "rs-down", "rs-down-id", down, nil)
	rtNewModel(t, a, "rs-ok", "rs-ok-id", ok, nil)
	rtNewModel(t, a, "rs-ok2", "rs-ok2-id", ok2, nil)
	rtNewModel(t, a, "rs-slow", "rs-slow-id", slow, nil)

	gen := func(body map[string]any) string {
		t.Helper()
		st, out := a.Do(t, "POST", "/key/generate", body)
		require.Equal(t, 200, st, "%s", out)
		return JSON(t, out)["key"].(string)
	}
	key := gen(map[string]any{"router_settings": map[string]any{
		"fallbacks": []any{map[string]any{"rs-down": []any{"rs-ok"}}}, "num_retries": 2, "timeout": 0.5,
		"model_group_alias": map[string]any{"rs-alias": "rs-ok"},
	}})

	// fallbacks and num_retries: three upstream calls to rs-down, then rs-ok answers
	st, h, body := fbChat(t, b, key, map[string]any{"model": "rs-down"}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "rs-ok-id", h.Get("x-litellm-model-id"))
	require.Equal(t, "1", h.Get("x-litellm-attempted-fallbacks"))
	require.Equal(t, "2", h.Get("x-litellm-max-retries"))
	require.Equal(t, "0.5", h.Get("x-litellm-timeout"))
	require.Len(t, down.Requests(), 3, "1 call + num_retries 2")
	// model_group_alias
	st, h, body = fbChat(t, b, key, map[string]any{"model": "rs-alias"}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "rs-ok-id", h.Get("x-litellm-model-id"))
	// timeout: 0.5 s against a 3 s upstream is a timeout; the request's x-litellm-timeout wins
	st, _, body = fbChat(t, b, key, map[string]any{"model": "rs-slow"}, nil)
	require.Equal(t, 504, st, "%s", body)
	require.Contains(t, string(body), "timed out after 500ms")
	st, _, body = fbChat(t, b, key, map[string]any{"model": "rs-slow"}, map[string]string{"x-litellm-timeout": "30"})
	require.Equal(t, 200, st, "%s", body)

	// the master key has none of it: the config's num_retries 0, no fallbacks, no alias
	n := len(down.Requests())
	st, h, body = fbChat(t, b, MasterKey, map[string]any{"model": "rs-down"}, nil)
	require.Equal(t, 500, st, "%s", body)
	require.Equal(t, "0", h.Get("x-litellm-max-retries"))
	require.Len(t, down.Requests(), n+1)

	// a team's router_settings hold for its keys without their own
	st, out := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "rs-team", "router_settings": map[string]any{
		"fallbacks": []any{map[string]any{"rs-down": []any{"rs-ok2"}}}}})
	require.Equal(t, 200, st, "%s", out)
	teamKey := gen(map[string]any{"team_id": "rs-team"})
	st, h, body = fbChat(t, b, teamKey, map[string]any{"model": "rs-down"}, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "rs-ok2-id", h.Get("x-litellm-model-id"))
	// a team key with router_settings of its own: the key's, not merged with the team's
	ownKey := gen(map[string]any{"team_id": "rs-team", "router_settings": map[string]any{"num_retries": 1}})
	n = len(down.Requests())
	st, h, body = fbChat(t, b, ownKey, map[string]any{"model": "rs-down"}, nil)
	require.Equal(t, 500, st, "%s", body)
	require.Equal(t, "1", h.Get("x-litellm-max-retries"))
	require.Len(t, down.Requests(), n+2)

	// /team/update on a: in force on b once the change arrives
	st, out = a.Do(t, "POST", "/team/update", map[string]any{"team_id": "rs-team", "router_settings": map[string]any{
		"fallbacks": []any{map[string]any{"rs-down": []any{"rs-ok"}}}}})
	require.Equal(t, 200, st, "%s", out)
	Eventually(t, "the team's new fallbacks on b", func() bool {
		st, h, _ := fbChat(t, b, teamKey, map[string]any{"model": "rs-down"}, nil)
		return st == 200 && h.Get("x-litellm-model-id") == "rs-ok-id"
	})
	// returned as sent
	st, out = b.Do(t, "GET", "/team/info?team_id=rs-team", nil)
	require.Equal(t, 200, st, "%s", out)
	require.Contains(t, string(out), `"router_settings":{"fallbacks":[{"rs-down":["rs-ok"]}]}`)

	// a member LiteLLM does not apply per call, or does not define, is a 400 naming it;
	// nothing is written
	for _, c := range []struct{ path, field string }{
		{"/key/generate", "routing_strategy"}, {"/team/new", "cooldown_time"}, {"/team/update", "num_retires"},
	} {
		body := map[string]any{"key_alias": "rs-refused", "router_settings": map[string]any{c.field: 1}}
		if c.path != "/key/generate" {
			body = map[string]any{"team_id": "rs-refused", "router_settings": map[string]any{c.field: 1}}
		}
		st, out := a.Do(t, "POST", c.path, body)
		require.Equal(t, 400, st, "%s: %s", c.path, out)
		require.Contains(t, string(out), `router_settings: \"`+c.field+`\" not supported on a key or team`, c.path)
	}
	st, out = a.Do(t, "POST", "/key/generate", map[string]any{"router_settings": map[string]any{"num_retries": -1}})
	require.Equal(t, 400, st, "%s", out)
	require.Contains(t, string(out), "router_settings.num_retries: must be an integer >= 0")
	st, out = a.Do(t, "GET", "/team/info?team_id=rs-refused", nil)
	require.Equal(t, 404, st, "%s", out)
}
