package notify_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
	"lockstep/pkg/store"
)

// countingStore counts the feed's re-reads by where they ran — the pool (Reload) or the
// listen connection (ReloadOn) — and makes the next ReloadOn fail once with failOn.
type countingStore struct {
	notify.Store
	pool, onConn atomic.Int64
	failOn       atomic.Pointer[error]
}

func (c *countingStore) Reload(ctx context.Context, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	c.pool.Add(1)
	return c.Store.Reload(ctx, typ, ids)
}

func (c *countingStore) ReloadOn(ctx context.Context, on store.Querier, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	c.onConn.Add(1)
	if e := c.failOn.Swap(nil); e != nil {
		return nil, nil, *e
	}
	return c.Store.ReloadOn(ctx, on, typ, ids)
}

func (c *countingStore) failNext(err error) { c.failOn.Store(&err) }

func startCounting(t *testing.T, b *bundle, id string) (*replica, *countingStore) {
	cs := &countingStore{}
	r := startReplica(t, b, id, func(c *notify.Config) {
		cs.Store = c.Store
		// no change-log poll: whatever is applied was applied from its notification (or by a
		// kick, or by a reconnect's catch-up)
		c.Store, c.PollInterval, c.ReconcileInterval = cs, time.Hour, time.Hour
	})
	return r, cs
}

// With LISTEN/NOTIFY, each notification is re-read on the connection that delivered it, by
// the listen session itself: no hand-off to the applier, no pool re-read (inline.go). The
// logical source's connection streams WAL and cannot run a query: its re-reads stay on the
// pool.
func TestNotificationIsReReadOnTheListenConnection(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r, cs := startCounting(t, b, "a")
		pool0, inline0 := cs.pool.Load(), r.syncer.Stats().EventsInline
		const n = 20
		for i := range n {
			id := fmt.Sprintf("m%d", i)
			exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, id)
			waitFor(t, "applied "+id, func() bool { _, ok := r.get(id); return ok })
		}
		st := r.syncer.Stats()
		if src == notify.SourceListen {
			require.Equal(t, pool0, cs.pool.Load(), "a notification was re-read on the pool")
			require.Equal(t, int64(n), cs.onConn.Load(), "one re-read on the listen connection per notification")
			require.Equal(t, inline0+n, st.EventsInline)
		} else {
			require.Zero(t, cs.onConn.Load(), "the logical source has no connection to re-read on")
			require.GreaterOrEqual(t, cs.pool.Load()-pool0, int64(n))
			require.Zero(t, st.EventsInline)
		}
		require.Zero(t, r.models.ApplyErrors())
		require.Zero(t, st.Reconnects)
	})
}

// An inline re-read that loses the server (store.ErrUnavailable: a timeout, a reset) ends the
// listen session like a failed liveness probe: the replica reconnects, catches up, and the
// change is applied; nothing is lost and nothing counts as an apply error.
func TestInlineReReadLosingTheServerEndsTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r, cs := startCounting(t, b, "a")
	cs.failNext(fmt.Errorf("%w: read tcp: i/o timeout", store.ErrUnavailable))
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('lost', 'g')`)
	waitFor(t, "applied after the reconnect", func() bool { _, ok := r.get("lost"); return ok })
	waitFor(t, "streaming again", func() bool { return r.syncer.State() == notify.StateStreaming })
	st := r.syncer.Stats()
	require.Equal(t, int64(1), st.Reconnects, "the failed re-read ended the session once")
	require.Zero(t, r.models.ApplyErrors())
	require.Nil(t, cs.failOn.Load(), "the failure was injected")

	// and the new session applies inline again
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('after', 'g')`)
	waitFor(t, "applied", func() bool { _, ok := r.get("after"); return ok })
	require.Positive(t, r.syncer.Stats().EventsInline)
}

// An inline re-read that fails with the connection still sound (the server answered with an
// error) keeps the session: the change is left pending and the applier is kicked, which
// re-reads it on the pool at once — not at the next poll, which this replica never runs.
func TestInlineReReadErrorIsRetriedOnThePool(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r, cs := startCounting(t, b, "a")
	pool0 := cs.pool.Load()
	cs.failNext(errors.New("reload models: ERROR: canceling statement due to user request (SQLSTATE 57014)"))
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('retried', 'g')`)
	waitFor(t, "applied by the applier", func() bool { _, ok := r.get("retried"); return ok })
	require.Greater(t, cs.pool.Load(), pool0, "the pending change was re-read on the pool")
	st := r.syncer.Stats()
	require.Zero(t, st.Reconnects, "a server-side error does not end the session")
	require.Zero(t, r.models.ApplyErrors())
	require.Equal(t, notify.StateStreaming, r.syncer.State())
}

// A burst larger than one inline batch (inlineMax) is handed to the applier, which batches it
// (one re-read per type and batch, built on every core): every row arrives, in order with the
// notifications around it, and the listen session only applies small batches itself.
func TestBurstGoesToTheApplier(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r, cs := startCounting(t, b, "a")
	const n = 1000
	exec(t, b.admin, fmt.Sprintf(`INSERT INTO gateway.models (model_id, model_name) SELECT 'b'||g, 'grp' FROM generate_series(1, %d) g`, n))
	exec(t, b.admin, `UPDATE gateway.models SET model_name = 'moved' WHERE model_id = 'b1'`)
	waitFor(t, "every row and the update applied", func() bool {
		e, ok := r.get("b1")
		return r.models.Len() == n && ok && e.Value.Name == "moved"
	})
	st := r.syncer.Stats()
	require.Less(t, st.EventsInline, int64(n), "the burst went through the applier")
	require.Less(t, cs.pool.Load()+cs.onConn.Load(), int64(n/10), "the burst was re-read in batches, not row by row")
	require.Zero(t, r.models.ApplyErrors())
	require.Zero(t, st.Reconnects)
	require.Zero(t, st.Dropped)
}
