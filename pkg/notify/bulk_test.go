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

// errReadTooLarge stands for a change-log read that cannot finish within its bound: under
// load, one read of a bulk insert's million changes exceeded its 30 s on every poll.
var errReadTooLarge = errors.New("change-log read too large to finish within its bound")

// boundedStore is the feed's Store with the limits a loaded database puts on it: a
// change-log read returning more than maxRead changes fails (errReadTooLarge), and the
// failReload-th Reload fails once (a re-read timing out mid catch-up).
type boundedStore struct {
	notify.Store
	maxRead    int
	failReload int64
	reloads    atomic.Int64
	largest    atomic.Int64 // the most changes one read returned
}

func (b *boundedStore) ChangesSince(ctx context.Context, wm uint64, after int64, limit int) (store.ChangeBatch, error) {
	batch, err := b.Store.ChangesSince(ctx, wm, after, limit)
	if err != nil {
		return batch, err
	}
	if n := int64(len(batch.Changes)); n > b.largest.Load() {
		b.largest.Store(n)
	}
	if len(batch.Changes) > b.maxRead {
		return store.ChangeBatch{}, fmt.Errorf("%w: %d changes", errReadTooLarge, len(batch.Changes))
	}
	return batch, nil
}

func (b *boundedStore) Reload(ctx context.Context, typ store.ObjectType, ids []string) ([]store.Row, []store.Row, error) {
	if b.reloads.Add(1) == b.failReload {
		return nil, nil, context.DeadlineExceeded
	}
	return b.Store.Reload(ctx, typ, ids)
}

// A bulk insert far larger than the notification buffer is applied through the feed — the
// overflow read from the change log by the catch-up, a page at a time, each page read,
// re-read and applied on its own — even when a read of the whole change log cannot finish
// and a re-read fails midway: every row arrives as a repaired gap, with no apply error, no
// reconnect and no drift left for the reconcile. Before, the catch-up read everything since
// the watermark in one read: with a million changes that read timed out on every poll, and
// the rows came in only with the 5-minute reconcile (TestBulkInsertBench: drift_repaired
// 1000000, gaps_repaired 0).
func TestCatchUpReadsTheLogInPages(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		bs := &boundedStore{maxRead: 300, failReload: 4}
		r := startReplica(t, b, "a", func(c *notify.Config) {
			bs.Store = c.Store
			c.Store, c.BufferSize, c.CatchUpPage, c.ReconcileInterval = bs, 10, 200, time.Hour
		})
		const n = 2000
		exec(t, b.admin, fmt.Sprintf(`INSERT INTO gateway.models (model_id, model_name) SELECT 'm'||g, 'grp' FROM generate_series(1, %d) g`, n))
		// the catch-up counts its repaired gaps once its last page is applied (countGaps), so the
		// rows can be held a moment before the count shows them
		waitFor(t, "all applied and counted", func() bool { return r.models.Len() == n && r.syncer.Stats().GapsRepaired > 0 })
		st := r.syncer.Stats()
		require.Positive(t, st.Dropped, "the insert overflowed the buffer")
		require.Positive(t, st.GapsRepaired, "the overflow came in through the catch-up")
		require.LessOrEqual(t, bs.largest.Load(), int64(200), "a read returned more than one page")
		require.GreaterOrEqual(t, bs.reloads.Load(), int64(4), "the re-read failure was injected")
		require.Zero(t, r.models.ApplyErrors())
		require.Zero(t, st.Reconnects)
		require.Zero(t, st.DriftRepaired)
		require.Equal(t, notify.StateStreaming, r.syncer.State())
	})
}
