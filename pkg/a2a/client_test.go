package a2a

import (
	"context"
	"errors"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"
)

// newOfficialClient builds a2a-go's v0.3 JSON-RPC client the way an A2A caller of the gateway
// does: fetch the card from /a2a/{agent}/.well-known/agent-card.json, then connect to the url
// it advertises, sending the gateway key on every call.
func newOfficialClient(t *testing.T, b *testBundle, agent string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	httpClient := b.server.Client()
	card, err := agentcard.NewResolver(httpClient).Resolve(ctx, b.server.URL+"/a2a/"+agent,
		agentcard.WithRequestHeader("Authorization", "Bearer sk-test"))
	require.NoError(t, err)
	require.Equal(t, b.server.URL+"/a2a/"+echoAgentID, card.URL)

	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithJSONRPCTransport(httpClient),
		a2aclient.WithInterceptors(a2aclient.NewStaticCallMetaInjector(
			a2aclient.CallMeta{"authorization": {"Bearer sk-test"}})),
	)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Destroy() })
	return client
}

func TestOfficialClientSendMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := newOfficialClient(t, b, "echo-agent")

	msg := a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "ping"})
	msg.ContextID = "ctx-1"
	result, err := client.SendMessage(context.Background(), &a2atypes.MessageSendParams{Message: msg})

	require.NoError(t, err)
	reply, ok := result.(*a2atypes.Message)
	require.True(t, ok, "result is %T", result)
	require.Equal(t, a2atypes.MessageRoleAgent, reply.Role)
	require.Equal(t, "ctx-1", reply.ContextID)
	require.Equal(t, a2atypes.ContentParts{a2atypes.TextPart{Text: "echo: ping"}}, reply.Parts)
	require.NotEmpty(t, reply.ID)

	b.mu.Lock()
	defer b.mu.Unlock()
	require.Equal(t, []string{"Bearer sk-test", "Bearer sk-test"}, b.authHeaders) // card, then RPC
}

func TestOfficialClientStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := newOfficialClient(t, b, "echo-agent")
	ctx := context.Background()

	msg := a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "ping"})
	var events []a2atypes.Event
	for ev, err := range client.SendStreamingMessage(ctx, &a2atypes.MessageSendParams{Message: msg}) {
		require.NoError(t, err)
		events = append(events, ev)
	}

	require.Len(t, events, 6)
	task, ok := events[0].(*a2atypes.Task)
	require.True(t, ok, "first event is %T", events[0])
	require.Equal(t, a2atypes.TaskStateSubmitted, task.Status.State)
	require.Equal(t, msg.ID, task.History[0].ID)

	working, ok := events[1].(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, ok, "second event is %T", events[1])
	require.Equal(t, a2atypes.TaskStateWorking, working.Status.State)
	require.False(t, working.Final)

	var text string
	for i, ev := range events[2:5] {
		chunk, ok := ev.(*a2atypes.TaskArtifactUpdateEvent)
		require.True(t, ok, "event %d is %T", i+2, ev)
		require.Equal(t, task.ID, chunk.TaskID)
		require.Equal(t, i > 0, chunk.Append)
		require.Equal(t, i == 2, chunk.LastChunk)
		text += chunk.Artifact.Parts[0].(a2atypes.TextPart).Text
	}
	require.Equal(t, "echo: ping", text)

	done, ok := events[5].(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, ok, "last event is %T", events[5])
	require.Equal(t, a2atypes.TaskStateCompleted, done.Status.State)
	require.True(t, done.Final)

	got, err := client.GetTask(ctx, &a2atypes.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateCompleted, got.Status.State)
	require.Equal(t, "echo: ping", got.Artifacts[0].Parts[0].(a2atypes.TextPart).Text)

	_, err = client.CancelTask(ctx, &a2atypes.TaskIDParams{ID: task.ID})
	require.ErrorIs(t, err, a2atypes.ErrTaskNotCancelable)

	_, err = client.GetTask(ctx, &a2atypes.TaskQueryParams{ID: "no-such-task"})
	require.ErrorIs(t, err, a2atypes.ErrTaskNotFound)
}

func TestOfficialClientErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := newOfficialClient(t, b, "echo-agent")
	ctx := context.Background()

	b.completer.CompleteFunc = func(context.Context, *Agent, string) (string, error) {
		return "", errors.New("no healthy deployment for gpt-4o-mini")
	}
	_, err := client.SendMessage(ctx, &a2atypes.MessageSendParams{
		Message: a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "ping"}),
	})
	require.ErrorIs(t, err, a2atypes.ErrInternalError)
	require.EqualError(t, err, "Internal error: no healthy deployment for gpt-4o-mini")

	// A message without text reaches the streaming client as an error event.
	var errs []error
	for _, err := range client.SendStreamingMessage(ctx, &a2atypes.MessageSendParams{
		Message: a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.DataPart{Data: map[string]any{"a": 1}}),
	}) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], a2atypes.ErrInvalidParams)
	require.EqualError(t, errs[0], "Invalid params: params.message.parts has no text part")

	b.completer.StreamFunc = func(_ context.Context, _ *Agent, _ string, onDelta func(string) error) error {
		_ = onDelta("par")
		return errors.New("upstream reset")
	}
	var last a2atypes.Event
	for ev, err := range client.SendStreamingMessage(ctx, &a2atypes.MessageSendParams{
		Message: a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "ping"}),
	}) {
		require.NoError(t, err)
		last = ev
	}
	failed, ok := last.(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, ok, "last event is %T", last)
	require.Equal(t, a2atypes.TaskStateFailed, failed.Status.State)
	require.True(t, failed.Final)

	// Unknown agent: a 404 the client reports as an HTTP error.
	lost, err := a2aclient.NewFromEndpoints(ctx, []a2atypes.AgentInterface{
		{URL: b.server.URL + "/a2a/nope", Transport: a2atypes.TransportProtocolJSONRPC},
	}, a2aclient.WithJSONRPCTransport(b.server.Client()))
	require.NoError(t, err)
	_, err = lost.SendMessage(ctx, &a2atypes.MessageSendParams{
		Message: a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "ping"}),
	})
	require.ErrorContains(t, err, "unexpected HTTP status: 404")
}
