package notify_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
	"lockstep/pkg/store"
)

// blindStore's inline re-read (the listen session's) finds no "late-" row, as if it were not
// visible yet: the listen source leaves such a change to the change-log poll, which re-reads
// it on the pool once it is older than PollGrace. Under a steady stream of such writes, every
// poll finds young changes it must leave for later.
type blindStore struct {
	notify.Store
	blind atomic.Int64
}

func (s *blindStore) ReloadOn(ctx context.Context, on store.Querier, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	if len(ids) > 0 && strings.HasPrefix(ids[0], "late-") {
		s.blind.Add(1)
		return nil, nil, nil
	}
	return s.Store.ReloadOn(ctx, on, typ, ids)
}

// Under a steady stream of writes the change-log cursor keeps moving: a poll that leaves a
// young change to its notification holds the watermark at that change's transaction, not
// where the poll started. Before, every poll that found one change in flight kept the old
// watermark, so under continuous writes each poll re-read the log since the last quiet
// moment (and held the applier that long). Every row still arrives, none as an apply error.
func TestWatermarkAdvancesUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	bs := &blindStore{}
	r := startReplica(t, b, "a", func(c *notify.Config) {
		bs.Store = c.Store
		c.Store, c.PollInterval, c.PollGrace, c.ReconcileInterval = bs, 50*time.Millisecond, 300*time.Millisecond, time.Hour
	})
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('before', 'g')`)
	waitFor(t, "the first row", func() bool { _, ok := r.get("before"); return ok })
	waitFor(t, "a watermark past the first row", func() bool { return r.syncer.Stats().Watermark > 0 })
	start := r.syncer.Stats().Watermark
	const n = 60
	var moved int
	last := start
	for i := range n { // 60 writes 50 ms apart (3 s), each applied by a poll 300 ms later
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, fmt.Sprintf("late-%d", i))
		if wm := r.syncer.Stats().Watermark; wm > last {
			moved++
			last = wm
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("watermark moved %d times, %d → %d; blind re-reads %d", moved, start, last, bs.blind.Load())
	require.Positive(t, bs.blind.Load(), "the notifications were left to the poll")
	require.Greater(t, last, start, "the watermark never moved while the writes went on")
	require.GreaterOrEqual(t, moved, 5, "the watermark moved only %d times in 3 s of writes", moved)
	waitFor(t, "every row applied", func() bool { return r.models.Len() == n+1 })
	require.Zero(t, r.models.ApplyErrors())
	require.Positive(t, r.syncer.Stats().GapsRepaired, "the poll applied them")
}

// stallStore makes the change-log read stall (a slow database, a large page) once armed, and
// says when the stalled read began.
type stallStore struct {
	notify.Store
	armed         atomic.Bool
	started, done chan struct{}
}

func (s *stallStore) ChangesSince(ctx context.Context, wm uint64, after int64, limit int) (store.ChangeBatch, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.started)
		time.Sleep(3 * time.Second)
		defer close(s.done)
	}
	return s.Store.ChangesSince(ctx, wm, after, limit)
}

// A poll waiting on the change log does not hold up the notifications meanwhile: the listen
// session applies them inline while the read is in flight (catchUpNow reads the log with
// applyMu released), instead of queueing them behind the poll.
func TestSlowPollDoesNotHoldUpNotifications(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	ss := &stallStore{started: make(chan struct{}), done: make(chan struct{})}
	r := startReplica(t, b, "a", func(c *notify.Config) {
		ss.Store = c.Store
		c.Store, c.PollInterval, c.ReconcileInterval = ss, 50*time.Millisecond, time.Hour
	})
	inline := r.syncer.Stats().EventsInline
	ss.armed.Store(true)
	select {
	case <-ss.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no poll read the change log")
	}
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('during-poll', 'g')`)
	waitFor(t, "applied", func() bool { _, ok := r.get("during-poll"); return ok })
	select {
	case <-ss.done:
		t.Fatal("the notification was applied only after the stalled poll's read returned")
	default:
	}
	require.Equal(t, inline+1, r.syncer.Stats().EventsInline, "applied inline, not queued behind the poll")
}
