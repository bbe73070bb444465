package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// a2aJSDir is the committed npm package (package.json + package-lock.json) holding the A2A JS
// SDK 1.x client the test runs under node.
func a2aJSDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "a2ajs")
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found on PATH: the A2A 1.0 client test needs node and npm under CI (apt-get install -y nodejs npm; .ci/run installs them)", tool)
			}
			t.Skipf("%s not found on PATH (apt-get install -y nodejs npm)", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in %s: %s", dir, out)
	}
	return dir
}

// newA2AClientKey is newA2AClient with the caller's key instead of the master key.
func newA2AClientKey(t *testing.T, g *Gateway, agent, key string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(httpClient).Resolve(ctx, g.URL+"/a2a/"+agent,
		agentcard.WithRequestHeader("Authorization", "Bearer "+key))
	require.NoError(t, err)
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(httpClient),
		a2aclient.WithInterceptors(a2aclient.NewStaticCallMetaInjector(a2aclient.CallMeta{"authorization": {"Bearer " + key}})))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Destroy() })
	return client
}

// TestA2AJSClient10 (issue 21 item 4): the A2A JS SDK 1.x client with its default options
// (ClientFactory from the agent card) speaks A2A 1.0 to the gateway — it used to fail with "No
// compatible transport found, available transports: JSONRPC" — and the a2a-go 0.3 client
// keeps speaking 0.3 on the same route; both send, stream and get a task created on the other
// replica, in either version. ListTasks lists the caller's tasks of both versions and none of
// another key's; an unsupported A2A-Version is -32009.
func TestA2AJSClient10(t *testing.T) {
	t.Parallel()
	dir := a2aJSDir(t)
	b := agentSetup(t, GatewayOpts{})
	agent := createAgent(t, b.A, "v10-agent", map[string]any{"model": "m"})
	key, _ := govKey(t, b.A, map[string]any{"models": []string{"m"}})
	other, _ := govKey(t, b.A, map[string]any{"models": []string{"m"}})

	// the card lists both interfaces at the gateway's url
	card := func(g *Gateway) string { return g.URL + "/a2a/" + agent + "/.well-known/agent-card.json" }
	st, body := b.A.DoKey(t, key, "GET", "/a2a/"+agent+"/.well-known/agent-card.json", nil)
	require.Equal(t, 200, st, "%s", body)
	require.JSONEq(t, `[{"url":"`+b.A.URL+`/a2a/`+agent+`","protocolBinding":"JSONRPC","protocolVersion":"1.0"},`+
		`{"url":"`+b.A.URL+`/a2a/`+agent+`","protocolBinding":"JSONRPC","protocolVersion":"0.3"}]`,
		gjson.GetBytes(body, "supportedInterfaces").Raw)

	// the 0.3 Go client streams a task on A and reads it on B
	go03A := newA2AClientKey(t, b.A, agent, key)
	go03B := newA2AClientKey(t, b.B, agent, key)
	task03, text03 := streamText(t, go03A, "stream from go 0.3")
	got, err := go03B.GetTask(context.Background(), &a2atypes.TaskQueryParams{ID: task03.ID})
	require.NoError(t, err)
	require.Equal(t, "completed", string(got.Status.State))

	// the 1.x JS client: send and stream on A, get both versions' tasks and list on B
	cmd := exec.Command("node", "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CARD_A="+card(b.A), "CARD_B="+card(b.B), "KEY="+key, "TASK_03="+string(task03.ID))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node client.mjs: %s", stderr.String())
	var report struct {
		ProtocolVersion string
		Send            struct {
			Role, Text string
			IsMessage  bool
		}
		Stream struct {
			Events       []string
			Text, TaskID string
		}
		GetOnB   struct{ ID, State, Text, History string }
		Get03OnB struct{ ID, State, Text string }
		ListOnB  struct {
			IDs           []string
			TotalSize     int
			NextPageToken string
		}
		Missing string
	}
	require.NoError(t, json.Unmarshal(out, &report), "%s", out)
	t.Logf("JS client report: %s", out)
	require.Equal(t, "1.0", report.ProtocolVersion, "the default client picked the 1.0 interface")
	require.True(t, report.Send.IsMessage)
	require.Equal(t, "ROLE_AGENT", report.Send.Role)
	require.NotEmpty(t, report.Send.Text)
	ev := report.Stream.Events
	require.GreaterOrEqual(t, len(ev), 4, "%v", ev)
	require.Equal(t, "task:TASK_STATE_SUBMITTED", ev[0])
	require.Equal(t, "status:TASK_STATE_WORKING", ev[1])
	require.Equal(t, "artifact", ev[2])
	require.Equal(t, "status:TASK_STATE_COMPLETED", ev[len(ev)-1])
	require.NotEmpty(t, report.Stream.Text)
	require.Equal(t, report.Stream.TaskID, report.GetOnB.ID)
	require.Equal(t, "TASK_STATE_COMPLETED", report.GetOnB.State)
	require.Equal(t, report.Stream.Text, report.GetOnB.Text, "GetTask on B has the text streamed on A")
	require.Equal(t, "stream from js", report.GetOnB.History)
	require.Equal(t, string(task03.ID), report.Get03OnB.ID, "a 0.3 task read over 1.0")
	require.Equal(t, "TASK_STATE_COMPLETED", report.Get03OnB.State)
	require.Equal(t, text03, report.Get03OnB.Text)
	require.ElementsMatch(t, []string{string(task03.ID), report.Stream.TaskID}, report.ListOnB.IDs)
	require.Equal(t, 2, report.ListOnB.TotalSize)
	require.Empty(t, report.ListOnB.NextPageToken)
	require.Contains(t, report.Missing, "TaskNotFoundError", "an unknown task is the SDK's task-not-found error")

	// the 0.3 client reads the task the 1.0 client streamed, on B
	got, err = go03B.GetTask(context.Background(), &a2atypes.TaskQueryParams{ID: a2atypes.TaskID(report.Stream.TaskID)})
	require.NoError(t, err)
	require.Equal(t, "completed", string(got.Status.State))
	require.Len(t, got.Artifacts, 1)

	// another key lists none of these tasks and cannot get them (task-not-found)
	v10 := func(g *Gateway, k string, method string, params map[string]any) []byte {
		st, body := a2aPost(t, g, k, "/a2a/"+agent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
			map[string]string{"A2A-Version": "1.0"})
		require.Equal(t, 200, st, "%s", body)
		return body
	}
	body = v10(b.B, other, "ListTasks", map[string]any{})
	require.JSONEq(t, `{"tasks":[],"nextPageToken":"","pageSize":50,"totalSize":0}`, gjson.GetBytes(body, "result").Raw, "%s", body)
	body = v10(b.B, other, "GetTask", map[string]any{"id": report.Stream.TaskID})
	require.Equal(t, int64(-32001), gjson.GetBytes(body, "error.code").Int(), "%s", body)
	// paging: one task per page, newest first, the cursor leads to the other
	body = v10(b.B, key, "ListTasks", map[string]any{"pageSize": 1})
	require.Equal(t, report.Stream.TaskID, gjson.GetBytes(body, "result.tasks.0.id").String(), "%s", body)
	require.False(t, gjson.GetBytes(body, "result.tasks.0.artifacts").Exists(), "artifacts only with includeArtifacts: %s", body)
	tok := gjson.GetBytes(body, "result.nextPageToken").String()
	require.NotEmpty(t, tok, "%s", body)
	body = v10(b.A, key, "ListTasks", map[string]any{"pageSize": 1, "pageToken": tok})
	require.Equal(t, string(task03.ID), gjson.GetBytes(body, "result.tasks.0.id").String(), "%s", body)
	require.Equal(t, "", gjson.GetBytes(body, "result.nextPageToken").String(), "%s", body)
	require.Equal(t, int64(2), gjson.GetBytes(body, "result.totalSize").Int(), "%s", body)

	// filters run in the shared table: status timestamp, state, context
	body = v10(b.B, key, "ListTasks", map[string]any{"statusTimestampAfter": "2999-01-01T00:00:00Z"})
	require.Equal(t, int64(0), gjson.GetBytes(body, "result.totalSize").Int(), "%s", body)
	body = v10(b.B, key, "ListTasks", map[string]any{"statusTimestampAfter": "2000-01-01T00:00:00Z", "status": "TASK_STATE_COMPLETED"})
	require.Equal(t, int64(2), gjson.GetBytes(body, "result.totalSize").Int(), "%s", body)
	body = v10(b.B, key, "ListTasks", map[string]any{"status": "TASK_STATE_CANCELED"})
	require.Equal(t, int64(0), gjson.GetBytes(body, "result.totalSize").Int(), "%s", body)
	body = v10(b.B, key, "ListTasks", map[string]any{"contextId": task03.ContextID})
	require.Equal(t, string(task03.ID), gjson.GetBytes(body, "result.tasks.0.id").String(), "%s", body)
	require.Equal(t, int64(1), gjson.GetBytes(body, "result.totalSize").Int(), "%s", body)

	// an unsupported version is VersionNotSupportedError; no header is 0.3, where 1.0 names are unknown
	st, body = a2aPost(t, b.A, key, "/a2a/"+agent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{}},
		map[string]string{"A2A-Version": "2.0"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(-32009), gjson.GetBytes(body, "error.code").Int(), "%s", body)
	require.Equal(t, "Version not supported", gjson.GetBytes(body, "error.message").String(), "%s", body)
	st, body = b.A.DoKey(t, key, "POST", "/a2a/"+agent, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(-32601), gjson.GetBytes(body, "error.code").Int(), "%s", body)
}

// a2aPost posts body as JSON to path on g with key and the extra headers.
func a2aPost(t *testing.T, g *Gateway, key, path string, body any, headers map[string]string) (int, []byte) {
	t.Helper()
	j, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", g.URL+path, bytes.NewReader(j))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// TestAgentAsModel (issue 21, Build: an agent is callable as a model): `model: "a2a/<agent
// name>"` on /v1/chat/completions of replica B calls an agent created on replica A through the
// LLM pipeline, plain and streamed; the key needs access to the agent's model; an unknown agent
// is the route's invalid-model 400.
func TestAgentAsModel(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{})
	createAgent(t, b.A, "model-agent", map[string]any{"model": "m"})
	key, _ := govKey(t, b.A, map[string]any{"models": []string{"m"}})
	denied, _ := govKey(t, b.A, map[string]any{"models": []string{"other"}})
	chat := func(model string, stream bool) map[string]any {
		return map[string]any{"model": model, "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "hi agent"}}}
	}
	st, body := b.B.DoKey(t, key, "POST", "/v1/chat/completions", chat("a2a/model-agent", false))
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "fake reply to: hi agent", gjson.GetBytes(body, "choices.0.message.content").String(), "%s", body)

	st, body = b.B.DoKey(t, key, "POST", "/v1/chat/completions", chat("a2a/model-agent", true))
	require.Equal(t, 200, st, "%s", body)
	require.Contains(t, string(body), "data: [DONE]")
	var text string
	for _, line := range bytes.Split(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && gjson.ValidBytes(d) {
			text += gjson.GetBytes(d, "choices.0.delta.content").String()
		}
	}
	require.Equal(t, "fake reply to: hi agent", text)

	st, body = b.B.DoKey(t, denied, "POST", "/v1/chat/completions", chat("a2a/model-agent", false))
	require.Equal(t, 401, st, "%s", body)
	require.Contains(t, gjson.GetBytes(body, "error.message").String(), "Tried to access m", "%s", body)

	st, body = b.B.DoKey(t, key, "POST", "/v1/chat/completions", chat("a2a/no-such-agent", false))
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, gjson.GetBytes(body, "error.message").String(), "Invalid model name passed in model=a2a/no-such-agent", "%s", body)
}
