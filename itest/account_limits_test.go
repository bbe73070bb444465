package itest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// chatAsEndUser sends a chat completion with key for end user ("user" in the body).
func chatAsEndUser(t *testing.T, g *Gateway, key, model, user string) (int, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "user": user, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	req, err := http.NewRequest("POST", g.URL+"/v1/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// spendUntilRefused calls with key on g until the budget refuses it; returns how many were served.
func spendUntilRefused(t *testing.T, g *Gateway, key, model string) int {
	t.Helper()
	served := 0
	for served < 20 {
		st, _, b := govDo(t, g, key, model, "hi")
		if st != 200 {
			require.Equal(t, 400, st, "%s", b)
			return served
		}
		served++
	}
	t.Fatalf("still served after %d calls", served)
	return served
}

func requireBudgetRefusal(t *testing.T, g *Gateway, key, model, owner string) bool {
	st, _, b := govDo(t, g, key, model, "hi")
	if st != 400 {
		return false
	}
	typ, msg := agOpenAIError(t, b)
	require.Equal(t, "budget_exceeded", typ)
	require.True(t, strings.HasPrefix(msg, "Budget has been exceeded! "+owner+" Current cost: "), msg)
	require.True(t, strings.HasSuffix(msg, ", Max budget: 0.12"), msg)
	return true
}

// Budgets above the key: spend by one of a user's keys past the user's max_budget refuses all
// of the user's keys on every replica; likewise an organization's budget for the keys of its
// teams. Each call costs 0.05 USD (the mock reports 10 prompt and 20 completion tokens).
func TestUserAndOrganizationBudgetsAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t)
	a, b, cc := c.G[0], c.G[1], c.G[2]
	govMockModel(t, a, "acct-budget", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})

	// user: two keys, the budget is the user's
	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "budget-user", "max_budget": 0.12})
	require.Equal(t, 200, st, "%s", body)
	k1 := JSON(t, body)["key"].(string)
	k2, _ := govKey(t, b, map[string]any{"user_id": "budget-user"})
	served := spendUntilRefused(t, a, k1, "acct-budget")
	require.GreaterOrEqual(t, served, 3) // 0, 0.05, 0.10 are below 0.12
	for _, g := range c.G {
		Eventually(t, "the user's other key refused on "+g.ReplicaID, func() bool { return requireBudgetRefusal(t, g, k2, "acct-budget", "User=budget-user") })
	}
	Eventually(t, "the user's spend shows on /user/info", func() bool {
		st, body := cc.Do(t, "GET", "/user/info?user_id=budget-user", nil)
		require.Equal(t, 200, st, "%s", body)
		return JSON(t, body)["user_info"].(map[string]any)["spend"].(float64) >= 0.12
	})

	// organization: keys of two teams of the organization share its budget
	st, body = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "budget-org", "max_budget": 0.12})
	require.Equal(t, 200, st, "%s", body)
	for _, team := range []string{"org-t1", "org-t2"} {
		st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": team, "organization_id": "budget-org"})
		require.Equal(t, 200, st, "%s", body)
	}
	t1, _ := govKey(t, a, map[string]any{"team_id": "org-t1"})
	t2, _ := govKey(t, b, map[string]any{"team_id": "org-t2"})
	served = spendUntilRefused(t, cc, t1, "acct-budget")
	require.GreaterOrEqual(t, served, 3)
	for _, g := range c.G {
		Eventually(t, "the other team's key refused on "+g.ReplicaID, func() bool {
			return requireBudgetRefusal(t, g, t2, "acct-budget", "Organization=budget-org")
		})
	}
}

// End users (the body's "user"): an end user's rpm_limit holds across three replicas together,
// and its budget refuses it on every replica once its spend passed max_budget, whatever key
// it calls with.
func TestEndUserBudgetAndRPMAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	a, b := c.G[0], c.G[1]
	govMockModel(t, a, "eu-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})
	st, body := a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "customer-1", "rpm_limit": 3})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "customer-2", "max_budget": 0.12})
	require.Equal(t, 200, st, "%s", body)
	for _, g := range c.G {
		Eventually(t, g.ReplicaID+" holds the end users", func() bool {
			return g.SyncLag(t)["registries"].(map[string]any)["end_users"].(map[string]any)["count"].(float64) == 2
		})
	}
	key := agGenKey(t, a)

	admitted := countAdmitted(t, 12, "Rate limit exceeded for end_user: customer-1. Limit type: requests. Current limit: 3", func(i int) (int, http.Header, []byte) {
		st, b := chatAsEndUser(t, c.G[i%3], key, "eu-m", "customer-1")
		return st, nil, b
	})
	require.LessOrEqual(t, admitted, 3, "never more than rpm_limit across the replicas")
	require.GreaterOrEqual(t, admitted, 1)
	// another end user with the same key is not limited
	st, body = chatAsEndUser(t, b, key, "eu-m", "customer-9")
	require.Equal(t, 200, st, "%s", body)

	served := 0
	for served < 20 {
		st, body := chatAsEndUser(t, a, key, "eu-m", "customer-2")
		if st != 200 {
			require.Equal(t, 400, st, "%s", body)
			break
		}
		served++
	}
	require.GreaterOrEqual(t, served, 3)
	other := agGenKey(t, b)
	for _, g := range c.G {
		Eventually(t, "customer-2 refused on "+g.ReplicaID, func() bool {
			st, body := chatAsEndUser(t, g, other, "eu-m", "customer-2")
			if st != 400 {
				return false
			}
			_, msg := agOpenAIError(t, body)
			require.True(t, strings.HasPrefix(msg, "Budget has been exceeded! End User=customer-2 Current cost: "), msg)
			return true
		})
	}
	st, body = a.Do(t, "GET", "/customer/info?end_user_id=customer-2", nil)
	require.Equal(t, 200, st, "%s", body)
	require.GreaterOrEqual(t, JSON(t, body)["spend"].(float64), 0.12)
}
