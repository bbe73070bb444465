package itest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOrgMemberBudget (issue 19 item 1): max_budget_in_organization given to
// /organization/member_add on replica a holds on replica b: once the member's spend through
// keys of the organization reaches it, every replica refuses the member's calls there, while
// another member of the organization is served; /organization/member_update on b raises it
// and a serves the member again. Each call costs 0.05 USD.
func TestOrgMemberBudget(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "om-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})
	st, body := a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "om-org", "organization_alias": "o"})
	require.Equal(t, 200, st, "%s", body)
	st, body = a.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "om-org",
		"member": []any{map[string]any{"user_id": "om-u1", "role": "internal_user"}}, "max_budget_in_organization": 0.12})
	require.Equal(t, 200, st, "%s", body)
	ms := JSON(t, body)["updated_organization_memberships"].([]any)
	require.NotEmpty(t, ms[0].(map[string]any)["budget_id"], "%s", body)
	st, body = a.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "om-org",
		"member": map[string]any{"user_id": "om-u2", "role": "internal_user"}})
	require.Equal(t, 200, st, "%s", body)
	k1, _ := govKey(t, a, map[string]any{"user_id": "om-u1", "organization_id": "om-org"})
	k2, _ := govKey(t, a, map[string]any{"user_id": "om-u2", "organization_id": "om-org"})

	served := 0
	for served < 20 {
		st, _, body := govDo(t, b, k1, "om-m", "hi")
		if st != 200 {
			require.Equal(t, 400, st, "%s", body)
			typ, msg := agOpenAIError(t, body)
			require.Equal(t, "budget_exceeded", typ)
			require.True(t, strings.HasPrefix(msg, "Budget has been exceeded! User=om-u1 in Organization=om-org Current cost: "), msg)
			require.True(t, strings.HasSuffix(msg, ", Max budget: 0.12"), msg)
			break
		}
		served++
	}
	require.GreaterOrEqual(t, served, 3, "0, 0.05, 0.10 are below 0.12")
	require.Less(t, served, 20, "the member budget refuses")
	Eventually(t, "the member refused on a", func() bool {
		st, _, _ := govDo(t, a, k1, "om-m", "hi")
		return st == 400
	})
	st, _, body = govDo(t, a, k2, "om-m", "hi")
	require.Equal(t, 200, st, "the other member is served: %s", body)

	// raised on b: served again on a
	st, body = b.Do(t, "PATCH", "/organization/member_update", map[string]any{"organization_id": "om-org", "user_id": "om-u1",
		"max_budget_in_organization": 100})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "the raised member budget on a", func() bool {
		st, _, _ := govDo(t, a, k1, "om-m", "hi")
		return st == 200
	})
	st, body = a.Do(t, "POST", "/organization/member_add", map[string]any{"organization_id": "om-org",
		"member": map[string]any{"user_id": "om-u3", "role": "internal_user"}, "max_budget_in_organization": -1})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "max_budget_in_organization")
}
