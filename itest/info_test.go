package itest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// A virtual key made on A reads, on B, its own /key/info and only the models it may use from
// /model/info, /v2/model/info, /model_group/info and /v1/models?only_model_access_groups=True.
func TestVirtualKeyInfoRoutes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	agNewModel(t, p.A, "info-a")
	agNewModel(t, p.A, "info-b")
	st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": "info-c",
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"},
		"model_info":     map[string]any{"access_groups": []string{"info-grp"}, "max_input_tokens": 1000, "input_cost_per_token": 0.5}})
	require.Equal(t, 200, st, "%s", b)

	key := agGenKey(t, p.A, "info-a", "info-grp")
	other := agGenKey(t, p.A, "info-b")
	Eventually(t, "B applied the three models", func() bool {
		return p.B.SyncLag(t)["registries"].(map[string]any)["models"].(map[string]any)["count"].(float64) == 3
	})

	st, b = p.B.DoKey(t, key, "GET", "/key/info", nil)
	require.Equal(t, 200, st, "%s", b)
	info := JSON(t, b)["info"].(map[string]any)
	require.Equal(t, keyTestHash(key), info["token"])
	require.Equal(t, []string{"info-a", "info-grp"}, agStrs(info["models"]))
	st, b = p.B.DoKey(t, key, "GET", "/key/info?key="+other, nil)
	require.Equal(t, 404, st, "another key's info answers as an absent one: %s", b)

	names := func(path string) []string {
		st, b := p.B.DoKey(t, key, "GET", path, nil)
		require.Equal(t, 200, st, "%s: %s", path, b)
		var out []string
		for _, d := range JSON(t, b)["data"].([]any) {
			m := d.(map[string]any)
			if n, ok := m["model_name"].(string); ok {
				out = append(out, n)
			} else {
				out = append(out, m["model_group"].(string))
			}
		}
		return out
	}
	for _, path := range []string{"/model/info", "/v1/model/info", "/v2/model/info", "/model_group/info"} {
		require.Equal(t, []string{"info-a", "info-c"}, names(path), path)
	}
	st, b = p.B.DoKey(t, key, "GET", "/model_group/info?model_group=info-c", nil)
	require.Equal(t, 200, st, "%s", b)
	g := JSON(t, b)["data"].([]any)[0].(map[string]any)
	require.EqualValues(t, 1000, g["max_input_tokens"])
	require.EqualValues(t, 0.5, g["input_cost_per_token"])
	require.Equal(t, []string{"openai"}, agStrs(g["providers"]))
	require.Equal(t, []string{"info-grp"}, agStrs(g["access_groups"]))

	require.Equal(t, []string{"info-a", "info-c"}, agModels(t, p.B, key))
	st, b = p.B.DoKey(t, key, "GET", "/v1/models?only_model_access_groups=True", nil)
	require.Equal(t, 200, st, "%s", b)
	data := JSON(t, b)["data"].([]any)
	require.Len(t, data, 1, "%s", b)
	require.Equal(t, "info-grp", data[0].(map[string]any)["id"])
}

// GET /health probes every deployment: a healthy and a failing fake upstream, and a mock that
// is answered without a call.
func TestHealthProbesDeployments(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t)
	down := fakeupstream.Start(t, fakeupstream.WithStatus(401), fakeupstream.WithErrorMessage("Incorrect API key provided"))
	for name, base := range map[string]string{"health-up": up.URL + "/v1", "health-down": down.URL + "/v1"} {
		st, b := p.A.Do(t, "POST", "/model/new", map[string]any{"model_name": name,
			"litellm_params": map[string]any{"model": "openai/gpt-x", "api_base": base, "api_key": "sk-upstream-secret"}})
		require.Equal(t, 200, st, "%s", b)
	}
	agNewModel(t, p.A, "health-mock")

	st, b := p.A.Do(t, "GET", "/health", nil)
	require.Equal(t, 200, st, "%s", b)
	h := JSON(t, b)
	require.EqualValues(t, 2, h["healthy_count"], "%s", b)
	require.EqualValues(t, 1, h["unhealthy_count"], "%s", b)
	var healthy []string
	for _, e := range h["healthy_endpoints"].([]any) {
		healthy = append(healthy, e.(map[string]any)["model_name"].(string))
	}
	require.ElementsMatch(t, []string{"health-up", "health-mock"}, healthy)
	bad := h["unhealthy_endpoints"].([]any)[0].(map[string]any)
	require.Equal(t, "health-down", bad["model_name"])
	require.Contains(t, bad["error"], "401")
	require.Contains(t, bad["error"], "Incorrect API key provided")
	require.NotContains(t, string(b), "sk-upstream-secret")
	// the probes were token-free GET /v1/models, and the mock made no call
	r, ok := up.LastRequest("/v1/models")
	require.True(t, ok)
	require.Equal(t, "GET", r.Method)
	require.Len(t, up.Requests(), 1)

	st, b = p.A.Do(t, "GET", "/health?model=health-up", nil)
	require.Equal(t, 200, st, "%s", b)
	require.EqualValues(t, 1, JSON(t, b)["healthy_count"])
	require.EqualValues(t, 0, JSON(t, b)["unhealthy_count"])

	// /health is an admin route; /routes lists the routes
	key := agGenKey(t, p.A)
	st, _ = p.B.DoKey(t, key, "GET", "/health", nil)
	require.Equal(t, 403, st)
	st, b = p.B.DoKey(t, key, "GET", "/routes", nil)
	require.Equal(t, 200, st, "%s", b)
	var paths []string
	for _, r := range JSON(t, b)["routes"].([]any) {
		paths = append(paths, r.(map[string]any)["path"].(string))
	}
	require.Contains(t, paths, "/v1/chat/completions")
	require.Contains(t, paths, "/team/new")
}
