package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// /health/readiness says "db": "connected" only while the change feed holds a working
// connection (streaming, catching up, or degraded: connected but without notifications); reconnecting (an outage) or not started yet is
// "disconnected". Readiness itself stays 200 (static stability).
func TestDBStatus(t *testing.T) {
	t.Parallel()
	for st, want := range map[notify.State]string{
		notify.StateStreaming:    "connected",
		notify.StateCatchingUp:   "connected",
		notify.StateDegraded:     "connected",
		notify.StateReconnecting: "disconnected",
		notify.StateStarting:     "disconnected",
	} {
		require.Equal(t, want, dbStatus(st), st)
	}
}
