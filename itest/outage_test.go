package itest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/pgcluster"
)

// Static stability: with Postgres down, replicas keep serving what they hold and stay ready;
// management writes fail with a clear 503; /sync/lag shows reconnecting; on return the
// replica catches up and nothing is lost. Runs on its own cluster (it stops the server).
func TestDatabaseOutageStaticStability(t *testing.T) {
	t.Parallel()
	c, err := pgcluster.Start()
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	db, err := c.CreateDB(context.Background(), "outage")
	require.NoError(t, err)
	a := StartGateway(t, db, "a", GatewayOpts{})
	b := StartGateway(t, db, "b", GatewayOpts{})

	st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": "steady", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "still serving"}})
	require.Equal(t, 200, st, "%s", body)
	st, _ = b.Do(t, "POST", "/v1/chat/completions", chatBody("steady", "x", false))
	require.Equal(t, 200, st)

	require.NoError(t, c.Restart(func() {
		Eventually(t, "B notices the outage", func() bool { return b.SyncLag(t)["state"] == "reconnecting" })
		for _, g := range []*Gateway{a, b} {
			st, body := g.Do(t, "POST", "/v1/chat/completions", chatBody("steady", "x", false))
			require.Equal(t, 200, st, "%s keeps serving: %s", g.ReplicaID, body)
		}
		// readiness stays 200 but does not claim a connection the change feed does not have
		Eventually(t, "A notices the outage", func() bool { return a.SyncLag(t)["state"] == "reconnecting" })
		for _, g := range []*Gateway{a, b} {
			st, body := g.DoKey(t, "", "GET", "/health/readiness", nil)
			require.Equal(t, 200, st, "%s stays ready", g.ReplicaID)
			require.Equal(t, "disconnected", JSON(t, body)["db"], "%s: %s", g.ReplicaID, body)
		}
		st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": "lost", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "x"}})
		require.Equal(t, 503, st, "%s", body)
		require.Contains(t, JSON(t, body)["error"].(map[string]any)["message"], "database unavailable")
		// a miss during the outage fails closed and is not negative-cached
		st, _ = b.Do(t, "POST", "/v1/chat/completions", chatBody("unknown-during-outage", "x", false))
		require.Equal(t, 400, st)
	}))

	// after the outage: a write with psql (no gateway on the write path) reaches both
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('after', 'after-outage', '{"model":"openai/x","mock_response":"back"}')`)
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" streams again", func() bool { return g.SyncLag(t)["state"] == "streaming" })
		st, body := g.DoKey(t, "", "GET", "/health/readiness", nil)
		require.Equal(t, 200, st)
		require.Equal(t, "connected", JSON(t, body)["db"], "%s: %s", g.ReplicaID, body)
		Eventually(t, g.ReplicaID+" applies the write made after the outage", func() bool {
			return g.SyncLag(t)["registries"].(map[string]any)["models"].(map[string]any)["count"].(float64) == 2
		})
		st, body = g.Do(t, "POST", "/v1/chat/completions", chatBody("after-outage", "x", false))
		require.Equal(t, 200, st, "%s", body)
	}
	require.GreaterOrEqual(t, b.SyncLag(t)["reconnects"].(float64), 1.0)
	// the refused write left no trace
	st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("lost", "x", false))
	require.Equal(t, 400, st, "%s", body)
}
