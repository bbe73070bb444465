package format

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestAnthropicNativeJSON(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]bool{
		"claude-sonnet-4-5": true, "claude-sonnet-4-5-20250929": true, "claude-opus-4-1-20250805": true,
		"claude-opus-4-5": true, "claude-haiku-4-5": true, "claude-opus-4-6": true, "claude-sonnet-4.5": true,
		"claude-sonnet-4-20250514": false, "claude-opus-4-20250514": false, "claude-3-5-sonnet-20241022": false,
		"claude-3-7-sonnet-latest": false, "claude-sonnet-4-0": false, "claude-sonnet-4": false,
	} {
		require.Equal(t, want, anthropicNativeJSON(model), model)
	}
}

// The forced structured-output tool's call comes back as text with a natural stop; namespace
// tool calls under the client's names.
func TestFixResult(t *testing.T) {
	t.Parallel()
	x := &xlate{jsonTool: true, ns: map[string]nsName{"ns__a": {ns: "ns", name: "a"}}}
	res := &result{blocks: []block{{tool: true, name: jsonToolName, args: `{"a":1}`}}, stop: stopTool}
	x.fixResult(res)
	require.Equal(t, []block{{text: `{"a":1}`}}, res.blocks)
	require.Equal(t, stopEnd, res.stop)
	res = &result{blocks: []block{{tool: true, id: "c", name: "ns__a", args: `{}`}}, stop: stopTool}
	x.fixResult(res)
	require.Equal(t, stopTool, res.stop)
	body := gjson.ParseBytes(renderResponses(res, 1))
	require.Equal(t, "a", body.Get("output.0.name").Str)
	require.Equal(t, "ns", body.Get("output.0.namespace").Str)

	// streamed: the tool's argument deltas are text deltas
	r := x.renderer(newRenderer(FormatChat, false))
	b := r.start(nil, "id", "m", usage{})
	b = r.toolStart(b, "t", jsonToolName)
	b = r.toolArgs(b, `{"a":`)
	b = r.toolArgs(b, `1}`)
	b = r.finish(b, stopTool, "", usage{})
	s := string(b)
	require.Contains(t, s, `"content":"{\"a\":"`)
	require.NotContains(t, s, "tool_calls")
	require.Contains(t, s, `"finish_reason":"stop"`)

	h := http.Header{}
	(&xlate{dropped: []string{"seed", "n"}}).setHeader(h)
	require.Equal(t, "seed,n", h.Get("x-lockstep-dropped"))
	(*xlate)(nil).setHeader(h)
}

// Reasoning in answers: Anthropic thinking (with its signature) ⇄ chat reasoning_content and
// LiteLLM's thinking_blocks, plain and streamed; a chat turn's thinking_blocks reach Anthropic
// again.
func TestReasoningAcrossFormats(t *testing.T) {
	t.Parallel()
	ant := `{"id":"msg_1","model":"claude","content":[{"type":"thinking","thinking":"hmm","signature":"sig1"},{"type":"text","text":"42"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}`
	res, err := parseMessagesResult([]byte(ant))
	require.NoError(t, err)
	require.Equal(t, "42", res.text())
	chat := gjson.ParseBytes(renderChat(res, 1))
	require.Equal(t, "42", chat.Get("choices.0.message.content").Str)
	require.Equal(t, "hmm", chat.Get("choices.0.message.reasoning_content").Str)
	require.JSONEq(t, `[{"type":"thinking","thinking":"hmm","signature":"sig1"}]`, chat.Get("choices.0.message.thinking_blocks").Raw)
	resp := gjson.ParseBytes(renderResponses(res, 1))
	require.Equal(t, int64(2), resp.Get("output.#").Int(), resp.Raw)
	require.JSONEq(t, `{"id":"rs_1_0","type":"reasoning","status":"completed","summary":[{"type":"summary_text","text":"hmm"}],"encrypted_content":"lockstep.anthropic.thinking:sig1"}`, resp.Get("output.0").Raw)
	require.Equal(t, "message", resp.Get("output.1.type").Str)

	// streamed to a Responses client: a reasoning item with its summary and signature
	rr := newRenderer(FormatResponses, false)
	b := rr.start(nil, "msg_9", "m", usage{})
	b = streamThinking(rr, b, "th")
	b = streamSignature(rr, b, "sg")
	b = rr.text(b, "hi")
	b = rr.finish(b, stopEnd, "", usage{})
	st := string(b)
	require.Contains(t, st, `"type":"response.reasoning_summary_text.delta"`)
	require.Contains(t, st, `"item_id":"rs_9_0","output_index":0,"summary_index":0,"delta":"th"`)
	require.Contains(t, st, `"encrypted_content":"lockstep.anthropic.thinking:sg"`)
	require.Contains(t, st, `"item_id":"msg_9_1"`)

	// chat upstream reasoning_content → a thinking block for a messages client
	cr, err := parseChatResult([]byte(`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":"ok","reasoning_content":"think"},"finish_reason":"stop"}]}`))
	require.NoError(t, err)
	msg := gjson.ParseBytes(renderMessages(cr))
	require.JSONEq(t, `{"type":"thinking","thinking":"think","signature":""}`, msg.Get("content.0").Raw)
	require.Equal(t, "ok", msg.Get("content.1.text").Str)

	// streamed: Anthropic thinking_delta / signature_delta → chat reasoning_content and
	// thinking_blocks
	dec := newMessagesDecoder(newRenderer(FormatChat, false))
	var out []byte
	for _, ev := range [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s9"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		out, _, _ = dec.Frame(out, []byte(ev[0]), []byte(ev[1]))
	}
	s := string(out)
	require.Contains(t, s, `"delta":{"reasoning_content":"hm"}`)
	require.Contains(t, s, `"thinking_blocks":[{"type":"thinking","thinking":"","signature":"s9"}]`)
	require.Contains(t, s, `"delta":{"content":"hi"}`)

	// streamed: chat reasoning_content → Anthropic thinking events
	cd := newChatDecoder(newRenderer(FormatMessages, false))
	out = nil
	for _, f := range []string{
		`{"id":"c","model":"m","choices":[{"delta":{"role":"assistant","reasoning_content":"r1"}}]}`,
		`{"id":"c","model":"m","choices":[{"delta":{"content":"ok"}}]}`,
		`{"id":"c","model":"m","choices":[{"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`,
	} {
		out, _, _ = cd.Frame(out, nil, []byte(f))
	}
	s = string(out)
	require.Contains(t, s, `"content_block":{"type":"thinking","thinking":"","signature":""}`)
	require.Contains(t, s, `"delta":{"type":"thinking_delta","thinking":"r1"}`)
	require.Contains(t, s, `"index":1,"content_block":{"type":"text"`)
}
