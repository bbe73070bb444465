package itest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Team memberships (LiteLLM_TeamMembership): /user/new with team_id joins the team and makes a
// team key; /team/member_update sets the member's budget in the team; the member's spend within
// the team shows in /team/info's team_memberships and in /user/info's teams on every replica;
// once it passes max_budget_in_team every replica refuses the member's keys of that team with
// LiteLLM's text, while another member of the same team is served. A team key is not held to
// its user's personal max_budget (LiteLLM). Each call costs 0.05 USD.
func TestTeamMembershipBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, b, cc := c.G[0], c.G[1], c.G[2]
	govMockModel(t, a, "tm-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})

	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "tm-team", "team_alias": "t"})
	require.Equal(t, 200, st, "%s", body)
	// personal budget 0.01: does not apply to the user's team key
	st, body = b.Do(t, "POST", "/user/new", map[string]any{"user_id": "tm-u1", "max_budget": 0.01, "team_id": "tm-team"})
	require.Equal(t, 200, st, "%s", body)
	k1 := JSON(t, body)["key"].(string)
	st, body = b.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "tm-team", "member": map[string]any{"user_id": "tm-u2", "role": "user"}, "max_budget_in_team": 100})
	require.Equal(t, 200, st, "%s", body)
	added := JSON(t, body)["updated_team_memberships"].([]any)
	require.Len(t, added, 1, "%s", body)
	require.Equal(t, "tm-u2", added[0].(map[string]any)["user_id"])
	require.EqualValues(t, 100, added[0].(map[string]any)["litellm_budget_table"].(map[string]any)["max_budget"])
	// /team/update answers LiteLLM's {"team_id", "data"}; the memberships are kept
	st, body = a.Do(t, "POST", "/team/update", map[string]any{"team_id": "tm-team", "team_alias": "t2"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "t2", JSON(t, body)["data"].(map[string]any)["team_alias"])
	require.Equal(t, "tm-team", JSON(t, body)["team_id"])
	k2, _ := govKey(t, a, map[string]any{"team_id": "tm-team", "user_id": "tm-u2"})

	// memberships before any budget: both members, no budget for u1, u2's from member_add
	st, body = cc.Do(t, "GET", "/team/info?team_id=tm-team", nil)
	require.Equal(t, 200, st, "%s", body)
	ms := JSON(t, body)["team_memberships"].([]any)
	require.Len(t, ms, 2, "%s", body)
	byUser := map[string]map[string]any{}
	for _, m := range ms {
		mm := m.(map[string]any)
		require.Equal(t, "tm-team", mm["team_id"])
		byUser[mm["user_id"].(string)] = mm
	}
	require.Nil(t, byUser["tm-u1"]["litellm_budget_table"])
	require.EqualValues(t, 100, byUser["tm-u2"]["litellm_budget_table"].(map[string]any)["max_budget"])
	require.NotEmpty(t, byUser["tm-u2"]["budget_id"])

	// member_update: u1's budget in the team (LiteLLM's response shape)
	st, body = c.G[2].Do(t, "POST", "/team/member_update", map[string]any{"team_id": "tm-team", "user_id": "tm-u1", "max_budget_in_team": 0.12})
	require.Equal(t, 200, st, "%s", body)
	up := JSON(t, body)
	require.Equal(t, "tm-u1", up["user_id"])
	require.EqualValues(t, 0.12, up["max_budget_in_team"])
	require.Equal(t, "user", up["role"], "the role is kept when not given")

	served := 0
	for served < 20 {
		st, _, body := govDo(t, a, k1, "tm-m", "hi")
		if st != 200 {
			require.Equal(t, 400, st, "%s", body)
			typ, msg := agOpenAIError(t, body)
			require.Equal(t, "budget_exceeded", typ)
			require.True(t, strings.HasPrefix(msg, "Budget has been exceeded! User=tm-u1 in Team=tm-team Current cost: "), msg)
			require.True(t, strings.HasSuffix(msg, ", Max budget: 0.12"), msg)
			break
		}
		served++
	}
	require.GreaterOrEqual(t, served, 3, "0, 0.05, 0.10 are below 0.12; the personal budget 0.01 does not apply to a team key")
	for _, g := range c.G {
		Eventually(t, "the member's team key refused on "+g.ReplicaID, func() bool {
			st, _, _ := govDo(t, g, k1, "tm-m", "hi")
			return st == 400
		})
	}
	// the other member of the team is served
	st, _, body = govDo(t, b, k2, "tm-m", "hi")
	require.Equal(t, 200, st, "%s", body)

	// the member's spend in the team: /team/info and /user/info (LiteLLM's shape) on every replica
	for _, g := range c.G {
		Eventually(t, "team_memberships spend on "+g.ReplicaID, func() bool {
			st, body := g.Do(t, "GET", "/user/info?user_id=tm-u1", nil)
			require.Equal(t, 200, st, "%s", body)
			teams := JSON(t, body)["teams"].([]any)
			require.Len(t, teams, 1)
			tm := teams[0].(map[string]any)
			require.Equal(t, "tm-team", tm["team_id"])
			mss := tm["team_memberships"].([]any)
			require.Len(t, mss, 1, "only the user's own membership")
			m := mss[0].(map[string]any)
			require.EqualValues(t, 0.12, m["litellm_budget_table"].(map[string]any)["max_budget"])
			return m["spend"].(float64) >= 0.12
		})
	}
	st, body = b.Do(t, "GET", "/team/info?team_id=tm-team", nil)
	require.Equal(t, 200, st, "%s", body)
	for _, m := range JSON(t, body)["team_memberships"].([]any) {
		mm := m.(map[string]any)
		if mm["user_id"] == "tm-u2" {
			require.InDelta(t, 0.05, mm["spend"].(float64), 1e-9)
		}
	}
	require.NotContains(t, string(body), "team_member_budgets", "the storage column is not shown")

	// raising the budget in the team serves the member again everywhere
	st, body = a.Do(t, "POST", "/team/member_update", map[string]any{"team_id": "tm-team", "user_id": "tm-u1", "max_budget_in_team": nil})
	require.Equal(t, 200, st, "%s", body)
	require.Nil(t, JSON(t, body)["max_budget_in_team"])
	for _, g := range c.G {
		Eventually(t, "the member served again on "+g.ReplicaID, func() bool {
			st, _, _ := govDo(t, g, k1, "tm-m", "hi")
			return st == 200
		})
	}

	// member_delete drops the membership and its budget
	st, body = a.Do(t, "POST", "/team/member_delete", map[string]any{"team_id": "tm-team", "user_id": "tm-u2"})
	require.Equal(t, 200, st, "%s", body)
	st, body = cc.Do(t, "GET", "/team/info?team_id=tm-team", nil)
	require.Equal(t, 200, st, "%s", body)
	ms = JSON(t, body)["team_memberships"].([]any)
	require.Len(t, ms, 1)
	require.Equal(t, "tm-u1", ms[0].(map[string]any)["user_id"])
	require.Zero(t, agScalar[int64](t, c.DB, "SELECT count(*) FROM gateway.teams WHERE team_id = 'tm-team' AND team_member_budgets ? 'tm-u2'"))

	// bad input: a role that is not a team role, a budget of the wrong type, a non-member
	st, body = a.Do(t, "POST", "/team/member_update", map[string]any{"team_id": "tm-team", "user_id": "tm-u1", "role": "owner"})
	require.Equal(t, 400, st, "%s", body)
	st, body = a.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "tm-team", "member": map[string]any{"user_id": "x"}, "max_budget_in_team": "ten"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "max_budget_in_team must be a number >= 0", agDetail(t, body))
	st, body = a.Do(t, "POST", "/team/member_update", map[string]any{"team_id": "tm-team", "user_id": "nobody", "max_budget_in_team": 1})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "User is not a member of team tm-team - nobody", agDetail(t, body))
}

// A member named only by user_email is the user with that email (LiteLLM add_new_member): it
// gets that user's user_id in members_with_roles, so /user/info lists the team; an email no user
// has makes a new user with a generated id. Deleting the member by email removes it.
func TestTeamMemberByEmail(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/user/new", map[string]any{"user_id": "em-u1", "user_email": "ada@example.com"})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "em-team",
		"members_with_roles": []map[string]any{{"user_email": "new@example.com", "role": "admin"}}})
	require.Equal(t, 200, st, "%s", body)
	mw := JSON(t, body)["members_with_roles"].([]any)
	require.Len(t, mw, 1)
	newID, _ := mw[0].(map[string]any)["user_id"].(string)
	require.NotEmpty(t, newID, "the new email's user got an id: %s", body)
	st, body = p.B.Do(t, "GET", "/user/info?user_id="+newID, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "new@example.com", JSON(t, body)["user_info"].(map[string]any)["user_email"])
	require.Len(t, JSON(t, body)["teams"], 1)

	st, body = p.B.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "em-team", "member": []map[string]any{{"user_email": "ada@example.com", "role": "user"}}, "max_budget_in_team": 3})
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, JSON(t, body)["updated_users"], "the user exists")
	st, body = p.A.Do(t, "GET", "/user/info?user_id=em-u1", nil)
	require.Equal(t, 200, st, "%s", body)
	teams := JSON(t, body)["teams"].([]any)
	require.Len(t, teams, 1)
	require.Equal(t, "em-team", teams[0].(map[string]any)["team_id"])
	ms := teams[0].(map[string]any)["team_memberships"].([]any)
	require.Len(t, ms, 1)
	require.EqualValues(t, 3, ms[0].(map[string]any)["litellm_budget_table"].(map[string]any)["max_budget"])
	// the same email again: already a member
	st, body = p.B.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "em-team", "member": map[string]any{"user_email": "ada@example.com", "role": "user"}})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "User already in team - em-u1", agDetail(t, body))

	st, body = p.A.Do(t, "POST", "/team/member_delete", map[string]any{"team_id": "em-team", "user_email": "ada@example.com"})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "GET", "/user/info?user_id=em-u1", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, JSON(t, body)["teams"])
}
