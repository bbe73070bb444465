package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/store"
)

// build carries each row's registries, apply_errors, request counters and lag sample count
// into the view, and derives db from the state (readiness' rule) or "unknown" when stale.
func TestBuildCarriesReplicaReport(t *testing.T) {
	t.Parallel()
	req := store.RequestCounts{Total: 10, ClientErrors: 2, ServerErrors: 1, RateLimited: 3}
	v := build([]store.ReplicaStatus{
		{ReplicaID: "a", State: "streaming", AppliedSeq: 5, LagSamples: 4, Registries: map[string]int{"models": 3, "keys": 1}, ApplyErrors: 2, Requests: req, HeartbeatAge: time.Second},
		{ReplicaID: "b", State: "reconnecting", AppliedSeq: 5, HeartbeatAge: time.Second},
		{ReplicaID: "c", State: "streaming", AppliedSeq: 4, Registries: map[string]int{"models": 2}, HeartbeatAge: time.Minute},
	}, DefaultStale)
	require.False(t, v.Converged)
	a, b, c := v.Replicas[0], v.Replicas[1], v.Replicas[2]
	require.Equal(t, map[string]Count{"models": {3}, "keys": {1}}, a.Registries)
	require.EqualValues(t, 2, a.ApplyErrors)
	require.Equal(t, req, a.Requests)
	require.EqualValues(t, 4, a.LagMs.Samples)
	require.Equal(t, DBConnected, a.DB)
	require.Equal(t, DBDisconnected, b.DB)
	require.NotNil(t, b.Registries, "an unreported replica has {} registries, not null")
	require.Empty(t, b.Registries)
	require.True(t, c.Stale)
	require.Equal(t, DBUnknown, c.DB)
	require.Equal(t, map[string]Count{"models": {2}}, c.Registries)
}
