package router_test

import (
	"context"
	"fmt"
	"lockstep/pkg/format"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

func newRouter(t *testing.T, s router.Settings, ups ...*fakeupstream.Server) (*router.Router, []*registry.Entry[*router.Deployment]) {
	t.Helper()
	reg := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	cfg := map[string]*router.Deployment{}
	for i, up := range ups {
		id := fmt.Sprint("d", i)
		d, err := router.Build(id, "grp", []byte(fmt.Sprintf(`{"model":"openai/m","api_base":%q,"api_key":"k"}`, up.URL+"/v1")), nil)
		require.NoError(t, err)
		cfg[id] = d
	}
	reg.SetConfig(cfg)
	r := router.New(reg, provider.NewClient(), s)
	g, err := r.Group(context.Background(), "grp")
	require.NoError(t, err)
	return r, g
}

var body = []byte(`{"model":"grp","messages":[{"role":"user","content":"hi"}]}`)

func TestRetryableFailureMovesToAnotherDeployment(t *testing.T) {
	t.Parallel()
	bad, good := fakeupstream.Start(t, fakeupstream.WithStatus(503)), fakeupstream.Start(t)
	r, g := newRouter(t, router.Settings{NumRetries: 2}, bad, good)
	for range 10 {
		res, d, err := r.Do(context.Background(), g, format.FormatChat, body)
		require.NoError(t, err)
		require.Equal(t, "d1", d.ModelID)
		require.Contains(t, string(res.Body), "fake reply to: hi")
	}
}

func TestNonRetryableFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStatus(400))
	r, g := newRouter(t, router.Settings{NumRetries: 3}, up)
	_, _, err := r.Do(context.Background(), g, format.FormatChat, body)
	var ue *format.UpstreamError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 400, ue.Status)
	require.Len(t, up.Requests(), 1)
}

func TestCooldownSkipsFailingDeployment(t *testing.T) {
	t.Parallel()
	bad, good := fakeupstream.Start(t, fakeupstream.WithStatus(500)), fakeupstream.Start(t)
	r, g := newRouter(t, router.Settings{NumRetries: 1, AllowedFails: 1, CooldownTime: time.Minute}, bad, good)
	for range 20 {
		_, _, err := r.Do(context.Background(), g, format.FormatChat, body)
		require.NoError(t, err)
	}
	// after more than allowed_fails failures the bad deployment cools down and is skipped
	require.LessOrEqual(t, len(bad.Requests()), 3, "cooling deployment kept receiving traffic")
}

func TestSimpleShuffleSpreadsLoad(t *testing.T) {
	t.Parallel()
	a, b := fakeupstream.Start(t), fakeupstream.Start(t)
	r, g := newRouter(t, router.Settings{}, a, b)
	for range 200 {
		_, _, err := r.Do(context.Background(), g, format.FormatChat, body)
		require.NoError(t, err)
	}
	require.Greater(t, len(a.Requests()), 50)
	require.Greater(t, len(b.Requests()), 50)
}

func TestUnknownGroup(t *testing.T) {
	t.Parallel()
	r, _ := newRouter(t, router.Settings{}, fakeupstream.Start(t))
	_, err := r.Group(context.Background(), "nope")
	require.ErrorIs(t, err, router.ErrUnknownModel)
}

func TestBuildRejectsInvalidModel(t *testing.T) {
	t.Parallel()
	_, err := router.Build("x", "", []byte(`{"model":"openai/x"}`), nil)
	require.ErrorContains(t, err, "model_name is required")
	_, err = router.Build("x", "n", nil, nil)
	require.ErrorContains(t, err, "litellm_params is required")
	_, err = router.Build("x", "n", []byte(`{"model":"openai/x"}`), []byte(`{"access_groups":"notalist"}`))
	require.ErrorContains(t, err, "model_info")
}

// model_info of the wrong shape is refused naming the field, never coerced.
func TestBuildModelInfoTypes(t *testing.T) {
	t.Parallel()
	params := []byte(`{"model":"openai/m","mock_response":"x"}`)
	for info, want := range map[string]string{
		`["a"]`:                        "model_info must be a JSON object",
		`"a"`:                          "model_info must be a JSON object",
		`{"access_groups":"g"}`:        `model_info.access_groups must be an array of strings, got "g"`,
		`{"access_groups":["g", 5]}`:   "model_info.access_groups[1] must be a string, got 5",
		`{"access_groups":{"g":true}}`: `model_info.access_groups must be an array of strings, got {"g":true}`,
		`{"team_id":5}`:                "model_info.team_id must be a string, got 5",
	} {
		_, err := router.Build("id", "grp", params, []byte(info))
		require.EqualError(t, err, want, info)
	}
	d, err := router.Build("id", "grp", params, []byte(`{"access_groups":["a","b"],"id":"id"}`))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, d.AccessGroups)
	d, err = router.Build("id", "grp", params, []byte(`{"access_groups":null}`))
	require.NoError(t, err)
	require.Empty(t, d.AccessGroups)
	d, err = router.Build("id", "grp", params, []byte(`{"team_id":"t1"}`))
	require.NoError(t, err)
	require.Equal(t, "t1", d.TeamID)
}

// Wildcard model groups: an exact group beats a wildcard, a longer pattern a shorter one, and
// the upstream model is taken from the request (LiteLLM's pattern routing).
func TestWildcardGroups(t *testing.T) {
	t.Parallel()
	reg := registry.New(registry.Options[*router.Deployment]{Type: store.Model, Build: router.BuildRow, Names: router.Names})
	cfg := map[string]*router.Deployment{}
	for id, def := range map[string][2]string{
		"w-all":    {"*", "openai/*"},
		"w-acc":    {"acc-wild/*", "openai/*"},
		"w-deeper": {"acc-wild/deep/*", "anthropic/claude-*"},
		"w-fixed":  {"fixed/*", "openai/always-this"},
		"exact":    {"acc-wild/exact", "openai/exact-upstream"},
	} {
		d, err := router.Build(id, def[0], []byte(fmt.Sprintf(`{"model":%q,"api_key":"k"}`, def[1])), nil)
		require.NoError(t, err)
		cfg[id] = d
	}
	reg.SetConfig(cfg)
	r := router.New(reg, provider.NewClient(), router.Settings{})
	for name, want := range map[string][2]string{
		"acc-wild/some-model":  {"w-acc", "some-model"},
		"acc-wild/exact":       {"exact", "exact-upstream"},
		"acc-wild/deep/x-3":    {"w-deeper", "claude-x-3"},
		"gpt-4o":               {"w-all", "gpt-4o"},
		"fixed/anything":       {"w-fixed", "always-this"},
		"other/provider/model": {"w-all", "other/provider/model"},
	} {
		g, err := r.Group(context.Background(), name)
		require.NoError(t, err, name)
		require.Len(t, g, 1, name)
		require.Equal(t, want[0], g[0].Value.ModelID, name)
		require.Equal(t, want[1], g[0].Value.Model, name)
	}
	// nothing after the prefix: no upstream model to call
	_, err := r.Group(context.Background(), "acc-wild/")
	require.ErrorIs(t, err, router.ErrUnknownModel)
	// the registry's own entries are never changed by a wildcard match
	e, _ := reg.Load().ByID("w-acc")
	require.Equal(t, "*", e.Value.Model)
}
