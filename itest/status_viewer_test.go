package itest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// Issue 23 ("readable with a proxy_admin_viewer key"): the status routes /sync/lag and
// /sync/cluster (what /ui reads) answer 200 to the master key and to the key of a user with
// user_role proxy_admin_viewer or proxy_admin (LiteLLM's admin-view pair); the viewer's key
// still writes nothing (POST /model/new refused 403, nothing created); an internal_user's key
// and a key without a user are refused 403 with LiteLLM's route-check text.
func TestStatusRoutesViewerKey(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	g := StartGateway(t, db, "a", GatewayOpts{})
	userKey := func(id, role string) string {
		t.Helper()
		st, b := g.Do(t, "POST", "/user/new", map[string]any{"user_id": id, "user_role": role})
		require.Equal(t, 200, st, "%s", b)
		return JSON(t, b)["key"].(string)
	}
	viewer := userKey("sv-viewer", "proxy_admin_viewer")
	admin := userKey("sv-admin", "proxy_admin")
	internal := userKey("sv-internal", "internal_user")
	st, b := g.Do(t, "POST", "/key/generate", map[string]any{})
	require.Equal(t, 200, st, "%s", b)
	plain := JSON(t, b)["key"].(string)

	for _, k := range []string{MasterKey, viewer, admin} {
		for _, path := range []string{"/sync/lag", "/sync/trace", "/sync/cluster"} {
			st, b := g.DoKey(t, k, "GET", path, nil)
			require.Equal(t, 200, st, "%s: %s", path, b)
		}
	}
	st, b = g.DoKey(t, viewer, "GET", "/sync/cluster", nil)
	require.Equal(t, 200, st)
	require.NotEmpty(t, JSON(t, b)["replicas"], "the viewer reads the whole cluster view")

	// read-only: a write with the viewer's key is refused and changes nothing
	st, b = g.DoKey(t, viewer, "POST", "/model/new", map[string]any{"model_name": "sv-m",
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
	require.Equal(t, 403, st, "%s", b)
	st, b = g.Do(t, "GET", "/model/info", nil)
	require.Equal(t, 200, st, "%s", b)
	require.Empty(t, JSON(t, b)["data"], "the viewer's write created nothing")

	for k, role := range map[string]string{internal: "internal_user", plain: "internal_user"} {
		for _, path := range []string{"/sync/lag", "/sync/trace", "/sync/cluster"} {
			st, b := g.DoKey(t, k, "GET", path, nil)
			require.Equal(t, 403, st, "%s: %s", path, b)
			require.Equal(t, "user not allowed to access this route, role= "+role+". Trying to access: "+path,
				JSON(t, b)["error"].(map[string]any)["message"], "%s", b)
		}
	}
	st, _ = g.DoKey(t, "sk-nope", "GET", "/sync/cluster", nil)
	require.Equal(t, 401, st)
}
