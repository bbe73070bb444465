package itest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// agentBundle is two replicas on one database, a fake upstream, and model group "m" on it
// (created through A).
type agentBundle struct {
	*Pair
	up *fakeupstream.Server
}

func agentSetup(t *testing.T, o GatewayOpts, upOpts ...fakeupstream.Option) *agentBundle {
	t.Helper()
	b := &agentBundle{Pair: StartPair(t, o), up: fakeupstream.Start(t, upOpts...)}
	st, body := b.A.Do(t, "POST", "/model/new", map[string]any{
		"model_name":     "m",
		"litellm_params": map[string]any{"model": "openai/gpt-x", "api_base": b.up.URL + "/v1", "api_key": "sk-up"},
	})
	require.Equal(t, 200, st, "%s", body)
	return b
}

// agentCard is a valid A2A v0.3 AgentCard whose url points at the agent's original host.
func agentCard(name string) map[string]any {
	return map[string]any{
		"name":               name,
		"description":        "test agent " + name,
		"version":            "1.0.0",
		"url":                "http://agent.invalid/original",
		"protocolVersion":    "0.3.0",
		"capabilities":       map[string]any{"streaming": true},
		"defaultInputModes":  []string{"text"},
		"defaultOutputModes": []string{"text"},
		"skills":             []any{map[string]any{"id": "chat", "name": "Chat", "description": "chats", "tags": []string{"chat"}}},
	}
}

// createAgent creates an agent through g and returns its agent_id.
func createAgent(t *testing.T, g *Gateway, name string, params map[string]any) string {
	t.Helper()
	st, body := g.Do(t, "POST", "/v1/agents", map[string]any{
		"agent_name": name, "agent_card_params": agentCard(name), "litellm_params": params,
	})
	require.Equal(t, 200, st, "%s", body)
	id := gjson.GetBytes(body, "agent_id").String()
	_, err := uuid.Parse(id)
	require.NoError(t, err, "agent_id %q", id)
	return id
}

func sendRequest(id any, text string) map[string]any {
	return map[string]any{
		"jsonrpc": "2.0", "id": id, "method": "message/send",
		"params": map[string]any{"message": map[string]any{
			"kind": "message", "role": "user", "messageId": uuid.NewString(),
			"parts": []any{map[string]any{"kind": "text", "text": text}},
		}},
	}
}

// rpc posts one JSON-RPC request to /a2a/{agent} on g.
func rpc(t *testing.T, g *Gateway, agent string, body any) (int, []byte) {
	t.Helper()
	return g.Do(t, "POST", "/a2a/"+agent, body)
}

// sendText runs message/send through g and returns the reply text, failing on a JSON-RPC error.
func sendText(t *testing.T, g *Gateway, agent, text string) string {
	t.Helper()
	st, body := rpc(t, g, agent, sendRequest("req-1", text))
	require.Equal(t, 200, st, "%s", body)
	res := gjson.ParseBytes(body)
	require.False(t, res.Get("error").Exists(), "%s", body)
	require.Equal(t, "2.0", res.Get("jsonrpc").String())
	require.Equal(t, "req-1", res.Get("id").String())
	require.Equal(t, "message", res.Get("result.kind").String(), "%s", body)
	require.Equal(t, "agent", res.Get("result.role").String())
	require.NotEmpty(t, res.Get("result.messageId").String())
	require.Equal(t, "text", res.Get("result.parts.0.kind").String())
	return res.Get("result.parts.0.text").String()
}

// requireAgentNotFound checks the API.md unknown-agent answer: HTTP 404 with exactly the
// JSON-RPC -32000 error.
func requireAgentNotFound(t *testing.T, g *Gateway, agent string) {
	t.Helper()
	st, body := rpc(t, g, agent, sendRequest(7, "hi"))
	require.Equal(t, 404, st, "%s", body)
	require.JSONEq(t, fmt.Sprintf(`{"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": "Agent '%s' not found"}}`, agent), string(body))
}

func TestAgentCreatedOnAServesOnB(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{})
	id := createAgent(t, b.A, "helper", map[string]any{"model": "m"})

	// Immediately on B, by id and by name: no wait for the notification.
	require.Equal(t, "fake reply to: hello by id", sendText(t, b.B, id, "hello by id"))
	require.Equal(t, "fake reply to: hello by name", sendText(t, b.B, "helper", "hello by name"))
	req, ok := b.up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "gpt-x", gjson.GetBytes(req.Body, "model").String())
	require.Equal(t, "Bearer sk-up", req.Header.Get("Authorization"))

	// The card, on B, by id and name, on both well-known paths: url rewritten to B.
	for _, ref := range []string{id, "helper"} {
		for _, file := range []string{"agent-card.json", "agent.json"} {
			st, body := b.B.Do(t, "GET", "/a2a/"+ref+"/.well-known/"+file, nil)
			require.Equal(t, 200, st, "%s", body)
			card := gjson.ParseBytes(body)
			require.Equal(t, b.B.URL+"/a2a/"+id, card.Get("url").String())
			require.Equal(t, "helper", card.Get("name").String())
			require.Equal(t, "JSONRPC", card.Get("preferredTransport").String())
			require.True(t, card.Get("capabilities.streaming").Bool())
		}
	}

	// Behind a load balancer the forwarded scheme and host win.
	req2, err := http.NewRequest("GET", b.B.URL+"/a2a/helper/.well-known/agent-card.json", nil)
	require.NoError(t, err)
	req2.Header.Set("Authorization", "Bearer "+MasterKey)
	req2.Header.Set("X-Forwarded-Proto", "https")
	req2.Header.Set("X-Forwarded-Host", "gateway.example.com")
	resp, err := httpClient.Do(req2)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var card map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&card))
	require.Equal(t, "https://gateway.example.com/a2a/"+id, card["url"])

	// A2A routes need a key.
	st, _ := b.B.DoKey(t, "", "POST", "/a2a/helper", sendRequest(1, "hi"))
	require.Equal(t, 401, st)
}

func TestAgentManagementAPI(t *testing.T) {
	t.Parallel()
	config := `
agents:
  - agent_id: cfg-agent
    agent_name: config-agent
    agent_card_params:
      name: config-agent
      description: from the config file
      version: "1.0.0"
      capabilities: {}
      defaultInputModes: [text]
      defaultOutputModes: [text]
      skills: []
    litellm_params:
      model: m
`
	b := agentSetup(t, GatewayOpts{Config: config})

	// An agent with its own upstream (not a gateway model group): its api_key is never shown.
	direct := map[string]any{"model": "openai/gpt-direct", "api_base": b.up.URL + "/v1", "api_key": "sk-direct-secret"}
	st, body := b.A.Do(t, "POST", "/v1/agents", map[string]any{
		"agent_name": "direct", "agent_card_params": agentCard("direct"), "litellm_params": direct,
	})
	require.Equal(t, 200, st, "%s", body)
	created := gjson.ParseBytes(body)
	id := created.Get("agent_id").String()
	require.Equal(t, "direct", created.Get("agent_name").String())
	require.Equal(t, "direct", created.Get("agent_card_params.name").String())
	require.Equal(t, "openai/gpt-direct", created.Get("litellm_params.model").String())
	require.NotContains(t, string(body), "sk-direct-secret")
	require.True(t, created.Get("created_at").Exists())

	// Served on B without spending a models read-through.
	models := b.B.ReadThrough(t, "models")
	require.Equal(t, "fake reply to: direct call", sendText(t, b.B, "direct", "direct call"))
	require.Equal(t, models, b.B.ReadThrough(t, "models"))
	req, ok := b.up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, "Bearer sk-direct-secret", req.Header.Get("Authorization"))
	require.Equal(t, "gpt-direct", gjson.GetBytes(req.Body, "model").String())

	// Refused, each with a 400 naming the problem, and nothing stored.
	bad := []struct {
		name string
		body any
		want []string
	}{
		{"DuplicateName", map[string]any{"agent_name": "direct", "agent_card_params": agentCard("direct"), "litellm_params": map[string]any{"model": "m"}},
			[]string{"Agent with name 'direct' already exists"}},
		{"ConfigName", map[string]any{"agent_name": "config-agent", "agent_card_params": agentCard("x"), "litellm_params": map[string]any{"model": "m"}},
			[]string{"Agent with name 'config-agent' already exists"}},
		{"CardFields", map[string]any{"agent_name": "bad-card", "agent_card_params": map[string]any{
			"description": "d", "version": "1", "capabilities": map[string]any{}, "defaultInputModes": []string{"text"},
			"defaultOutputModes": []string{"text"}, "skills": []any{map[string]any{"id": "s", "name": "s", "description": "s"}},
		}, "litellm_params": map[string]any{"model": "m"}},
			[]string{"agent_card_params.name is required", "agent_card_params.skills[0].tags is required"}},
		{"NoCard", map[string]any{"agent_name": "no-card", "litellm_params": map[string]any{"model": "m"}},
			[]string{"agent_card_params is required"}},
		{"NoModel", map[string]any{"agent_name": "no-model", "agent_card_params": agentCard("no-model"), "litellm_params": map[string]any{}},
			[]string{"litellm_params.model is required"}},
		{"NoName", map[string]any{"agent_card_params": agentCard("x"), "litellm_params": map[string]any{"model": "m"}},
			[]string{"agent_name is required"}},
		{"BadAPIBase", map[string]any{"agent_name": "bad-base", "agent_card_params": agentCard("bad-base"),
			"litellm_params": map[string]any{"model": "openai/x", "api_base": "ftp://nowhere"}},
			[]string{"litellm_params.api_base"}},
		{"MalformedJSON", `{"agent_name": `, []string{"malformed JSON body"}},
	}
	for _, tt := range bad {
		st, body := b.A.Do(t, "POST", "/v1/agents", tt.body)
		require.Equal(t, 400, st, "%s: %s", tt.name, body)
		msg := gjson.GetBytes(body, "error.message").String()
		for _, w := range tt.want {
			require.Contains(t, msg, w, tt.name)
		}
	}

	// List (bare array) and get, on B: the config agent and the one DB agent.
	st, body = b.B.Do(t, "GET", "/v1/agents", nil)
	require.Equal(t, 200, st, "%s", body)
	list := gjson.ParseBytes(body)
	require.True(t, list.IsArray(), "%s", body)
	var names []string
	for _, a := range list.Array() {
		names = append(names, a.Get("agent_name").String())
	}
	require.Equal(t, []string{"config-agent", "direct"}, names)
	require.NotContains(t, string(body), "sk-direct-secret")

	st, body = b.B.Do(t, "GET", "/v1/agents/"+id, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "direct", gjson.GetBytes(body, "agent_name").String())
	st, body = b.B.Do(t, "GET", "/v1/agents/cfg-agent", nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "config-agent", gjson.GetBytes(body, "agent_name").String())
	st, _ = b.B.Do(t, "GET", "/v1/agents/no-such-id", nil)
	require.Equal(t, 404, st)

	// The config agent serves, and cannot be edited or deleted.
	require.Equal(t, "fake reply to: cfg", sendText(t, b.B, "config-agent", "cfg"))
	st, body = b.A.Do(t, "DELETE", "/v1/agents/cfg-agent", nil)
	require.Equal(t, 400, st, "%s", body)
	require.Contains(t, gjson.GetBytes(body, "error.message").String(), "Agent in config")
	st, _ = b.A.Do(t, "PATCH", "/v1/agents/cfg-agent", map[string]any{"agent_name": "renamed"})
	require.Equal(t, 400, st)

	// PATCH on A renames and switches to the gateway model group; B serves the new name at once
	// (read-through by name), and the api_key is kept by the merge.
	st, body = b.A.Do(t, "PATCH", "/v1/agents/"+id, map[string]any{"agent_name": "renamed", "litellm_params": map[string]any{"model": "openai/gpt-renamed"}})
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "renamed", gjson.GetBytes(body, "agent_name").String())
	require.Equal(t, "fake reply to: after rename", sendText(t, b.B, "renamed", "after rename"))
	req, _ = b.up.LastRequest("/v1/chat/completions")
	require.Equal(t, "gpt-renamed", gjson.GetBytes(req.Body, "model").String())
	require.Equal(t, "Bearer sk-direct-secret", req.Header.Get("Authorization"))

	// PUT replaces everything: now backed by model group "m".
	st, body = b.A.Do(t, "PUT", "/v1/agents/"+id, map[string]any{"agent_name": "replaced", "agent_card_params": agentCard("replaced"), "litellm_params": map[string]any{"model": "m"}})
	require.Equal(t, 200, st, "%s", body)
	require.JSONEq(t, `{"model": "m"}`, gjson.GetBytes(body, "litellm_params").Raw)
	st, _ = b.A.Do(t, "PUT", "/v1/agents/"+id, map[string]any{"agent_name": "replaced"})
	require.Equal(t, 400, st)

	// A virtual key may call A2A routes, not the management API.
	st, body = b.A.Do(t, "POST", "/key/generate", map[string]any{})
	require.Equal(t, 200, st, "%s", body)
	vk := gjson.GetBytes(body, "key").String()
	st, _ = b.B.DoKey(t, vk, "GET", "/v1/agents", nil)
	require.Equal(t, 403, st)
	st, body = b.B.DoKey(t, vk, "POST", "/a2a/replaced", sendRequest(1, "with a virtual key"))
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "fake reply to: with a virtual key", gjson.GetBytes(body, "result.parts.0.text").String())

	// Delete: 404 when unknown, then gone.
	st, _ = b.A.Do(t, "DELETE", "/v1/agents/no-such-id", nil)
	require.Equal(t, 404, st)
	st, body = b.A.Do(t, "DELETE", "/v1/agents/"+id, nil)
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, "Agent "+id+" deleted successfully", gjson.GetBytes(body, "message").String())
	st, _ = b.A.Do(t, "GET", "/v1/agents/"+id, nil)
	require.Equal(t, 404, st)
	requireAgentNotFound(t, b.A, id) // writer-local apply: gone on A at once
}

// newA2AClient builds a2a-go's v0.3 JSON-RPC client against g the way an A2A caller does:
// fetch the card, then call the url it advertises, sending the key on every call.
func newA2AClient(t *testing.T, g *Gateway, agent, wantURL string) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(httpClient).Resolve(ctx, g.URL+"/a2a/"+agent,
		agentcard.WithRequestHeader("Authorization", "Bearer "+MasterKey))
	require.NoError(t, err)
	if wantURL != "" {
		require.Equal(t, wantURL, card.URL)
	}
	client, err := a2aclient.NewFromCard(ctx, card,
		a2aclient.WithJSONRPCTransport(httpClient),
		a2aclient.WithInterceptors(a2aclient.NewStaticCallMetaInjector(
			a2aclient.CallMeta{"authorization": {"Bearer " + MasterKey}})),
	)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Destroy() })
	return client
}

// streamText runs message/stream through the official client, checks the A2A event sequence
// (task submitted → working → artifact chunks → completed, final) and returns the task and
// the streamed text.
func streamText(t *testing.T, client *a2aclient.Client, text string) (*a2atypes.Task, string) {
	t.Helper()
	msg := a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: text})
	var events []a2atypes.Event
	for ev, err := range client.SendStreamingMessage(context.Background(), &a2atypes.MessageSendParams{Message: msg}) {
		require.NoError(t, err)
		events = append(events, ev)
	}
	require.GreaterOrEqual(t, len(events), 4, "events: %v", events)
	task, ok := events[0].(*a2atypes.Task)
	require.True(t, ok, "first event is %T", events[0])
	require.Equal(t, a2atypes.TaskStateSubmitted, task.Status.State)
	require.Equal(t, msg.ID, task.History[0].ID)
	working, ok := events[1].(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, ok, "second event is %T", events[1])
	require.Equal(t, a2atypes.TaskStateWorking, working.Status.State)
	require.False(t, working.Final)
	var out strings.Builder
	chunks := events[2 : len(events)-1]
	for i, ev := range chunks {
		chunk, ok := ev.(*a2atypes.TaskArtifactUpdateEvent)
		require.True(t, ok, "event %d is %T", i+2, ev)
		require.Equal(t, task.ID, chunk.TaskID)
		require.Equal(t, i > 0, chunk.Append)
		require.Equal(t, i == len(chunks)-1, chunk.LastChunk)
		for _, p := range chunk.Artifact.Parts {
			out.WriteString(p.(a2atypes.TextPart).Text)
		}
	}
	done, ok := events[len(events)-1].(*a2atypes.TaskStatusUpdateEvent)
	require.True(t, ok, "last event is %T", events[len(events)-1])
	require.Equal(t, a2atypes.TaskStateCompleted, done.Status.State, "%+v", done.Status)
	require.True(t, done.Final)
	return task, out.String()
}

func TestAgentOfficialClient(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{}, fakeupstream.WithStreamChunks(4))
	id := createAgent(t, b.A, "sdk-agent", map[string]any{"model": "m"})
	client := newA2AClient(t, b.B, "sdk-agent", b.B.URL+"/a2a/"+id)
	ctx := context.Background()

	msg := a2atypes.NewMessage(a2atypes.MessageRoleUser, a2atypes.TextPart{Text: "ping"})
	msg.ContextID = "ctx-1"
	result, err := client.SendMessage(ctx, &a2atypes.MessageSendParams{Message: msg})
	require.NoError(t, err)
	reply, ok := result.(*a2atypes.Message)
	require.True(t, ok, "result is %T", result)
	require.Equal(t, a2atypes.MessageRoleAgent, reply.Role)
	require.Equal(t, "ctx-1", reply.ContextID)
	require.Equal(t, a2atypes.ContentParts{a2atypes.TextPart{Text: "fake reply to: ping"}}, reply.Parts)

	task, text := streamText(t, client, "stream me")
	require.Equal(t, "fake reply to: stream me", text)
	req, ok := b.up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.True(t, gjson.GetBytes(req.Body, "stream").Bool(), "%s", req.Body)

	// tasks/get on the replica that ran the stream.
	got, err := client.GetTask(ctx, &a2atypes.TaskQueryParams{ID: task.ID})
	require.NoError(t, err)
	require.Equal(t, a2atypes.TaskStateCompleted, got.Status.State)
	require.Equal(t, "fake reply to: stream me", got.Artifacts[0].Parts[0].(a2atypes.TextPart).Text)
	_, err = client.GetTask(ctx, &a2atypes.TaskQueryParams{ID: "no-such-task"})
	require.ErrorIs(t, err, a2atypes.ErrTaskNotFound)
}

func TestAgentUnknownAndBadJSONRPC(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{})
	createAgent(t, b.A, "rpc-agent", map[string]any{"model": "m"})

	// Unknown agent on B: 404 -32000, one agents read-through, no models read-through.
	models := b.B.ReadThrough(t, "models")
	agents := b.B.ReadThrough(t, "agents")
	requireAgentNotFound(t, b.B, "no-such-agent")
	st, body := b.B.Do(t, "GET", "/a2a/no-such-agent/.well-known/agent-card.json", nil)
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, models, b.B.ReadThrough(t, "models"))
	require.Greater(t, b.B.ReadThrough(t, "agents")["attempts"], agents["attempts"])

	// Streaming to an unknown agent: the same 404.
	st, body = rpc(t, b.B, "no-such-agent", map[string]any{"jsonrpc": "2.0", "id": 7, "method": "message/stream",
		"params": sendRequest(7, "x")["params"]})
	require.Equal(t, 404, st, "%s", body)
	require.Equal(t, int64(-32000), gjson.GetBytes(body, "error.code").Int())

	params := sendRequest(1, "x")["params"]
	bad := []struct {
		name string
		body any
		code int64
		id   string // raw JSON id expected in the answer
	}{
		{"NoJSONRPC", map[string]any{"id": 1, "method": "message/send", "params": params}, -32600, "1"},
		{"WrongVersion", map[string]any{"jsonrpc": "1.0", "id": 1, "method": "message/send", "params": params}, -32600, "1"},
		{"NoMethod", map[string]any{"jsonrpc": "2.0", "id": 1, "params": params}, -32600, "1"},
		{"Batch", `[{"jsonrpc": "2.0", "id": 1, "method": "message/send"}]`, -32600, "null"},
		{"UnknownMethod", map[string]any{"jsonrpc": "2.0", "id": "u", "method": "message/explode", "params": params}, -32601, `"u"`},
		{"NoParts", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "message/send",
			"params": map[string]any{"message": map[string]any{"role": "user", "messageId": "m1"}}}, -32602, "2"},
		{"EmptyParts", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "message/send",
			"params": map[string]any{"message": map[string]any{"role": "user", "messageId": "m1", "parts": []any{}}}}, -32602, "2"},
		{"NoMessage", map[string]any{"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": map[string]any{}}, -32602, "2"},
		{"InvalidJSON", `{"jsonrpc": "2.0", "id": 1, "method": `, -32700, "null"},
		{"NotJSON", `hello`, -32700, "null"},
		{"TaskNotFound", map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": map[string]any{"id": "nope"}}, -32001, "3"},
	}
	for _, tt := range bad {
		st, body := rpc(t, b.B, "rpc-agent", tt.body)
		require.Equal(t, 200, st, "%s: %s", tt.name, body)
		res := gjson.ParseBytes(body)
		require.Equal(t, "2.0", res.Get("jsonrpc").String(), tt.name)
		require.Equal(t, tt.code, res.Get("error.code").Int(), "%s: %s", tt.name, body)
		require.NotEmpty(t, res.Get("error.message").String(), tt.name)
		require.Equal(t, tt.id, res.Get("id").Raw, "%s: %s", tt.name, body)
		require.False(t, res.Get("result").Exists(), tt.name)
	}

	// Malformed message/stream params: one SSE event carrying the error.
	req, err := http.NewRequest("POST", b.B.URL+"/a2a/rpc-agent", strings.NewReader(
		`{"jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": {"message": {"role": "user"}}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/event-stream")
	data := sseData(t, resp)
	require.Len(t, data, 1)
	require.Equal(t, int64(-32602), gjson.Get(data[0], "error.code").Int(), data[0])

	// Nothing crashed: both replicas still answer.
	require.Equal(t, "fake reply to: still here", sendText(t, b.B, "rpc-agent", "still here"))
	require.Equal(t, "fake reply to: still here", sendText(t, b.A, "rpc-agent", "still here"))
}

// sseData returns the data: payloads of an SSE response.
func sseData(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
			out = append(out, string(bytes.TrimSpace(d)))
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func TestAgentDeletedOnAStopsOnB(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{})
	id := createAgent(t, b.A, "short-lived", map[string]any{"model": "m"})
	require.Equal(t, "fake reply to: alive", sendText(t, b.B, id, "alive"))
	require.Equal(t, "fake reply to: alive", sendText(t, b.B, "short-lived", "alive"))

	st, body := b.A.Do(t, "DELETE", "/v1/agents/"+id, nil)
	require.Equal(t, 200, st, "%s", body)

	Eventually(t, "B drops the deleted agent", func() bool {
		st, _ := rpc(t, b.B, id, sendRequest(1, "anyone?"))
		return st == 404
	})
	requireAgentNotFound(t, b.B, id)
	requireAgentNotFound(t, b.B, "short-lived")
	st, _ = b.B.Do(t, "GET", "/a2a/"+id+"/.well-known/agent-card.json", nil)
	require.Equal(t, 404, st)
	st, _ = b.B.Do(t, "GET", "/v1/agents/"+id, nil)
	require.Equal(t, 404, st)
}

func insertGuardrail(t *testing.T, db, name, params string) {
	t.Helper()
	PSQL(t, db, `INSERT INTO gateway.guardrails (guardrail_id, guardrail_name, litellm_params) VALUES ($1, $2, $3::jsonb)`,
		uuid.NewString(), name, params)
}

func TestAgentGuardrails(t *testing.T) {
	t.Parallel()
	b := agentSetup(t, GatewayOpts{})
	// Written straight into Postgres: no gateway code on the write path.
	insertGuardrail(t, b.DB, "mask-email",
		`{"guardrail": "litellm_content_filter", "mode": "pre_call", "patterns": [{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"}]}`)
	insertGuardrail(t, b.DB, "block-secret",
		`{"guardrail": "litellm_content_filter", "mode": "pre_call", "blocked_words": [{"keyword": "topsecret", "action": "BLOCK"}]}`)
	insertGuardrail(t, b.DB, "mask-reply",
		`{"guardrail": "litellm_content_filter", "mode": "post_call", "patterns": [{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"}]}`)

	createAgent(t, b.A, "guarded", map[string]any{"model": "m", "guardrails": []string{"mask-email", "block-secret"}})
	createAgent(t, b.A, "guarded-out", map[string]any{"model": "m", "guardrails": "mask-reply"})
	createAgent(t, b.A, "missing-guard", map[string]any{"model": "m", "guardrails": []string{"no-such-guardrail"}})

	// pre_call MASK: the upstream never sees the address.
	reply := sendText(t, b.B, "guarded", "mail bob@example.com please")
	req, ok := b.up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	sent := gjson.GetBytes(req.Body, "messages.0.content").String()
	require.NotContains(t, sent, "bob@example.com")
	require.Contains(t, sent, "REDACTED")
	require.Equal(t, "fake reply to: "+sent, reply)

	// Streaming goes through the same input guardrail.
	client := newA2AClient(t, b.B, "guarded", "")
	_, text := streamText(t, client, "stream to bob@example.com")
	require.NotContains(t, text, "bob@example.com")
	req, _ = b.up.LastRequest("/v1/chat/completions")
	require.NotContains(t, string(req.Body), "bob@example.com")

	// pre_call BLOCK: -32602 with the content filter's message; no upstream call.
	calls := len(b.up.Requests())
	st, body := rpc(t, b.B, "guarded", sendRequest(5, "the topsecret plan"))
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(-32602), gjson.GetBytes(body, "error.code").Int(), "%s", body)
	require.Equal(t, "Content blocked: keyword 'topsecret' detected", gjson.GetBytes(body, "error.message").String())
	require.Equal(t, calls, len(b.up.Requests()))

	// post_call MASK: the upstream saw the address, the caller does not, streamed or not.
	reply = sendText(t, b.B, "guarded-out", "reply to carol@example.com")
	req, _ = b.up.LastRequest("/v1/chat/completions")
	require.Contains(t, string(req.Body), "carol@example.com")
	require.NotContains(t, reply, "carol@example.com")
	require.Contains(t, reply, "REDACTED")
	outClient := newA2AClient(t, b.B, "guarded-out", "")
	_, text = streamText(t, outClient, "stream to carol@example.com")
	require.NotContains(t, text, "carol@example.com")
	require.Contains(t, text, "REDACTED")

	// An agent whose guardrail does not exist never runs unguarded.
	st, body = rpc(t, b.B, "missing-guard", sendRequest(6, "hi"))
	require.Equal(t, 200, st, "%s", body)
	require.Equal(t, int64(-32603), gjson.GetBytes(body, "error.code").Int(), "%s", body)
	require.Contains(t, gjson.GetBytes(body, "error.message").String(), "Guardrail 'no-such-guardrail' not found")
}
