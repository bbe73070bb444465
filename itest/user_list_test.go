package itest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// /user/list pages as LiteLLM's get_users: page / page_size (default 25, at most 100), the
// total and total_pages over every matching user, newest first by default; filters role,
// user_ids, user_email and team; sort_by / sort_order; each user with its key_count. Bad
// parameters are a 400 naming them. /team/list filters by user_id and organization_id.
func TestUserListPaging(t *testing.T) {
	t.Parallel()
	g := StartGateway(t, pgtest.NewDB(t), "a", GatewayOpts{})
	for i := range 7 {
		body := map[string]any{"user_id": fmt.Sprintf("ul-%02d", i), "user_email": fmt.Sprintf("u%d@Example.com", i)}
		if i%2 == 0 {
			body["user_role"] = "internal_user_viewer"
		}
		if i == 3 {
			body["auto_create_key"] = false
		}
		st, b := g.Do(t, "POST", "/user/new", body)
		require.Equal(t, 200, st, "%s", b)
	}
	st, b := g.Do(t, "POST", "/team/new", map[string]any{"team_id": "ul-team", "members_with_roles": []map[string]any{{"user_id": "ul-01", "role": "admin"}, {"user_id": "ul-05", "role": "user"}}})
	require.Equal(t, 200, st, "%s", b)

	list := func(q string) map[string]any {
		t.Helper()
		st, b := g.Do(t, "GET", "/user/list"+q, nil)
		require.Equal(t, 200, st, "%s", b)
		return JSON(t, b)
	}
	ids := func(m map[string]any) []string {
		var out []string
		for _, u := range m["users"].([]any) {
			out = append(out, u.(map[string]any)["user_id"].(string))
		}
		return out
	}

	// defaults: page 1, page_size 25, newest first
	m := list("")
	require.EqualValues(t, 7, m["total"])
	require.EqualValues(t, 1, m["page"])
	require.EqualValues(t, 25, m["page_size"])
	require.EqualValues(t, 1, m["total_pages"])
	require.Equal(t, []string{"ul-06", "ul-05", "ul-04", "ul-03", "ul-02", "ul-01", "ul-00"}, ids(m))

	// pages of 3: 3 + 3 + 1, nothing twice, nothing lost
	var seen []string
	for p := 1; p <= 3; p++ {
		m = list(fmt.Sprintf("?page=%d&page_size=3", p))
		require.EqualValues(t, 7, m["total"])
		require.EqualValues(t, 3, m["total_pages"])
		require.EqualValues(t, p, m["page"])
		seen = append(seen, ids(m)...)
	}
	require.Equal(t, []string{"ul-06", "ul-05", "ul-04", "ul-03", "ul-02", "ul-01", "ul-00"}, seen)
	require.Empty(t, ids(list("?page=4&page_size=3")), "past the last page: no users")

	// filters and sorting
	m = list("?role=internal_user_viewer&sort_by=user_id&sort_order=asc")
	require.Equal(t, []string{"ul-00", "ul-02", "ul-04", "ul-06"}, ids(m))
	require.EqualValues(t, 4, m["total"])
	require.Equal(t, []string{"ul-06", "ul-04", "ul-02", "ul-00"}, ids(list("?role=internal_user_viewer&sort_by=user_id&sort_order=desc")))
	require.Equal(t, []string{"ul-02", "ul-05"}, ids(list("?user_ids=ul-02,ul-05&sort_by=user_id")))
	require.Equal(t, []string{"ul-03"}, ids(list("?user_ids=L-03")), "one id: contains, case-insensitive")
	require.Equal(t, []string{"ul-04"}, ids(list("?user_email=u4@example")))
	require.Equal(t, []string{"ul-01", "ul-05"}, ids(list("?team=ul-team&sort_by=user_id")))

	// key_count: /user/new made a key for every user but ul-03
	for _, u := range list("?sort_by=user_id")["users"].([]any) {
		um := u.(map[string]any)
		want := 1
		if um["user_id"] == "ul-03" {
			want = 0
		}
		require.EqualValues(t, want, um["key_count"], "%v", um["user_id"])
	}

	// bad parameters
	for q, msg := range map[string]string{
		"?page=0":                        `page must be an integer >= 1, got "0"`,
		"?page_size=101":                 `page_size must be an integer from 1 to 100, got "101"`,
		"?page_size=x":                   `page_size must be an integer from 1 to 100, got "x"`,
		"?sort_by=password":              "Invalid sort column. Must be one of: user_id, user_email, created_at, spend, user_alias, user_role",
		"?sort_by=user_id&sort_order=up": "Invalid sort order. Must be 'asc' or 'desc'",
	} {
		st, b := g.Do(t, "GET", "/user/list"+q, nil)
		require.Equal(t, 400, st, "%s: %s", q, b)
		require.Equal(t, msg, agDetail(t, b), q)
	}

	// /team/list filters (a bare array, as LiteLLM)
	st, b = g.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "ul-org"})
	require.Equal(t, 200, st, "%s", b)
	st, b = g.Do(t, "POST", "/team/new", map[string]any{"team_id": "ul-team2", "organization_id": "ul-org"})
	require.Equal(t, 200, st, "%s", b)
	teamIDs := func(q string) []string {
		st, b := g.Do(t, "GET", "/team/list"+q, nil)
		require.Equal(t, 200, st, "%s", b)
		var arr []any
		require.NoError(t, json.Unmarshal(b, &arr), "%s", b)
		var out []string
		for _, tm := range arr {
			out = append(out, tm.(map[string]any)["team_id"].(string))
		}
		return out
	}
	require.Equal(t, []string{"ul-team", "ul-team2"}, teamIDs(""))
	require.Equal(t, []string{"ul-team"}, teamIDs("?user_id=ul-05"))
	require.Equal(t, []string{"ul-team2"}, teamIDs("?organization_id=ul-org"))
	require.Empty(t, teamIDs("?user_id=ul-02"))

	// /v2/team/list pages (newest first)
	st, b = g.Do(t, "POST", "/team/new", map[string]any{"team_id": "ul-team3", "team_alias": "Search Me"})
	require.Equal(t, 200, st, "%s", b)
	v2 := func(q string) ([]string, map[string]any) {
		st, b := g.Do(t, "GET", "/v2/team/list"+q, nil)
		require.Equal(t, 200, st, "%s", b)
		m := JSON(t, b)
		var out []string
		for _, tm := range m["teams"].([]any) {
			out = append(out, tm.(map[string]any)["team_id"].(string))
		}
		return out, m
	}
	ids3, m3 := v2("")
	require.Equal(t, []string{"ul-team3", "ul-team2", "ul-team"}, ids3)
	require.EqualValues(t, 10, m3["page_size"])
	ids3, m3 = v2("?page=2&page_size=2")
	require.Equal(t, []string{"ul-team"}, ids3)
	require.EqualValues(t, 3, m3["total"])
	require.EqualValues(t, 2, m3["total_pages"])
	ids3, _ = v2("?team_alias=search")
	require.Equal(t, []string{"ul-team3"}, ids3)
	ids3, _ = v2("?user_id=ul-01")
	require.Equal(t, []string{"ul-team"}, ids3)
	st, b = g.Do(t, "GET", "/v2/team/list?page_size=0", nil)
	require.Equal(t, 400, st, "%s", b)
}
