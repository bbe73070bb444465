package itest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// TestSyncTraceRecordsTheChangePath: a model written on A appears in B's GET /sync/trace with
// its change-log seq and every stage of its path on B in order (received ≤ decoded ≤ taken by
// the applier ≤ re-read sent ≤ answered ≤ published: one process's monotonic readings), and
// B's /sync/lag summarises the stages (stages_ms). A traces its own write too: without a
// re-read when it applied the write before the notification came back (the usual case), with
// one, in order, when the notification won that race (it can: the write's answer and the
// listener's read run concurrently).
func TestSyncTraceRecordsTheChangePath(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	id := "trace-model-1"
	st, body := p.A.Do(t, "POST", "/model/new", map[string]any{
		"model_name": "trace-group", "model_info": map[string]any{"id": id},
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"},
	})
	require.Equal(t, 200, st, "%s", body)
	find := func(g *Gateway) (notify.TracedChange, bool) {
		for _, c := range syncTrace(t, g) {
			if c.ID == id {
				return c, true
			}
		}
		return notify.TracedChange{}, false
	}
	var c notify.TracedChange
	Eventually(t, "B traces the write", func() bool {
		var ok bool
		c, ok = find(p.B)
		return ok
	})
	require.Positive(t, c.Seq)
	require.Positive(t, c.CommittedUs)
	path := []int64{c.ReceivedUs, c.ParsedUs, c.DequeuedUs, c.RereadSentUs, c.RereadAnsweredUs, c.PublishedUs}
	for i, v := range path {
		require.Positive(t, v, "stage %d of %+v", i, c)
		if i > 0 {
			require.GreaterOrEqual(t, v, path[i-1], "stage %d before stage %d: %+v", i, i-1, c)
		}
	}
	stages := p.B.SyncLag(t)["stages_ms"].(map[string]any)
	for _, s := range []string{"notify", "parse", "queue", "prepare", "reread", "publish", "total"} {
		require.Contains(t, stages, s)
		require.GreaterOrEqual(t, stages[s].(map[string]any)["samples"].(float64), 1.0, "stage %s: %v", s, stages[s])
	}

	Eventually(t, "A traces its own write", func() bool {
		var ok bool
		c, ok = find(p.A)
		return ok
	})
	if c.RereadSentUs != 0 {
		require.GreaterOrEqual(t, c.RereadSentUs, c.DequeuedUs, fmt.Sprintf("%+v", c))
		require.GreaterOrEqual(t, c.RereadAnsweredUs, c.RereadSentUs, fmt.Sprintf("%+v", c))
		require.GreaterOrEqual(t, c.PublishedUs, c.RereadAnsweredUs, fmt.Sprintf("%+v", c))
	} else {
		require.Zero(t, c.RereadAnsweredUs, "no re-read, no answer: %+v", c)
	}
	require.GreaterOrEqual(t, c.PublishedUs, c.DequeuedUs, fmt.Sprintf("%+v", c))
}
