package notify_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
	"lockstep/pkg/store"
)

// A table large enough to be loaded in partitions (store: 4096 heap blocks and up, each
// partition a range of blocks read in a transaction importing the load's snapshot) loads every
// row exactly once, at its current version (a row committed after the load is not in it), and
// prepare sees every row as it streams.
func TestLoadAllPartitionedIsOneSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	ctx := context.Background()
	// ~1.9 kB rows (under the TOAST threshold, so they stay in the heap): 4 per block
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, model_info)
		SELECT 'm-' || g, 'grp', jsonb_build_object('pad', repeat('x', 1850)) FROM generate_series(1, 17000) g`)
	var blocks int64
	require.NoError(t, b.admin.QueryRow(ctx, `SELECT pg_relation_size('gateway.models') / 8192`).Scan(&blocks))
	require.GreaterOrEqual(t, blocks, int64(4096), "the table must be large enough to be partitioned")
	versions := map[string]int64{}
	rows, err := b.admin.Query(ctx, `SELECT model_id, version FROM gateway.models`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var v int64
		require.NoError(t, rows.Scan(&id, &v))
		versions[id] = v
	}
	require.NoError(t, rows.Err())

	var mu sync.Mutex
	prepared := 0
	snap, err := b.st.LoadAll(ctx, store.Model, func(rows []store.Row) {
		mu.Lock()
		defer mu.Unlock()
		prepared += len(rows)
	})
	require.NoError(t, err)
	require.Len(t, snap.Rows, len(versions))
	require.Equal(t, len(versions), prepared, "prepare saw every row")
	seen := map[string]bool{}
	for _, r := range snap.Rows {
		require.False(t, seen[r.ID], "row %s loaded twice", r.ID)
		seen[r.ID] = true
		require.Equal(t, versions[r.ID], r.Version, "row %s", r.ID)
	}
	// a row committed after the load is not in it; the next load has it
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('late', 'grp')`)
	require.False(t, seen["late"])
	snap2, err := b.st.LoadAll(ctx, store.Model, nil)
	require.NoError(t, err)
	require.Len(t, snap2.Rows, len(versions)+1)
	require.GreaterOrEqual(t, snap2.Watermark, snap.Watermark)
}
