package itest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Hostile inputs to the features of issues 19–21 found by the adversarial pass: each was
// accepted before and is refused (or bounded) now.

// A batch completion (comma-separated model) is bounded: 65 names are a 400 naming the bound
// (before, 100 000 names were 100 000 concurrent pipeline calls from one 1 MB request); 64
// names are served as a list of 64, duplicates included.
func TestBatchCompletionIsBounded(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	govMockModel(t, p.A, "bm", nil)
	call := func(n int) (int, []byte) {
		return p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": strings.Repeat("bm,", n-1) + "bm",
			"messages": []any{map[string]any{"role": "user", "content": "x"}}})
	}
	st, body := call(65)
	require.Equal(t, 400, st, "%s", body)
	require.Equal(t, "model: a batch completion names at most 64 models, got 65", gjson.GetBytes(body, "error.message").Str, "%s", body)
	st, body = call(64)
	require.Equal(t, 200, st, "%s", body)
	var list []map[string]any
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list, 64)
	for _, r := range list {
		require.Equal(t, "chat.completion", r["object"], "%v", r)
	}
}

// A remote A2A agent whose card URL points back at the gateway itself (its own /a2a/<name>,
// with the master key) is bounded: every remote call carries X-Lockstep-A2A-Hops (the
// inbound count plus one) and the A2A route refuses a request that already passed through 8,
// so the loop ends and the client gets the refusal (before: thousands of nested calls a
// second until the outermost timeout). A malformed count is a 400 naming the header.
func TestRemoteA2AAgentLoopIsBounded(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	st, body := p.A.Do(t, "POST", "/v1/agents", map[string]any{"agent_name": "loop",
		"agent_card_params": remoteCard("loop", "0.3", p.B.URL+"/a2a/loop"),
		"litellm_params":    map[string]any{"model": "a2a_agent/loop", "api_key": MasterKey, "timeout": 60}})
	require.Equal(t, 200, st, "%s", body)
	send := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": map[string]any{
		"kind": "message", "role": "user", "messageId": "m1", "parts": []any{map[string]any{"kind": "text", "text": "hi"}}}}}
	var msg string
	Eventually(t, "B serves the agent", func() bool {
		st, body = p.A.Do(t, "POST", "/a2a/loop", send)
		msg = string(body)
		return !strings.Contains(msg, "not found")
	})
	require.Contains(t, msg, "already passed through 8 remote A2A agent calls (X-Lockstep-A2A-Hops)", "status %d", st)

	for hops, want := range map[string]string{"8": "already passed through 8", "x": "X-Lockstep-A2A-Hops: must be a non-negative integer"} {
		b, _ := json.Marshal(send)
		req, err := http.NewRequest("POST", p.B.URL+"/a2a/loop", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+MasterKey)
		req.Header.Set("X-Lockstep-A2A-Hops", hops)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		rb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 400, resp.StatusCode, "%s", rb)
		require.Contains(t, string(rb), want)
	}
}
