package itest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 19: the organization and customer fields LiteLLM honours (model_rpm_limit /
// model_tpm_limit, object_permission, model_max_budget through the linked budget, a customer's
// budget_reset_at), each written on replica A and in force on replica B; bad values are a 400
// naming the field with nothing stored.

// registryCount is how many rows g's registry name ("organizations", "end_users", ...) holds.
func registryCount(t *testing.T, g *Gateway, name string) float64 {
	t.Helper()
	return g.SyncLag(t)["registries"].(map[string]any)[name].(map[string]any)["count"].(float64)
}

// twoMockAgents creates agents <prefix>1 and <prefix>2 answering a mock response; returns
// their ids.
func twoMockAgents(t *testing.T, g *Gateway, prefix string) (string, string) {
	t.Helper()
	mock := map[string]any{"model": "openai/x", "mock_response": "agent says hi"}
	return createAgent(t, g, prefix+"1", mock), createAgent(t, g, prefix+"2", mock)
}

// An organization's model_rpm_limit holds per model group across all its keys and replicas
// (LiteLLM's model_per_organization descriptor): two keys of the organization calling through
// A and B share one window of 2; another model group is not limited; a bad value is refused.
func TestOrgModelRPMAcrossKeysAndReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{Env: []string{"GATEWAY_LIMIT_WINDOW=1h"}})
	a, b := p.A, p.B
	govMockModel(t, a, "omr-m", nil)
	govMockModel(t, a, "omr-other", nil)
	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "omr", "model_rpm_limit": map[string]any{"omr-m": 2}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 2.0, JSON(t, body)["model_rpm_limit"].(map[string]any)["omr-m"], "returned: %s", body)
	k1, _ := govKey(t, a, map[string]any{"organization_id": "omr"})
	k2, _ := govKey(t, a, map[string]any{"organization_id": "omr"})
	Eventually(t, "b holds the organization", func() bool { return registryCount(t, b, "organizations") == 1 })

	gs, ks := []*Gateway{a, b}, []string{k1, k2}
	admitted := countAdmitted(t, 8, "Rate limit exceeded for model_per_organization: omr:omr-m. Limit type: requests. Current limit: 2", func(i int) (int, http.Header, []byte) {
		return govDo(t, gs[i%2], ks[(i/2)%2], "omr-m", "hi")
	})
	require.LessOrEqual(t, admitted, 2, "one window for all the organization's keys, across the replicas")
	require.GreaterOrEqual(t, admitted, 1)
	st, _, body = govDo(t, b, k1, "omr-other", "hi")
	require.Equal(t, 200, st, "another model group is not limited: %s", body)

	for _, v := range []any{map[string]any{"m": -1}, "lots"} {
		st, body = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "omr-bad", "model_rpm_limit": v})
		require.Equal(t, 400, st, "%s", body)
		require.Contains(t, string(body), "model_rpm_limit")
	}
	st, body = b.Do(t, "GET", "/organization/info?organization_id=omr-bad", nil)
	require.Equal(t, 404, st, "nothing stored: %s", body)
}

// object_permission.agents on an organization binds its keys, and on a customer the A2A calls
// naming it (x-litellm-customer-id), on the other replica; MCP members are stored; a member
// not supported yet is refused with nothing stored.
func TestOrgAndCustomerObjectPermissionAgents(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	id1, id2 := twoMockAgents(t, a, "opa-ag")
	send := func(g *Gateway, key, agent string, hdr map[string]string) (int, []byte) {
		st, _, body := postAs(t, g, key, "/a2a/"+agent, sendRequest(1, "hi"), hdr)
		return st, body
	}

	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "opa",
		"object_permission": map[string]any{"agents": []string{id1}, "mcp_servers": []string{"s1"}}})
	require.Equal(t, 200, st, "%s", body)
	ok, _ := govKey(t, a, map[string]any{"organization_id": "opa"})
	Eventually(t, "B runs agent 1 for the organization's key", func() bool { st, _ := send(b, ok, id1, nil); return st == 200 })
	st, body = send(b, ok, id2, nil)
	require.Equal(t, 403, st, "%s", body)
	require.Equal(t, "Access denied to agent: "+id2, accDetail(body))
	st, body = b.Do(t, "GET", "/organization/info?organization_id=opa", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{"s1"}, JSON(t, body)["object_permission"].(map[string]any)["mcp_servers"], "%s", body)
	// lifted on B: A follows
	st, body = b.Do(t, "POST", "/organization/update", map[string]any{"organization_id": "opa", "object_permission": map[string]any{"agents": []string{}}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A runs agent 2 for the organization's key", func() bool { st, _ := send(a, ok, id2, nil); return st == 200 })

	// a customer's agents bind the calls made for it
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "opa-eu", "object_permission": map[string]any{"agents": []string{id2}}})
	require.Equal(t, 200, st, "%s", body)
	plain := agGenKey(t, a)
	eu := map[string]string{"x-litellm-customer-id": "opa-eu"}
	Eventually(t, "B refuses agent 1 for the customer", func() bool {
		st, body := send(b, plain, id1, eu)
		return st == 403 && accDetail(body) == "Access denied to agent: "+id1
	})
	st, body = send(b, plain, id2, eu)
	require.Equal(t, 200, st, "%s", body)
	st, body = send(b, plain, id1, nil)
	require.Equal(t, 200, st, "a call for no customer is not bound: %s", body)
	st, body = a.Do(t, "POST", "/customer/update", map[string]any{"user_id": "opa-eu", "object_permission": nil})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "B runs agent 1 for the customer once lifted", func() bool { st, _ := send(b, plain, id1, eu); return st == 200 })

	for _, c := range []struct {
		path string
		body map[string]any
		want string
	}{
		{"/organization/new", map[string]any{"organization_id": "opa-no", "object_permission": map[string]any{"models": []string{"m"}}}, `field \"object_permission.models\" is not supported yet`},
		{"/customer/new", map[string]any{"user_id": "opa-no", "object_permission": map[string]any{"agentz": []string{}}}, `unknown field \"agentz\" in object_permission`},
		{"/customer/new", map[string]any{"user_id": "opa-no", "object_permission": map[string]any{"agents": "a"}}, "object_permission.agents must be a list of strings"},
	} {
		st, body = a.Do(t, "POST", c.path, c.body)
		require.Equal(t, 400, st, "%s %s", c.path, body)
		require.Contains(t, string(body), c.want)
	}
	st, _ = b.Do(t, "GET", "/organization/info?organization_id=opa-no", nil)
	require.Equal(t, 404, st)
	st, _ = b.Do(t, "GET", "/customer/info?end_user_id=opa-no", nil)
	require.Equal(t, 404, st)
}

// model_max_budget on /organization/new goes to a budget the organization is linked to, as
// LiteLLM's new_organization: the organization's spend on that model group is refused on B
// once it reached the budget, with LiteLLM's text; /organization/update on A changes that same
// budget and B serves the group again. With a budget_id, or a bad shape: 400, nothing stored.
func TestOrgModelMaxBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	price := map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002} // 0.05 USD a call
	govMockModel(t, a, "omb-m", price)
	govMockModel(t, a, "omb-other", price)
	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "omb",
		"model_max_budget": map[string]any{"omb-m": map[string]any{"budget_limit": 0.05, "time_period": "1d"}}})
	require.Equal(t, 200, st, "%s", body)
	bid, _ := JSON(t, body)["budget_id"].(string)
	require.NotEmpty(t, bid, "the organization links its new budget: %s", body)
	st, body = b.Do(t, "POST", "/budget/info", map[string]any{"budgets": []string{bid}})
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, budgetArray(t, body), 1, "%s", body)
	mmb := budgetArray(t, body)[0].(map[string]any)["model_max_budget"].(map[string]any)
	require.Contains(t, mmb, "omb-m", "%s", body)
	key, _ := govKey(t, a, map[string]any{"organization_id": "omb"})
	Eventually(t, "b holds the organization and its budget", func() bool {
		return registryCount(t, b, "organizations") == 1 && budgetCount(t, b) == 1
	})

	require.Equal(t, 1, spendUntilRefused(t, b, key, "omb-m"), "one call of 0.05 USD reaches the organization's model budget")
	st, _, body = govDo(t, b, key, "omb-m", "hi")
	require.Equal(t, 400, st, "%s", body)
	typ, msg := agOpenAIError(t, body)
	require.Equal(t, "budget_exceeded", typ)
	require.Equal(t, "LiteLLM Organization: omb, exceeded budget for model=omb-m", msg)
	st, _, body = govDo(t, b, key, "omb-other", "hi")
	require.Equal(t, 200, st, "another model group is served: %s", body)

	st, body = a.Do(t, "POST", "/organization/update", map[string]any{"organization_id": "omb",
		"model_max_budget": map[string]any{"omb-m": map[string]any{"budget_limit": 10}}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, bid, JSON(t, body)["budget_id"], "the same budget: %s", body)
	Eventually(t, "b serves the model again", func() bool { st, _, _ := govDo(t, b, key, "omb-m", "hi"); return st == 200 })
	st, body = b.Do(t, "GET", "/organization/info?organization_id=omb", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 10.0, JSON(t, body)["litellm_budget_table"].(map[string]any)["model_max_budget"].(map[string]any)["omb-m"].(map[string]any)["budget_limit"], "%s", body)

	st, body = a.Do(t, "POST", "/budget/new", map[string]any{"budget_id": "omb-tier"})
	require.Equal(t, 200, st, "%s", body)
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"organization_id": "omb-no", "model_max_budget": map[string]any{"m": map[string]any{"budget_limit": "lots"}}}, "Invalid model_max_budget: m.budget_limit must be a number (USD)."},
		{map[string]any{"organization_id": "omb-no", "budget_id": "omb-tier", "model_max_budget": map[string]any{"m": map[string]any{"budget_limit": 1}}}, "model_max_budget cannot be given with budget_id"},
	} {
		st, body = a.Do(t, "POST", "/organization/new", c.body)
		require.Equal(t, 400, st, "%s", body)
		require.Contains(t, string(body), c.want)
	}
	st, _ = b.Do(t, "GET", "/organization/info?organization_id=omb-no", nil)
	require.Equal(t, 404, st, "nothing stored")
	st, body = b.Do(t, "GET", "/budget/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, budgetArray(t, body), 2, "no budget made for a refused write: %s", body)
}

// /customer/new's model_max_budget goes to a budget the customer is linked to (LiteLLM
// new_end_user), its budget_reset_at sets when the customer's spend next resets: a customer
// refused at its max_budget on B is served again once budget_reset_at passed, well before its
// budget_duration (1h) would reset it. Bad values: 400 naming the field, nothing stored.
func TestCustomerModelBudgetAndResetAtAcrossReplicas(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "cmb-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}) // 0.05 USD a call
	key := agGenKey(t, a)

	st, body := a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "cmb-eu",
		"model_max_budget": map[string]any{"cmb-m": map[string]any{"max_budget": 0.05}}})
	require.Equal(t, 200, st, "%s", body)
	require.NotEmpty(t, JSON(t, body)["budget_id"], "the customer links its new budget: %s", body)
	Eventually(t, "b holds the customer and its budget", func() bool {
		return registryCount(t, b, "end_users") == 1 && budgetCount(t, b) == 1
	})
	st, body = chatAsEndUser(t, b, key, "cmb-m", "cmb-eu")
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "the customer's model budget refuses it on b", func() bool {
		st, body := chatAsEndUser(t, b, key, "cmb-m", "cmb-eu")
		if st != 400 {
			return false
		}
		require.Contains(t, string(body), "LiteLLM End User: cmb-eu, exceeded budget for model=cmb-m")
		return true
	})

	resetAt := time.Now().Add(10 * time.Second).UTC().Format(time.RFC3339)
	st, body = a.Do(t, "POST", "/customer/new", map[string]any{"user_id": "cmb-reset", "max_budget": 0.05,
		"budget_duration": "1h", "budget_reset_at": resetAt})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "b holds the second customer", func() bool { return registryCount(t, b, "end_users") == 2 })
	served := 0
	for ; served < 10; served++ {
		st, body := chatAsEndUser(t, b, key, "cmb-m", "cmb-reset")
		if st != 200 {
			require.Equal(t, 400, st, "%s", body)
			require.Contains(t, string(body), "Budget has been exceeded! End User=cmb-reset")
			break
		}
	}
	require.Equal(t, 1, served, "one call of 0.05 USD reaches max_budget 0.05")
	Eventually(t, "b serves the customer again once budget_reset_at passed", func() bool {
		st, _ := chatAsEndUser(t, b, key, "cmb-m", "cmb-reset")
		return st == 200
	})

	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"user_id": "cmb-no", "max_budget": 1, "budget_reset_at": resetAt}, "budget_reset_at needs a budget_duration"},
		{map[string]any{"user_id": "cmb-no", "budget_duration": "1h", "budget_reset_at": "soon"}, `budget_reset_at must be an ISO 8601 date-time (2025-01-31T00:00:00Z), got \"soon\"`},
		{map[string]any{"user_id": "cmb-no", "model_max_budget": map[string]any{"m": map[string]any{"rpm_limit": 1}}}, "Invalid model_max_budget: m.rpm_limit is not supported yet"},
	} {
		st, body = a.Do(t, "POST", "/customer/new", c.body)
		require.Equal(t, 400, st, "%s", body)
		require.Contains(t, string(body), c.want)
	}
	st, _ = b.Do(t, "GET", "/customer/info?end_user_id=cmb-no", nil)
	require.Equal(t, 404, st, "nothing stored")
	require.Equal(t, 1.0, budgetCount(t, a), "no budget made for a refused write")
}
