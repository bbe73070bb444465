package registry_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/store"
)

// The reconcile repair re-checks each difference when it runs: an entry a notification
// updated (or a row it deleted) between the snapshot and the repair is not counted.
func TestDeferredRepairSkipsWhatTheFeedFixed(t *testing.T) {
	t.Parallel()
	r := newReg()
	r.Apply([]store.Row{row("a", 2, "g"), row("b", 2, "g")}, nil)
	start := r.Generation()
	// snapshot: a at v4 (feed has not applied it yet), b deleted
	fix := r.Diff([]store.Row{row("a", 4, "g")}, start)
	require.NotNil(t, fix)
	// the feed catches up before the repair runs
	r.Apply([]store.Row{row("a", 4, "g")}, map[string]int64{"b": 3})
	require.Zero(t, fix(), "differences the feed already fixed are not drift")
	// a real difference is repaired and counted
	start = r.Generation()
	fix = r.Diff([]store.Row{row("a", 4, "g"), row("c", 6, "h")}, start)
	require.Equal(t, 1, fix())
	_, ok := r.Load().ByID("c")
	require.True(t, ok)
}
