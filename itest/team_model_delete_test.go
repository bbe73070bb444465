package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTeamModelDelete: /model/delete of a team model (model_info.team_id) on replica a takes
// its public name out of the team's models and model_aliases, as LiteLLM's delete_model does
// (PR #29820); on replica b the team then lists neither, and its key no longer reaches the
// name. The team's other model stays.
func TestTeamModelDelete(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "td-team", "models": []string{"td-base"}})
	require.Equal(t, 200, st, "%s", body)
	ids := map[string]string{}
	for _, name := range []string{"td-gone", "td-keep"} {
		st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": name,
			"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
			"model_info":     map[string]any{"team_id": "td-team"}})
		require.Equal(t, 200, st, "%s", body)
		ids[name] = JSON(t, body)["model_id"].(string)
	}
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"team_id": "td-team"})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	Eventually(t, "b serves td-gone to the team key", func() bool {
		st, _ := agChat(t, b, key, "td-gone")
		return st == 200
	})

	st, body = a.Do(t, "POST", "/model/delete", map[string]any{"id": ids["td-gone"]})
	require.Equal(t, 200, st, "%s", body)
	var ti map[string]any
	Eventually(t, "b's team no longer names td-gone", func() bool {
		st, body := b.Do(t, "GET", "/team/info?team_id=td-team", nil)
		require.Equal(t, 200, st, "%s", body)
		ti = JSON(t, body)["team_info"].(map[string]any)
		_, aliased := ti["model_aliases"].(map[string]any)["td-gone"]
		return !aliased
	})
	require.Equal(t, []any{"td-base", "td-keep"}, ti["models"])
	require.Len(t, ti["model_aliases"], 1)
	require.Contains(t, ti["model_aliases"], "td-keep")
	Eventually(t, "b refuses td-gone to the team key", func() bool {
		st, _ := agChat(t, b, key, "td-gone")
		return st == 400
	})
	st, body = agChat(t, b, key, "td-keep")
	require.Equal(t, 200, st, "%s", body)
}
