package itest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHealthAndAuth(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, b := p.A.DoKey(t, "", "GET", "/health/liveliness", nil)
	require.Equal(t, 200, st)
	require.JSONEq(t, `"I'm alive!"`, string(b))
	st, _ = p.A.DoKey(t, "", "GET", "/model/info", nil)
	require.Equal(t, 401, st)
	st, _ = p.A.DoKey(t, "wrong", "GET", "/model/info", nil)
	require.Equal(t, 401, st)
	lag := p.B.SyncLag(t)
	for _, f := range []string{"replica_id", "source", "state", "applied_seq", "head_seq", "lag_ms", "heartbeat_rtt_ms", "events_applied",
		"apply_errors", "reconnects", "gaps_repaired", "drift_repaired", "read_through", "registries"} {
		require.Contains(t, lag, f)
	}
	require.Equal(t, "b", lag["replica_id"])
	require.Equal(t, "streaming", lag["state"])
}
