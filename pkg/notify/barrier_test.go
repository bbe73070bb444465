package notify_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// slowFeed turns off every repair path but the notifications themselves (no poll, no periodic
// reconcile), so only the barrier can explain a change being applied when it returns.
func slowFeed(c *notify.Config) {
	c.PollInterval = time.Hour
	c.ReconcileInterval = time.Hour
}

// TestBarrierAppliesEverythingCommittedBefore: a row written by another session is held as
// soon as Barrier returns, and a delete is gone — with no poll running, only the barrier's
// own round trip can have waited for the notification to be applied.
func TestBarrierAppliesEverythingCommittedBefore(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "bar-"+string(src), slowFeed)
		ctx := context.Background()
		for i := range 100 {
			id := fmt.Sprintf("m%d", i)
			_, err := b.admin.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ($1, $1, '{}')`, id)
			require.NoError(t, err)
			require.NoError(t, r.syncer.Barrier(ctx))
			_, ok := r.get(id)
			require.True(t, ok, "%s not held after the barrier", id)
			if i%2 == 0 {
				_, err := b.admin.Exec(ctx, `DELETE FROM gateway.models WHERE model_id = $1`, id)
				require.NoError(t, err)
				require.NoError(t, r.syncer.Barrier(ctx))
				_, ok := r.get(id)
				require.False(t, ok, "%s still held after delete + barrier", id)
			}
		}
		require.Equal(t, int64(0), r.syncer.Stats().GapsRepaired, "nothing was repaired by the change log")
	})
}

// TestBarrierCoalesces: while one round is in flight (the listener backend is held stopped, so
// its token cannot come back), 200 callers arrive; they all share the next round. Two rounds
// for 201 callers, and every caller sees the row written before it called.
func TestBarrierCoalesces(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "coal-"+string(src), func(c *notify.Config) {
			slowFeed(c)
			c.HeartbeatTimeout = time.Minute // the paused listener must not be taken for dead
			c.BarrierTimeout = time.Minute
		})
		ctx := context.Background()
		before := r.syncer.Stats().Barrier
		resume := pauseListener(t, b, r)
		first := make(chan error, 1)
		go func() { first <- r.syncer.Barrier(ctx) }()
		waitFor(t, "first round sent", func() bool { return r.syncer.Stats().Barrier.Rounds == before.Rounds+1 })
		_, err := b.admin.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('late', 'late', '{}')`)
		require.NoError(t, err)
		const n = 200
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.syncer.Barrier(ctx); err != nil {
					errs <- err
					return
				}
				if _, ok := r.get("late"); !ok {
					errs <- errors.New("row committed before the call not held after its barrier")
				}
			}()
		}
		waitFor(t, "every caller waiting", func() bool { return r.syncer.Stats().Barrier.Waiters == before.Waiters+n+1 })
		resume()
		require.NoError(t, <-first)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		after := r.syncer.Stats().Barrier
		require.Equal(t, before.Rounds+2, after.Rounds, "201 callers, one round in flight and one shared by the rest")
		require.Equal(t, before.Failed, after.Failed)
	})
}

// TestBarrierFailsWhenTokenNeverReturns: with the listener backend held stopped, the token
// never comes back; the barrier does not hang: it fails at BarrierTimeout with ErrBarrier, and
// works again once the listener resumes.
func TestBarrierFailsWhenTokenNeverReturns(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r := startReplica(t, b, "bar-fail", func(c *notify.Config) {
		slowFeed(c)
		c.HeartbeatTimeout = time.Minute
		c.BarrierTimeout = 300 * time.Millisecond
	})
	resume := pauseListener(t, b, r)
	err := r.syncer.Barrier(context.Background())
	require.ErrorIs(t, err, notify.ErrBarrier)
	require.Equal(t, int64(1), r.syncer.Stats().Barrier.Failed)
	resume()
	require.NoError(t, r.syncer.Barrier(context.Background()), "barrier works again once the token can come back")
}
