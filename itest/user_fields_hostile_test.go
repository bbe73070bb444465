package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Issue 19, hostile user-field bodies: an empty organization id is a 400 naming
// "organizations" (not the organization routes' "organization_id"); a stored object_permission
// member of the wrong LiteLLM type is a 400 naming it on /user/new and /user/update; nothing
// of the user, its key or its memberships is written on any replica. An internal_user setting
// the user fields on itself (/user/update, /user/new) is refused and changes nothing: its
// user row, its key's limits and its organizations stay as the admin left them on B.
func TestUserFieldsHostile(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "uh-org", "organization_alias": "o"})
	require.Equal(t, 200, st, "%s", body)

	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"organizations": []string{"uh-org", ""}}, "organizations[1] must be a non-empty organization id"},
		{map[string]any{"organizations": []string{"uh-org"}, "object_permission": map[string]any{"mcp_servers": "srv"}},
			"object_permission.mcp_servers must be a list of strings"},
		{map[string]any{"organizations": []string{"uh-org"}, "object_permission": map[string]any{"mcp_tool_search_enabled": "yes"}},
			"object_permission.mcp_tool_search_enabled must be true or false"},
	} {
		c.body["user_id"] = "uh-bad"
		st, body := a.Do(t, "POST", "/user/new", c.body)
		require.Equal(t, 400, st, "%v: %s", c.body, body)
		require.Contains(t, string(body), c.want, "%v", c.body)
		st, body = b.Do(t, "GET", "/user/info?user_id=uh-bad", nil)
		require.Equal(t, 404, st, "%v: nothing stored: %s", c.body, body)
	}
	st, body = b.Do(t, "GET", "/organization/info?organization_id=uh-org", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, gjson.GetBytes(body, "members").Array(), "no membership written: %s", body)

	// an internal_user made by the admin with limits on its key
	st, body = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "uh-u", "user_role": "internal_user",
		"max_budget": 1, "model_rpm_limit": map[string]int{"uh-m": 1}, "spend": 0.5})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	Eventually(t, "B serves the user's key", func() bool {
		st, _ := b.DoKey(t, key, "GET", "/key/info", nil)
		return st == 200
	})

	st, body = a.Do(t, "POST", "/user/update", map[string]any{"user_id": "uh-u", "object_permission": map[string]any{"vector_stores": 7}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "object_permission.vector_stores must be a list of strings", "%s", body)

	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/user/update", map[string]any{"user_id": "uh-u", "permissions": map[string]any{"get_spend_routes": true}}},
		{"/user/update", map[string]any{"user_id": "uh-u", "model_rpm_limit": map[string]int{"uh-m": 1000000}}},
		{"/user/update", map[string]any{"user_id": "uh-u", "spend": 0, "max_budget": 1e9}},
		{"/user/update", map[string]any{"user_id": "uh-u", "user_role": "proxy_admin"}},
		{"/user/new", map[string]any{"user_id": "uh-u2", "user_role": "proxy_admin", "organizations": []string{"uh-org"},
			"permissions": map[string]any{"get_spend_routes": true}}},
	} {
		st, body := b.DoKey(t, key, "POST", c.path, c.body)
		require.Equal(t, 403, st, "%s %v: %s", c.path, c.body, body)
		require.Contains(t, string(body), "Only proxy admin can be used to generate, delete, update info for new keys/users/teams", "%s", body)
	}
	st, body = a.Do(t, "GET", "/user/info?user_id=uh-u", nil)
	require.Equal(t, 200, st, "%s", body)
	u := gjson.GetBytes(body, "user_info")
	require.Equal(t, "internal_user", u.Get("user_role").String(), "%s", body)
	require.Equal(t, 1.0, u.Get("max_budget").Float(), "%s", body)
	require.Equal(t, 0.5, u.Get("spend").Float(), "%s", body)
	require.Equal(t, int64(1), u.Get("model_rpm_limit.uh-m").Int(), "%s", body)
	require.False(t, u.Get("permissions").Exists(), "%s", body)
	require.Equal(t, int64(1), gjson.GetBytes(body, "keys.0.model_rpm_limit.uh-m").Int(), "%s", body)
	st, body = a.Do(t, "GET", "/user/info?user_id=uh-u2", nil)
	require.Equal(t, 404, st, "%s", body)
	st, body = a.Do(t, "GET", "/organization/info?organization_id=uh-org", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, gjson.GetBytes(body, "members").Array(), "%s", body)
}
