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
