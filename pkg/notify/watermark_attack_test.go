package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// Attack on the moving watermark (min(xmin, oldest held-back change's tx)) with small pages:
// a steady stream of writes the inline re-read cannot see (left to the poll), interleaved
// with transactions that stay open across several polls and commit late. Every row arrives.
func TestWatermarkUnderSteadyWritesAndLateCommitsInPages(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	bs := &blindStore{}
	r := startReplica(t, b, "a", func(c *notify.Config) {
		bs.Store = c.Store
		c.Store, c.PollInterval, c.PollGrace, c.ReconcileInterval, c.CatchUpPage = bs, 30*time.Millisecond, 200*time.Millisecond, time.Hour, 2
	})
	ctx := context.Background()
	const n = 40
	var open []pgx.Tx
	var conns []*pgx.Conn
	defer func() {
		for _, c := range conns {
			c.Close(ctx)
		}
	}()
	want := 0
	for i := range n {
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, fmt.Sprintf("late-s%d", i))
		want++
		if i%5 == 0 { // a transaction that writes now and commits ~5 writes (several polls) later
			c, err := pgx.Connect(ctx, b.url)
			require.NoError(t, err)
			conns = append(conns, c)
			tx, err := c.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, fmt.Sprintf("late-t%d", i))
			require.NoError(t, err)
			want++
			open = append(open, tx)
		}
		if len(open) > 1 {
			require.NoError(t, open[0].Commit(ctx))
			open = open[1:]
		}
		time.Sleep(40 * time.Millisecond)
	}
	for _, tx := range open {
		require.NoError(t, tx.Commit(ctx))
	}
	waitFor(t, "every row applied", func() bool { return r.models.Len() == want })
	require.Zero(t, r.models.ApplyErrors())
}
