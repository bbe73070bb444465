package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/pgtest"
)

// Issue 8, input 5: pool settings in DATABASE_URL (pool_max_conns, a pgx setting too) configure
// the pool and never reach the server as session parameters on any connection: the replica
// becomes ready, its change feed streams (LISTEN and logical replication alike), and a write
// made with psql is served by a second replica.
func TestPoolSettingsInDatabaseURLNeverReachTheServer(t *testing.T) {
	t.Parallel()
	for _, source := range []string{"listen", "logical"} {
		t.Run(source, func(t *testing.T) {
			t.Parallel()
			db := pgtest.NewDB(t)
			url := db + "&pool_max_conns=4&pool_min_conns=1&statement_cache_capacity=64"
			o := GatewayOpts{Env: []string{"DATABASE_URL=" + url}, Args: []string{"--sync-source", source}}
			a := StartGateway(t, "", "pool-a", o)
			b := StartGateway(t, "", "pool-b", o)
			for _, g := range []*Gateway{a, b} {
				lag := g.SyncLag(t)
				require.Equal(t, "streaming", lag["state"], "%s: %v", g.ReplicaID, lag)
				require.Equal(t, source, lag["source"])
			}
			PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params)
				VALUES ('pool-1', 'pooled', '{"model":"openai/x","mock_response":"pooled answer"}')`)
			Eventually(t, "the psql write is applied on b", func() bool {
				_, body := b.Do(t, "GET", "/sync/lag", nil)
				return gjson.GetBytes(body, "registries.models.count").Int() == 1
			})
			st, body := b.Do(t, "POST", "/v1/chat/completions", chatBody("pooled", "hi", false))
			require.Equal(t, 200, st, "%s", body)
			require.Contains(t, string(body), "pooled answer")
			st, body = a.Do(t, "POST", "/model/new", map[string]any{"model_name": "via-a",
				"litellm_params": map[string]any{"model": "openai/y", "mock_response": "from a"}})
			require.Equal(t, 200, st, "%s", body)
			st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("via-a", "hi", false))
			require.Equal(t, 200, st, "%s", body)
		})
	}
}
