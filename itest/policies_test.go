package itest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// policyNew creates a guardrail policy through g and returns its row.
func policyNew(t *testing.T, g *Gateway, body map[string]any) map[string]any {
	t.Helper()
	st, b := g.Do(t, "POST", "/policies", body)
	require.Equal(t, 200, st, "%s", b)
	row := JSON(t, b)
	require.NotEmpty(t, row["policy_id"], "%s", b)
	return row
}

// policyCount is how many policies g's registry holds.
func policyCount(t *testing.T, g *Gateway) float64 {
	t.Helper()
	return g.SyncLag(t)["registries"].(map[string]any)["policies"].(map[string]any)["count"].(float64)
}

// detailError is the message of a {"detail": {"error": msg}} answer.
func detailError(t *testing.T, b []byte) string {
	t.Helper()
	d, _ := JSON(t, b)["detail"].(map[string]any)
	msg, _ := d["error"].(string)
	return msg
}

// Guardrail policies (LiteLLM's policy engine, issue 19): a policy created on replica A and
// attached to a key and to a team on A makes its guardrails run on those callers' calls on
// replica B at once (no wait); inheritance adds the parent's guardrails and guardrails_remove
// drops one; a condition limits a policy to the models it matches; a policy change on A
// reaches B's calls through the change feed.
func TestPolicyCreatedOnAEnforcedOnB(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "pol-m", nil)
	createGuardrail(t, a, "no-zeus", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("project-zeus", "BLOCK")}}))
	createGuardrail(t, a, "no-apollo", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("apollo", "BLOCK")}}))
	createGuardrail(t, a, "no-hermes", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("hermes", "BLOCK")}}))

	base := policyNew(t, a, map[string]any{"policy_name": "base", "description": "baseline", "guardrails_add": []string{"no-zeus", "no-hermes"}})
	require.Equal(t, "base", base["policy_name"])
	require.Equal(t, []any{"no-zeus", "no-hermes"}, base["guardrails_add"])
	require.Equal(t, []any{}, base["guardrails_remove"])
	require.Equal(t, "baseline", base["description"])
	require.Nil(t, base["inherit"])
	require.Nil(t, base["pipeline"])
	require.Equal(t, "default_user_id", base["created_by"])
	child := policyNew(t, a, map[string]any{"policy_name": "child", "inherit": "base",
		"guardrails_add": []string{"no-apollo"}, "guardrails_remove": []string{"no-hermes"}})
	require.Equal(t, "base", child["inherit"])
	policyNew(t, a, map[string]any{"policy_name": "other-models", "guardrails_add": []string{"no-apollo"},
		"condition": map[string]any{"model": []string{"gpt-4", "claude-.*"}}})
	policyNew(t, a, map[string]any{"policy_name": "pol-models", "guardrails_add": []string{"no-hermes"},
		"condition": map[string]any{"model": "pol-.*"}})

	st, body := b.Do(t, "GET", "/policies/"+child["policy_id"].(string)+"/resolved-guardrails", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, map[string]any{"policy_id": child["policy_id"], "policy_name": "child",
		"resolved_guardrails": []any{"no-zeus", "no-apollo"}}, JSON(t, body))

	// a key attaching child, made on A, called on B at once
	key, _ := govKey(t, a, map[string]any{"models": []string{"pol-m"}, "policies": []string{"child"}})
	st, _, body = govDo(t, b, key, "pol-m", "status of project-zeus?")
	require.Equal(t, 400, st, "the parent's guardrail runs: %s", body)
	require.Equal(t, "Content blocked: keyword 'project-zeus' detected", errorMessage(t, body))
	st, _, body = govDo(t, b, key, "pol-m", "apollo launch")
	require.Equal(t, 400, st, "the policy's own guardrail runs: %s", body)
	st, _, body = govDo(t, b, key, "pol-m", "hermes says hi")
	require.Equal(t, 200, st, "guardrails_remove drops the parent's no-hermes: %s", body)
	st, _, body = govDo(t, b, key, "pol-m", "plain question")
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, string(body), `"policies":["child"]`)

	// conditions: pol-models applies to pol-m, other-models does not
	condKey, _ := govKey(t, a, map[string]any{"policies": []string{"other-models", "pol-models"}})
	st, _, body = govDo(t, b, condKey, "pol-m", "apollo again")
	require.Equal(t, 200, st, "other-models' condition does not match pol-m: %s", body)
	st, _, body = govDo(t, b, condKey, "pol-m", "hermes again")
	require.Equal(t, 400, st, "pol-models' condition matches pol-m: %s", body)

	// a team attaching base: every key of the team runs its guardrails
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "pol-team", "policies": []string{"base"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, []any{"base"}, JSON(t, body)["policies"], "%s", body)
	teamKey, _ := govKey(t, a, map[string]any{"team_id": "pol-team"})
	st, _, body = govDo(t, b, teamKey, "pol-m", "hermes via the team")
	require.Equal(t, 400, st, "the team's policy runs on its key: %s", body)
	require.Equal(t, "Content blocked: keyword 'hermes' detected", errorMessage(t, body))

	// a change to the policy on A reaches B's calls
	st, body = a.Do(t, "PUT", "/policies/"+base["policy_id"].(string), map[string]any{"guardrails_add": []string{"no-hermes"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "baseline", JSON(t, body)["description"], "a field not sent keeps its value")
	Eventually(t, "B runs base without no-zeus", func() bool {
		st, _, _ := govDo(t, b, teamKey, "pol-m", "project-zeus via the team")
		return st == 200
	})
	st, _, body = govDo(t, b, teamKey, "pol-m", "hermes via the team")
	require.Equal(t, 400, st, "%s", body)

	// detach: the key's calls run without the policy
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "policies": []string{}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "B runs the key without its policy", func() bool {
		st, _, _ := govDo(t, b, key, "pol-m", "apollo launch")
		return st == 200
	})

	st, body = b.Do(t, "GET", "/policies/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 4.0, JSON(t, body)["total_count"], "%s", body)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" holds the policies", func() bool { return policyCount(t, g) == 4 })
	}
}

// Bad policy input is a 400 naming the field and writes nothing; a key or team attaching a
// policy that does not exist is refused and not written; a policy in use is not deleted; a
// policy removed behind the API's back (psql) makes its callers' calls fail closed, never run
// unguarded.
func TestPolicyBadInputsAndFailClosed(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	govMockModel(t, a, "pol-m", nil)
	createGuardrail(t, a, "no-zeus", contentFilter("pre_call", map[string]any{"blocked_words": []any{word("project-zeus", "BLOCK")}}))

	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"guardrails_add": []string{"no-zeus"}}, "policy_name is required"},
		{map[string]any{"policy_name": "  "}, "policy_name must be a non-blank string"},
		{map[string]any{"policy_name": "p", "guardrails_add": []string{"no-zeus", "nope"}}, "Guardrail 'nope' not found in guardrail registry"},
		{map[string]any{"policy_name": "p", "inherit": "ghost"}, "Parent policy 'ghost' not found"},
		{map[string]any{"policy_name": "p", "guardrails_add": "no-zeus"}, "guardrails_add"},
		{map[string]any{"policy_name": "p", "condition": map[string]any{"team": "x"}}, "condition.team"},
		{map[string]any{"policy_name": "p", "condition": map[string]any{"model": 3}}, "condition.model must be a string or a list of strings"},
		{map[string]any{"policy_name": "p", "pipeline": map[string]any{"mode": "pre_call", "steps": []any{}}}, "pipeline is not supported yet"},
		{map[string]any{"policy_name": "p", "guardrail_add": []string{"no-zeus"}}, `unknown field "guardrail_add"`},
		{map[string]any{"policy_name": "p", "guardrails_remove": manyNames(101)}, "guardrails_remove lists at most 100 guardrails, got 101"},
	} {
		st, body := a.Do(t, "POST", "/policies", c.body)
		require.Equal(t, 400, st, "%v: %s", c.body, body)
		require.Contains(t, detailError(t, body), c.want, "%v", c.body)
	}
	st, body := b.Do(t, "GET", "/policies/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 0.0, JSON(t, body)["total_count"], "nothing was written: %s", body)

	pa := policyNew(t, a, map[string]any{"policy_name": "pa", "guardrails_add": []string{"no-zeus"}})
	policyNew(t, a, map[string]any{"policy_name": "pb", "inherit": "pa"})
	st, body = b.Do(t, "POST", "/policies", map[string]any{"policy_name": "pa"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Policy with name 'pa' already exists", detailError(t, body))
	st, body = b.Do(t, "PUT", "/policies/"+pa["policy_id"].(string), map[string]any{"inherit": "pb"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Circular inheritance detected: pa -> pb -> pa", detailError(t, body))
	st, body = b.Do(t, "PUT", "/policies/nope", map[string]any{"description": "x"})
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, "Policy with ID nope not found", detailError(t, body))

	// attaching an unknown policy: 400 naming it, nothing written
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"key_alias": "ghostly", "policies": []string{"pa", "ghost"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, errorMessage(t, body), "Policy 'ghost' not found. Create it first with POST /policies")
	require.Equal(t, 0, queryInt(t, p.DB, `SELECT count(*) FROM gateway.api_keys WHERE key_alias = 'ghostly'`))
	st, body = a.Do(t, "POST", "/team/new", map[string]any{"team_id": "ghost-team", "policies": []string{"ghost"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Policy 'ghost' not found")
	require.Equal(t, 0, queryInt(t, p.DB, `SELECT count(*) FROM gateway.teams WHERE team_id = 'ghost-team'`))
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"policies": manyNames(101)})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, errorMessage(t, body), "policies lists at most 100 policies, got 101")
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"policies": "pa"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "policies")

	// a policy in use is kept; renaming it is refused
	key, _ := govKey(t, a, map[string]any{"policies": []string{"pb"}})
	st, body = b.Do(t, "DELETE", "/policies/"+pa["policy_id"].(string), nil)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Policy pa is still used by policy pb: detach it first (policies: [])", detailError(t, body))
	st, body = b.Do(t, "PUT", "/policies/"+pa["policy_id"].(string), map[string]any{"policy_name": "pa2"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, detailError(t, body), "it cannot be renamed")

	// removed by psql behind the API: the key's calls fail closed, on both replicas
	st, _, body = govDo(t, b, key, "pol-m", "project-zeus")
	require.Equal(t, 400, st, "%s", body)
	PSQL(t, p.DB, `DELETE FROM gateway.policies WHERE policy_name = 'pa'`)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" dropped pa", func() bool { return policyCount(t, g) == 1 })
		st, _, body = govDo(t, g, key, "pol-m", "hello")
		require.Equal(t, 404, st, "the inherited policy is gone: the call fails closed: %s", body)
		require.Equal(t, "Policy 'pa' not found. Please ensure the policy exists (/policies/list).", errorMessage(t, body))
	}

	// detached, the last policy goes; then it is gone everywhere
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "policies": nil})
	require.Equal(t, 200, st, "%s", body)
	pb := JSON(t, mustGet(t, b, "/policies/list"))["policies"].([]any)[0].(map[string]any)
	st, body = b.Do(t, "DELETE", "/policies/"+pb["policy_id"].(string), nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "Policy "+pb["policy_id"].(string)+" deleted successfully", JSON(t, body)["message"])
	st, body = a.Do(t, "GET", "/policies/"+pb["policy_id"].(string), nil)
	require.Equal(t, 404, st, "%s", body)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" dropped pb", func() bool { return policyCount(t, g) == 0 })
	}
}

func mustGet(t *testing.T, g *Gateway, path string) []byte {
	t.Helper()
	st, b := g.Do(t, "GET", path, nil)
	require.Equal(t, 200, st, "%s", b)
	return b
}

func manyNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i)
	}
	return out
}
