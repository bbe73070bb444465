package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/itest/fakeupstream"
)

// claudeCodeBody is a /v1/messages request as Claude Code sends one: extended thinking,
// cache_control on the system prompt and a tool, and a tool round trip whose assistant turn
// keeps its signed thinking block.
const claudeCodeBody = `{"model":%q,"max_tokens":2048,
"thinking":{"type":"enabled","budget_tokens":1024},
"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],
"tools":[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
"messages":[
 {"role":"user","content":[{"type":"text","text":"open main.go"}]},
 {"role":"assistant","content":[{"type":"thinking","thinking":"I should read it.","signature":"EqQBCkYIBxgCKkDsig=="},{"type":"tool_use","id":"toolu_01A","name":"read_file","input":{"path":"main.go"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"package main"},{"type":"text","text":"summarise it","cache_control":{"type":"ephemeral"}}]}
],"metadata":{"user_id":"u-1"},"service_tier":"auto"}`

// postMessages posts a raw /v1/messages body with the given anthropic-beta header.
func postMessages(t *testing.T, g *Gateway, body []byte, beta string) (int, []byte) {
	t.Helper()
	st, b, _ := postMessagesH(t, g, body, beta)
	return st, b
}

// postMessagesH is postMessages also returning the answer's header.
func postMessagesH(t *testing.T, g *Gateway, body []byte, beta string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", g.URL+"/v1/messages", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("x-api-key", MasterKey)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", beta)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out, resp.Header
}

// withoutMembers returns body without the named top-level members.
func withoutMembers(t *testing.T, body []byte, names ...string) string {
	t.Helper()
	var err error
	for _, n := range names {
		body, err = sjson.DeleteBytes(body, n)
		require.NoError(t, err)
	}
	return string(body)
}

// Issue 21: Claude on Bedrock and Vertex keeps Anthropic's features on /v1/messages — the
// body goes to the Anthropic-native endpoint (Bedrock InvokeModel, Vertex rawPredict) with
// only the edits each needs, never through the Converse translation; created on A, used on B.
func TestClaudeNativeOnBedrockAndVertex(t *testing.T) {
	t.Parallel()
	creds := fakeupstream.Bedrock{Region: "us-west-2", AccessKeyID: "AKIAINVOKETEST001", SecretAccessKey: "invoke/test/secret/001"}
	br := fakeupstream.StartBedrock(t, creds, fakeupstream.WithStreamChunks(3))
	vx := fakeupstream.StartVertex(t, "proj-c", fakeupstream.WithStreamChunks(3))
	p := StartPair(t, GatewayOpts{})
	aws := map[string]any{"api_base": br.URL, "aws_region_name": creds.Region, "aws_access_key_id": creds.AccessKeyID, "aws_secret_access_key": creds.SecretAccessKey}
	withModel := func(m map[string]any, model string) map[string]any {
		out := map[string]any{"model": model}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	createModel(t, p.A, "cc-bedrock", withModel(aws, "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0"))
	createModel(t, p.A, "cc-bedrock-invoke", withModel(aws, "bedrock/invoke/anthropic.claude-3-5-haiku-20241022-v1:0"))
	createModel(t, p.A, "cc-bedrock-converse", withModel(aws, "bedrock/converse/anthropic.claude-3-5-haiku-20241022-v1:0"))
	createModel(t, p.A, "cc-vertex", map[string]any{"model": "vertex_ai/claude-sonnet-4-5@20250929", "api_base": vx.URL, "vertex_project": "proj-c", "vertex_credentials": vx.ServiceAccountJSON()})
	const beta = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"

	cases := []struct {
		model, path, streamPath string
		up                      *fakeupstream.Server
		bedrock                 bool
	}{
		{"cc-bedrock", "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke", "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream", br, true},
		{"cc-bedrock-invoke", "/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke", "/model/anthropic.claude-3-5-haiku-20241022-v1:0/invoke-with-response-stream", br, true},
		{"cc-vertex", "/v1/projects/proj-c/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			"/v1/projects/proj-c/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict", vx.Server, false},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			sent := []byte(fmt.Sprintf(claudeCodeBody, c.model))
			st, b, h := postMessagesH(t, p.B, sent, beta)
			require.Equal(t, 200, st, "%s", b)
			require.Equal(t, "fake reply to: summarise it", gjson.GetBytes(b, "content.0.text").Str, "%s", b)
			require.Equal(t, "end_turn", gjson.GetBytes(b, "stop_reason").Str)
			req, ok := c.up.LastRequest(c.path)
			require.True(t, ok, "%+v", c.up.Requests())
			got := gjson.ParseBytes(req.Body)
			// Everything the client sent arrives as it was, but for the endpoint's own edits.
			notTaken := []string{"model"}
			if c.bedrock { // Bedrock takes no service_tier: dropped, with the header
				notTaken = append(notTaken, "service_tier")
				require.Equal(t, "service_tier", h.Get("x-lockstep-dropped"))
			} else {
				require.Empty(t, h.Get("x-lockstep-dropped"))
			}
			require.JSONEq(t, withoutMembers(t, sent, notTaken...), withoutMembers(t, req.Body, "anthropic_version", "anthropic_beta"), "%s", req.Body)
			if c.bedrock {
				require.Equal(t, "bedrock-2023-05-31", got.Get("anthropic_version").Str)
				require.JSONEq(t, `["interleaved-thinking-2025-05-14","fine-grained-tool-streaming-2025-05-14"]`, got.Get("anthropic_beta").Raw)
				require.True(t, len(req.Header.Get("Authorization")) > 0, "SigV4-signed")
			} else {
				require.Equal(t, "vertex-2023-10-16", got.Get("anthropic_version").Str)
				require.Equal(t, beta, req.Header.Get("anthropic-beta"))
			}

			// Streamed, with the official SDK: the Anthropic events arrive verbatim.
			an := anthropic.NewClient(aoption.WithBaseURL(p.B.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0),
				aoption.WithHeader("anthropic-beta", beta))
			var params anthropic.BetaMessageNewParams
			require.NoError(t, json.Unmarshal(sent, &params))
			s := an.Beta.Messages.NewStreaming(context.Background(), params)
			var msg anthropic.BetaMessage
			for s.Next() {
				require.NoError(t, msg.Accumulate(s.Current()))
			}
			require.NoError(t, s.Err())
			require.Equal(t, "fake reply to: summarise it", msg.Content[0].Text)
			require.Equal(t, anthropic.BetaStopReasonEndTurn, msg.StopReason)
			require.Positive(t, msg.Usage.InputTokens)
			req, ok = c.up.LastRequest(c.streamPath)
			require.True(t, ok, "%+v", c.up.Requests())
			got = gjson.ParseBytes(req.Body)
			require.JSONEq(t, `{"type":"enabled","budget_tokens":1024}`, got.Get("thinking").Raw)
			require.Equal(t, "EqQBCkYIBxgCKkDsig==", got.Get("messages.1.content.0.signature").Str)
			require.Equal(t, "toolu_01A", got.Get("messages.1.content.1.id").Str)
			require.Equal(t, "ephemeral", got.Get("system.0.cache_control.type").Str)
			require.Equal(t, "ephemeral", got.Get("tools.0.cache_control.type").Str)
			require.Equal(t, !c.bedrock, got.Get("stream").Bool(), "Bedrock takes no stream member; Vertex does")
		})
	}

	// A tool call streamed back from InvokeModel reaches the client as Anthropic's tool_use.
	brTools := fakeupstream.StartBedrock(t, creds, fakeupstream.WithToolCalls())
	createModel(t, p.A, "cc-bedrock-tools", withModel(map[string]any{"api_base": brTools.URL, "aws_region_name": creds.Region,
		"aws_access_key_id": creds.AccessKeyID, "aws_secret_access_key": creds.SecretAccessKey}, "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"))
	an := anthropic.NewClient(aoption.WithBaseURL(p.B.URL), aoption.WithAPIKey(MasterKey), aoption.WithMaxRetries(0))
	s := an.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "cc-bedrock-tools", MaxTokens: 64,
		Tools:    []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "read_file", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}}}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("open main.go"))}})
	var msg anthropic.Message
	for s.Next() {
		require.NoError(t, msg.Accumulate(s.Current()))
	}
	require.NoError(t, s.Err())
	require.Equal(t, anthropic.StopReasonToolUse, msg.StopReason)
	require.Equal(t, "read_file", msg.Content[0].Name)

	// "converse/" keeps /v1/messages on Converse (LiteLLM's route hint), and chat on a Claude
	// model still goes through Converse.
	br.Reset()
	st, b := postMessages(t, p.B, []byte(`{"model":"cc-bedrock-converse","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`), "")
	require.Equal(t, 200, st, "%s", b)
	_, ok := br.LastRequest("/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse")
	require.True(t, ok, "%+v", br.Requests())
	st, b = p.B.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "cc-bedrock", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	require.Equal(t, 200, st, "%s", b)
	_, ok = br.LastRequest("/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/converse")
	require.True(t, ok, "%+v", br.Requests())

	// An image URL Bedrock cannot take is refused before any upstream call.
	br.Reset()
	st, b = postMessages(t, p.B, []byte(`{"model":"cc-bedrock","max_tokens":16,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},{"type":"text","text":"what is it"}]}]}`), "")
	require.Equal(t, 400, st, "%s", b)
	require.Contains(t, string(b), "messages: image URLs cannot be sent to provider bedrock; send the image as a base64 data: URL")
	require.Empty(t, br.Requests())
}
