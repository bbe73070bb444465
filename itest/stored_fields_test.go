package itest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestVacuousFieldsStored (issue 19 item 1): the fields gating features lockstep does not serve
// (pass-through routes, prompt management, vector store indexes, file and batch expiry, a
// team's secret manager) are accepted on replica a and returned as sent on replica b; a
// user's password is stored only as a hash and never returned, on either replica.
func TestVacuousFieldsStored(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, out := a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "vac-key",
		"allowed_passthrough_routes": []string{"/langfuse"}, "prompts": []string{"p1"},
		"allowed_vector_store_indexes": []any{map[string]any{"index_name": "i1", "index_permissions": []string{"read"}}}})
	require.Equal(t, 200, st, "%s", out)
	key := JSON(t, out)["key"].(string)
	st, out = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", out)
	info := JSON(t, out)["info"].(map[string]any)
	require.Equal(t, []any{"/langfuse"}, info["allowed_passthrough_routes"])
	require.Equal(t, []any{"p1"}, info["prompts"])
	require.NotNil(t, info["allowed_vector_store_indexes"])

	st, out = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "vac-team",
		"enforced_file_expires_after":         map[string]any{"anchor": "created_at", "seconds": 3600},
		"enforced_batch_output_expires_after": map[string]any{"anchor": "created_at", "seconds": 60},
		"secret_manager_settings":             map[string]any{"namespace": "x"}, "prompts": []string{"p2"}})
	require.Equal(t, 200, st, "%s", out)
	st, out = b.Do(t, "GET", "/team/info?team_id=vac-team", nil)
	require.Equal(t, 200, st, "%s", out)
	ti := JSON(t, out)["team_info"].(map[string]any)
	require.Equal(t, map[string]any{"anchor": "created_at", "seconds": 3600.0}, ti["enforced_file_expires_after"])
	require.Equal(t, map[string]any{"namespace": "x"}, ti["secret_manager_settings"])
	// a wrong type is a 400 naming the field
	st, out = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "vac-bad", "secret_manager_settings": "x"})
	require.Equal(t, 400, st, "%s", out)
	require.Contains(t, string(out), "secret_manager_settings")

	// password: accepted, hashed, never returned (also not its hash)
	const pw = "correct horse battery staple"
	st, out = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "vac-user", "password": pw})
	require.Equal(t, 200, st, "%s", out)
	require.NotContains(t, string(out), "password")
	st, out = a.Do(t, "POST", "/user/update", map[string]any{"user_id": "vac-user", "password": pw + "2"})
	require.Equal(t, 200, st, "%s", out)
	require.NotContains(t, string(out), "password")
	for _, g := range []*Gateway{a, b} {
		for _, path := range []string{"/user/info?user_id=vac-user", "/user/list"} {
			st, out := g.Do(t, "GET", path, nil)
			require.Equal(t, 200, st, "%s", out)
			require.NotContains(t, string(out), "password", path)
			require.NotContains(t, string(out), "$2a$", path)
		}
	}
	conn, err := pgx.Connect(context.Background(), p.DB)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var stored string
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT litellm_fields->>'password' FROM gateway.users WHERE user_id = 'vac-user'").Scan(&stored))
	require.True(t, strings.HasPrefix(stored, "$2a$"), "a bcrypt hash is stored, got %q", stored)
	require.NotContains(t, stored, pw)
	st, out = a.Do(t, "POST", "/user/new", map[string]any{"user_id": "vac-long", "password": strings.Repeat("x", 73)})
	require.Equal(t, 400, st, "%s", out)
	require.Contains(t, string(out), "password: must be at most 72 bytes")
}
