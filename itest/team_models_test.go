package itest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTeamScopedModel pins issue 19 item 3 (LiteLLM team models): a model written on A with
// model_info.team_id is, on B, callable and listed (/v1/models, /model/info, /v2/model/info
// with team_public_model_name) for that team's keys and the master key only; a key of another
// team and a key without team get the usual access denial and do not see it.
func TestTeamScopedModel(t *testing.T) {
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	for _, team := range []string{"tm-own", "tm-other"} {
		st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": team})
		require.Equal(t, 200, st, "%s", body)
	}
	st, body := a.Do(t, "POST", "/model/new", map[string]any{
		"model_name":     "tm-model",
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
		"model_info":     map[string]any{"team_id": "tm-own"},
	})
	require.Equal(t, 200, st, "%s", body)
	genKey := func(team string) string {
		req := map[string]any{}
		if team != "" {
			req["team_id"] = team
		}
		st, body := a.Do(t, "POST", "/key/generate", req)
		require.Equal(t, 200, st, "%s", body)
		k, _ := JSON(t, body)["key"].(string)
		require.NotEmpty(t, k, "%s", body)
		return k
	}
	own, other, none := genKey("tm-own"), genKey("tm-other"), genKey("")

	// the model reaches B (change feed); the team key calls it there
	Eventually(t, "B serves tm-model to the team key", func() bool {
		st, _ := agChat(t, b, own, "tm-model")
		return st == 200
	})
	require.Contains(t, agModels(t, b, own), "tm-model")
	require.Contains(t, agModels(t, b, MasterKey), "tm-model")

	infoNames := func(key, path string) map[string]map[string]any {
		st, body := b.DoKey(t, key, "GET", path, nil)
		require.Equal(t, 200, st, "%s", body)
		var out struct {
			Data []struct {
				ModelName string         `json:"model_name"`
				ModelInfo map[string]any `json:"model_info"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &out))
		m := map[string]map[string]any{}
		for _, d := range out.Data {
			m[d.ModelName] = d.ModelInfo
		}
		return m
	}
	for _, path := range []string{"/model/info", "/v2/model/info"} {
		mi, ok := infoNames(own, path)["tm-model"]
		require.True(t, ok, "%s lists tm-model for its team", path)
		require.Equal(t, "tm-own", mi["team_id"])
		require.Equal(t, "tm-model", mi["team_public_model_name"])
	}

	// the other keys: the answer of a model they may not access, and not listed
	for name, k := range map[string]string{"other team": other, "no team": none} {
		st, body := agChat(t, b, k, "tm-model")
		require.Equal(t, 401, st, "%s: %s", name, body)
		typ, msg := agOpenAIError(t, body)
		require.Equal(t, "key_model_access_denied", typ, "%s: %s", name, body)
		require.Contains(t, msg, "key not allowed to access model.", name)
		require.False(t, slices.Contains(agModels(t, b, k), "tm-model"), "%s sees tm-model in /v1/models", name)
		for _, path := range []string{"/model/info", "/v2/model/info"} {
			_, ok := infoNames(k, path)["tm-model"]
			require.False(t, ok, "%s sees tm-model in %s", name, path)
		}
	}
}
