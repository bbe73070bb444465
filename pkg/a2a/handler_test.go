package a2a

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestMessageSend(t *testing.T) {
	t.Parallel()

	for _, agent := range []string{echoAgentID, "echo-agent"} {
		t.Run(agent, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			var gotAgent *Agent
			var gotText string
			b.completer.CompleteFunc = func(_ context.Context, a *Agent, text string) (string, error) {
				gotAgent, gotText = a, text
				return "echo: " + text, nil
			}
			msg := `{"kind": "message", "role": "user", "messageId": "m-1", "contextId": "ctx-1", "taskId": "t-1",
				"parts": [{"kind": "text", "text": "hello"}, {"kind": "data", "data": {"x": 1}}, {"kind": "text", "text": "world"}]}`
			status, resp := b.call(t, agent, sendBody(MethodMessageSend, `"req-1"`, msg))

			require.Equal(t, http.StatusOK, status)
			require.JSONEq(t, `"req-1"`, string(resp.ID))
			require.Nil(t, resp.Error)
			require.NotContains(t, resp.Raw, "error")
			require.Same(t, b.echo, gotAgent)
			require.Equal(t, "hello\nworld", gotText)

			var result map[string]any
			require.NoError(t, json.Unmarshal(resp.Result, &result))
			messageID, _ := result["messageId"].(string)
			_, err := uuid.Parse(messageID)
			require.NoError(t, err, "messageId %q", messageID)
			delete(result, "messageId")
			require.Equal(t, map[string]any{
				"kind":      "message",
				"role":      "agent",
				"parts":     []any{map[string]any{"kind": "text", "text": "echo: hello\nworld"}},
				"contextId": "ctx-1",
				"taskId":    "t-1",
			}, result)
		})
	}
}

func TestMessageSendNumericIDAndNoContext(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// A part without "kind" but with "text" is text (LiteLLM is lenient the same way).
	status, resp := b.call(t, "echo-agent", sendBody(MethodMessageSend, `42`, `{"parts": [{"text": "hi"}]}`))

	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "42", string(resp.ID))
	var result map[string]any
	require.NoError(t, json.Unmarshal(resp.Result, &result))
	require.NotContains(t, result, "contextId")
	require.NotContains(t, result, "taskId")
	require.Equal(t, []any{map[string]any{"kind": "text", "text": "echo: hi"}}, result["parts"])
}

func TestCard(t *testing.T) {
	t.Parallel()

	for _, agent := range []string{echoAgentID, "echo-agent"} {
		t.Run(agent, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			resp, err := b.server.Client().Get(b.server.URL + "/a2a/" + agent + "/.well-known/agent-card.json")
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))

			var card a2atypes.AgentCard
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
			wantURL := b.server.URL + "/a2a/" + echoAgentID
			require.Equal(t, wantURL, card.URL)
			require.Equal(t, a2atypes.TransportProtocolJSONRPC, card.PreferredTransport)
			require.Equal(t, []a2atypes.AgentInterface{{URL: wantURL, Transport: a2atypes.TransportProtocolJSONRPC}},
				card.AdditionalInterfaces)
			require.Equal(t, "0.3.0", card.ProtocolVersion)
			require.Equal(t, "echo-agent", card.Name)
			require.Equal(t, "1.0.0", card.Version)
			require.True(t, card.Capabilities.Streaming)
			require.Equal(t, []a2atypes.AgentSkill{{ID: "echo", Name: "Echo", Description: "Says it back", Tags: []string{"test"}}},
				card.Skills)
		})
	}

	t.Run("KeepsProtocolVersion", func(t *testing.T) {
		t.Parallel()
		agent, err := NewAgent("id-1", "a", []byte(strings.Replace(testCard("a"), `"version"`, `"protocolVersion": "0.2.6", "version"`, 1)),
			[]byte(`{"model": "m"}`))
		require.NoError(t, err)
		served, err := servedCard(agent, "https://gw.example/")
		require.NoError(t, err)
		var card a2atypes.AgentCard
		require.NoError(t, json.Unmarshal(served, &card))
		require.Equal(t, "0.2.6", card.ProtocolVersion)
		require.Equal(t, "https://gw.example/a2a/id-1", card.URL)
	})

	t.Run("UnknownAgent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp, err := b.server.Client().Get(b.server.URL + "/a2a/nope/.well-known/agent-card.json")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.JSONEq(t, `{"detail": "Agent 'nope' not found"}`, string(body))
	})

	t.Run("LookupFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.resolver.ResolveAgentFunc = func(context.Context, string) (*Agent, error) {
			return nil, errors.New("dial tcp 10.0.0.5:5432: connection refused")
		}
		resp, err := b.server.Client().Get(b.server.URL + "/a2a/echo-agent/.well-known/agent-card.json")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.JSONEq(t, `{"detail": "agent lookup failed"}`, string(body))
	})
}

func TestRPCErrors(t *testing.T) {
	t.Parallel()

	okMessage := `{"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "hi"}]}`
	tests := []struct {
		name       string
		agent      string // default "echo-agent"
		body       string
		setup      func(b *testBundle)
		wantStatus int // default 200
		wantCode   int
		wantMsg    string // exact message
		wantID     string // raw JSON; default "null"
	}{
		{name: "InvalidJSON", body: `{"jsonrpc": "2.0", "id": 1,`, wantCode: -32700,
			wantMsg: "Parse error: invalid JSON: unexpected end of JSON input"},
		{name: "EmptyBody", body: ``, wantCode: -32700, wantMsg: "Parse error: invalid JSON: unexpected end of JSON input"},
		{name: "TrailingGarbage", body: `{"jsonrpc": "2.0"} x`, wantCode: -32700,
			wantMsg: "Parse error: invalid JSON: invalid character 'x' after top-level value"},
		{name: "Batch", body: `[{"jsonrpc": "2.0", "id": 1, "method": "message/send"}]`, wantCode: -32600,
			wantMsg: "Invalid Request: batch requests are not supported"},
		{name: "NotAnObject", body: `"message/send"`, wantCode: -32600,
			wantMsg: "Invalid Request: the request must be a JSON object"},
		{name: "Null", body: `null`, wantCode: -32600, wantMsg: "Invalid Request: the request must be a JSON object"},
		{name: "MissingJSONRPC", body: `{"id": 1, "method": "message/send"}`, wantCode: -32600,
			wantMsg: `Invalid Request: jsonrpc must be "2.0"`, wantID: "1"},
		{name: "WrongJSONRPC", body: `{"jsonrpc": "1.0", "id": "a", "method": "message/send"}`, wantCode: -32600,
			wantMsg: `Invalid Request: jsonrpc must be "2.0"`, wantID: `"a"`},
		{name: "NumericJSONRPC", body: `{"jsonrpc": 2.0, "id": "a", "method": "message/send"}`, wantCode: -32600,
			wantMsg: `Invalid Request: jsonrpc must be "2.0"`, wantID: `"a"`},
		{name: "MissingMethod", body: `{"jsonrpc": "2.0", "id": "a"}`, wantCode: -32600,
			wantMsg: "Invalid Request: method is required", wantID: `"a"`},
		{name: "EmptyMethod", body: `{"jsonrpc": "2.0", "id": "a", "method": ""}`, wantCode: -32600,
			wantMsg: "Invalid Request: method is required", wantID: `"a"`},
		{name: "MethodNotString", body: `{"jsonrpc": "2.0", "id": "a", "method": 7}`, wantCode: -32600,
			wantMsg: "Invalid Request: method must be a string", wantID: `"a"`},
		{name: "BadID", body: `{"jsonrpc": "2.0", "id": {"x": 1}, "method": "message/send"}`, wantCode: -32600,
			wantMsg: "Invalid Request: id must be a string, a number or null"},
		{name: "UnknownMethod", body: `{"jsonrpc": "2.0", "id": 7, "method": "tasks/foo", "params": {}}`, wantCode: -32601,
			wantMsg: `Method not found: "tasks/foo"`, wantID: "7"},
		{name: "UnknownAgent", agent: "nope", body: sendBody(MethodMessageSend, `"abc"`, okMessage),
			wantStatus: http.StatusNotFound, wantCode: -32000, wantMsg: "Agent 'nope' not found", wantID: `"abc"`},
		{name: "UnknownAgentNullID", agent: "nope", body: `{"jsonrpc": "2.0", "id": null, "method": "message/send"}`,
			wantStatus: http.StatusNotFound, wantCode: -32000, wantMsg: "Agent 'nope' not found"},
		{name: "UnknownAgentStream", agent: "nope", body: sendBody(MethodMessageStream, `1`, okMessage),
			wantStatus: http.StatusNotFound, wantCode: -32000, wantMsg: "Agent 'nope' not found", wantID: "1"},
		{name: "LookupFailure", body: sendBody(MethodMessageSend, `1`, okMessage),
			setup: func(b *testBundle) {
				b.resolver.ResolveAgentFunc = func(context.Context, string) (*Agent, error) {
					return nil, errors.New("dial tcp 10.0.0.5:5432: connection refused")
				}
			},
			wantCode: -32603, wantMsg: "Internal error: agent lookup failed", wantID: "1"},
		{name: "NoParams", body: `{"jsonrpc": "2.0", "id": 1, "method": "message/send"}`, wantCode: -32602,
			wantMsg: "Invalid params: params is required", wantID: "1"},
		{name: "ParamsArray", body: `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": [1]}`, wantCode: -32602,
			wantMsg: "Invalid params: params must be an object", wantID: "1"},
		{name: "NoMessage", body: `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}`, wantCode: -32602,
			wantMsg: "Invalid params: params.message is required", wantID: "1"},
		{name: "MessageNotObject", body: sendBody(MethodMessageSend, `1`, `"hi"`), wantCode: -32602,
			wantMsg: "Invalid params: params.message must be an object", wantID: "1"},
		{name: "NoParts", body: sendBody(MethodMessageSend, `1`, `{"role": "user"}`), wantCode: -32602,
			wantMsg: "Invalid params: params.message.parts is required", wantID: "1"},
		{name: "PartsNotArray", body: sendBody(MethodMessageSend, `1`, `{"parts": {"kind": "text"}}`), wantCode: -32602,
			wantMsg: "Invalid params: params.message.parts must be an array", wantID: "1"},
		{name: "EmptyParts", body: sendBody(MethodMessageSend, `1`, `{"parts": []}`), wantCode: -32602,
			wantMsg: "Invalid params: params.message.parts must not be empty", wantID: "1"},
		{name: "NoTextPart", body: sendBody(MethodMessageSend, `1`, `{"parts": [{"kind": "data", "data": {"a": 1}}]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.parts has no text part", wantID: "1"},
		{name: "TextNotString", body: sendBody(MethodMessageSend, `1`, `{"parts": [{"kind": "text", "text": 5}]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.parts[0].text must be a string", wantID: "1"},
		{name: "TextMissing", body: sendBody(MethodMessageSend, `1`, `{"parts": [{"kind": "text"}]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.parts[0].text is required", wantID: "1"},
		{name: "PartNotObject", body: sendBody(MethodMessageSend, `1`, `{"parts": ["hi"]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.parts[0] must be an object", wantID: "1"},
		{name: "PartNoKind", body: sendBody(MethodMessageSend, `1`, `{"parts": [{"data": {}}]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.parts[0].kind is required", wantID: "1"},
		{name: "PartUnknownKind", body: sendBody(MethodMessageSend, `1`, `{"parts": [{"kind": "image", "text": "x"}]}`),
			wantCode: -32602, wantMsg: `Invalid params: params.message.parts[0].kind must be "text", "file" or "data"`, wantID: "1"},
		{name: "BadFilePart", body: sendBody(MethodMessageSend, `1`, `{"parts": [{"kind": "text", "text": "x"}, {"kind": "file", "file": {}}]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.parts[1]: invalid file part: either Bytes or URI must be set", wantID: "1"},
		{name: "BadRole", body: sendBody(MethodMessageSend, `1`, `{"role": "system", "parts": [{"kind": "text", "text": "x"}]}`),
			wantCode: -32602, wantMsg: `Invalid params: params.message.role must be "user" or "agent"`, wantID: "1"},
		{name: "ContextIDNotString", body: sendBody(MethodMessageSend, `1`, `{"contextId": 5, "parts": [{"kind": "text", "text": "x"}]}`),
			wantCode: -32602, wantMsg: "Invalid params: params.message.contextId must be a string", wantID: "1"},
		{name: "CompleterError", body: sendBody(MethodMessageSend, `1`, okMessage),
			setup: func(b *testBundle) {
				b.completer.CompleteFunc = func(context.Context, *Agent, string) (string, error) {
					return "", errors.New("upstream returned 503")
				}
			},
			wantCode: -32603, wantMsg: "Internal error: upstream returned 503", wantID: "1"},
		{name: "CompleterRPCError", body: sendBody(MethodMessageSend, `1`, okMessage),
			setup: func(b *testBundle) {
				b.completer.CompleteFunc = func(context.Context, *Agent, string) (string, error) {
					return "", errors.Join(errors.New("guardrail"), &Error{Code: CodeInvalidParams, Message: "Content blocked: keyword 'x' detected"})
				}
			},
			wantCode: -32602, wantMsg: "Content blocked: keyword 'x' detected", wantID: "1"},
		{name: "TasksGetUnknown", body: `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t-nope"}}`,
			wantCode: -32001, wantMsg: "Task not found", wantID: "1"},
		{name: "TasksGetNoID", body: `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}`,
			wantCode: -32602, wantMsg: "Invalid params: params.id is required", wantID: "1"},
		{name: "TasksGetBadHistoryLength", body: `{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t", "historyLength": -1}}`,
			wantCode: -32602, wantMsg: "Invalid params: params.historyLength must be a non-negative integer", wantID: "1"},
		{name: "TasksCancelUnknown", body: `{"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": "t-nope"}}`,
			wantCode: -32001, wantMsg: "Task not found", wantID: "1"},
		{name: "PushConfig", body: `{"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/set", "params": {}}`,
			wantCode: -32003, wantMsg: "Push Notification is not supported", wantID: "1"},
		{name: "ExtendedCard", body: `{"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}`,
			wantCode: -32007, wantMsg: "Authenticated Extended Card is not configured", wantID: "1"},
		{name: "TooLarge", body: `{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"pad": "` +
			strings.Repeat("x", MaxBodyBytes) + `"}}`,
			wantStatus: http.StatusRequestEntityTooLarge, wantCode: -32600,
			wantMsg: "Invalid Request: request body exceeds 10485760 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tt.setup != nil {
				tt.setup(b)
			}
			agent := tt.agent
			if agent == "" {
				agent = "echo-agent"
			}
			wantStatus := tt.wantStatus
			if wantStatus == 0 {
				wantStatus = http.StatusOK
			}
			wantID := tt.wantID
			if wantID == "" {
				wantID = "null"
			}

			status, resp := b.call(t, agent, tt.body)

			require.Equal(t, wantStatus, status)
			require.NotNil(t, resp.Error)
			require.Equal(t, tt.wantCode, resp.Error.Code)
			require.Equal(t, tt.wantMsg, resp.Error.Message)
			require.Equal(t, wantID, string(resp.ID))
			require.Contains(t, resp.Raw, "id") // null is written, not omitted
			require.NotContains(t, resp.Raw, "result")
		})
	}
}

func TestMessageStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var gotText string
	b.completer.StreamFunc = func(_ context.Context, _ *Agent, text string, onDelta func(string) error) error {
		gotText = text
		for _, d := range []string{"Hel", "", "lo", " world"} {
			if err := onDelta(d); err != nil {
				return err
			}
		}
		return nil
	}

	events := b.stream(t, "echo-agent", sendBody(MethodMessageStream, `"s-1"`, userMessage))

	require.Equal(t, "hello\nworld", gotText)
	require.Len(t, events, 6)
	for _, ev := range events {
		require.Equal(t, `"s-1"`, string(ev.ID))
		require.Nil(t, ev.Error)
	}
	kinds := make([]string, len(events))
	parsed := make([]a2atypes.Event, len(events))
	for i, ev := range events {
		var k struct{ Kind string }
		require.NoError(t, json.Unmarshal(ev.Result, &k))
		kinds[i] = k.Kind
		e, err := a2atypes.UnmarshalEventJSON(ev.Result)
		require.NoError(t, err)
		parsed[i] = e
	}
	require.Equal(t, []string{"task", "status-update", "artifact-update", "artifact-update", "artifact-update", "status-update"}, kinds)

	task := parsed[0].(*a2atypes.Task)
	require.Equal(t, a2atypes.TaskStateSubmitted, task.Status.State)
	require.NotNil(t, task.Status.Timestamp)
	_, err := uuid.Parse(string(task.ID))
	require.NoError(t, err)
	_, err = uuid.Parse(task.ContextID)
	require.NoError(t, err)
	require.Len(t, task.History, 1)
	require.Equal(t, "m-1", task.History[0].ID)
	require.Equal(t, a2atypes.MessageRoleUser, task.History[0].Role)
	require.Equal(t, task.ID, task.History[0].TaskID)
	require.Equal(t, task.ContextID, task.History[0].ContextID)
	require.Empty(t, task.Artifacts)

	working := parsed[1].(*a2atypes.TaskStatusUpdateEvent)
	require.Equal(t, a2atypes.TaskStateWorking, working.Status.State)
	require.False(t, working.Final)
	require.Equal(t, task.ID, working.TaskID)
	require.Equal(t, task.ContextID, working.ContextID)
	require.Contains(t, string(events[1].Result), `"final":false`)

	var artifactID a2atypes.ArtifactID
	for i, want := range []struct {
		text           string
		append, isLast bool
	}{{"Hel", false, false}, {"lo", true, false}, {" world", true, true}} {
		ev := parsed[2+i].(*a2atypes.TaskArtifactUpdateEvent)
		require.Equal(t, task.ID, ev.TaskID)
		require.Equal(t, task.ContextID, ev.ContextID)
		require.Equal(t, want.append, ev.Append, "chunk %d", i)
		require.Equal(t, want.isLast, ev.LastChunk, "chunk %d", i)
		require.Equal(t, a2atypes.ContentParts{a2atypes.TextPart{Text: want.text}}, ev.Artifact.Parts)
		if i == 0 {
			artifactID = ev.Artifact.ID
			require.NotEmpty(t, artifactID)
		}
		require.Equal(t, artifactID, ev.Artifact.ID)
	}

	done := parsed[5].(*a2atypes.TaskStatusUpdateEvent)
	require.Equal(t, a2atypes.TaskStateCompleted, done.Status.State)
	require.True(t, done.Final)

	// tasks/get returns the task as accumulated.
	status, resp := b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "`+string(task.ID)+`"}}`)
	require.Equal(t, http.StatusOK, status)
	var got a2atypes.Task
	require.NoError(t, json.Unmarshal(resp.Result, &got))
	require.Contains(t, string(resp.Result), `"kind":"task"`)
	require.Equal(t, task.ID, got.ID)
	require.Equal(t, task.ContextID, got.ContextID)
	require.Equal(t, a2atypes.TaskStateCompleted, got.Status.State)
	require.Len(t, got.History, 1)
	require.Equal(t, task.History[0].Parts, got.History[0].Parts)
	require.Equal(t, []*a2atypes.Artifact{{
		ID:    artifactID,
		Name:  "response",
		Parts: a2atypes.ContentParts{a2atypes.TextPart{Text: "Hello world"}},
	}}, got.Artifacts)

	// historyLength trims the history; the task id works through the agent's id too.
	_, resp = b.call(t, echoAgentID, `{"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": "`+string(task.ID)+`", "historyLength": 0}}`)
	require.Nil(t, resp.Error)
	var trimmed a2atypes.Task
	require.NoError(t, json.Unmarshal(resp.Result, &trimmed))
	require.Equal(t, task.ID, trimmed.ID)
	require.Empty(t, trimmed.History)

	// Another agent does not see the task.
	_, resp = b.call(t, "other-agent", `{"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": "`+string(task.ID)+`"}}`)
	require.NotNil(t, resp.Error)
	require.Equal(t, CodeTaskNotFound, resp.Error.Code)

	// A completed task cannot be canceled.
	_, resp = b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 5, "method": "tasks/cancel", "params": {"id": "`+string(task.ID)+`"}}`)
	require.NotNil(t, resp.Error)
	require.Equal(t, CodeTaskNotCancelable, resp.Error.Code)
	require.Equal(t, "Task cannot be canceled", resp.Error.Message)
}

func TestMessageStreamKeepsContextID(t *testing.T) {
	t.Parallel()
	b := setup(t)

	events := b.stream(t, "echo-agent", sendBody(MethodMessageStream, `1`,
		`{"role": "user", "contextId": "ctx-9", "taskId": "old-task", "parts": [{"kind": "text", "text": "x"}]}`))

	task, err := a2atypes.UnmarshalEventJSON(events[0].Result)
	require.NoError(t, err)
	require.Equal(t, "ctx-9", task.TaskInfo().ContextID)
	require.NotEqual(t, a2atypes.TaskID("old-task"), task.TaskInfo().TaskID) // every stream is a new task
}

func TestMessageStreamEmptyReply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.completer.StreamFunc = func(context.Context, *Agent, string, func(string) error) error { return nil }

	events := b.stream(t, "echo-agent", sendBody(MethodMessageStream, `1`, userMessage))

	require.Len(t, events, 4)
	chunk, err := a2atypes.UnmarshalEventJSON(events[2].Result)
	require.NoError(t, err)
	require.Equal(t, &a2atypes.TaskArtifactUpdateEvent{
		TaskID:    chunk.TaskInfo().TaskID,
		ContextID: chunk.TaskInfo().ContextID,
		LastChunk: true,
		Artifact: &a2atypes.Artifact{
			ID:    chunk.(*a2atypes.TaskArtifactUpdateEvent).Artifact.ID,
			Name:  "response",
			Parts: a2atypes.ContentParts{a2atypes.TextPart{Text: ""}},
		},
	}, chunk)
	done, err := a2atypes.UnmarshalEventJSON(events[3].Result)
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateCompleted, done.(*a2atypes.TaskStatusUpdateEvent).Status.State)
}

func TestMessageStreamFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.completer.StreamFunc = func(_ context.Context, _ *Agent, _ string, onDelta func(string) error) error {
		if err := onDelta("partial"); err != nil {
			return err
		}
		return errors.New("upstream reset the connection")
	}

	events := b.stream(t, "echo-agent", sendBody(MethodMessageStream, `1`, userMessage))

	require.Len(t, events, 4)
	chunk, err := a2atypes.UnmarshalEventJSON(events[2].Result)
	require.NoError(t, err)
	require.Equal(t, a2atypes.ContentParts{a2atypes.TextPart{Text: "partial"}}, chunk.(*a2atypes.TaskArtifactUpdateEvent).Artifact.Parts)
	require.False(t, chunk.(*a2atypes.TaskArtifactUpdateEvent).LastChunk)

	ev, err := a2atypes.UnmarshalEventJSON(events[3].Result)
	require.NoError(t, err)
	failed := ev.(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, failed.Final)
	require.Equal(t, a2atypes.TaskStateFailed, failed.Status.State)
	require.NotNil(t, failed.Status.Message)
	require.Equal(t, a2atypes.MessageRoleAgent, failed.Status.Message.Role)
	require.Equal(t, failed.TaskID, failed.Status.Message.TaskID)
	require.Equal(t, a2atypes.ContentParts{a2atypes.TextPart{Text: "Internal error: upstream reset the connection"}},
		failed.Status.Message.Parts)

	_, resp := b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "`+string(failed.TaskID)+`"}}`)
	var got a2atypes.Task
	require.NoError(t, json.Unmarshal(resp.Result, &got))
	require.Equal(t, a2atypes.TaskStateFailed, got.Status.State)
	require.Equal(t, "partial", got.Artifacts[0].Parts[0].(a2atypes.TextPart).Text)
}

// Errors of a streaming method are one SSE event, since streaming clients read only SSE.
func TestStreamingMethodErrorsAreEvents(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		body     string
		wantCode int
		wantMsg  string
	}{
		{"InvalidParams", sendBody(MethodMessageStream, `"x"`, `{"parts": []}`), -32602,
			"Invalid params: params.message.parts must not be empty"},
		{"Resubscribe", `{"jsonrpc": "2.0", "id": "x", "method": "tasks/resubscribe", "params": {"id": "t"}}`, -32004,
			"This operation is not supported: tasks/resubscribe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			events := b.stream(t, "echo-agent", tt.body)

			require.Len(t, events, 1)
			require.Equal(t, `"x"`, string(events[0].ID))
			require.NotContains(t, events[0].Raw, "result")
			require.Equal(t, &Error{Code: tt.wantCode, Message: tt.wantMsg}, events[0].Error)
		})
	}
}

func TestTasksCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	streaming := make(chan struct{})
	streamErr := make(chan error, 1)
	b.completer.StreamFunc = func(ctx context.Context, _ *Agent, _ string, onDelta func(string) error) error {
		if err := onDelta("first"); err != nil {
			return err
		}
		close(streaming)
		<-ctx.Done() // tasks/cancel stops the model call
		err := onDelta("late")
		streamErr <- err
		return err
	}

	resp := b.post(t, "echo-agent", sendBody(MethodMessageStream, `1`, userMessage))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body := bufio.NewReader(resp.Body)
	first := readEvents(t, body, 1)
	task, err := a2atypes.UnmarshalEventJSON(first[0].Result)
	require.NoError(t, err)
	taskID := string(task.TaskInfo().TaskID)
	<-streaming

	// While working, tasks/get shows the text so far.
	_, got := b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "`+taskID+`"}}`)
	var working a2atypes.Task
	require.NoError(t, json.Unmarshal(got.Result, &working))
	require.Equal(t, a2atypes.TaskStateWorking, working.Status.State)
	require.Equal(t, "first", working.Artifacts[0].Parts[0].(a2atypes.TextPart).Text)

	status, canceled := b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": "`+taskID+`"}}`)
	require.Equal(t, http.StatusOK, status)
	require.Nil(t, canceled.Error)
	var result a2atypes.Task
	require.NoError(t, json.Unmarshal(canceled.Result, &result))
	require.Equal(t, a2atypes.TaskStateCanceled, result.Status.State)
	require.Equal(t, errTaskFinished, <-streamErr)

	rest := readEvents(t, body, -1)
	require.Len(t, rest, 3)
	ev, err := a2atypes.UnmarshalEventJSON(rest[0].Result)
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateWorking, ev.(*a2atypes.TaskStatusUpdateEvent).Status.State)
	ev, err = a2atypes.UnmarshalEventJSON(rest[1].Result)
	require.NoError(t, err)
	require.Equal(t, a2atypes.ContentParts{a2atypes.TextPart{Text: "first"}}, ev.(*a2atypes.TaskArtifactUpdateEvent).Artifact.Parts)
	ev, err = a2atypes.UnmarshalEventJSON(rest[2].Result)
	require.NoError(t, err)
	final := ev.(*a2atypes.TaskStatusUpdateEvent)
	require.Equal(t, a2atypes.TaskStateCanceled, final.Status.State)
	require.True(t, final.Final)

	_, again := b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel", "params": {"id": "`+taskID+`"}}`)
	require.Equal(t, CodeTaskNotCancelable, again.Error.Code)
}

func TestMessageStreamClientGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	streaming := make(chan struct{})
	stopped := make(chan error, 1)
	b.completer.StreamFunc = func(ctx context.Context, _ *Agent, _ string, onDelta func(string) error) error {
		close(streaming)
		<-ctx.Done() // the request context ends with the connection
		stopped <- ctx.Err()
		return ctx.Err()
	}

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.server.URL+"/a2a/echo-agent",
		strings.NewReader(sendBody(MethodMessageStream, `1`, userMessage)))
	require.NoError(t, err)
	resp, err := b.server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	first := readEvents(t, bufio.NewReader(resp.Body), 1)
	task, err := a2atypes.UnmarshalEventJSON(first[0].Result)
	require.NoError(t, err)
	<-streaming
	cancel()

	require.ErrorIs(t, <-stopped, context.Canceled)
	require.Eventually(t, func() bool {
		got, ok := b.handler.tasks.get(echoAgentID, Owner{}, string(task.TaskInfo().TaskID), nil)
		return ok && got.Status.State == a2atypes.TaskStateFailed
	}, timeout, tick)
}
