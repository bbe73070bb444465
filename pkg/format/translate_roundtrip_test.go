package format

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// randRequest is a random request in the canonical form both chat and messages express
// without loss: alternating turns starting with the user, tool results answering the previous
// turn's calls first, non-empty texts, and only the fields the table translates both ways.
func randRequest(rng *rand.Rand) *Request {
	word := func() string { return fmt.Sprintf("w%d \"q\" ü\n", rng.IntN(1000)) }
	r := &Request{maxTokens: int64(1 + rng.IntN(8000))}
	for range rng.IntN(3) {
		r.system = append(r.system, word())
	}
	var calls []string
	for i := range 1 + rng.IntN(6) {
		if i%2 == 0 { // user
			m := message{role: "user"}
			for _, id := range calls {
				m.parts = append(m.parts, part{kind: partToolResult, id: id, text: word()})
			}
			calls = nil
			if len(m.parts) == 0 || rng.IntN(2) == 0 {
				m.parts = append(m.parts, part{kind: partText, text: word()})
			}
			if rng.IntN(3) == 0 {
				m.parts = append(m.parts, part{kind: partImage, url: "data:image/png;base64,iVBO" + fmt.Sprint(rng.IntN(9))})
			}
			r.messages = append(r.messages, m)
			continue
		}
		m := message{role: "assistant"}
		if rng.IntN(2) == 0 {
			m.parts = append(m.parts, part{kind: partText, text: word()})
		}
		for j := range rng.IntN(3) {
			id := fmt.Sprintf("call_%d_%d", i, j)
			calls = append(calls, id)
			m.parts = append(m.parts, part{kind: partToolUse, id: id, name: fmt.Sprintf("f%d", j), args: fmt.Sprintf(`{"a":%d}`, j)})
		}
		if len(m.parts) == 0 {
			m.parts = append(m.parts, part{kind: partText, text: word()})
		}
		r.messages = append(r.messages, m)
	}
	for j := range rng.IntN(3) {
		r.tools = append(r.tools, tool{name: fmt.Sprintf("f%d", j), description: word(), schema: `{"type":"object","properties":{"a":{"type":"integer"}}}`})
	}
	if len(r.tools) > 0 {
		switch rng.IntN(4) {
		case 1:
			r.choice.mode = "auto"
		case 2:
			r.choice.mode = "any"
		case 3:
			r.choice = toolChoice{mode: "tool", name: r.tools[0].name}
		}
		if rng.IntN(2) == 0 {
			r.parallel = "false"
			if r.choice.mode == "" {
				r.choice.mode = "auto" // disable_parallel_tool_use rides on an auto choice
			}
		}
	}
	if rng.IntN(2) == 0 {
		r.temperature = "0.5"
	}
	if rng.IntN(2) == 0 {
		r.topP = "0.9"
	}
	for range rng.IntN(3) {
		r.stop = append(r.stop, word())
	}
	if rng.IntN(2) == 0 {
		r.user = fmt.Sprintf("user-%d", rng.IntN(100))
	}
	if rng.IntN(3) == 0 {
		r.effort = []string{"low", "medium", "high"}[rng.IntN(3)]
		r.maxTokens += budgetHigh // room for the thinking budget (see TestThinkingBudgetFits)
	}
	if rng.IntN(3) == 0 {
		r.format = outputFormat{kind: "json_schema", schema: `{"type":"object","properties":{"x":{"type":"string"}}}`}
	}
	return r
}

// comparable strips what is not a translated field.
func comparable(r *Request) Request {
	c := *r
	c.dropped, c.ns, c.jsonTool, c.stream = nil, nil, false, false
	c.format.name, c.format.strict, c.format.member = "", "", ""
	return c
}

// Round trip per pair: a request translated chat → messages → chat (and messages → chat →
// messages) keeps every translated field; so does an answer messages → chat → messages (and
// chat → messages → chat). 0 crashes over the runs.
func TestTranslationRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 2026))
	const model = "claude-sonnet-4-5" // structured outputs native: json_schema round-trips
	for i := range 2000 {
		want := randRequest(rng)
		chat := renderChatRequest(want, "o3", i%2 == 0)
		r1, err := parseChatRequest(chat)
		require.NoError(t, err, "%s", chat)
		require.Equal(t, comparable(want), comparable(r1), "chat parse: %s", chat)
		msgs := renderMessagesRequest(r1, model, true)
		r2, err := parseMessagesRequest(msgs)
		require.NoError(t, err, "%s", msgs)
		require.Equal(t, comparable(want), comparable(r2), "chat → messages: %s\n%s", chat, msgs)
		back := renderChatRequest(r2, "o3", i%2 == 0)
		r3, err := parseChatRequest(back)
		require.NoError(t, err)
		require.Equal(t, comparable(want), comparable(r3), "messages → chat: %s", back)
		require.Empty(t, r3.dropped)
	}
	for range 2000 {
		want := randResult(rng)
		viaChat, err := parseChatResult(renderChat(want, 1))
		require.NoError(t, err)
		got, err := parseMessagesResult(renderMessages(viaChat))
		require.NoError(t, err)
		require.Equal(t, want.blocks, got.blocks)
		require.Equal(t, want.stop, got.stop)
		require.Equal(t, want.usage.in, got.usage.in)
		require.Equal(t, want.usage.out, got.usage.out)
	}
}

// randResult is a random answer both chat and messages carry whole: reasoning first (with
// a signature only Anthropic's own would have — chat carries it in thinking_blocks, so it
// survives; one reasoning block, as chat joins them), then text, then tool calls.
func randResult(rng *rand.Rand) *Result {
	r := &result{id: "msg_x", model: "m", usage: usage{in: int64(rng.IntN(100)), out: int64(rng.IntN(100))}}
	if rng.IntN(2) == 0 {
		r.blocks = append(r.blocks, block{think: true, text: fmt.Sprintf("think %d", rng.IntN(9)), sig: fmt.Sprintf("sig%d", rng.IntN(9))})
	}
	if rng.IntN(3) > 0 {
		r.blocks = append(r.blocks, block{text: fmt.Sprintf("answer %d\n\"ü\"", rng.IntN(99))})
	}
	r.stop = []stopReason{stopEnd, stopLength, stopSequence}[rng.IntN(3)]
	for j := range rng.IntN(3) {
		r.blocks = append(r.blocks, block{tool: true, id: fmt.Sprintf("toolu_%d", j), name: fmt.Sprintf("f%d", j), args: fmt.Sprintf(`{"a":%d}`, j)})
		r.stop = stopTool
	}
	if r.stop == stopSequence {
		r.stop = stopEnd // chat has no stop_sequence reason: it reads back as a natural end
	}
	return r
}

// renderResponsesRequestForTest writes r as a Responses request (the gateway never sends one:
// Responses upstreams are passed through), for the responses pairs' round trip.
func renderResponsesRequestForTest(r *Request) []byte {
	m := map[string]any{"model": "g"}
	if len(r.system) == 1 {
		m["instructions"] = r.system[0]
	}
	var input []any
	if len(r.system) > 1 {
		for _, s := range r.system {
			input = append(input, map[string]any{"role": "developer", "content": s})
		}
	}
	for _, msg := range r.messages {
		var content []any
		flush := func() {
			if len(content) > 0 {
				input = append(input, map[string]any{"type": "message", "role": msg.role, "content": content})
				content = nil
			}
		}
		for _, p := range msg.parts {
			switch p.kind {
			case partText:
				typ := "input_text"
				if msg.role == "assistant" {
					typ = "output_text"
				}
				content = append(content, map[string]any{"type": typ, "text": p.text})
			case partImage:
				content = append(content, map[string]any{"type": "input_image", "image_url": p.url})
			case partToolUse:
				flush()
				input = append(input, map[string]any{"type": "function_call", "call_id": p.id, "name": p.name, "arguments": p.args})
			case partToolResult:
				flush()
				input = append(input, map[string]any{"type": "function_call_output", "call_id": p.id, "output": p.text})
			}
		}
		flush()
	}
	m["input"] = input
	if r.maxTokens > 0 {
		m["max_output_tokens"] = r.maxTokens
	}
	if r.temperature != "" {
		m["temperature"] = json.RawMessage(r.temperature)
	}
	if r.topP != "" {
		m["top_p"] = json.RawMessage(r.topP)
	}
	var tools []any
	for _, t := range r.tools {
		tools = append(tools, map[string]any{"type": "function", "name": t.name, "description": t.description, "parameters": json.RawMessage(t.schema)})
	}
	if tools != nil {
		m["tools"] = tools
	}
	switch r.choice.mode {
	case "auto", "none":
		m["tool_choice"] = r.choice.mode
	case "any":
		m["tool_choice"] = "required"
	case "tool":
		m["tool_choice"] = map[string]any{"type": "function", "name": r.choice.name}
	}
	if r.parallel != "" {
		m["parallel_tool_calls"] = r.parallel == "true"
	}
	if r.user != "" {
		m["user"] = r.user
	}
	if r.effort != "" {
		m["reasoning"] = map[string]any{"effort": r.effort}
	}
	if r.format.kind == "json_schema" {
		m["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "name": "n", "schema": json.RawMessage(r.format.schema)}}
	}
	b, _ := json.Marshal(m)
	return b
}

// The responses pairs: a Responses request translated to messages or to chat keeps every
// translated field (read back by that format's parser); an answer rendered for a Responses
// client reads back whole.
func TestTranslationRoundTripResponses(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 5))
	for i := range 2000 {
		want := randRequest(rng)
		want.stop = nil // Responses has no stop sequences
		body := renderResponsesRequestForTest(want)
		r1, err := parseResponsesRequest(body)
		require.NoError(t, err, "%s", body)
		require.Equal(t, comparable(want), comparable(r1), "responses parse: %s", body)
		msgs := renderMessagesRequest(r1, "claude-sonnet-4-5", true)
		r2, err := parseMessagesRequest(msgs)
		require.NoError(t, err, "%s", msgs)
		require.Equal(t, comparable(want), comparable(r2), "responses → messages: %s", msgs)
		r1, _ = parseResponsesRequest(body)
		chat := renderChatRequest(r1, "gpt-5", i%2 == 0)
		r3, err := parseChatRequest(chat)
		require.NoError(t, err, "%s", chat)
		require.Equal(t, comparable(want), comparable(r3), "responses → chat: %s", chat)
	}
	for range 2000 {
		want := randResult(rng)
		if len(want.blocks) > 0 && want.blocks[0].think {
			want.blocks = want.blocks[1:] // reasoning items are not read from an answer
		}
		if len(want.blocks) == 0 {
			want.blocks = nil
		}
		got, err := parseResponsesResult(renderResponses(want, 1))
		require.NoError(t, err)
		require.Equal(t, want.blocks, got.blocks)
		if want.stop != stopTool && got.stop == stopTool {
			t.Fatalf("stop %v read back as a tool call", want.stop)
		}
	}
}
