package keys_test

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

// A key read as typed columns (the change feed's loads, store.KeyCols) builds the same Key as
// its row_to_json text (writes' RETURNING), and the compact form shares what it can: the token
// is the row id's string, equal models lists are one slice.
func TestBuildRowTypedColumnsMatchJSON(t *testing.T) {
	t.Parallel()
	tok := keys.Hash("sk-typed")
	js := `{"token":"` + tok + `","key_alias":"a","models":["m1","m2"],"blocked":true,"expires":"2030-01-02T03:04:05Z",` +
		`"metadata":{"k": "v"},"rpm_limit":5,"tpm_limit":null,"max_parallel_requests":2,"max_budget":1.5,"budget_duration":"1d",` +
		`"team_id":"t","user_id":null}`
	fromJSON, err := keys.BuildRow(store.Row{ID: tok, Data: []byte(js)})
	require.NoError(t, err)
	alias, rpm, par, budget, every, team := "a", int64(5), int64(2), 1.5, "1d", "t"
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cols := &store.KeyCols{Token: tok, KeyAlias: &alias, Models: []string{"m1", "m2"}, Blocked: true, Expires: &exp,
		Metadata: []byte(`{"k": "v"}`), RPMLimit: &rpm, MaxParallel: &par, MaxBudget: &budget, BudgetDuration: &every, TeamID: &team}
	typed, err := keys.BuildRow(store.Row{ID: tok, Cols: cols})
	require.NoError(t, err)
	require.Equal(t, fromJSON, typed)

	require.Equal(t, unsafe.StringData(tok), unsafe.StringData(typed.Token), "token shares the row id")
	again, err := keys.BuildRow(store.Row{ID: keys.Hash("sk-other"), Cols: &store.KeyCols{Token: keys.Hash("sk-other"), Models: []string{"m1", "m2"}}})
	require.NoError(t, err)
	require.Same(t, &typed.Models[0], &again.Models[0], "equal models lists are interned")

	cols.Token = "ABC"
	_, err = keys.BuildRow(store.Row{ID: "ABC", Cols: cols})
	require.ErrorContains(t, err, "token: want the lowercase hex sha256")
}

// Keys that repeat a small metadata object, a team or a user hold one copy of it: a million
// keys carry a few thousand distinct owners.
func TestBuildRowSharesRepeatedValues(t *testing.T) {
	t.Parallel()
	build := func(secret string) *keys.Key {
		tok, team, user := keys.Hash(secret), "team-"+"shared", "user-"+"shared"
		k, err := keys.BuildRow(store.Row{Type: store.Key, ID: tok, Version: 1, Cols: &store.KeyCols{
			Token: tok, Metadata: []byte(`{"owner": "user-7"}`), TeamID: &team, UserID: &user}})
		require.NoError(t, err)
		return k
	}
	a, b := build("sk-one"), build("sk-two")
	require.JSONEq(t, `{"owner": "user-7"}`, string(a.Metadata))
	require.Equal(t, unsafe.SliceData(a.Metadata), unsafe.SliceData(b.Metadata), "metadata not shared")
	require.Equal(t, unsafe.StringData(a.TeamID), unsafe.StringData(b.TeamID), "team id not shared")
	require.Equal(t, unsafe.StringData(a.UserID), unsafe.StringData(b.UserID), "user id not shared")
}

// A plain key (no rarely set field in litellm_fields) carries no Extra and stays in the
// 208-byte size class; a key setting one of them holds them behind Key.Extra; X reads either
// without allocating.
func TestBuildRowRareFieldsBehindExtra(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(keys.Key{}), uintptr(208), "a plain key grew: put rarely set fields in keys.Extra")
	tok := keys.Hash("sk-plain")
	plain, err := keys.BuildRow(store.Row{ID: tok, Cols: &store.KeyCols{Token: tok, LitellmFields: []byte(`{"permissions": {}}`)}})
	require.NoError(t, err)
	require.Nil(t, plain.Extra, "litellm_fields without a rarely set field leave Extra nil")
	require.Empty(t, plain.X().BudgetID)
	require.Nil(t, plain.X().Aliases)

	tok = keys.Hash("sk-rare")
	rare, err := keys.BuildRow(store.Row{ID: tok, Cols: &store.KeyCols{Token: tok, LitellmFields: []byte(
		`{"aliases": {"a": "m"}, "budget_id": "tier", "organization_id": "o1", "guardrails": ["g"], "allowed_routes": ["/chat/completions"],
		  "object_permission": {"agents": ["ag"]}, "allowed_cache_controls": ["no-cache"], "enforced_params": ["user"],
		  "model_rpm_limit": {"m": 3}, "model_max_budget": {"m": {"budget_limit": 2}},
		  "temp_budget_increase": 5, "temp_budget_expiry": "2030-01-01T00:00:00Z"}`)}})
	require.NoError(t, err)
	require.NotNil(t, rare.Extra)
	x := rare.X()
	require.Equal(t, map[string]string{"a": "m"}, x.Aliases)
	require.Equal(t, "tier", x.BudgetID)
	require.Equal(t, "o1", x.OrganizationID)
	require.Equal(t, []string{"g"}, x.Guardrails)
	require.Equal(t, []string{"/chat/completions"}, x.AllowedRoutes)
	require.Equal(t, []string{"ag"}, x.Agents)
	require.Equal(t, []string{"no-cache"}, x.AllowedCacheControls)
	require.Equal(t, []string{"user"}, x.EnforcedParams)
	require.Equal(t, int64(3), x.ModelLimits["m"].RPM)
	require.Equal(t, 2.0, x.ModelBudgets["m"].Max)
	require.Equal(t, 5.0, x.TempBudgetIncrease)

	var sink int
	require.Zero(t, testing.AllocsPerRun(100, func() { sink += len(plain.X().Aliases) + len(rare.X().BudgetID) }))
	_ = sink
}
