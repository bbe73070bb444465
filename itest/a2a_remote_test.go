package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// remoteCard is the card of a remote A2A agent: 0.3 (protocolVersion, url) or 1.0 (the
// interface in supportedInterfaces).
func remoteCard(name, version, url string) map[string]any {
	c := agentCard(name)
	if version == "1.0" {
		delete(c, "url")
		c["protocolVersion"] = "1.0"
		c["supportedInterfaces"] = []any{map[string]any{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}
	} else {
		c["url"] = url
	}
	return c
}

// TestRemoteA2AAgents (issue 21, "the upstream agent called in the version its card pins"):
// an agent registered with litellm_params.model "a2a_agent/<name>" is a remote A2A agent the
// gateway proxies through its pipeline — key auth, guardrails on the texts, spend — calling the
// remote at the URL and in the version its card pins (a 0.3 card's url and protocolVersion, a
// 1.0 card's supportedInterfaces), whatever version the client speaks: the a2a-go 0.3 client
// and 1.0 JSON-RPC on a 1.0 remote, the A2A JS SDK 1.x on a 0.3 remote. Created on A, called
// on B.
func TestRemoteA2AAgents(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{})
	r03 := fakeupstream.StartA2AAgent(t, "0.3", fakeupstream.WithStreamChunks(3))
	r10 := fakeupstream.StartA2AAgent(t, "1.0", fakeupstream.WithStreamChunks(3))
	insertGuardrail(t, b.DB, "block-secret-remote",
		`{"guardrail": "litellm_content_filter", "mode": "pre_call", "blocked_words": [{"keyword": "topsecret", "action": "BLOCK"}]}`)
	create := func(name, version, url string, params map[string]any) string {
		st, body := b.A.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": name, "agent_card_params": remoteCard(name, version, url), "litellm_params": params})
		require.Equal(t, 200, st, "%s", body)
		return gjson.GetBytes(body, "agent_id").String()
	}
	id03 := create("remote-03", "0.3", r03.URL, map[string]any{"model": "a2a_agent/remote-03"})
	id10 := create("remote-10", "1.0", r10.URL, map[string]any{"model": "a2a_agent/remote-10", "guardrails": []string{"block-secret-remote"}})
	key, token := govKey(t, b.A, map[string]any{"models": []string{"a2a_agent/remote-03", "a2a_agent/remote-10"}})

	// The a2a-go 0.3 client on B, on the 1.0 remote: send and stream, the remote spoken to in 1.0.
	c10 := newA2AClientKey(t, b.B, id10, key)
	res, err := c10.SendMessage(context.Background(), &a2atypes.MessageSendParams{Message: a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "hello remote"})})
	require.NoError(t, err)
	msg, ok := res.(*a2atypes.Message)
	require.True(t, ok, "%T", res)
	require.Equal(t, "fake reply to: hello remote", msg.Parts[0].(a2atypes.TextPart).Text)
	req, ok := r10.LastRequest("/")
	require.True(t, ok)
	got := gjson.ParseBytes(req.Body)
	require.Equal(t, "SendMessage", got.Get("method").Str, "%s", req.Body)
	require.Equal(t, "1.0", req.Header.Get("A2A-Version"))
	require.Equal(t, "ROLE_USER", got.Get("params.message.role").Str)
	require.JSONEq(t, `[{"text":"hello remote"}]`, got.Get("params.message.parts").Raw)
	task, text := streamText(t, c10, "stream remote")
	require.Equal(t, "fake reply to: stream remote", text)
	req, _ = r10.LastRequest("/")
	require.Equal(t, "SendStreamingMessage", gjson.GetBytes(req.Body, "method").Str)
	// the task is the gateway's: read on A
	cA := newA2AClientKey(t, b.A, id10, key)
	gotTask, err := cA.GetTask(context.Background(), &a2atypes.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateCompleted, gotTask.Status.State)

	// 1.0 JSON-RPC on the 0.3 remote: the remote gets message/send in 0.3 shapes.
	st, body := a2aPost(t, b.B, key, "/a2a/"+id03, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
		"params": map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi in 1.0"}}}}},
		map[string]string{"A2A-Version": "1.0"})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "fake reply to: hi in 1.0", gjson.GetBytes(body, "result.message.parts.0.text").Str, "%s", body)
	require.Equal(t, "ROLE_AGENT", gjson.GetBytes(body, "result.message.role").Str)
	req, _ = r03.LastRequest("/")
	got = gjson.ParseBytes(req.Body)
	require.Equal(t, "message/send", got.Get("method").Str, "%s", req.Body)
	require.Empty(t, req.Header.Get("A2A-Version"))
	require.Equal(t, "message", got.Get("params.message.kind").Str)
	require.Equal(t, "user", got.Get("params.message.role").Str)
	require.JSONEq(t, `[{"kind":"text","text":"hi in 1.0"}]`, got.Get("params.message.parts").Raw)

	// The remote agent as a model on an LLM route (model "a2a/<agent>"), streamed.
	st, body = b.B.DoKey(t, key, "POST", "/v1/chat/completions", map[string]any{"model": "a2a/remote-03", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "as a model"}}})
	require.Equal(t, 200, st, "%s", body)
	var streamed string
	for _, line := range bytes.Split(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: {")); ok {
			streamed += gjson.GetBytes(append([]byte("{"), d...), "choices.0.delta.content").Str
		}
	}
	require.Equal(t, "fake reply to: as a model", streamed, "%s", body)
	req, _ = r03.LastRequest("/")
	require.Equal(t, "message/stream", gjson.GetBytes(req.Body, "method").Str)
	require.Equal(t, "as a model", gjson.GetBytes(req.Body, "params.message.parts.0.text").Str)

	// The pipeline: no key → 401 before the remote; the agent's guardrail blocks before the
	// remote; each call is charged to the key.
	calls := len(r10.Requests())
	st, body = a2aPost(t, b.B, "", "/a2a/"+id10, sendRequest(2, "no key"), nil)
	require.Equal(t, 401, st, "%s", body)
	st, body = a2aPost(t, b.B, key, "/a2a/"+id10, sendRequest(3, "the topsecret plan"), nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(-32602), gjson.GetBytes(body, "error.code").Int(), "%s", body)
	require.Len(t, r10.Requests(), calls, "nothing reached the remote")
	// spend logs: the remote calls under the key, with the ⌈chars/4⌉ token counts
	Eventually(t, "spend logs of the remote calls", func() bool {
		st, body := b.B.Do(t, "GET", "/spend/logs?api_key="+token, nil)
		require.Equal(t, 200, st, "%s", body)
		n := 0
		for _, l := range gjson.ParseBytes(body).Array() {
			if l.Get("model").Str == "a2a_agent/remote-10" && l.Get("status").Str == "success" {
				require.Positive(t, l.Get("prompt_tokens").Int(), l.Raw)
				require.Positive(t, l.Get("completion_tokens").Int(), l.Raw)
				n++
			}
		}
		return n >= 2
	})

	// The A2A JS SDK 1.x (default options) on the 0.3 remote, through both replicas.
	t.Run("js-1.x-client", func(t *testing.T) {
		dir := a2aJSDir(t)
		_, _ = streamText(t, newA2AClientKey(t, b.A, id03, key), "stream from go 0.3") // TASK_03
		task03, _ := streamText(t, newA2AClientKey(t, b.A, id03, key), "second go stream")
		card := func(g *Gateway) string { return g.URL + "/a2a/" + id03 + "/.well-known/agent-card.json" }
		cmd := exec.Command("node", "client.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CARD_A="+card(b.A), "CARD_B="+card(b.B), "KEY="+key, "TASK_03="+string(task03.ID))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "node client.mjs: %s", stderr.String())
		var report struct {
			ProtocolVersion string
			Send            struct{ Role, Text string }
			Stream          struct{ Text, TaskID string }
			GetOnB          struct{ State, Text string }
		}
		require.NoError(t, json.Unmarshal(out, &report), "%s", out)
		require.Equal(t, "1.0", report.ProtocolVersion)
		require.Equal(t, "ROLE_AGENT", report.Send.Role)
		require.Equal(t, "fake reply to: hello from js", report.Send.Text)
		require.Equal(t, "fake reply to: stream from js", report.Stream.Text)
		require.Equal(t, "TASK_STATE_COMPLETED", report.GetOnB.State)
		require.Equal(t, report.Stream.Text, report.GetOnB.Text)
		req, _ := r03.LastRequest("/")
		require.Equal(t, "message/stream", gjson.GetBytes(req.Body, "method").Str, "the 0.3 remote spoken to in 0.3")
	})
}
