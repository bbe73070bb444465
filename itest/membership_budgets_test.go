package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Budgets that are membership budgets (max_budget_in_team, max_budget_in_organization):
// /budget/update on A changes the limit the member is held to on B; /budget/delete unlinks the
// memberships as LiteLLM's foreign keys do (ON DELETE SET NULL), never leaving one pointing at a
// deleted budget; /user/delete deletes the user's membership budgets with its memberships.

// teamMembershipBudget is the budget_id of user's membership in team as g answers /team/info
// ("" none).
func teamMembershipBudget(t *testing.T, g *Gateway, team, user string) (string, map[string]any) {
	t.Helper()
	st, body := g.Do(t, "GET", "/team/info?team_id="+team, nil)
	require.Equal(t, 200, st, "%s", body)
	for _, m := range JSON(t, body)["team_memberships"].([]any) {
		m := m.(map[string]any)
		if m["user_id"] == user {
			id, _ := m["budget_id"].(string)
			bt, _ := m["litellm_budget_table"].(map[string]any)
			return id, bt
		}
	}
	return "", nil
}

// A team member on a membership budget of 0.05 USD is refused on B after one call; the budget
// raised by /budget/update on A serves it on B again; lowered again, refused again; deleted on
// A, the membership is unlinked on every replica and the member is served (no budget of its own
// in the team). An organization membership's budget is unlinked by /budget/delete too.
func TestMembershipBudgetUpdateAndDeleteAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "mbu-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}) // 0.05 USD a call
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "mbu"})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "mbu", "max_budget_in_team": 0.05,
		"member": map[string]any{"user_id": "mbu-u", "role": "user"}})
	require.Equal(t, 200, st, "%s", body)
	bid, _ := teamMembershipBudget(t, a, "mbu", "mbu-u")
	require.NotEmpty(t, bid)
	key, _ := govKey(t, a, map[string]any{"team_id": "mbu", "user_id": "mbu-u"})
	Eventually(t, "b holds the membership budget", func() bool { return budgetCount(t, b) == 1 })

	refused := func(g *Gateway) bool {
		st, _, body := govDo(t, g, key, "mbu-m", "hi")
		if st == 200 {
			return false
		}
		require.Equal(t, 400, st, "%s", body)
		require.Contains(t, string(body), "Budget has been exceeded! User=mbu-u in Team=mbu")
		return true
	}
	require.Equal(t, 1, spendUntilRefused(t, b, key, "mbu-m"), "one call of 0.05 USD reaches max_budget_in_team 0.05")

	// (1) /budget/update of the membership budget on A: B holds the member to the new limit
	st, body = a.Do(t, "POST", "/budget/update", map[string]any{"budget_id": bid, "max_budget": 1})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "b serves the member under the raised budget", func() bool { st, _, _ := govDo(t, b, key, "mbu-m", "hi"); return st == 200 })
	_, bt := teamMembershipBudget(t, b, "mbu", "mbu-u")
	require.Equal(t, 1.0, bt["max_budget"], "the membership shows the budget's limit: %v", bt)
	st, body = b.Do(t, "POST", "/budget/update", map[string]any{"budget_id": bid, "max_budget": 0.05})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "a refuses the member under the lowered budget", func() bool { return refused(a) })

	// (2) /budget/delete on A unlinks the membership (LiteLLM ON DELETE SET NULL)
	st, body = a.Do(t, "POST", "/budget/delete", map[string]any{"id": bid})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "b serves the member without a budget in the team", func() bool { st, _, _ := govDo(t, b, key, "mbu-m", "hi"); return st == 200 })
	id, _ := teamMembershipBudget(t, b, "mbu", "mbu-u")
	require.Empty(t, id, "the membership links no budget")
	Eventually(t, "b dropped the budget", func() bool { return budgetCount(t, b) == 0 })

	// an organization membership's budget is unlinked likewise
	st, body = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "mbu-org"})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "mbu-org", "max_budget_in_organization": 2,
		"member": map[string]any{"user_id": "mbu-u", "role": "internal_user"}})
	require.Equal(t, 200, st, "%s", body)
	obid, _ := JSON(t, body)["updated_organization_memberships"].([]any)[0].(map[string]any)["budget_id"].(string)
	require.NotEmpty(t, obid, "%s", body)
	st, body = a.Do(t, "POST", "/budget/delete", map[string]any{"id": obid})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "b shows the organization membership unlinked", func() bool {
		st, body := b.Do(t, "GET", "/organization/info?organization_id=mbu-org", nil)
		require.Equal(t, 200, st, "%s", body)
		ms := JSON(t, body)["members"].([]any)
		return len(ms) == 1 && ms[0].(map[string]any)["budget_id"] == nil
	})
}

// /user/delete on A deletes the user's team membership budgets with its memberships: B no
// longer serves the budget, and the team lists no membership for the user.
func TestUserDeleteDropsMembershipBudgets(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "udm"})
	require.Equal(t, 200, st, "%s", body)
	for _, u := range []string{"udm-gone", "udm-stays"} {
		st, body = a.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "udm", "max_budget_in_team": 3,
			"member": map[string]any{"user_id": u, "role": "user"}})
		require.Equal(t, 200, st, "%s", body)
	}
	gone, _ := teamMembershipBudget(t, a, "udm", "udm-gone")
	stays, _ := teamMembershipBudget(t, a, "udm", "udm-stays")
	require.NotEmpty(t, gone)
	Eventually(t, "b holds both membership budgets", func() bool { return budgetCount(t, b) == 2 })

	st, body = a.Do(t, "POST", "/user/delete", map[string]any{"user_ids": []string{"udm-gone"}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "b dropped the deleted user's membership budget", func() bool { return budgetCount(t, b) == 1 })
	st, body = b.Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{gone, stays}})
	require.Equal(t, 200, st, "%s", body)
	rows := budgetArray(t, body)
	require.Len(t, rows, 1, "%s", body)
	require.Equal(t, stays, rows[0].(map[string]any)["budget_id"], "the other member's budget stays")
	id, _ := teamMembershipBudget(t, b, "udm", "udm-gone")
	require.Empty(t, id)
}
