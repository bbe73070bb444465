package a2a

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
)

// JSON-RPC 2.0 §4.1: a request without an "id" member is a notification and the server MUST
// NOT reply to it, errors included: HTTP 204, empty body. Requests that are not valid (so the
// id cannot be known) and requests with "id": null are still answered.
func TestNotificationsGetNoResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var completions atomic.Int32
	b.completer.CompleteFunc = func(context.Context, *Agent, string) (string, error) {
		completions.Add(1)
		return "x", nil
	}
	b.completer.StreamFunc = func(context.Context, *Agent, string, func(string) error) error {
		completions.Add(1)
		return nil
	}

	for name, tc := range map[string]struct{ agent, body string }{
		"send":          {"echo-agent", `{"jsonrpc": "2.0", "method": "message/send", "params": {"message": ` + userMessage + `}}`},
		"stream":        {"echo-agent", `{"jsonrpc": "2.0", "method": "message/stream", "params": {"message": ` + userMessage + `}}`},
		"bad params":    {"echo-agent", `{"jsonrpc": "2.0", "method": "message/send", "params": {}}`},
		"unknown":       {"echo-agent", `{"jsonrpc": "2.0", "method": "tasks/foo"}`},
		"tasks/get":     {"echo-agent", `{"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "t-nope"}}`},
		"unknown agent": {"nope", `{"jsonrpc": "2.0", "method": "message/send", "params": {"message": ` + userMessage + `}}`},
	} {
		resp := b.post(t, tc.agent, tc.body)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, name)
		require.Empty(t, body, name)
	}
	require.Zero(t, completions.Load(), "a notification runs no model call")

	// Not a valid request: the id cannot be determined, so the error is answered (id null).
	status, resp := b.call(t, "echo-agent", `{"method": "message/send"}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, CodeInvalidRequest, resp.Error.Code)
	require.Equal(t, "null", string(resp.ID))
	// "id": null is a request, not a notification.
	status, resp = b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": null, "method": "tasks/foo"}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, CodeMethodNotFound, resp.Error.Code)
}

// tasks/cancel sent as a notification still cancels the task (its effect outlives the reply).
func TestTasksCancelNotification(t *testing.T) {
	t.Parallel()
	b := setup(t)
	streaming := make(chan struct{})
	b.completer.StreamFunc = func(ctx context.Context, _ *Agent, _ string, onDelta func(string) error) error {
		close(streaming)
		<-ctx.Done()
		return ctx.Err()
	}
	resp := b.post(t, "echo-agent", sendBody(MethodMessageStream, `1`, userMessage))
	first := readEvents(t, bufio.NewReader(resp.Body), 1)
	task, err := a2atypes.UnmarshalEventJSON(first[0].Result)
	require.NoError(t, err)
	taskID := string(task.TaskInfo().TaskID)
	<-streaming

	n := b.post(t, "echo-agent", `{"jsonrpc": "2.0", "method": "tasks/cancel", "params": {"id": "`+taskID+`"}}`)
	body, err := io.ReadAll(n.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, n.StatusCode)
	require.Empty(t, body)

	got, ok := b.handler.tasks.get(echoAgentID, Owner{}, taskID, nil)
	require.True(t, ok)
	require.Equal(t, a2atypes.TaskStateCanceled, got.Status.State)
}
