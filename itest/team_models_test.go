package itest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// TestTeamScopedModel pins issue 19 item 3 (LiteLLM team models): a model written on A with
// model_info.team_id is stored under a unique model_name with team_public_model_name, in the
// team's models and model_aliases; on B it is callable and listed by its public name for that
// team's keys (and under its stored name for the master key); for a key of another team or
// without team the public name is no model and the stored name the usual access denial.
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
	require.Contains(t, agModels(t, b, own), "tm-model") // the team's keys list it by its public name

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
	// stored as LiteLLM stores a team model: a unique model_name, team_public_model_name the
	// name it was created with, listed as such to the master key too
	byPublic := func(key, path string) (string, map[string]any) {
		for name, mi := range infoNames(key, path) {
			if mi["team_public_model_name"] == "tm-model" {
				return name, mi
			}
		}
		return "", nil
	}
	for _, key := range []string{own, MasterKey} {
		for _, path := range []string{"/model/info", "/v2/model/info"} {
			name, mi := byPublic(key, path)
			require.NotNil(t, mi, "%s lists tm-model", path)
			require.Regexp(t, `^model_name_tm-own_[0-9a-f-]{36}$`, name)
			require.Equal(t, "tm-own", mi["team_id"])
		}
	}
	// the team: its models list and model_aliases name the model (LiteLLM team_model_add)
	st, body = b.Do(t, "GET", "/team/info?team_id=tm-own", nil)
	require.Equal(t, 200, st, "%s", body)
	ti := JSON(t, body)["team_info"].(map[string]any)
	require.Equal(t, []any{"tm-model"}, ti["models"])
	unique, _ := byPublic(MasterKey, "/model/info")
	require.Equal(t, map[string]any{"tm-model": unique}, ti["model_aliases"])

	// the other keys: the answer of a model they may not access, and not listed
	for name, k := range map[string]string{"other team": other, "no team": none} {
		// the public name is the team's alias only: for others no such model (LiteLLM)
		st, body := agChat(t, b, k, "tm-model")
		require.Equal(t, 400, st, "%s: %s", name, body)
		require.Contains(t, string(body), "Invalid model name passed in model=tm-model")
		// the stored name: the usual access denial
		st, body = agChat(t, b, k, unique)
		require.Equal(t, 401, st, "%s: %s", name, body)
		typ, msg := agOpenAIError(t, body)
		require.Equal(t, "key_model_access_denied", typ, "%s: %s", name, body)
		require.Contains(t, msg, "key not allowed to access model.", name)
		require.False(t, slices.Contains(agModels(t, b, k), "tm-model"), "%s sees tm-model in /v1/models", name)
		for _, path := range []string{"/model/info", "/v2/model/info"} {
			n, _ := byPublic(k, path)
			require.Empty(t, n, "%s sees tm-model in %s", name, path)
		}
	}
}

// TestTeamModelsSamePublicName pins the rest of issue 19 item 3 (LiteLLM team models): two
// teams each create a model under the same public name, on A; on B each team's key reaches
// its own team's deployment by that name, and a key of neither team is refused it.
func TestTeamModelsSamePublicName(t *testing.T) {
	up1, up2 := fakeupstream.Start(t, fakeupstream.WithReply(func(fakeupstream.ReplyInput) string { return "from team one" })), fakeupstream.Start(t, fakeupstream.WithReply(func(fakeupstream.ReplyInput) string { return "from team two" }))
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	keyOf, idOf := map[string]string{}, map[string]string{}
	for team, up := range map[string]*fakeupstream.Server{"pub-t1": up1, "pub-t2": up2} {
		st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": team, "models": []string{"base-model"}})
		require.Equal(t, 200, st, "%s", body)
		st, body = a.Do(t, "POST", "/model/new", map[string]any{"model_name": "shared-name",
			"litellm_params": map[string]any{"model": "openai/up", "api_base": up.URL + "/v1", "api_key": "sk-up"},
			"model_info":     map[string]any{"team_id": team}})
		require.Equal(t, 200, st, "%s", body)
		idOf[team] = JSON(t, body)["model_id"].(string)
		st, body = a.Do(t, "POST", "/key/generate", map[string]any{"team_id": team})
		require.Equal(t, 200, st, "%s", body)
		keyOf[team] = JSON(t, body)["key"].(string)
	}
	none := agGenKey(t, a)
	for team, want := range map[string]string{"pub-t1": "from team one", "pub-t2": "from team two"} {
		var body []byte
		Eventually(t, "B serves "+team+"'s shared-name to its key", func() bool {
			var st int
			st, body = agChat(t, b, keyOf[team], "shared-name")
			return st == 200
		})
		msg := JSON(t, body)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
		require.Equal(t, want, msg, "%s reaches its own deployment", team)
		require.Contains(t, agModels(t, b, keyOf[team]), "shared-name")
	}
	st, body := agChat(t, b, none, "shared-name")
	require.Equal(t, 400, st, "a key of neither team: no such model for it: %s", body)

	// /model/update with a new model_name renames a team model's public name (its stored
	// name stays): team one's key reaches it by the new name on B
	st, body = a.Do(t, "POST", "/model/update", map[string]any{"model_name": "renamed-name", "model_info": map[string]any{"id": idOf["pub-t1"]}})
	require.Equal(t, 200, st, "%s", body)
	require.Regexp(t, `^model_name_pub-t1_`, JSON(t, body)["model_name"])
	Eventually(t, "B serves team one's model under its new public name", func() bool {
		st, _ := agChat(t, b, keyOf["pub-t1"], "renamed-name")
		return st == 200
	})
	st, body = agChat(t, b, keyOf["pub-t2"], "renamed-name")
	require.Equal(t, 400, st, "%s", body)
}
