package itest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// general_settings.maximum_spend_logs_retention_period: two replicas prune the spend logs older
// than the period (here every second), keep the newer ones and the spend totals, and count
// what they deleted in lockstep_spend_logs_total{outcome="pruned"}.
func TestSpendLogRetentionConfig(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	cfg := "general_settings:\n  maximum_spend_logs_retention_period: \"1d\"\n  maximum_spend_logs_retention_interval: \"1s\"\n"
	a := StartGateway(t, db, "a", GatewayOpts{Config: cfg})
	b := StartGateway(t, db, "b", GatewayOpts{Config: cfg})
	govMockModel(t, a, "ret-m", map[string]any{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002})
	key, token := govKey(t, a, nil)
	for range 3 {
		st, _, body := govDo(t, b, key, "ret-m", "hi")
		require.Equal(t, 200, st, "%s", body)
	}
	Eventually(t, "the calls' logs are written", func() bool {
		return agScalar[int64](t, db, "SELECT count(*) FROM gateway.spend_logs WHERE api_key = $1", token) == 3
	})
	// 2500 logs from ten days ago (more than two prune batches)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO gateway.spend_logs (request_id, api_key, call_type, model, spend, start_time, end_time)
		SELECT 'old-' || i, $1, '/chat/completions', 'ret-m', 0.001, now() - interval '10 days', now() - interval '10 days'
		FROM generate_series(1, 2500) i`, token)
	require.NoError(t, err)

	Eventually(t, "the old logs are pruned", func() bool {
		return agScalar[int64](t, db, "SELECT count(*) FROM gateway.spend_logs WHERE request_id LIKE 'old-%'") == 0
	})
	require.EqualValues(t, 3, agScalar[int64](t, db, "SELECT count(*) FROM gateway.spend_logs WHERE api_key = $1", token), "the recent logs are kept")
	require.InDelta(t, 0.15, agScalar[float64](t, db, "SELECT spend FROM gateway.key_spend WHERE token = $1", token), 1e-9, "spend total unchanged")
	var pruned float64
	for _, g := range []*Gateway{a, b} {
		st, body := g.Do(t, "GET", "/metrics", nil)
		require.Equal(t, 200, st)
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, `lockstep_spend_logs_total{outcome="pruned"} `); ok {
				f, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				pruned += f
			}
		}
	}
	require.EqualValues(t, 2500, pruned, "every old log deleted once, by one replica or the other")
}
