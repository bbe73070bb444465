package spend_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// Spend-log retention: logs older than the period are deleted in batches, newer ones and the
// spend totals are kept; while another session holds the prune lock a replica skips (deletes
// nothing); two replicas pruning at once delete every old log exactly once between them.
func TestSpendLogRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.NewDB(t)
	st, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx))
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var mu sync.Mutex // conn is not safe for concurrent use

	var logs []store.SpendLog
	old := time.Now().Add(-10 * 24 * time.Hour)
	for i := range 25 {
		l := logOf("tok-r", 0.01, i)
		l.StartTime, l.EndTime = old.Add(time.Duration(i)*time.Second), old.Add(time.Duration(i)*time.Second)
		logs = append(logs, l)
	}
	for i := range 5 {
		logs = append(logs, logOf("tok-r", 0.01, 100+i)) // now
	}
	_, _, err = st.FlushSpend(ctx, logs, nil, nil)
	require.NoError(t, err)
	count := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		var n int64
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM gateway.spend_logs").Scan(&n))
		return n
	}
	require.EqualValues(t, 30, count())

	// another session holds the lock: nothing is deleted, the run reports it did not run
	other, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock("+store.SpendLogsPruneLock+")")
	require.NoError(t, err)
	n, ran, err := st.PruneSpendLogs(ctx, 7*24*time.Hour, 10)
	require.NoError(t, err)
	require.False(t, ran)
	require.Zero(t, n)
	n, err = spend.PruneOnce(ctx, st, 7*24*time.Hour, 10)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, tx.Commit(ctx))
	require.EqualValues(t, 30, count())

	// one batch: the oldest 10
	n, ran, err = st.PruneSpendLogs(ctx, 7*24*time.Hour, 10)
	require.NoError(t, err)
	require.True(t, ran)
	require.EqualValues(t, 10, n)
	require.EqualValues(t, 20, count())

	// two replicas at once, batches of 4: the 15 old logs left are deleted once in all
	var wg sync.WaitGroup
	got := make([]int64, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := spend.PruneOnce(ctx, st, 7*24*time.Hour, 4)
				require.NoError(t, err)
				got[r] += n
				if count() <= 5 {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 15, got[0]+got[1], "every old log deleted exactly once")
	require.EqualValues(t, 5, count(), "the recent logs are kept")

	// the key's spend total is untouched by pruning
	tot, err := st.GetKeySpend(ctx, []string{"tok-r"})
	require.NoError(t, err)
	require.InDelta(t, 0.30, tot["tok-r"].Spend, 1e-9)
}
