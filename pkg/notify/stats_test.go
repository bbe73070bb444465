package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLagWindowKeepsTheLastMinute: after three minutes of samples every 10 ms, the window
// holds exactly the last minute's (lagWindowSpan), in order, whatever compaction happened.
func TestLagWindowKeepsTheLastMinute(t *testing.T) {
	t.Parallel()
	var w lagWindow
	t0 := time.Unix(1_700_000_000, 0)
	const step = 10 * time.Millisecond
	var now time.Time
	for i := range 18000 { // 180 s
		now = t0.Add(time.Duration(i) * step)
		w.add(now, time.Duration(i%100)*time.Millisecond) // lags 0..99 ms, evenly
	}
	st := w.stats(now)
	require.Equal(t, 6001, st.Samples, "samples at or after now-60s") // [now-60s, now]
	require.Equal(t, 99.0, st.Max)
	require.InDelta(t, 50.0, st.P50, 1)
	require.InDelta(t, 99.0, st.P99, 1)
	require.Equal(t, float64((18000-1)%100), st.Last)
	w.mu.Lock()
	live := w.live()
	for i := 1; i < len(live); i++ {
		require.False(t, live[i].at.Before(live[i-1].at), "samples out of order at %d", i)
	}
	require.LessOrEqual(t, len(w.samples), 2*len(live)+1, "the dead prefix is compacted")
	w.mu.Unlock()
	require.Zero(t, w.stats(now.Add(2*lagWindowSpan)).Samples, "nothing younger than a minute")
}

// BenchmarkLagWindowAdd: one sample into a full window (a minute at 200 changes/s), the
// steady state of a replica applying 200 changes a second.
func BenchmarkLagWindowAdd(b *testing.B) {
	var w lagWindow
	t0 := time.Unix(1_700_000_000, 0)
	const step = 5 * time.Millisecond
	i := 0
	for ; i < 12000; i++ {
		w.add(t0.Add(time.Duration(i)*step), time.Millisecond)
	}
	b.ResetTimer()
	for range b.N {
		w.add(t0.Add(time.Duration(i)*step), time.Millisecond)
		i++
	}
}
