package itest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// TestMetricModelLabelIsTheGroup (issue 17, item 11b): 25 calls through a wildcard group, each
// naming another concrete model, and calls naming unknown models leave one spend series,
// labelled with the group's pattern, never with a name the client chose.
func TestMetricModelLabelIsTheGroup(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t)
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "wild/*",
		"litellm_params": map[string]any{"model": "openai/*", "api_base": up.URL + "/v1", "api_key": "sk-up"},
		"model_info":     map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}})
	require.Equal(t, 200, st, "%s", b)
	key, _ := govKey(t, p.A, map[string]any{})
	Eventually(t, "B routes through the wildcard group", func() bool {
		st, _ := agChat(t, p.B, key, "wild/warm-up")
		return st == 200
	})
	for i := range 25 {
		st, b := agChat(t, p.B, key, fmt.Sprintf("wild/client-chosen-%d", i))
		require.Equal(t, 200, st, "%s", b)
		st, _ = agChat(t, p.B, key, fmt.Sprintf("no-such-model-%d", i))
		require.NotEqual(t, 200, st)
	}
	var series []string
	for _, line := range strings.Split(metricsText(t, p.B), "\n") {
		if strings.HasPrefix(line, "lockstep_spend_usd_total{") {
			series = append(series, line)
		}
	}
	require.Len(t, series, 1, "%v", series)
	require.True(t, strings.HasPrefix(series[0], `lockstep_spend_usd_total{model="wild/*"}`), series[0])
}

// TestAccessLogRedactsKeysInPaths (issue 17, item 11c): a raw virtual key in a request path
// (/key/{key}/regenerate, refused or not) never reaches the replica's log; the path is logged
// with the key as sk-…abcd.
func TestAccessLogRedactsKeysInPaths(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	victim, _ := govKey(t, p.A, map[string]any{})
	caller, _ := govKey(t, p.A, map[string]any{})
	for _, g := range []*Gateway{p.A, p.B} {
		// refused: a virtual key may not call the management routes
		st, b := g.DoKey(t, caller, "POST", "/key/"+victim+"/regenerate", map[string]any{})
		require.Equal(t, 403, st, "%s", b)
		// refused: no key at all
		st, b = g.DoKey(t, "", "POST", "/key/"+victim+"/regenerate?key="+victim, map[string]any{})
		require.Equal(t, 401, st, "%s", b)
	}
	// served: the master key regenerates it (on B)
	st, b := p.B.Do(t, "POST", "/key/"+victim+"/regenerate", map[string]any{})
	require.Equal(t, 200, st, "%s", b)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, g.ReplicaID+" logged the requests", func() bool {
			return strings.Count(g.Log(), `"path":"/key/sk-…`+victim[len(victim)-4:]+`/regenerate"`) >= 2
		})
		require.NotContains(t, g.Log(), victim, "the raw key is in %s's log", g.ReplicaID)
		require.NotContains(t, g.Log(), caller, "the caller's raw key is in %s's log", g.ReplicaID)
	}
}
