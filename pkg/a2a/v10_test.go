package a2a

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// post10 posts body to /a2a/{agent} with the A2A-Version header (none when version is "").
func (b *testBundle) post10(t *testing.T, agent, version, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", b.server.URL+"/a2a/"+agent, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set(VersionHeader, version)
	}
	resp, err := b.server.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func (b *testBundle) call10(t *testing.T, agent, body string) []byte {
	t.Helper()
	resp := b.post10(t, agent, "1.0", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return data
}

const userMessage10 = `{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hello"},
	{"data": {"x": 1}}, {"url": "https://example.com/a.png", "mediaType": "image/png", "filename": "a.png"},
	{"raw": "aGk=", "mediaType": "text/plain"}, {"data": [1, 2]}, {"text": "world"}]}`

func TestNegotiate(t *testing.T) {
	for header, want := range map[string]wire{"": wire03, "0.3": wire03, "0.3.0": wire03, "1.0": wire10, "1.0.0": wire10, " 1.0 ": wire10} {
		r, _ := http.NewRequest("POST", "/", nil)
		r.Header.Set(VersionHeader, header)
		got, err := negotiate(r)
		require.Nil(t, err, "%q", header)
		require.Equal(t, want, got, "%q", header)
	}
	for _, header := range []string{"2.0", "1", "1.1", "0.2", "v1.0", "1.0.0.0", "latest"} {
		r, _ := http.NewRequest("POST", "/", nil)
		r.Header.Set(VersionHeader, header)
		_, err := negotiate(r)
		require.NotNil(t, err, "%q", header)
		require.Equal(t, CodeVersionNotSupported, err.Code)
		require.Equal(t, "Version not supported", err.Message)
		require.Equal(t, header, err.Data["version"])
	}
}

// TestSendMessage10: SendMessage answers the 1.0 SendMessageResponse; only text parts reach
// the model; the 0.3 method names are unknown under 1.0 and the 1.0 names without the header.
func TestSendMessage10(t *testing.T) {
	b := setup(t)
	var asked string
	b.completer.CompleteFunc = func(_ context.Context, _ *Agent, text string) (string, error) {
		asked = text
		return "echo: " + text, nil
	}
	data := b.call10(t, "echo-agent", sendBody(MethodSendMessage, "1", userMessage10))
	require.Equal(t, "hello\nworld", asked)
	res := gjson.GetBytes(data, "result.message")
	require.Equal(t, "ROLE_AGENT", res.Get("role").String(), "%s", data)
	require.JSONEq(t, `[{"text": "echo: hello\nworld"}]`, res.Get("parts").Raw)
	require.False(t, gjson.GetBytes(data, "result.kind").Exists(), "no 0.3 kind in 1.0: %s", data)

	data = b.call10(t, "echo-agent", sendBody(MethodMessageSend, "1", userMessage10))
	require.Equal(t, int64(CodeMethodNotFound), gjson.GetBytes(data, "error.code").Int(), "%s", data)
	_, r := b.call(t, "echo-agent", sendBody(MethodSendMessage, "1", userMessage))
	require.Equal(t, CodeMethodNotFound, r.Error.Code)

	resp := b.post10(t, "echo-agent", "9.9", sendBody(MethodSendMessage, "1", userMessage10))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	data, _ = io.ReadAll(resp.Body)
	require.Equal(t, int64(CodeVersionNotSupported), gjson.GetBytes(data, "error.code").Int(), "%s", data)
}

func TestSendMessage10BadParams(t *testing.T) {
	b := setup(t)
	for msg, want := range map[string]string{
		`{"role": "user", "parts": [{"text": "x"}]}`:              `params.message.role must be "ROLE_USER" or "ROLE_AGENT"`,
		`{"role": "ROLE_USER", "parts": [{}]}`:                    "params.message.parts[0] must have one of text, raw, url or data",
		`{"parts": [{"text": "x", "url": "u"}]}`:                  "params.message.parts[0] must have only one of text, raw, url or data (has text, url)",
		`{"parts": [{"text": 1}]}`:                                "params.message.parts[0].text must be a string",
		`{"parts": [{"raw": "not base64!"}, {"text": "x"}]}`:      "params.message.parts[0].raw must be base64",
		`{"parts": [{"url": "u"}]}`:                               "params.message.parts has no text part",
		`{"parts": []}`:                                           "params.message.parts must not be empty",
		`{"parts": [{"text": "x", "metadata": []}]}`:              "params.message.parts[0].metadata must be an object",
		`{"parts": [{"kind": "text", "text": "x"}], "taskId": 3}`: "params.message.taskId must be a string",
	} {
		data := b.call10(t, "echo-agent", sendBody(MethodSendMessage, "1", msg))
		require.Equal(t, int64(CodeInvalidParams), gjson.GetBytes(data, "error.code").Int(), "%s: %s", msg, data)
		require.Equal(t, "Invalid params: "+want, gjson.GetBytes(data, "error.message").String(), "%s", msg)
	}
}

// TestStream10: SendStreamingMessage sends the 0.3 event sequence as 1.0 StreamResponse
// members; GetTask (1.0) and tasks/get (0.3) read the same task; the parts of the request come
// back in 1.0 shapes in the history.
func TestStream10(t *testing.T) {
	b := setup(t)
	resp := b.post10(t, "echo-agent", "1.0", sendBody(MethodSendStreamingMessage, "1", userMessage10))
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := readEvents(t, bufio.NewReader(resp.Body), -1)
	require.Len(t, events, 6)
	first := gjson.ParseBytes(events[0].Result)
	require.Equal(t, "TASK_STATE_SUBMITTED", first.Get("task.status.state").String(), "%s", events[0].Result)
	id := first.Get("task.id").String()
	require.JSONEq(t, `[{"text": "hello"}, {"data": {"x": 1}},
		{"url": "https://example.com/a.png", "mediaType": "image/png", "filename": "a.png"},
		{"raw": "aGk=", "mediaType": "text/plain"}, {"data": {"value": [1, 2]}}, {"text": "world"}]`,
		first.Get("task.history.0.parts").Raw)
	require.Equal(t, "ROLE_USER", first.Get("task.history.0.role").String())
	require.Equal(t, "TASK_STATE_WORKING", gjson.GetBytes(events[1].Result, "statusUpdate.status.state").String())
	require.False(t, gjson.GetBytes(events[1].Result, "statusUpdate.final").Exists(), "1.0 has no final flag")
	var text strings.Builder
	for i, ev := range events[2:5] {
		u := gjson.GetBytes(ev.Result, "artifactUpdate")
		require.Equal(t, i > 0, u.Get("append").Bool())
		require.Equal(t, i == 2, u.Get("lastChunk").Bool())
		text.WriteString(u.Get("artifact.parts.0.text").String())
	}
	require.Equal(t, "echo: hello\nworld", text.String())
	require.Equal(t, "TASK_STATE_COMPLETED", gjson.GetBytes(events[5].Result, "statusUpdate.status.state").String())

	data := b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": "`+id+`", "historyLength": 0}}`)
	task := gjson.GetBytes(data, "result")
	require.Equal(t, "TASK_STATE_COMPLETED", task.Get("status.state").String(), "%s", data)
	require.Equal(t, "echo: hello\nworld", task.Get("artifacts.0.parts.0.text").String())
	require.False(t, task.Get("history").Exists())
	_, r := b.call(t, "echo-agent", `{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "`+id+`"}}`)
	require.Nil(t, r.Error)
	require.Equal(t, "completed", gjson.GetBytes(r.Result, "status.state").String())

	data = b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 3, "method": "CancelTask", "params": {"id": "`+id+`"}}`)
	require.Equal(t, int64(CodeTaskNotCancelable), gjson.GetBytes(data, "error.code").Int(), "%s", data)
	data = b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "nope"}}`)
	require.Equal(t, int64(CodeTaskNotFound), gjson.GetBytes(data, "error.code").Int(), "%s", data)
}

// TestListTasks10Local: without a shared table ListTasks lists this process's tasks of the
// agent that the caller may access, newest first, paged by the cursor.
func TestListTasks10Local(t *testing.T) {
	b := setup(t)
	var ids []string
	for range 3 {
		resp := b.post10(t, "echo-agent", "1.0", sendBody(MethodSendStreamingMessage, "1", userMessage10))
		events := readEvents(t, bufio.NewReader(resp.Body), -1)
		ids = append(ids, gjson.GetBytes(events[0].Result, "task.id").String())
	}
	// another agent's task is never listed
	resp := b.post10(t, "other-agent", "1.0", sendBody(MethodSendStreamingMessage, "1", userMessage10))
	readEvents(t, bufio.NewReader(resp.Body), -1)

	var got []string
	token := ""
	for page := 0; page < 3; page++ {
		params, _ := json.Marshal(map[string]any{"pageSize": 2, "pageToken": token, "includeArtifacts": page == 0})
		data := b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": `+string(params)+`}`)
		res := gjson.GetBytes(data, "result")
		require.Equal(t, int64(3), res.Get("totalSize").Int(), "%s", data)
		require.Equal(t, int64(2), res.Get("pageSize").Int())
		require.Equal(t, page == 0, res.Get("tasks.0.artifacts").Exists(), "%s", data)
		for _, tk := range res.Get("tasks").Array() {
			got = append(got, tk.Get("id").String())
		}
		token = res.Get("nextPageToken").String()
		require.True(t, res.Get("nextPageToken").Exists())
		if token == "" {
			break
		}
	}
	require.ElementsMatch(t, ids, got)
	require.Len(t, got, 3)

	// statusTimestampAfter keeps tasks whose status timestamp is at or after it
	data := b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}`)
	newest := gjson.GetBytes(data, "result.tasks.0")
	data = b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"statusTimestampAfter": "`+newest.Get("status.timestamp").String()+`"}}`)
	require.Equal(t, newest.Get("id").String(), gjson.GetBytes(data, "result.tasks.0.id").String(), "%s", data)
	data = b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"statusTimestampAfter": "2999-01-01T00:00:00Z"}}`)
	require.Equal(t, int64(0), gjson.GetBytes(data, "result.totalSize").Int(), "%s", data)

	data = b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "TASK_STATE_WORKING"}}`)
	require.JSONEq(t, `{"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}`, gjson.GetBytes(data, "result").Raw)
	for params, want := range map[string]string{
		`{"status": "working"}`:         `params.status must be a TASK_STATE_* task state, not "working"`,
		`{"pageSize": 101}`:             "params.pageSize must be an integer from 0 to 100",
		`{"pageToken": "x"}`:            "params.pageToken is not a page token this server issued",
		`{"statusTimestampAfter": "y"}`: "params.statusTimestampAfter must be an RFC 3339 timestamp",
		`{"includeArtifacts": "yes"}`:   "params.includeArtifacts must be a boolean",
	} {
		data := b.call10(t, "echo-agent", `{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": `+params+`}`)
		require.Equal(t, "Invalid params: "+want, gjson.GetBytes(data, "error.message").String(), "%s: %s", params, data)
	}
}

// TestListTasks10Owner: a caller lists only its own (or its team's) tasks; the master key all.
func TestListTasks10Owner(t *testing.T) {
	s := newTaskStore(10, DefaultTaskTTL)
	msg := func() *a2atypes.Message {
		return a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "q"})
	}
	mine, _ := s.create("ag", Owner{Key: "k1", Team: "t1"}, msg(), nil)
	teammate, _ := s.create("ag", Owner{Key: "k2", Team: "t1"}, msg(), nil)
	stranger, _ := s.create("ag", Owner{Key: "k3"}, msg(), nil)
	list := func(caller Owner) []string {
		res, err := s.list(t.Context(), "ag", caller, &listParams{query: TaskQuery{Limit: 50}})
		require.NoError(t, err)
		var ids []string
		for _, tk := range res.Tasks {
			ids = append(ids, tk.ID)
		}
		return ids
	}
	require.ElementsMatch(t, []string{mine.id, teammate.id}, list(Owner{Key: "k1", Team: "t1"}))
	require.ElementsMatch(t, []string{stranger.id}, list(Owner{Key: "k3"}))
	require.Empty(t, list(Owner{Key: "k4"}))
	require.ElementsMatch(t, []string{mine.id, teammate.id, stranger.id}, list(Owner{Admin: true}))
}

// TestCancelTask10: CancelTask (1.0) stops a running SendStreamingMessage, whose stream ends
// with TASK_STATE_CANCELED; as a notification (no id) it cancels too and gets HTTP 204; a
// notification with an unsupported version is 204 and does nothing.
func TestCancelTask10(t *testing.T) {
	t.Parallel()
	for _, notify := range []bool{false, true} {
		b := setup(t)
		streaming := make(chan struct{})
		b.completer.StreamFunc = func(ctx context.Context, _ *Agent, _ string, onDelta func(string) error) error {
			close(streaming)
			<-ctx.Done()
			return ctx.Err()
		}
		resp := b.post10(t, "echo-agent", "1.0", sendBody(MethodSendStreamingMessage, `1`, userMessage10))
		r := bufio.NewReader(resp.Body)
		first := readEvents(t, r, 2)
		id := gjson.GetBytes(first[0].Result, "task.id").String()
		<-streaming

		body := `{"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": "` + id + `"}}`
		if notify {
			n := b.post10(t, "echo-agent", "2.0", `{"jsonrpc": "2.0", "method": "CancelTask", "params": {"id": "`+id+`"}}`)
			require.Equal(t, http.StatusNoContent, n.StatusCode)
			got, _ := b.handler.tasks.get(echoAgentID, Owner{}, id, nil)
			require.Equal(t, a2atypes.TaskStateWorking, got.Status.State, "an unsupported version cancels nothing")
			n = b.post10(t, "echo-agent", "1.0", `{"jsonrpc": "2.0", "method": "CancelTask", "params": {"id": "`+id+`"}}`)
			require.Equal(t, http.StatusNoContent, n.StatusCode)
		} else {
			data := b.call10(t, "echo-agent", body)
			require.Equal(t, "TASK_STATE_CANCELED", gjson.GetBytes(data, "result.status.state").String(), "%s", data)
		}
		rest := readEvents(t, r, -1)
		require.Equal(t, "TASK_STATE_CANCELED", gjson.GetBytes(rest[len(rest)-1].Result, "statusUpdate.status.state").String())
	}
}
