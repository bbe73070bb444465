package itest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// budgetCount is how many budgets g's registry holds.
func budgetCount(t *testing.T, g *Gateway) float64 {
	t.Helper()
	return g.SyncLag(t)["registries"].(map[string]any)["budgets"].(map[string]any)["count"].(float64)
}

// Budgets as objects (issue 19 item 9): a budget made on replica A is listed and served on B at
// once; its answers are LiteLLM's LiteLLM_BudgetTable rows; a link to an unknown budget is a
// 400; a linked budget cannot be deleted until it is unlinked.
func TestBudgetObjectsAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, b := c.G[0], c.G[1]

	st, body := a.Do(t, "POST", "/budget/new", map[string]any{"budget_id": "tier-1", "max_budget": 5, "soft_budget": 1,
		"rpm_limit": 100, "tpm_limit": 1000, "max_parallel_requests": 3, "budget_duration": "30d"})
	require.Equal(t, 200, st, "%s", body)
	m := JSON(t, body)
	for k, v := range map[string]any{"budget_id": "tier-1", "max_budget": 5.0, "soft_budget": 1.0, "rpm_limit": 100.0,
		"tpm_limit": 1000.0, "max_parallel_requests": 3.0, "budget_duration": "30d", "created_by": "default_user_id"} {
		require.Equal(t, v, m[k], "%s in %s", k, body)
	}
	require.NotNil(t, m["budget_reset_at"], "a budget_duration sets the first reset, %s", body)
	require.Contains(t, m, "model_max_budget")
	st, body = b.Do(t, "POST", "/budget/new", map[string]any{"budget_id": "tier-1"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Budget with id 'tier-1' already exists.")
	st, body = a.Do(t, "POST", "/budget/new", map[string]any{"budget_id": "x", "rpm_limt": 1})
	require.Equal(t, 400, st, "a typo is refused: %s", body)
	require.Contains(t, string(body), "rpm_limt")
	st, body = a.Do(t, "POST", "/budget/new", map[string]any{"budget_id": "x", "model_max_budget": map[string]any{"m": map[string]any{"budget_limit": "lots"}}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, JSON(t, body)["detail"].(map[string]any)["error"], "Invalid model_max_budget: m.budget_limit must be a number (USD).")

	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" holds the budget", func() bool { return budgetCount(t, g) == 1 })
	}
	st, body = b.Do(t, "POST", "/budget/update", map[string]any{"budget_id": "tier-1", "rpm_limit": 50})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 50.0, JSON(t, body)["rpm_limit"])
	require.Equal(t, 5.0, JSON(t, body)["max_budget"], "a field not sent keeps its value")
	st, body = a.Do(t, "POST", "/budget/update", map[string]any{"budget_id": "nope", "rpm_limit": 1})
	require.Equal(t, 404, st, "%s", body)
	st, body = a.Do(t, "POST", "/budget/update", map[string]any{"rpm_limit": 1})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "budget_id is required")

	st, body = c.G[2].Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{"tier-1", "nope"}})
	require.Equal(t, 200, st, "%s", body)
	rows := budgetArray(t, body)
	require.Len(t, rows, 1)
	require.Equal(t, 50.0, rows[0].(map[string]any)["rpm_limit"])
	st, body = a.Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Specify list of budget id's to query.")
	st, body = b.Do(t, "GET", "/budget/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, budgetArray(t, body), 1)
	st, body = b.Do(t, "GET", "/budget/settings?budget_id=tier-1", nil)
	require.Equal(t, 200, st, "%s", body)
	settings := budgetArray(t, body)
	require.Len(t, settings, 7)
	for _, s := range settings {
		s := s.(map[string]any)
		if s["field_name"] == "rpm_limit" {
			require.Equal(t, 50.0, s["field_value"])
			require.Equal(t, "Integer", s["field_type"])
		}
	}

	// links: an unknown budget is refused; a linked budget is not deleted
	st, body = a.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "eu-x", "budget_id": "nope"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Budget not found, passed budget_id=nope")
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"budget_id": "nope"})
	require.Equal(t, 400, st, "%s", body)
	key, _ := govKey(t, b, map[string]any{"budget_id": "tier-1"})
	st, body = a.Do(t, "POST", "/budget/delete", map[string]any{"id": "tier-1"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Budget tier-1 is still linked from key ")
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "budget_id": nil})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "POST", "/budget/delete", map[string]any{"id": "tier-1"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "tier-1", JSON(t, body)["budget_id"])
	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" dropped the budget", func() bool { return budgetCount(t, g) == 0 })
	}
	st, body = a.Do(t, "POST", "/budget/delete", map[string]any{"id": "tier-1"})
	require.Equal(t, 404, st, "%s", body)
}

// A budget's limits are enforced cluster-wide on the objects linked to it: an end user on a
// budget with tpm_limit 1 is refused after its first calls on every replica (issue 19 item
// 9); a key on a budget with rpm_limit 2 is admitted at most twice across three replicas; an
// end user on a budget with max_budget is refused once its spend passed it. The budget is
// written on A and linked on A; the calls go to B (and C).
func TestBudgetEnforcedViaEndUserAndKey(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	a, b := c.G[0], c.G[1]
	govMockModel(t, a, "bud-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})
	for _, bud := range []map[string]any{{"budget_id": "tpm-1", "tpm_limit": 1}, {"budget_id": "rpm-2", "rpm_limit": 2},
		{"budget_id": "usd", "max_budget": 0.12}} {
		st, body := a.Do(t, "POST", "/budget/new", bud)
		require.Equal(t, 200, st, "%s", body)
	}
	st, body := a.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "tiered", "budget_id": "tpm-1"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "tpm-1", JSON(t, body)["budget_id"], "the link is returned")
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "purse", "budget_id": "usd"})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "GET", "/customer/info?end_user_id=tiered", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 1.0, JSON(t, body)["litellm_budget_table"].(map[string]any)["tpm_limit"], "LiteLLM: the linked budget's row, %s", body)
	rpmKey, rpmToken := govKey(t, a, map[string]any{"budget_id": "rpm-2"})
	// an organization on the same budget: its own window, its teams' keys across replicas
	st, body = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "bud-org", "budget_id": "rpm-2"})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "bud-org-t", "organization_id": "bud-org"})
	require.Equal(t, 200, st, "%s", body)
	orgKey, _ := govKey(t, a, map[string]any{"team_id": "bud-org-t"})
	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" holds the budgets and end users", func() bool {
			regs := g.SyncLag(t)["registries"].(map[string]any)
			return regs["budgets"].(map[string]any)["count"].(float64) == 3 && regs["end_users"].(map[string]any)["count"].(float64) == 2
		})
	}
	key := agGenKey(t, a)

	// tpm_limit 1 through the end user's budget: refused on B after its first calls
	served := 0
	for ; served < 10; served++ {
		st, body := chatAsEndUser(t, b, key, "bud-m", "tiered")
		if st == 429 {
			require.Contains(t, string(body), "Rate limit exceeded for end_user: tiered. Limit type: tokens. Current limit: 1")
			break
		}
		require.Equal(t, 200, st, "%s", body)
	}
	require.GreaterOrEqual(t, served, 1)
	require.Less(t, served, 10, "the budget's tpm_limit holds")
	for _, g := range c.G {
		Eventually(t, "the end user refused on "+g.ReplicaID, func() bool {
			st, _ := chatAsEndUser(t, g, key, "bud-m", "tiered")
			return st == 429
		})
	}
	st, body = chatAsEndUser(t, b, key, "bud-m", "someone-else")
	require.Equal(t, 200, st, "another end user is not limited: %s", body)

	// rpm_limit 2 through the key's budget, across the three replicas
	admitted := countAdmitted(t, 9, "Rate limit exceeded for api_key: "+rpmToken+". Limit type: requests. Current limit: 2", func(i int) (int, http.Header, []byte) {
		return govDo(t, c.G[i%3], rpmKey, "bud-m", "hi")
	})
	require.LessOrEqual(t, admitted, 2, "never more than the budget's rpm_limit across the replicas")
	require.GreaterOrEqual(t, admitted, 1)
	admitted = countAdmitted(t, 9, "Rate limit exceeded for organization: bud-org. Limit type: requests. Current limit: 2", func(i int) (int, http.Header, []byte) {
		return govDo(t, c.G[(i+1)%3], orgKey, "bud-m", "hi")
	})
	require.LessOrEqual(t, admitted, 2, "the organization's own window of the budget's rpm_limit")
	require.GreaterOrEqual(t, admitted, 1)

	// max_budget through the end user's budget (each call costs 0.05 USD)
	served = 0
	for ; served < 20; served++ {
		st, body := chatAsEndUser(t, b, key, "bud-m", "purse")
		if st != 200 {
			require.Equal(t, 400, st, "%s", body)
			require.True(t, strings.Contains(string(body), "Budget has been exceeded! End User=purse"), "%s", body)
			break
		}
	}
	require.GreaterOrEqual(t, served, 3) // 0, 0.05, 0.10 are below 0.12
	require.Less(t, served, 20)

	// spend on /customer/new (LiteLLM NewCustomerRequest.spend): the spend total starts there
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "prepaid", "budget_id": "usd", "spend": 0.12})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "b holds the prepaid end user", func() bool {
		return b.SyncLag(t)["registries"].(map[string]any)["end_users"].(map[string]any)["count"].(float64) == 3
	})
	st, body = chatAsEndUser(t, b, key, "bud-m", "prepaid")
	require.Equal(t, 400, st, "refused at its first call: %s", body)
	require.Contains(t, string(body), "Budget has been exceeded! End User=prepaid Current cost: 0.12")
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "neg", "spend": -1})
	require.Equal(t, 400, st, "%s", body)
}

// budgetArray decodes b as a JSON array.
func budgetArray(t *testing.T, b []byte) []any {
	t.Helper()
	var out []any
	require.NoError(t, json.Unmarshal(b, &out), "body: %s", b)
	return out
}

// A team's member budget (LiteLLM team_member_rpm_limit, ...): /team/new on A makes a budget
// the team links to, and every member's key is held to it within the team across replicas;
// /team/update changes that same budget.
func TestTeamMemberBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	a, b := c.G[0], c.G[1]
	govMockModel(t, a, "tmb-m", nil)
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "tmb", "team_member_rpm_limit": 2, "team_member_budget": 10,
		"members_with_roles": []map[string]any{{"user_id": "m1", "role": "user"}}})
	require.Equal(t, 200, st, "%s", body)
	bid, _ := JSON(t, body)["team_member_budget_id"].(string)
	require.True(t, strings.HasPrefix(bid, "team-tmb-budget-"), "%s", body)
	st, body = b.Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{bid}})
	require.Equal(t, 200, st, "%s", body)
	row := budgetArray(t, body)[0].(map[string]any)
	require.Equal(t, 2.0, row["rpm_limit"])
	require.Equal(t, 10.0, row["max_budget"])
	key, _ := govKey(t, a, map[string]any{"team_id": "tmb", "user_id": "m1"})
	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" holds the member budget", func() bool { return budgetCount(t, g) == 1 })
	}
	st, body = c.G[2].Do(t, "GET", "/team/info?team_id=tmb", nil)
	require.Equal(t, 200, st, "%s", body)
	ms := JSON(t, body)["team_memberships"].([]any)
	require.Len(t, ms, 1)
	require.Equal(t, bid, ms[0].(map[string]any)["budget_id"], "the member's budget is the team's member budget: %s", body)
	require.Equal(t, 2.0, ms[0].(map[string]any)["litellm_budget_table"].(map[string]any)["rpm_limit"])
	admitted := countAdmitted(t, 9, "Rate limit exceeded for team_member: tmb:m1. Limit type: requests. Current limit: 2", func(i int) (int, http.Header, []byte) {
		return govDo(t, c.G[i%3], key, "tmb-m", "hi")
	})
	require.LessOrEqual(t, admitted, 2, "never more than the member budget's rpm_limit across the replicas")
	require.GreaterOrEqual(t, admitted, 1)

	st, body = b.Do(t, "POST", "/team/update", map[string]any{"team_id": "tmb", "team_member_tpm_limit": 7})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, bid, JSON(t, body)["team_member_budget_id"], "the same budget")
	st, body = a.Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{bid}})
	require.Equal(t, 200, st, "%s", body)
	row = budgetArray(t, body)[0].(map[string]any)
	require.Equal(t, 7.0, row["tpm_limit"])
	require.Equal(t, 2.0, row["rpm_limit"], "a field not sent keeps its value")
	st, body = a.Do(t, "POST", "/budget/delete", map[string]any{"id": bid})
	require.Equal(t, 400, st, "the team's member budget is linked: %s", body)
}

// temp_budget_increase / temp_budget_expiry on /key/update (LiteLLM): a key refused at its
// max_budget on B is served again once A raised its budget for a while; both fields go together
// and the expiry must be ahead.
func TestTempBudgetIncreaseAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, b := c.G[0], c.G[1]
	govMockModel(t, a, "tmp-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})
	key, _ := govKey(t, a, map[string]any{"max_budget": 0.05})
	require.Equal(t, 1, spendUntilRefused(t, b, key, "tmp-m"), "one call of 0.05 USD reaches max_budget 0.05")

	st, body := a.Do(t, "POST", "/key/update", map[string]any{"key": key, "temp_budget_increase": 0.1})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "temp_budget_increase and temp_budget_expiry must be set together")
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "temp_budget_increase": 0.1, "temp_budget_expiry": "2020-01-01T00:00:00Z"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `temp_budget_expiry must be in the future, got \"2020-01-01T00:00:00Z\"`)
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "temp_budget_increase": 0.1, "temp_budget_expiry": "soon"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), `temp_budget_expiry must be an ISO 8601 date or date-time, got \"soon\"`)
	expiry := time.Now().AddDate(0, 0, 2).UTC().Format(time.DateOnly) // a date: its midnight UTC (LiteLLM)
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "temp_budget_increase": 0.1, "temp_budget_expiry": expiry})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 0.1, JSON(t, body)["temp_budget_increase"], "returned: %s", body)
	Eventually(t, "the raised budget serves the key on b", func() bool {
		st, _, _ := govDo(t, b, key, "tmp-m", "hi")
		return st == 200
	})
}

// model_max_budget (LiteLLM's per-model budget): a key's budget for one model group refuses
// that group on every replica once the key's spend on it reached the budget, with LiteLLM's
// text, while the key's other groups are served; an end user on a budget with a
// model_max_budget likewise. Each call costs 0.05 USD.
func TestModelMaxBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, b := c.G[0], c.G[1]
	price := map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}
	govMockModel(t, a, "mmb-m", price)
	govMockModel(t, a, "mmb-other", price)
	st, body := a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "mmb",
		"model_max_budget": map[string]any{"mmb-m": map[string]any{"budget_limit": 0.05, "time_period": "1d"}}})
	require.Equal(t, 200, st, "%s", body)
	key, token := JSON(t, body)["key"].(string), JSON(t, body)["token"].(string)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"model_max_budget": map[string]any{"m": map[string]any{"rpm_limit": 5}}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Invalid model_max_budget: m.rpm_limit is not supported yet")

	require.Equal(t, 1, spendUntilRefused(t, b, key, "mmb-m"), "one call of 0.05 USD reaches the model's budget")
	want := "LiteLLM Virtual Key: " + token + ", key_alias: mmb, exceeded budget for model=mmb-m"
	for _, g := range c.G {
		Eventually(t, "the model refused on "+g.ReplicaID, func() bool {
			st, _, body := govDo(t, g, key, "mmb-m", "hi")
			if st != 400 {
				return false
			}
			typ, msg := agOpenAIError(t, body)
			require.Equal(t, "budget_exceeded", typ)
			require.Equal(t, want, msg)
			return true
		})
	}
	st, _, body = govDo(t, a, key, "mmb-other", "hi")
	require.Equal(t, 200, st, "another model of the key is served: %s", body)

	// through a budget object linked to an end user
	st, body = a.Do(t, "POST", "/budget/new", map[string]any{"budget_id": "per-model",
		"model_max_budget": map[string]any{"mmb-m": map[string]any{"max_budget": 0.05}}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "mm-eu", "budget_id": "per-model"})
	require.Equal(t, 200, st, "%s", body)
	plain := agGenKey(t, a)
	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" holds the budget and end user", func() bool {
			regs := g.SyncLag(t)["registries"].(map[string]any)
			return regs["budgets"].(map[string]any)["count"].(float64) == 1 && regs["end_users"].(map[string]any)["count"].(float64) == 1
		})
	}
	st, body = chatAsEndUser(t, b, plain, "mmb-m", "mm-eu")
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "the end user's model budget refuses it on a", func() bool {
		st, body := chatAsEndUser(t, a, plain, "mmb-m", "mm-eu")
		if st != 400 {
			return false
		}
		require.Contains(t, string(body), "LiteLLM End User: mm-eu, exceeded budget for model=mmb-m")
		return true
	})
}

// A membership budget (/team/member_add max_budget_in_team) is a real budget row, as LiteLLM's
// LiteLLM_BudgetTable: /budget/info on the membership's budget_id finds it on another replica;
// a blank budget_id is a 400 naming budget_id.
func TestMembershipBudgetIsABudget(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, b := c.G[0], c.G[1]
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "mbb"})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "mbb", "max_budget_in_team": 3,
		"member": map[string]any{"user_id": "mu", "role": "user"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "GET", "/team/info?team_id=mbb", nil)
	require.Equal(t, 200, st, "%s", body)
	var bid string
	for _, m := range JSON(t, body)["team_memberships"].([]any) {
		if id, ok := m.(map[string]any)["budget_id"].(string); ok && id != "" {
			bid = id
		}
	}
	require.NotEmpty(t, bid, "%s", body)
	Eventually(t, "b serves the membership budget", func() bool {
		st, body = b.Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{bid}})
		return st == 200 && len(budgetArray(t, body)) == 1
	})
	require.Equal(t, 3.0, budgetArray(t, body)[0].(map[string]any)["max_budget"], "%s", body)

	for _, p := range []struct {
		path string
		body map[string]any
	}{{"/budget/new", map[string]any{"budget_id": "   "}}, {"/customer/new", map[string]any{"user_id": "ws", "budget_id": "   "}}} {
		st, body = b.Do(t, "POST", p.path, p.body)
		require.Equal(t, 400, st, "%s %s", p.path, body)
		require.Contains(t, string(body), `budget_id must be a non-blank string, got \"   \"`, p.path)
	}
}
