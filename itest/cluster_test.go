package itest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

type clusterView struct {
	Converged bool     `json:"converged"`
	MaxLagMs  *float64 `json:"max_lag_ms"`
	Replicas  []struct {
		ReplicaID string `json:"replica_id"`
		Addr      string `json:"addr"`
		Source    string `json:"source"`
		State     string `json:"state"`
		Applied   *int64 `json:"applied"`
		LagMs     *struct {
			P50 *float64 `json:"p50"`
			P99 *float64 `json:"p99"`
		} `json:"lag_ms"`
		HeartbeatAgeMs *float64 `json:"heartbeat_age_ms"`
		Version        string   `json:"version"`
		StartedAt      string   `json:"started_at"`
		Stale          bool     `json:"stale"`
	} `json:"replicas"`
}

func (g *Gateway) cluster(t testing.TB) clusterView {
	t.Helper()
	st, b := g.Do(t, "GET", "/sync/cluster", nil)
	require.Equal(t, 200, st, "%s", b)
	var v clusterView
	require.NoError(t, json.Unmarshal(b, &v), "%s", b)
	return v
}

func (v clusterView) stale(id string) bool {
	for _, r := range v.Replicas {
		if r.ReplicaID == id {
			return r.Stale
		}
	}
	return false
}

func metricsText(t testing.TB, g *Gateway) string {
	t.Helper()
	resp, err := http.Get(g.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestClusterView (issue 10): three replicas report converged at rest with every field of
// API.md; one SIGSTOPped is reported stale (and converged false) once silent > 10 s, on the
// JSON view and the Prometheus gauges of the others; after SIGCONT it is back and converged.
func TestClusterView(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	a := StartGateway(t, db, "a", GatewayOpts{})
	_ = StartGateway(t, db, "b", GatewayOpts{})
	c := StartGateway(t, db, "c", GatewayOpts{})
	st, b := a.Do(t, "POST", "/model/new", map[string]any{"model_name": "m", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"}})
	require.Equal(t, 200, st, "%s", b)

	// converged on the model write (rows written at the streaming transition already agree on
	// the position before it; the 2 s tick carries the new one)
	Eventually(t, "three replicas converged past the write", func() bool {
		v := a.cluster(t)
		return len(v.Replicas) == 3 && v.Converged && v.Replicas[0].Applied != nil && *v.Replicas[0].Applied > 0
	})
	v := a.cluster(t)
	require.NotNil(t, v.MaxLagMs)
	for _, r := range v.Replicas {
		require.False(t, r.Stale)
		require.Equal(t, "streaming", r.State)
		require.Equal(t, "listen", r.Source)
		require.True(t, strings.HasPrefix(r.Addr, "127.0.0.1:"), r.Addr)
		require.NotEmpty(t, r.Version)
		_, err := time.Parse(time.RFC3339Nano, r.StartedAt)
		require.NoError(t, err)
		require.NotNil(t, r.Applied)
		require.Greater(t, *r.Applied, int64(0))
		require.NotNil(t, r.LagMs)
		require.NotNil(t, r.LagMs.P50)
		require.NotNil(t, r.LagMs.P99)
		require.NotNil(t, r.HeartbeatAgeMs)
		require.Less(t, *r.HeartbeatAgeMs, 10000.0)
	}

	require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
	defer c.cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck
	require.Eventually(t, func() bool { v := a.cluster(t); return v.stale("c") && !v.Converged }, 30*time.Second, 100*time.Millisecond,
		"c reported stale and the cluster not converged")
	require.Eventually(t, func() bool {
		m := metricsText(t, a)
		return strings.Contains(m, `lockstep_cluster_replica_stale{replica_id="c"} 1`) && strings.Contains(m, "lockstep_cluster_converged 0")
	}, 10*time.Second, 100*time.Millisecond, "gauges show c stale")

	require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool { v := a.cluster(t); return !v.stale("c") && v.Converged && len(v.Replicas) == 3 }, 30*time.Second, 100*time.Millisecond,
		"c back and the cluster converged")
	require.Eventually(t, func() bool {
		m := metricsText(t, a)
		return strings.Contains(m, `lockstep_cluster_replica_stale{replica_id="c"} 0`) && strings.Contains(m, "lockstep_cluster_converged 1")
	}, 10*time.Second, 100*time.Millisecond, "gauges show c back")
}

// Issue 23 ("The cluster view is current"): a replica writes its gateway.replicas row at every
// change-feed state change, not only on its timer. With the timer set to an hour, only the
// transition writes can make /sync/cluster right: as soon as both replicas answer readiness
// and /sync/lag says streaming, /sync/cluster lists both streaming, at the applied position
// their /sync/lag reports, and converged (before the fix: starting, applied 0, converged false
// until the next tick).
func TestClusterViewCurrentAtStateChange(t *testing.T) {
	t.Parallel()
	db := pgtestNewMigratedDB(t)
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('cv', 'cv', '{"model": "openai/x", "mock_response": "hi"}')`)
	o := GatewayOpts{Env: []string{"GATEWAY_CLUSTER_INTERVAL=1h"}, Args: []string{"--no-migrate"}}
	a := StartGateway(t, db, "a", o)
	b := StartGateway(t, db, "b", o)
	applied := map[string]int64{}
	for _, g := range []*Gateway{a, b} {
		Eventually(t, g.ReplicaID+" streaming", func() bool { return g.SyncLag(t)["state"] == "streaming" })
		applied[g.ReplicaID] = int64(g.SyncLag(t)["applied_seq"].(float64))
		require.Positive(t, applied[g.ReplicaID])
	}
	Eventually(t, "both listed streaming and converged", func() bool {
		v := a.cluster(t)
		if len(v.Replicas) != 2 || !v.Converged {
			return false
		}
		for _, r := range v.Replicas {
			if r.State != "streaming" || r.Applied == nil || *r.Applied != applied[r.ReplicaID] {
				return false
			}
		}
		return true
	})
}

// Issue 23 ("The cluster view is current"): a reconnect (streaming → reconnecting →
// catching_up → streaming) rewrites the replica's row, tick or not: with the timer at an hour,
// its heartbeat_at moves once the listener connection is killed and the feed streams again.
func TestClusterRowWrittenOnReconnect(t *testing.T) {
	t.Parallel()
	db := pgtestNewMigratedDB(t)
	a := StartGateway(t, db, "a", GatewayOpts{Env: []string{"GATEWAY_CLUSTER_INTERVAL=1h"}, Args: []string{"--no-migrate"}})
	Eventually(t, "a listed streaming", func() bool {
		v := a.cluster(t)
		return len(v.Replicas) == 1 && v.Replicas[0].State == "streaming"
	})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	heartbeat := func() (hb time.Time) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT heartbeat_at FROM gateway.replicas WHERE replica_id = 'a'`).Scan(&hb))
		return hb
	}
	before := heartbeat()
	var killed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'lockstep-listener-a'`).Scan(&killed))
	require.Equal(t, 1, killed)
	Eventually(t, "a reconnected and streaming", func() bool {
		l := a.SyncLag(t)
		return l["reconnects"].(float64) >= 1 && l["state"] == "streaming"
	})
	Eventually(t, "the row rewritten after the reconnect", func() bool { return heartbeat().After(before) })
	// the reconnecting write may land first; with the tick at an hour, only the write at the
	// next state change can bring the row back to streaming
	Eventually(t, "the row back at streaming", func() bool { return a.cluster(t).Replicas[0].State == "streaming" })
}
