package notify_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// ownPathSpy counts what a replica sends on its own heartbeat path, as another session sees
// it: listen, NOTIFYs on gateway_hb_<replica> heard by a second LISTEN connection; logical,
// logical decoding messages with the prefix lockstep_hb_<replica> decoded by a temporary
// test_decoding slot of its own. take returns how many arrived since the last call.
func ownPathSpy(t *testing.T, b *bundle, replicaID string) (take func() int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	if b.source == notify.SourceLogical {
		slot := fmt.Sprintf("spy_%08x", rand.Uint32())
		_, err := conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'test_decoding', true)`, slot)
		require.NoError(t, err)
		return func() int {
			var n int
			require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_logical_slot_get_changes($1, NULL, NULL)
				WHERE data LIKE 'message:%prefix: lockstep_hb_' || $2 || ',%'`, slot, replicaID).Scan(&n))
			return n
		}
	}
	_, err = conn.Exec(ctx, "LISTEN gateway_hb_"+replicaID)
	require.NoError(t, err)
	return func() int {
		n := 0
		for {
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				require.True(t, pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded), "spy: %v", err)
				return n
			}
			n++
		}
	}
}

// TestIdleLivenessProbeWakesNoOtherSession: an idle replica proves its change-feed connection
// alive by a probe on that connection (listen: SELECT 1; logical: a standby status update the
// walsender answers), never by a NOTIFY or WAL message that every other listener in the
// database is woken by or every walsender decodes (issue 22: R² wake-ups at R replicas).
// Over ten probe intervals the probes are answered and nothing arrives on the replica's own
// path; a barrier (on demand) still does send one token there.
func TestIdleLivenessProbeWakesNoOtherSession(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		spy := ownPathSpy(t, b, "a")
		r := startReplica(t, b, "a", nil) // probe every 200 ms
		waitFor(t, "probe round trip measured", func() bool { return r.syncer.Stats().HeartbeatRTTMs > 0 })
		spy() // the listen source's one delivery check at session start, if any
		probes := r.syncer.Stats().LivenessProbes
		waitFor(t, "ten probes answered", func() bool { return r.syncer.Stats().LivenessProbes >= probes+10 })
		require.Equal(t, notify.StateStreaming, r.syncer.State())
		require.Zero(t, spy(), "an idle replica sent on its own heartbeat path")
		require.Zero(t, r.syncer.Stats().Reconnects)

		require.NoError(t, r.syncer.Barrier(context.Background()))
		require.Equal(t, 1, spy(), "a barrier round sends one token")
	})
}
