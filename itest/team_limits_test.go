package itest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// limitedCalls sends n chat calls with the keys in turn, spread over the replicas, and returns
// how many were admitted; every refusal must be a 429 whose message starts with want and that
// carries Retry-After.
func limitedCalls(t *testing.T, c *govCluster, keys []string, model string, n int, want string) int {
	t.Helper()
	return countAdmitted(t, n, want, func(i int) (int, http.Header, []byte) {
		return govDo(t, c.G[i%len(c.G)], keys[i%len(keys)], model, "hi")
	})
}

// countAdmitted makes n calls (call(i) returns the status, the answer's headers or nil, and
// the body) and returns how many were admitted (200); every other answer must be a 429
// rate_limit_error whose message starts with want, with Retry-After when headers are given.
func countAdmitted(t *testing.T, n int, want string, call func(i int) (int, http.Header, []byte)) int {
	t.Helper()
	admitted := 0
	for i := range n {
		st, h, b := call(i)
		switch st {
		case 200:
			admitted++
		case 429:
			typ, msg := agOpenAIError(t, b)
			require.Equal(t, "rate_limit_error", typ)
			require.True(t, strings.HasPrefix(msg, want), msg)
			if h != nil {
				require.NotEmpty(t, h.Get("Retry-After"))
			}
		default:
			t.Fatalf("status %d: %s", st, b)
		}
	}
	return admitted
}

// Rate limits above the key hold across three replicas together: a team's rpm_limit and
// tpm_limit over the keys of the team, a team member's rpm_limit within the team
// (/team/member_update) over that member's keys only, an internal user's rpm_limit over the
// user's keys, and an organization's rpm_limit over the keys of its teams. The mock reports 30 tokens per call.
func TestTeamAndOrganizationRateLimitsAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	a, b, cc := c.G[0], c.G[1], c.G[2]
	govMockModel(t, a, "tl-m", nil)
	newTeam := func(g *Gateway, body map[string]any) {
		st, out := g.Do(t, "POST", "/team/new", body)
		require.Equal(t, 200, st, "%s", out)
	}

	// team rpm_limit 3: two keys of the team on different replicas share it
	newTeam(a, map[string]any{"team_id": "tl-rpm", "rpm_limit": 3})
	k1, _ := govKey(t, b, map[string]any{"team_id": "tl-rpm"})
	k2, _ := govKey(t, cc, map[string]any{"team_id": "tl-rpm"})
	got := limitedCalls(t, c, []string{k1, k2}, "tl-m", 12, "Rate limit exceeded for team: tl-rpm. Limit type: requests. Current limit: 3")
	require.LessOrEqual(t, got, 3, "never more than the team's rpm_limit across the replicas")
	require.GreaterOrEqual(t, got, 1)
	// a key of another team is not limited by it
	newTeam(b, map[string]any{"team_id": "tl-free"})
	kf, _ := govKey(t, a, map[string]any{"team_id": "tl-free"})
	require.Equal(t, 6, limitedCalls(t, c, []string{kf}, "tl-m", 6, "-"))

	// team tpm_limit 60: 30 tokens a call, sequential calls round the replicas. The limiter
	// reserves a call's estimated tokens at admission (1 before a replica has seen a call, then
	// the recent average capped at a quarter of the limit) and debits the reported tokens after
	// it, so the team's window overshoots by at most about one call per replica; then every
	// replica refuses.
	newTeam(cc, map[string]any{"team_id": "tl-tpm", "tpm_limit": 60})
	kt, _ := govKey(t, a, map[string]any{"team_id": "tl-tpm"})
	got = limitedCalls(t, c, []string{kt}, "tl-m", 8, "Rate limit exceeded for team: tl-tpm. Limit type: tokens. Current limit: 60")
	t.Logf("team tpm_limit 60: %d calls of 30 tokens admitted", got)
	require.LessOrEqual(t, got*30, 60+len(c.G)*30, "tokens overshoot by at most one call per replica")
	require.GreaterOrEqual(t, got, 2)
	for _, g := range c.G {
		st, _, body := govDo(t, g, kt, "tl-m", "hi")
		require.Equal(t, 429, st, "%s: %s", g.ReplicaID, body)
	}

	// team member rpm_limit 2 within the team: the member's keys share it, another member's
	// keys of the same team do not
	newTeam(a, map[string]any{"team_id": "tl-mem", "members_with_roles": []map[string]any{{"user_id": "tl-u1", "role": "user"}, {"user_id": "tl-u2", "role": "user"}}})
	st, out, tok := b.doToken(t, "", "POST", "/team/member_update", map[string]any{"team_id": "tl-mem", "user_id": "tl-u1", "rpm_limit": 2})
	require.Equal(t, 200, st, "%s", out)
	require.EqualValues(t, 2, JSON(t, out)["rpm_limit"])
	for _, g := range c.G { // every replica has applied the membership's limit
		st, out, _ := g.doToken(t, tok, "GET", "/v1/models", nil)
		require.Equal(t, 200, st, "%s", out)
	}
	m1, _ := govKey(t, a, map[string]any{"team_id": "tl-mem", "user_id": "tl-u1"})
	m2, _ := govKey(t, cc, map[string]any{"team_id": "tl-mem", "user_id": "tl-u1"})
	got = limitedCalls(t, c, []string{m1, m2}, "tl-m", 9, "Rate limit exceeded for team_member: tl-mem:tl-u1. Limit type: requests. Current limit: 2")
	require.LessOrEqual(t, got, 2)
	require.GreaterOrEqual(t, got, 1)
	o1, _ := govKey(t, b, map[string]any{"team_id": "tl-mem", "user_id": "tl-u2"})
	require.Equal(t, 4, limitedCalls(t, c, []string{o1}, "tl-m", 4, "-"))

	// internal user rpm_limit 2 over two of the user's keys
	st, out = cc.Do(t, "POST", "/user/new", map[string]any{"user_id": "tl-user", "rpm_limit": 2})
	require.Equal(t, 200, st, "%s", out)
	u1 := JSON(t, out)["key"].(string)
	u2, _ := govKey(t, a, map[string]any{"user_id": "tl-user"})
	got = limitedCalls(t, c, []string{u1, u2}, "tl-m", 9, "Rate limit exceeded for user: tl-user. Limit type: requests. Current limit: 2")
	require.LessOrEqual(t, got, 2)
	require.GreaterOrEqual(t, got, 1)

	// organization rpm_limit 2 over the keys of two of its teams
	st, out = a.Do(t, "POST", "/organization/new", map[string]any{"organization_id": "tl-org", "rpm_limit": 2})
	require.Equal(t, 200, st, "%s", out)
	newTeam(b, map[string]any{"team_id": "tl-ot1", "organization_id": "tl-org"})
	newTeam(cc, map[string]any{"team_id": "tl-ot2", "organization_id": "tl-org"})
	x1, _ := govKey(t, a, map[string]any{"team_id": "tl-ot1"})
	x2, _ := govKey(t, b, map[string]any{"team_id": "tl-ot2"})
	got = limitedCalls(t, c, []string{x1, x2}, "tl-m", 9, "Rate limit exceeded for organization: tl-org. Limit type: requests. Current limit: 2")
	require.LessOrEqual(t, got, 2)
	require.GreaterOrEqual(t, got, 1)
}

// A key limited only through its team answers with the team's x-ratelimit-* headers (the
// tightest of the key's and its owners' limits, as LiteLLM's limiter reports), on a replica
// other than the one that made the team; a key with no limit anywhere carries none.
func TestTeamLimitedKeyCarriesRateLimitHeaders(t *testing.T) {
	t.Parallel()
	c := startGovCluster(t, "GATEWAY_LIMIT_WINDOW=1h")
	a, b := c.G[0], c.G[1]
	govMockModel(t, a, "tlh-m", nil)
	st, out := a.Do(t, "POST", "/team/new", map[string]any{"team_id": "tlh", "rpm_limit": 100, "tpm_limit": 100000})
	require.Equal(t, 200, st, "%s", out)
	k, _ := govKey(t, b, map[string]any{"team_id": "tlh"})
	st, h, body := govDo(t, b, k, "tlh-m", "hi")
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "100", h.Get("x-ratelimit-limit-requests"))
	require.NotEmpty(t, h.Get("x-ratelimit-remaining-requests"))
	require.Equal(t, "100000", h.Get("x-ratelimit-limit-tokens"))
	free, _ := govKey(t, b, map[string]any{})
	st, h, body = govDo(t, b, free, "tlh-m", "hi")
	require.Equal(t, 200, st, "%s", body)
	require.Empty(t, h.Get("x-ratelimit-limit-requests"))
}
