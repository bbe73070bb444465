package notify

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// The inline re-read's watchdog counts from the connection's last proof of life, as the
// liveness probe does: while notifications keep arriving (a reply queued behind a bulk
// insert's burst of them) it neither asks the server to cancel nor gives the connection up,
// however long the re-read takes; once nothing arrives, it sends a cancel request after half
// the probe bound and ends the re-read after the whole bound. Before, the bound counted from
// the re-read's start: a million-key bulk insert made one of three replicas reconnect.
func TestInlineWatchCountsFromTheLastMessage(t *testing.T) {
	t.Parallel()
	s, w := newWatchedSession(t)
	bound := s.probeTimeout() // 200 ms
	rctx := w.begin()

	// traffic: a message every 20 ms for 5 bounds
	var last time.Time // the last proof of life stored
	for range 50 {
		last = time.Now()
		s.lastHB.Store(last.UnixNano())
		time.Sleep(20 * time.Millisecond)
	}
	w.mu.Lock()
	sent := w.sent
	w.mu.Unlock()
	require.False(t, sent, "a cancel request while messages kept arriving")
	require.NoError(t, rctx.Err(), "the re-read was given up while messages kept arriving")

	// silence: a cancel request, then the end of the re-read, a whole bound after the last
	// message (counted from the message itself: the sleep after it may overrun on a busy host)
	<-rctx.Done()
	require.GreaterOrEqual(t, time.Since(last), bound, "given up before the bound of silence")
	require.True(t, w.finish(), "no cancel request before giving up")
}

// One watchdog serves a session's re-reads: quick ones leave it disarmed once idle (no timer
// runs on an idle session), and a re-read given up leaves the next one a fresh context, so
// the session goes on after a cancelled re-read (errInlineSlow) and every later re-read is
// still watched.
func TestInlineWatchServesTheWholeSession(t *testing.T) {
	t.Parallel()
	s, w := newWatchedSession(t)
	bound := s.probeTimeout() // 200 ms
	for range 100 {           // quick re-reads
		rctx := w.begin()
		require.NoError(t, rctx.Err())
		require.False(t, w.finish())
	}
	require.Eventually(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return !w.armed }, 5*bound, bound/10,
		"the timer disarms once no re-read is in flight")

	hung := w.begin() // nothing arrives: given up after the bound
	select {
	case <-hung.Done():
	case <-time.After(5 * bound):
		t.Fatal("the re-read was never given up")
	}
	require.True(t, w.finish(), "a cancel request before giving up")
	next := w.begin()
	require.NoError(t, next.Err(), "the next re-read gets a fresh context")
	select {
	case <-next.Done():
	case <-time.After(5 * bound):
		t.Fatal("the next re-read is not watched")
	}
	require.True(t, w.finish())
}

// newWatchedSession is a syncer with a 200 ms probe bound and the inline watchdog of a real
// connection (closed and released when the test ends).
func newWatchedSession(t *testing.T) (*Syncer, *inlineWatch) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.NewDB(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	s := New(Config{ReplicaID: "w", Logger: zerolog.Nop(), HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 250 * time.Millisecond})
	w := s.newInlineWatch(ctx, conn)
	t.Cleanup(w.release)
	return s, w
}
