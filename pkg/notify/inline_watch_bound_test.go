package notify

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// The inline re-read is given up after the whole probe bound of silence even when the cancel
// request sent at half of it gets no answer (the host unreachable, a half-open network: the
// cancel's own connection hangs too, up to half the bound). Before, the timer was re-armed
// with the silence measured before the cancel request, so the re-read (and applyMu, held by
// the inline apply: every change on the replica) waited 1.5 bounds.
func TestInlineWatchBoundHoldsWhenTheCancelRequestHangs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(pgtest.NewDB(t))
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		dialed int
		held   []net.Conn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	plain := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		dialed++
		if dialed == 1 {
			return plain(ctx, network, addr)
		}
		a, b := net.Pipe() // the cancel request's connection: nothing ever answers
		held = append(held, a, b)
		return a, nil
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	s := New(Config{ReplicaID: "w", Logger: zerolog.Nop(), HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 650 * time.Millisecond})
	bound := s.probeTimeout() // 600 ms
	start := time.Now()
	w := s.newInlineWatch(ctx, conn)
	defer w.release()
	rctx := w.begin()
	select {
	case <-rctx.Done():
	case <-time.After(5 * bound):
		t.Fatal("the re-read was never given up")
	}
	took := time.Since(start)
	require.True(t, w.finish(), "no cancel request before giving up")
	require.GreaterOrEqual(t, took, bound-20*time.Millisecond, "given up before the bound")
	require.Less(t, took, bound+bound/4, "given up %v after the re-read was sent, bound %v (1.5 bounds before)", took, bound)
}
