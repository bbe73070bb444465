package itest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// projectNew creates a project through g and returns its answer.
func projectNew(t *testing.T, g *Gateway, body map[string]any) map[string]any {
	t.Helper()
	st, b := g.Do(t, "POST", "/project/new", body)
	require.Equal(t, 200, st, "%s", b)
	return JSON(t, b)
}

// projectInfo is /project/info of id through g.
func projectInfo(t *testing.T, g *Gateway, id string) map[string]any {
	t.Helper()
	st, b := g.Do(t, "GET", "/project/info?project_id="+id, nil)
	require.Equal(t, 200, st, "%s", b)
	return JSON(t, b)
}

// Projects (LiteLLM's project management, issue 19): a project created on replica A and a key
// of it made on A gate that key's calls on replica B at once — a model outside the project's
// models is refused, the project's budget (made from max_budget on /project/new) refuses once
// the project's own spend reached it, on every replica; its spend shows in /project/info; a
// project blocked on A refuses the key's calls on B; its rpm_limit holds across both replicas.
func TestProjectCreatedOnAEnforcedOnB(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	// the mock answers report 10 prompt and 20 completion tokens: 0.05 USD a call
	cost := map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}
	govMockModel(t, a, "pj-a", cost)
	govMockModel(t, a, "pj-b", cost)
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "pj-team", "models": []string{"pj-a", "pj-b"}, "max_budget": 50, "rpm_limit": 1000})
	require.Equal(t, 200, st, "%s", body)

	pr := projectNew(t, a, map[string]any{"project_id": "pj-1", "project_alias": "flights", "team_id": "pj-team",
		"models": []string{"pj-a"}, "max_budget": 0.08, "metadata": map[string]any{"use_case_id": "SNOW-1"}, "tags": []string{"prod"}})
	require.Equal(t, "pj-1", pr["project_id"])
	require.Equal(t, "flights", pr["project_alias"])
	require.Equal(t, "pj-team", pr["team_id"])
	require.Equal(t, []any{"pj-a"}, pr["models"])
	require.Equal(t, false, pr["blocked"])
	require.Equal(t, map[string]any{"use_case_id": "SNOW-1", "tags": []any{"prod"}}, pr["metadata"])
	bt, _ := pr["litellm_budget_table"].(map[string]any)
	require.NotNil(t, bt, "%v", pr)
	require.EqualValues(t, 0.08, bt["max_budget"])
	require.Equal(t, pr["budget_id"], bt["budget_id"])

	// read on B at once
	info := projectInfo(t, b, "pj-1")
	require.Equal(t, "pj-team", info["team_id"])
	require.EqualValues(t, 0, info["spend"])

	key, tok := govKey(t, a, map[string]any{"team_id": "pj-team", "project_id": "pj-1"})
	st, body = b.Do(t, "GET", "/key/info?key="+key, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "pj-1", JSON(t, body)["info"].(map[string]any)["project_id"])

	// models: the team allows pj-b, the project does not
	st, _, body = govDo(t, b, key, "pj-b", "hi")
	require.Equal(t, 401, st, "%s", body)
	typ, msg := agOpenAIError(t, body)
	require.Equal(t, "project_model_access_denied", typ)
	require.Equal(t, "project not allowed to access model. This project can only access models=['pj-a']. Tried to access pj-b", msg)

	// budget: 0, 0.05 are below 0.08; then every replica refuses naming the project
	served := 0
	for served < 6 {
		st, _, body = govDo(t, b, key, "pj-a", "hi")
		if st != 200 {
			require.Equal(t, 400, st, "%s", body)
			break
		}
		served++
	}
	require.GreaterOrEqual(t, served, 2, "%s", body)
	require.Less(t, served, 6, "the project's budget never refused")
	for _, g := range []*Gateway{a, b} {
		Eventually(t, "project budget refusal on "+g.ReplicaID, func() bool {
			st, _, body := govDo(t, g, key, "pj-a", "hi")
			if st != 400 {
				return false
			}
			typ, msg := agOpenAIError(t, body)
			require.Equal(t, "budget_exceeded", typ)
			require.True(t, strings.HasPrefix(msg, "Budget has been exceeded! Project=pj-1 Current cost: "), msg)
			return true
		})
	}
	Eventually(t, "project spend in /project/info", func() bool {
		sp, _ := projectInfo(t, a, "pj-1")["spend"].(float64)
		return sp >= 0.08
	})
	// the spend logs name the project (LiteLLM metadata user_api_key_project_id)
	Eventually(t, "spend logs name the project", func() bool {
		st, body := b.Do(t, "GET", "/spend/logs?api_key="+tok, nil)
		require.Equal(t, 200, st, "%s", body)
		logs := budgetArray(t, body)
		if len(logs) == 0 {
			return false
		}
		meta := logs[0].(map[string]any)["metadata"].(map[string]any)
		require.Equal(t, "pj-1", meta["user_api_key_project_id"])
		return true
	})
	// a second key of the project shares the project's spend: refused too
	key2, _ := govKey(t, a, map[string]any{"team_id": "pj-team", "project_id": "pj-1"})
	Eventually(t, "second key refused by the project's budget", func() bool {
		st, _, _ := govDo(t, b, key2, "pj-a", "hi")
		return st == 400
	})

	// raising the budget on A serves again on B; blocking on A refuses on B
	st, body = a.Do(t, "POST", "/project/update", map[string]any{"project_id": "pj-1", "max_budget": 40})
	require.Equal(t, 200, st, "%s", body)
	require.EqualValues(t, 40, JSON(t, body)["litellm_budget_table"].(map[string]any)["max_budget"])
	Eventually(t, "B serves under the raised budget", func() bool {
		st, _, _ := govDo(t, b, key, "pj-a", "hi")
		return st == 200
	})
	st, body = a.Do(t, "POST", "/project/update", map[string]any{"project_id": "pj-1", "blocked": true})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "B refuses the blocked project's key", func() bool {
		st, _, body := govDo(t, b, key, "pj-a", "hi")
		if st != 401 {
			return false
		}
		require.Contains(t, string(body), "Project=pj-1 is blocked. Update via `/project/update` if you're an admin.")
		return true
	})

	// rpm_limit 3 on a second project: at most 3 calls a window across both replicas
	projectNew(t, a, map[string]any{"project_id": "pj-rpm", "team_id": "pj-team", "rpm_limit": 3})
	rk, _ := govKey(t, a, map[string]any{"team_id": "pj-team", "project_id": "pj-rpm"})
	ok, limited := 0, 0
	for i := 0; i < 8; i++ {
		g := []*Gateway{a, b}[i%2]
		st, _, body := govDo(t, g, rk, "pj-b", "hi")
		switch st {
		case 200:
			ok++
		case 429:
			limited++
			require.Contains(t, string(body), "Rate limit exceeded for project: pj-rpm", "%s", body)
		default:
			t.Fatalf("status %d: %s", st, body)
		}
	}
	require.LessOrEqual(t, ok, 3)
	require.Positive(t, limited)

	// per-model: model_max_budget (on the project's budget) and model_rpm_limit, across the
	// project's keys and both replicas
	projectNew(t, a, map[string]any{"project_id": "pj-model", "team_id": "pj-team",
		"model_max_budget": map[string]any{"pj-a": map[string]any{"max_budget": 0.04}}, "model_rpm_limit": map[string]any{"pj-b": 1}})
	mk, _ := govKey(t, a, map[string]any{"team_id": "pj-team", "project_id": "pj-model"})
	st, _, body = govDo(t, b, mk, "pj-a", "hi")
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "the project's model budget refuses pj-a", func() bool {
		st, _, body := govDo(t, a, mk, "pj-a", "hi")
		if st != 400 {
			return false
		}
		require.Contains(t, string(body), "LiteLLM Project: pj-model, exceeded budget for model=pj-a")
		return true
	})
	st, _, body = govDo(t, a, mk, "pj-b", "hi")
	require.Equal(t, 200, st, "%s", body)
	st, _, body = govDo(t, b, mk, "pj-b", "hi")
	require.Equal(t, 429, st, "model_rpm_limit 1 holds across replicas: %s", body)
	require.Contains(t, string(body), "model_per_project: pj-model:pj-b")

	// list on B
	st, body = b.Do(t, "GET", "/project/list", nil)
	require.Equal(t, 200, st, "%s", body)
	var ids []string
	for _, r := range budgetArray(t, body) {
		ids = append(ids, r.(map[string]any)["project_id"].(string))
	}
	require.ElementsMatch(t, []string{"pj-1", "pj-rpm", "pj-model"}, ids)

	// a replica started now loads both projects cold, before any call reads them through
	c := StartGateway(t, p.DB, "c", GatewayOpts{})
	require.EqualValues(t, 3, c.SyncLag(t)["registries"].(map[string]any)["projects"].(map[string]any)["count"], "cold load")
	st, _, body = govDo(t, c, key, "pj-a", "hi")
	require.Equal(t, 401, st, "%s", body)
	require.Contains(t, string(body), "Project=pj-1 is blocked.")

	// removed behind the API (psql): its keys' calls fail closed on both replicas
	PSQL(t, p.DB, `DELETE FROM gateway.projects WHERE project_id = 'pj-rpm'`)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" refuses the deleted project's key", func() bool {
			st, _, body := govDo(t, g, rk, "pj-b", "hi")
			if st != 401 {
				return false
			}
			require.Contains(t, string(body), "project pj-rpm of this key does not exist")
			return true
		})
	}
}

// Bad project input is a 400 naming the field (404 an unknown team or project) and writes
// nothing: no project, no budget row, no key; a key of an unknown project is refused; a project
// with keys is not deleted (all-or-nothing over project_ids), and once its keys are gone it is,
// on both replicas.
func TestProjectBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "pb-team", "models": []string{"m1"}, "max_budget": 10, "tpm_limit": 100})
	require.Equal(t, 200, st, "%s", body)
	budgets := func() int64 {
		return agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.budgets")
	}
	before := budgets()
	for _, c := range []struct {
		body   map[string]any
		status int
		want   string
	}{
		{map[string]any{"project_alias": "x"}, 400, "team_id is required"},
		{map[string]any{"team_id": "nope"}, 404, "Team not found, team_id=nope"},
		{map[string]any{"team_id": "pb-team", "models": []string{"m2"}}, 400, "Model 'm2' not in team's allowed models"},
		{map[string]any{"team_id": "pb-team", "max_budget": 20}, 400, "Project max_budget (20) exceeds team's max_budget (10)"},
		{map[string]any{"team_id": "pb-team", "tpm_limit": 200}, 400, "Project tpm_limit (200) exceeds team's tpm_limit (100)"},
		{map[string]any{"team_id": "pb-team", "max_budget": 5, "soft_budget": 6}, 400, "soft_budget (6) must be strictly lower than max_budget (5)"},
		{map[string]any{"team_id": "pb-team", "max_budget": -1}, 400, "max_budget"},
		{map[string]any{"team_id": "pb-team", "budget_id": "no-such-budget"}, 400, "Budget not found, passed budget_id=no-such-budget"},
		{map[string]any{"team_id": "pb-team", "model_rpm_limit": map[string]any{"m1": -3}}, 400, "model_rpm_limit"},
		{map[string]any{"team_id": "pb-team", "models": "m1"}, 400, "models"},
		{map[string]any{"team_id": "pb-team", "object_permission": map[string]any{"vector_stores": []string{"v"}}}, 400, `object_permission\" is not supported yet`},
		{map[string]any{"team_id": "pb-team", "project_id": "  "}, 400, "project_id must be a non-blank string"},
		{map[string]any{"team_id": "pb-team", "no_such_field": 1}, 400, "no_such_field"},
	} {
		st, body := a.Do(t, "POST", "/project/new", c.body)
		require.Equal(t, c.status, st, "%v: %s", c.body, body)
		require.Contains(t, string(body), c.want, "%v", c.body)
	}
	require.Equal(t, before, budgets(), "a refused /project/new made a budget row")
	require.Zero(t, agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.projects"))

	// a key of an unknown project: 400 naming project_id, no key written
	keysBefore := agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.api_keys")
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"project_id": "ghost"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Project not found, project_id=ghost")
	require.Contains(t, string(body), "project_id")
	require.Equal(t, keysBefore, agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.api_keys"))
	// /key/update has no project_id (LiteLLM UpdateKeyRequest)
	projectNew(t, a, map[string]any{"project_id": "pb-1", "team_id": "pb-team"})
	st, body = a.Do(t, "POST", "/project/new", map[string]any{"project_id": "pb-1", "team_id": "pb-team"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Project id = pb-1 already exists. Please use a different project id.")
	key, _ := govKey(t, a, map[string]any{"project_id": "pb-1"})
	st, body = a.Do(t, "POST", "/key/update", map[string]any{"key": key, "project_id": "pb-1"})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "project_id")

	// update: unknown project 404, limits above the team's 400, nothing changed
	st, body = b.Do(t, "POST", "/project/update", map[string]any{"project_id": "nope", "project_alias": "x"})
	require.Equal(t, 404, st, "%s", body)
	require.Contains(t, string(body), "Project not found, project_id=nope")
	st, body = b.Do(t, "POST", "/project/update", map[string]any{"project_id": "pb-1", "project_alias": "changed", "max_budget": 99})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "exceeds team's max_budget")
	require.Nil(t, projectInfo(t, a, "pb-1")["project_alias"], "a refused update changed the project")

	// delete: refused while a key links it (nothing deleted, also not pb-2 listed first)
	projectNew(t, a, map[string]any{"project_id": "pb-2", "team_id": "pb-team"})
	st, body = b.Do(t, "DELETE", "/project/delete", map[string]any{"project_ids": []string{"pb-2", "pb-1"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "Cannot delete project pb-1")
	projectInfo(t, a, "pb-2")
	st, body = a.Do(t, "POST", "/key/delete", map[string]any{"keys": []string{key}})
	require.Equal(t, 200, st, "%s", body)
	st, body = b.Do(t, "DELETE", "/project/delete", map[string]any{"project_ids": []string{"pb-2", "pb-1"}})
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, budgetArray(t, body), 2)
	for _, g := range []*Gateway{a, b} {
		st, body = g.Do(t, "GET", "/project/info?project_id=pb-1", nil)
		require.Equal(t, 404, st, "%s", body)
	}
	st, body = a.Do(t, "DELETE", "/project/delete", map[string]any{"project_ids": []string{}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, string(body), "project_ids")
}

// Keys generated for a project while /project/delete runs on the other replica: every key
// either commits before the delete (which is then refused, naming it) or is refused (the
// project gone) — never a key linking a deleted project (the key write reads the project FOR
// SHARE, the delete locks it FOR UPDATE before looking for keys).
func TestProjectDeleteRacesKeyGenerate(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	a, b := p.A, p.B
	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "pr-team"})
	require.Equal(t, 200, st, "%s", body)
	for round := 0; round < 5; round++ {
		id := "race-" + string(rune('a'+round))
		projectNew(t, a, map[string]any{"project_id": id, "team_id": "pr-team"})
		done := make(chan []int, 1)
		go func() {
			var sts []int
			for i := 0; i < 20; i++ {
				st, _ := a.Do(t, "POST", "/key/generate", map[string]any{"project_id": id})
				sts = append(sts, st)
			}
			done <- sts
		}()
		var deleted bool
		for i := 0; i < 40 && !deleted; i++ {
			st, _ := b.Do(t, "DELETE", "/project/delete", map[string]any{"project_ids": []string{id}})
			require.Contains(t, []int{200, 400}, st)
			deleted = st == 200
		}
		made := 0
		for _, st := range <-done {
			require.Contains(t, []int{200, 400}, st, "a key write for a project being deleted")
			if st == 200 {
				made++
			}
		}
		dangling := agScalar[int64](t, p.DB, `SELECT count(*) FROM gateway.api_keys k WHERE k.litellm_fields->>'project_id' = $1
			AND NOT EXISTS (SELECT 1 FROM gateway.projects p WHERE p.project_id = $1)`, id)
		require.Zero(t, dangling, "round %d: a key links the deleted project %s (%d keys made, deleted %v)", round, id, made, deleted)
		if deleted {
			require.Zero(t, agScalar[int64](t, p.DB, `SELECT count(*) FROM gateway.api_keys WHERE litellm_fields->>'project_id' = $1`, id))
		} else {
			require.Positive(t, made, "the delete was refused, so a key links the project")
		}
	}
}
