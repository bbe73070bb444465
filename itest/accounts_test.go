package itest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// startTrio starts replicas A, B and C on a new database.
func startTrio(t *testing.T) (db string, a, b, c *Gateway) {
	t.Helper()
	db = pgtest.NewDB(t)
	return db, StartGateway(t, db, "a", GatewayOpts{}), StartGateway(t, db, "b", GatewayOpts{}), StartGateway(t, db, "c", GatewayOpts{})
}

// A team made on A with models [m]; a key of that team made on B may use m and nothing else,
// on C at once; the team deleted on A, the key is refused on every replica.
func TestTeamGovernsKeysAcrossReplicas(t *testing.T) {
	t.Parallel()
	db, a, b, c := startTrio(t)
	agNewModel(t, a, "team-m")
	agNewModel(t, a, "team-other")

	st, body := a.Do(t, "POST", "/team/new", map[string]any{"team_alias": "t", "models": []string{"team-m"}, "max_budget": 10})
	require.Equal(t, 200, st, "%s", body)
	team := JSON(t, body)
	teamID := team["team_id"].(string)
	require.NotEmpty(t, teamID)
	require.Equal(t, "t", team["team_alias"])
	require.Equal(t, []string{"team-m"}, agStrs(team["models"]))

	// a key of the team asking for a model outside the team's list is refused at generation
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"team_id": teamID, "models": []string{"team-other"}})
	require.Equal(t, 400, st, "%s", body)

	// a key without its own list gets the team's models
	st, body = b.Do(t, "POST", "/key/generate", map[string]any{"team_id": teamID})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	require.Equal(t, teamID, JSON(t, body)["team_id"])

	st, body = agChat(t, c, key, "team-m")
	require.Equal(t, 200, st, "%s", body)
	st, body = agChat(t, c, key, "team-other")
	require.Equal(t, 401, st, "%s", body)
	typ, msg := agOpenAIError(t, body)
	require.Equal(t, "team_model_access_denied", typ)
	require.Equal(t, "team not allowed to access model. This team can only access models=['team-m']. Tried to access team-other", msg)
	require.Equal(t, []string{"team-m"}, agModels(t, c, key))

	// /team/info on C lists the key, never the raw key
	st, body = c.Do(t, "GET", "/team/info?team_id="+teamID, nil)
	require.Equal(t, 200, st, "%s", body)
	info := JSON(t, body)
	require.Equal(t, "t", info["team_info"].(map[string]any)["team_alias"])
	require.Len(t, info["keys"], 1)
	require.NotContains(t, string(body), key)

	// a widened team list is honoured on C at once
	st, body = a.Do(t, "POST", "/team/update", map[string]any{"team_id": teamID, "models": []string{"team-m", "team-other"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = agChat(t, c, key, "team-other")
	require.Equal(t, 200, st, "%s", body)

	// blocked on A: refused on B; unblocked: served again
	st, body = a.Do(t, "POST", "/team/block", map[string]any{"team_id": teamID})
	require.Equal(t, 200, st, "%s", body)
	st, body = agChat(t, a, key, "team-m")
	require.Equal(t, 401, st, "writer-local apply: %s", body)
	require.Equal(t, "Authentication Error, team "+teamID+" is blocked.", func() string { _, m := agOpenAIError(t, body); return m }())
	Eventually(t, "B refuses the blocked team's key", func() bool { st, _ := agChat(t, b, key, "team-m"); return st == 401 })
	st, body = a.Do(t, "POST", "/team/unblock", map[string]any{"team_id": teamID})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "B serves the unblocked team's key", func() bool { st, _ := agChat(t, b, key, "team-m"); return st == 200 })

	// deleted on A: refused everywhere, at once
	st, body = a.Do(t, "POST", "/team/delete", map[string]any{"team_ids": []string{teamID}})
	require.Equal(t, 200, st, "%s", body)
	st, body = agChat(t, a, key, "team-m")
	require.Equal(t, 401, st, "writer-local apply: %s", body)
	for _, g := range []*Gateway{b, c} {
		Eventually(t, "replica "+g.ReplicaID+" refuses the deleted team's key", func() bool { st, _ := agChat(t, g, key, "team-m"); return st == 401 })
	}
	require.Zero(t, agScalar[int64](t, db, "SELECT count(*) FROM gateway.api_keys WHERE team_id = $1", teamID), "the team's keys go with it")

	st, body = b.Do(t, "GET", "/team/info?team_id="+teamID, nil)
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, "Team not found, passed team_id="+teamID, agDetail(t, body))
}

// A team deleted with psql (not through the gateway) refuses its keys everywhere too.
func TestTeamDeletedWithPSQLRefusesKeys(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	agNewModel(t, p.A, "tp-m")
	PSQL(t, p.DB, `INSERT INTO gateway.teams (team_id, models) VALUES ('tp', '{tp-m}')`)
	st, body := p.A.Do(t, "POST", "/key/generate", map[string]any{"team_id": "tp"})
	require.Equal(t, 200, st, "%s", body)
	key := JSON(t, body)["key"].(string)
	st, body = agChat(t, p.B, key, "tp-m")
	require.Equal(t, 200, st, "%s", body)
	PSQL(t, p.DB, `DELETE FROM gateway.teams WHERE team_id = 'tp'`)
	for _, g := range []*Gateway{p.A, p.B} {
		Eventually(t, "key of the deleted team refused on "+g.ReplicaID, func() bool {
			st, _ := agChat(t, g, key, "tp-m")
			return st == 401
		})
	}
	st, body = agChat(t, p.A, key, "tp-m")
	require.Equal(t, 401, st, "%s", body)
	require.Contains(t, string(body), "team tp of this key does not exist")
}

// Team members, users with keys, organizations and end users: the management routes.
func TestAccountRoutes(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	agNewModel(t, p.A, "acc-m")

	st, body := p.A.Do(t, "POST", "/organization/new", map[string]any{"organization_alias": "org", "models": []string{"acc-m"}})
	require.Equal(t, 200, st, "%s", body)
	orgID := JSON(t, body)["organization_id"].(string)

	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-team", "organization_id": orgID,
		"members_with_roles": []map[string]any{{"user_id": "alice", "role": "admin"}}})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-team"})
	require.Equal(t, 400, st, "%s", body)
	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_alias": "x", "organization_id": "nope"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "Organization not found, passed organization_id=nope", agDetail(t, body))

	// unknown field: 400 naming it, nothing stored
	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-bad", "modles": []string{"x"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, agDetail(t, body), `unknown field "modles"`)
	require.Zero(t, agScalar[int64](t, p.DB, "SELECT count(*) FROM gateway.teams WHERE team_id = 'acc-bad'"))
	st, body = p.A.Do(t, "POST", "/team/new", map[string]any{"team_id": "acc-bad", "max_budget": "ten"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "max_budget must be a number >= 0", agDetail(t, body))

	// members: add, duplicate, role, delete
	st, body = p.B.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "acc-team", "member": map[string]any{"user_id": "bob", "role": "user"}})
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, JSON(t, body)["members_with_roles"], 2)
	st, body = p.B.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "acc-team", "member": map[string]any{"user_id": "bob", "role": "user"}})
	require.Equal(t, 400, st, "%s", body)
	st, body = p.B.Do(t, "POST", "/team/member_add", map[string]any{"team_id": "acc-team", "member": map[string]any{"user_id": "carol", "role": "owner"}})
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, agDetail(t, body), "not a team role")
	st, body = p.A.Do(t, "POST", "/team/member_delete", map[string]any{"team_id": "acc-team", "user_id": "bob"})
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, JSON(t, body)["members_with_roles"], 1)
	st, body = p.A.Do(t, "POST", "/team/member_delete", map[string]any{"team_id": "acc-team", "user_id": "bob"})
	require.Equal(t, 400, st, "%s", body)

	// the organization lists its team
	st, body = p.B.Do(t, "GET", "/organization/info?organization_id="+orgID, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Len(t, JSON(t, body)["teams"], 1)

	// /user/new answers with a key for the user; the user's models bind it
	st, body = p.A.Do(t, "POST", "/user/new", map[string]any{"user_id": "u1", "max_budget": 5, "models": []string{"acc-m"}, "teams": []string{"acc-team"}})
	require.Equal(t, 200, st, "%s", body)
	u := JSON(t, body)
	key := u["key"].(string)
	require.Equal(t, "u1", u["user_id"])
	require.EqualValues(t, 5, u["max_budget"])
	st, body = agChat(t, p.B, key, "acc-m")
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "GET", "/user/info?user_id=u1", nil)
	require.Equal(t, 200, st, "%s", body)
	ui := JSON(t, body)
	require.Len(t, ui["keys"], 1)
	require.Len(t, ui["teams"], 1)
	st, body = p.B.Do(t, "GET", "/user/list", nil)
	require.Equal(t, 200, st, "%s", body)
	require.EqualValues(t, 3, JSON(t, body)["total"]) // alice and bob (created as members) and u1

	// deleting the user deletes its keys, on every replica
	st, body = p.B.Do(t, "POST", "/user/delete", map[string]any{"user_ids": []string{"u1"}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A refuses the deleted user's key", func() bool { st, _ := agChat(t, p.A, key, "acc-m"); return st == 401 })

	// end users: /end_user/new and the /customer/* names
	st, body = p.A.Do(t, "POST", "/end_user/new", map[string]any{"user_id": "customer-1", "max_budget": 1, "rpm_limit": 10})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.B.Do(t, "GET", "/customer/info?end_user_id=customer-1", nil)
	require.Equal(t, 200, st, "%s", body)
	require.EqualValues(t, 10, JSON(t, body)["litellm_budget_table"].(map[string]any)["rpm_limit"])
	// a blocked end user (the body's "user") is refused on every replica
	chatAs := func(g *Gateway, user string) int {
		st, _ := g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "acc-m", "user": user,
			"messages": []map[string]any{{"role": "user", "content": "hi"}}})
		return st
	}
	require.Equal(t, 200, chatAs(p.A, "customer-1"))
	st, body = p.A.Do(t, "POST", "/customer/block", map[string]any{"user_ids": []string{"customer-1"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, 403, chatAs(p.A, "customer-1"))
	Eventually(t, "B refuses the blocked end user", func() bool { return chatAs(p.B, "customer-1") == 403 })
	require.Equal(t, 200, chatAs(p.B, "customer-2"), "an unknown end user is served")
	st, body = p.B.Do(t, "POST", "/end_user/unblock", map[string]any{"user_ids": []string{"customer-1"}})
	require.Equal(t, 200, st, "%s", body)
	Eventually(t, "A serves the unblocked end user", func() bool { return chatAs(p.A, "customer-1") == 200 })

	st, body = p.A.Do(t, "POST", "/customer/new", map[string]any{"alias": "no id"})
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "user_id is required", agDetail(t, body))
	st, body = p.B.Do(t, "POST", "/customer/delete", map[string]any{"user_ids": []string{"customer-1"}})
	require.Equal(t, 200, st, "%s", body)
	st, body = p.A.Do(t, "GET", "/customer/info?end_user_id=customer-1", nil)
	require.Equal(t, 404, st, "%s", body)

	// the registries are on /sync/lag
	reg := p.B.SyncLag(t)["registries"].(map[string]any)
	for _, n := range []string{"teams", "users", "organizations", "end_users"} {
		require.Contains(t, reg, n)
	}
}
