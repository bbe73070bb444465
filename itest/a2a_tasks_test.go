package itest

import (
	"context"
	"strings"
	"testing"
	"time"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
)

// TestA2ATaskGetAndCancelOnAnotherReplica (issue 10): a message/stream runs on A (a slow
// upstream: 200 chunks, 50 ms apart); with the official a2a-go client, tasks/get on B sees it
// working with the text streamed so far, tasks/cancel on B cancels it, and A's stream stops
// early with a final "canceled" status; both replicas then report it canceled, a second cancel
// is refused as not cancelable, and an unknown task is not found on B.
func TestA2ATaskGetAndCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{}, fakeupstream.WithStreamChunks(200), fakeupstream.WithChunkDelay(50*time.Millisecond))
	id := createAgent(t, b.A, "tasks-agent", map[string]any{"model": "m"})
	clientA := newA2AClient(t, b.A, "tasks-agent", b.A.URL+"/a2a/"+id)
	clientB := newA2AClient(t, b.B, "tasks-agent", b.B.URL+"/a2a/"+id)
	ctx := context.Background()

	type item struct {
		ev  a2atypes.Event
		err error
	}
	events := make(chan item, 1024)
	go func() {
		defer close(events)
		msg := a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: strings.Repeat("long ", 100)})
		for ev, err := range clientA.SendStreamingMessage(ctx, &a2atypes.MessageSendParams{Message: msg}) {
			events <- item{ev, err}
		}
	}()
	first := <-events
	require.NoError(t, first.err)
	task, ok := first.ev.(*a2atypes.Task)
	require.True(t, ok, "first event is %T", first.ev)
	chunks := 0
	for it := range events { // wait until text streams
		require.NoError(t, it.err)
		if _, ok := it.ev.(*a2atypes.TaskArtifactUpdateEvent); ok {
			chunks++
			break
		}
	}

	Eventually(t, "tasks/get on B sees the task working with text", func() bool {
		got, err := clientB.GetTask(ctx, &a2atypes.TaskQueryParams{ID: task.ID})
		require.NoError(t, err)
		return got.Status.State == a2atypes.TaskStateWorking && len(got.Artifacts) == 1
	})
	canceled, err := clientB.CancelTask(ctx, &a2atypes.TaskIDParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateCanceled, canceled.Status.State)
	require.Equal(t, task.ID, canceled.ID)

	var last a2atypes.Event
	for it := range events {
		require.NoError(t, it.err)
		if _, ok := it.ev.(*a2atypes.TaskArtifactUpdateEvent); ok {
			chunks++
		}
		last = it.ev
	}
	final, ok := last.(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, ok, "last event is %T", last)
	require.True(t, final.Final)
	require.Equal(t, a2atypes.TaskStateCanceled, final.Status.State, "the stream on A ends canceled")
	require.Less(t, chunks, 200, "the stream on A stopped before the upstream finished")

	for name, c := range map[string]interface {
		GetTask(context.Context, *a2atypes.TaskQueryParams) (*a2atypes.Task, error)
	}{"A": clientA, "B": clientB} {
		Eventually(t, "canceled on "+name, func() bool {
			got, err := c.GetTask(ctx, &a2atypes.TaskQueryParams{ID: task.ID})
			require.NoError(t, err)
			return got.Status.State == a2atypes.TaskStateCanceled
		})
	}
	_, err = clientB.CancelTask(ctx, &a2atypes.TaskIDParams{ID: task.ID})
	require.ErrorIs(t, err, a2atypes.ErrTaskNotCancelable)
	_, err = clientB.GetTask(ctx, &a2atypes.TaskQueryParams{ID: "no-such-task"})
	require.ErrorIs(t, err, a2atypes.ErrTaskNotFound)

	// a completed task is readable on the other replica, with its whole text
	done, text := streamText(t, clientA, "short")
	got, err := clientB.GetTask(ctx, &a2atypes.TaskQueryParams{ID: done.ID})
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateCompleted, got.Status.State)
	require.Equal(t, text, got.Artifacts[0].Parts[0].(a2atypes.TextPart).Text)
}
