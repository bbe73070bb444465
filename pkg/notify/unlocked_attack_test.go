package notify_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
	"lockstep/pkg/store"
)

// staleStore returns a change-log page late, once armed: the page is read, then held for a
// while (a slow network), so that the catch-up applies a snapshot older than what the listen
// session applied inline meanwhile (catchUpNow reads the log with applyMu released).
type staleStore struct {
	notify.Store
	armed         atomic.Bool
	started, done chan struct{}
	after         atomic.Int64 // reads that began after the held page was released
}

func (s *staleStore) ChangesSince(ctx context.Context, wm uint64, after int64, limit int) (store.ChangeBatch, error) {
	select {
	case <-s.done:
		s.after.Add(1)
	default:
	}
	b, err := s.Store.ChangesSince(ctx, wm, after, limit)
	if err == nil && len(b.Changes) > 0 && s.armed.CompareAndSwap(true, false) {
		close(s.started)
		time.Sleep(1500 * time.Millisecond)
		close(s.done)
	}
	return b, err
}

// Attack on the unlocked change-log read: while a poll holds a stale page (an insert of a
// row), the row is updated and deleted and both are applied inline; the poll's page, applied
// afterwards, must not bring the row back (version guard, tombstone).
func TestStalePollPageDoesNotResurrectARowDeletedInline(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	ss := &staleStore{started: make(chan struct{}), done: make(chan struct{})}
	r := startReplica(t, b, "a", func(c *notify.Config) {
		ss.Store = c.Store
		c.Store, c.PollInterval, c.PollGrace, c.ReconcileInterval = ss, 50*time.Millisecond, time.Millisecond, time.Hour
	})
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('x', 'g')`)
	waitFor(t, "x applied", func() bool { _, ok := r.get("x"); return ok })
	ss.armed.Store(true) // the next page with changes (the insert of x, or later) is held
	select {
	case <-ss.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no poll read the change log")
	}
	exec(t, b.admin, `UPDATE gateway.models SET model_name = 'h' WHERE model_id = 'x'`)
	exec(t, b.admin, `DELETE FROM gateway.models WHERE model_id = 'x'`)
	waitFor(t, "the delete applied inline", func() bool { _, ok := r.get("x"); return !ok })
	<-ss.done
	// the stale page applied, and two polls after it
	waitFor(t, "polls after the stale page", func() bool { return ss.after.Load() >= 2 })
	_, ok := r.get("x")
	require.False(t, ok, "the stale page resurrected a deleted row")
	require.Zero(t, r.models.ApplyErrors())
}
