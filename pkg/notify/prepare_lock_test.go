package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// A listen session that (re)connects while a registry table is locked (a migration's ALTER
// TABLE, queued behind a long transaction, blocks every read of the table) still reaches
// streaming: preparing and warming the inline re-read's statement at connect is an
// optimisation and must not wait on the lock. Before, the warm-up waited on the lock until
// its 5 s bound, which closed the new connection: the replica stayed reconnecting (failed
// barriers, /sync/lag "reconnecting") for as long as the lock was held, on every replica that
// reconnected meanwhile — although no change to the locked table needed reading.
func TestReconnectWhileARegistryTableIsLocked(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r := startReplica(t, b, "a", func(c *notify.Config) { c.BackoffMin, c.BackoffMax = 50*time.Millisecond, 100*time.Millisecond })
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE gateway.models IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	terminateListener(t, b, r)
	require.Eventually(t, func() bool { return r.syncer.State() == notify.StateStreaming }, 4*time.Second, 5*time.Millisecond,
		"not streaming again within 4 s while gateway.models is locked (state %s)", r.syncer.State())
	require.NoError(t, tx.Rollback(ctx))
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('after-lock', 'g')`)
	waitFor(t, "applied after the lock", func() bool { _, ok := r.get("after-lock"); return ok })
}
