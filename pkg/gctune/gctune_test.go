package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, min uint64
		want      int
	}{
		{0, 64 * mb, 1500},       // before the first cycle: the runtime's 4 MB counts
		{4 * mb, 64 * mb, 1500},  // 4 + 4×15 = 64
		{16 * mb, 64 * mb, 300},  // 16 + 16×3 = 64
		{40 * mb, 64 * mb, 100},  // 40 + 40 ≥ 64: GOGC's own
		{500 * mb, 64 * mb, 100}, // a large heap: untouched
		{4 * mb, 1 << 40, 10000}, // capped
	} {
		require.Equal(t, c.want, percentFor(c.live, c.min, 100), "live %d MB", c.live/mb)
	}
	require.Equal(t, 400, percentFor(16*mb, 64*mb, 400), "never below the base")
}

// Start raises the GC percent while the heap is small, re-tunes after every collection, and
// leaves an operator's GOGC alone.
func TestStartTunesAfterEachCollection(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	tu := Start(64 << 20)
	require.NotNil(t, tu)
	defer tu.Stop()
	require.Greater(t, tu.Percent(), 100, "a small heap gets a higher percent")
	require.Equal(t, tu.Percent(), debug.SetGCPercent(tu.Percent()), "the runtime's percent is the one set")

	// a big live heap: after the collections that find it, the floor steps aside
	big := make([][]byte, 0, 96)
	for range 96 {
		big = append(big, make([]byte, 1<<20))
	}
	deadline := time.Now().Add(10 * time.Second)
	for tu.Percent() != 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the cleanup runs on its own goroutine after the cycle
	}
	require.Equal(t, 100, tu.Percent(), "96 MB live is above the 64 MB floor")
	runtime.KeepAlive(big)

	t.Setenv("GOGC", "200")
	require.Nil(t, Start(64<<20), "GOGC set: the operator's choice")
	t.Setenv("GOGC", "")
	require.Nil(t, Start(0), "no floor")
}

// Pretouch leaves the floor's pages resident and free in the heap: the pre-touched buffer was
// collected (it is not live) and its memory was not returned to the OS, also a while later
// (the scavenger keeps what the heap goal covers); a nil Tuner (GOGC set) does nothing.
func TestStartPretouchesTheFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	const floor = 64 << 20
	tu := Start(floor)
	require.NotNil(t, tu)
	defer tu.Stop()
	debug.FreeOSMemory() // as the gateway does after its initial load
	tu.Pretouch()
	time.Sleep(2 * time.Second) // the background scavenger's chance to release them (it must not)
	(*Tuner)(nil).Pretouch()
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	free, live := s[0].Value.Uint64(), s[1].Value.Uint64()
	require.Less(t, live, uint64(floor/2), "the pre-touch buffer is not live after Start")
	require.GreaterOrEqual(t, free, uint64(floor/8*7)*9/10, "the pre-touched pages are free in the heap, not released (free %d MB)", free>>20)
}
