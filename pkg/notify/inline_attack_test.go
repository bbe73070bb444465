package notify_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
	"lockstep/pkg/store"
)

// A notification whose row is locked (a migration's ALTER TABLE, queued behind a long
// transaction, blocks every read of the table) makes the inline re-read wait on the lock. A
// wait on a lock is not a dead connection: the listen session must survive it (the change is
// re-read once the lock is gone), as it did when every re-read ran on the pool. Failing the
// re-read at probeTimeout closed the healthy LISTEN connection: a reconnect, reconnecting state
// (failed barriers) and a catch-up that waits on the same lock, on every replica at once.
func TestInlineReReadWaitingOnALockKeepsTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r := startReplica(t, b, "a", nil) // probeTimeout 1.3 s
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, b.url)
	require.NoError(t, err)
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `LOCK TABLE gateway.models IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	// a change committed just before the lock was taken: its notification arrives while the
	// lock is held (a notification is all the feed needs to re-read the row)
	exec(t, b.admin, `SELECT pg_notify('gateway_registry', $1)`,
		fmt.Sprintf(`{"seq":%d,"type":"model","op":"insert","id":"locked","v":1}`, 1<<40))
	time.Sleep(2500 * time.Millisecond) // longer than probeTimeout, shorter than a pool re-read's 5 s
	require.NoError(t, tx.Rollback(ctx))
	// the session goes on applying: a write after the lock arrives, with no reconnect between
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('after-lock', 'g')`)
	waitFor(t, "a write after the lock applied", func() bool { _, ok := r.get("after-lock"); return ok })
	st := r.syncer.Stats()
	require.Zero(t, st.Reconnects, "a re-read waiting on a lock ended a healthy listen session")
	require.Equal(t, notify.StateStreaming, st.State)
}

// freezingStore SIGSTOPs the listen backend (pid) just before the next inline re-read is sent,
// once armed: the re-read is in flight on a frozen backend.
type freezingStore struct {
	notify.Store
	pid    atomic.Int64
	frozen atomic.Int64 // unix nanos of the freeze
}

func (f *freezingStore) ReloadOn(ctx context.Context, on store.Querier, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	if pid := f.pid.Swap(0); pid != 0 {
		_ = syscall.Kill(int(pid), syscall.SIGSTOP)
		f.frozen.Store(time.Now().UnixNano())
	}
	return f.Store.ReloadOn(ctx, on, typ, ids)
}

// A backend frozen while it owes the answer to an inline re-read (SIGSTOP; a hung host, a
// half-open connection) is detected within HeartbeatTimeout of its last message, as by the
// liveness probe: the session ends, reconnects and catches up.
func TestFrozenBackendDuringInlineReReadIsDetected(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	fs := &freezingStore{}
	r := startReplica(t, b, "a", func(c *notify.Config) { fs.Store = c.Store; c.Store = fs })
	pid := listenerPID(t, b, r.id)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	fs.pid.Store(int64(pid))
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('frozen', 'g')`)
	waitFor(t, "silence detected", func() bool { return r.syncer.State() != notify.StateStreaming })
	took := time.Since(time.Unix(0, fs.frozen.Load()))
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	require.Less(t, took, 1500*time.Millisecond+300*time.Millisecond, "detected later than HeartbeatTimeout")
	waitFor(t, "applied after the reconnect", func() bool { _, ok := r.get("frozen"); return ok })
	waitFor(t, "streaming again", func() bool { return r.syncer.State() == notify.StateStreaming })
}

// killingStore terminates the listen backend (pid) just before the next inline re-read, once
// armed: the re-read is answered with FATAL 57P01 and a closed connection.
type killingStore struct {
	notify.Store
	admin *pgx.Conn
	pid   atomic.Int64
}

func (k *killingStore) ReloadOn(ctx context.Context, on store.Querier, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	if pid := k.pid.Swap(0); pid != 0 {
		_, _ = k.admin.Exec(context.Background(), `SELECT pg_terminate_backend($1::int, 1000)`, pid)
	}
	return k.Store.ReloadOn(ctx, on, typ, ids)
}

// A listen backend killed while it owes an inline re-read ends the session at once; the
// reconnect's catch-up applies the change, and nothing counts as an apply error.
func TestKilledBackendDuringInlineReReadReconnects(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	admin, err := pgx.Connect(context.Background(), b.url)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	ks := &killingStore{admin: admin}
	r := startReplica(t, b, "a", func(c *notify.Config) { ks.Store = c.Store; c.Store = ks })
	ks.pid.Store(int64(listenerPID(t, b, r.id)))
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('killed', 'g')`)
	waitFor(t, "applied after the reconnect", func() bool { _, ok := r.get("killed"); return ok })
	waitFor(t, "reconnected", func() bool { return r.syncer.Stats().Reconnects == 1 })
	require.Zero(t, r.models.ApplyErrors())
	waitFor(t, "streaming again", func() bool { return r.syncer.State() == notify.StateStreaming })
}
