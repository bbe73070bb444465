package itest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
)

// Issue 17 inputs 9 and 13, against two replica processes: guardrail patterns count Unicode
// spaces and digits as LiteLLM's Python regexes do, and a streamed post_call MASK never
// releases held-back text on a frame without text.

func addModelNamed(t *testing.T, g *Gateway, name string, up *fakeupstream.Server) {
	t.Helper()
	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": name, "litellm_params": map[string]any{
		"model": "openai/gpt-x", "api_base": up.URL + "/v1", "api_key": "sk-up"}})
	require.Equal(t, 200, st, "%s", b)
}

// TestGuardrailUnicodeSpacesAndDigits is input 9: a card number with U+00A0, U+2009, U+202F
// or U+3000 between its groups, and an SSN in full-width digits, are caught by pre_call MASK
// and BLOCK and by post_call MASK, plain and streamed, on either replica.
func TestGuardrailUnicodeSpacesAndDigits(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStreamChunks(12), fakeupstream.WithReply(func(in fakeupstream.ReplyInput) string {
		return "echo: " + in.Text
	}))
	p := StartPair(t, GatewayOpts{})
	addModel(t, p.A, up)
	pats := func(action string) []any {
		return []any{prebuilt("credit_card", action), prebuilt("us_ssn", action)}
	}
	createGuardrail(t, p.A, "in-mask", contentFilter("pre_call", map[string]any{"patterns": pats("MASK")}))
	createGuardrail(t, p.A, "in-block", contentFilter("pre_call", map[string]any{"patterns": pats("BLOCK")}))
	createGuardrail(t, p.A, "out-mask", contentFilter("post_call", map[string]any{"patterns": pats("MASK")}))
	chat := func(g *Gateway, text string, stream bool, guardrail string) (int, []byte) {
		return g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m", "stream": stream, "guardrails": []string{guardrail},
			"messages": []any{map[string]any{"role": "user", "content": text}}})
	}
	answer := func(stream bool, b []byte) string {
		if stream {
			text, errMsg, done := sse(t, b)
			require.Empty(t, errMsg, "%s", b)
			require.True(t, done, "%s", b)
			return text
		}
		return gjson.GetBytes(b, "choices.0.message.content").String()
	}

	type input struct{ text, masked, pattern, secret string }
	var inputs []input
	for _, sp := range []string{"\u00a0", "\u2009", "\u202f", "\u3000"} {
		card := strings.Join([]string{"4111", "1111", "1111", "1111"}, sp)
		inputs = append(inputs, input{"card " + card + " done", "card [CREDIT_CARD_REDACTED] done", "credit_card", card})
	}
	inputs = append(inputs, input{"ssn １２３-４５-６７８９ done", "ssn [US_SSN_REDACTED] done", "us_ssn", "１２３-４５-６７８９"})

	for i, in := range inputs {
		g := []*Gateway{p.A, p.B}[i%2]
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%q stream=%v", in.text, stream)
			// pre_call MASK: the upstream receives the masked text.
			st, b := chat(g, in.text, stream, "in-mask")
			require.Equal(t, 200, st, "%s: %s", name, b)
			require.Equal(t, in.masked, upstreamUserText(t, up), name)
			require.Equal(t, "echo: "+in.masked, answer(stream, b), name)

			// pre_call BLOCK: refused before the upstream.
			st, b = chat(g, in.text, stream, "in-block")
			require.Equal(t, 400, st, "%s: %s", name, b)
			require.Equal(t, "Content blocked: "+in.pattern+" pattern detected", errorMessage(t, b), name)

			// post_call MASK: the upstream echoes the value, the client gets it masked.
			st, b = chat(g, in.text, stream, "out-mask")
			require.Equal(t, 200, st, "%s: %s", name, b)
			require.Equal(t, in.text, upstreamUserText(t, up), name)
			require.Equal(t, "echo: "+in.masked, answer(stream, b), name)
			require.NotContains(t, answer(stream, b), in.secret, name)
		}
	}
}

// TestGuardrailStreamTextlessFrameKeepsHold is input 13: the upstream streams `card 4111
// 1111`, then a frame without text (an empty delta, a role-only delta, a tool-call frame),
// then ` 1111 1111 done`; with a post_call MASK (credit_card) the client receives the card
// masked, and every frame in upstream order.
func TestGuardrailStreamTextlessFrameKeepsHold(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	middles := map[string]map[string]any{
		"empty":     {},
		"role-only": {"role": "assistant"},
		"tool-call": {"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "lookup", "arguments": ""}}}},
	}
	for name, mid := range middles {
		up := fakeupstream.Start(t, fakeupstream.WithChatStreamDeltas(
			map[string]any{"content": "card 4111 1111"}, mid, map[string]any{"content": " 1111 1111 done"}))
		addModelNamed(t, p.A, "m-"+name, up)
	}
	createGuardrail(t, p.A, "out-mask", contentFilter("post_call", map[string]any{"patterns": []any{prebuilt("credit_card", "MASK")}}))
	i := 0
	for name, mid := range middles {
		g := []*Gateway{p.A, p.B}[i%2]
		i++
		var st int
		var b []byte
		Eventually(t, "model m-"+name+" served", func() bool {
			st, b = g.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "m-" + name, "stream": true,
				"guardrails": []string{"out-mask"}, "messages": []any{map[string]any{"role": "user", "content": "card?"}}})
			return st != 404 && st != 400
		})
		require.Equal(t, 200, st, "%s: %s", name, b)
		text, errMsg, done := sse(t, b)
		require.Empty(t, errMsg, "%s", b)
		require.True(t, done, "%s", b)
		require.Equal(t, "card [CREDIT_CARD_REDACTED] done", text, name)
		require.NotContains(t, string(b), "4111", name)

		// Frames in upstream order: role chunk, first piece, the textless frame, the rest.
		var deltas []string
		for _, line := range strings.Split(string(b), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
				if d := gjson.Get(data, "choices.0.delta"); d.Exists() {
					deltas = append(deltas, d.Raw)
				}
			}
		}
		require.GreaterOrEqual(t, len(deltas), 4, "%s", b)
		want, err := json.Marshal(mid)
		require.NoError(t, err)
		require.JSONEq(t, string(want), deltas[2], "%s: the textless frame stays between the pieces: %s", name, b)
		require.Contains(t, deltas[1], "card", name)
		require.Contains(t, deltas[3], "done", name)
	}
}

// A translated stream (a /v1/messages client on an OpenAI chat deployment) whose upstream puts
// a tool call between two pieces of a card number: the Anthropic stream opens a new text block
// after the tool_use block, and each block used to be matched on its own, so the card went out
// in clear (the same stream on /v1/chat/completions was masked). The text blocks of one answer
// are one text for the post_call MASK.
func TestGuardrailTranslatedStreamToolCallBetweenPieces(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	up := fakeupstream.Start(t, fakeupstream.WithChatStreamDeltas(
		map[string]any{"content": "card 4111"},
		map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "lookup", "arguments": ""}}}},
		map[string]any{"content": " 1111"},
		map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": "{}"}}}},
		map[string]any{"content": " 1111 1111 done"}))
	addModelNamed(t, p.A, "m-xlate-split", up)
	createGuardrail(t, p.A, "out-mask-x", contentFilter("post_call", map[string]any{"patterns": []any{prebuilt("credit_card", "MASK")}}))
	var st int
	var b []byte
	Eventually(t, "model served on B", func() bool {
		st, b = p.B.Do(t, "POST", "/v1/messages", map[string]any{"model": "m-xlate-split", "stream": true, "max_tokens": 64,
			"guardrails": []string{"out-mask-x"}, "messages": []any{map[string]any{"role": "user", "content": "card?"}}})
		return st != 404 && st != 400
	})
	require.Equal(t, 200, st, "%s", b)
	var text strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if d := gjson.Get(data, "delta"); d.Get("type").Str == "text_delta" {
				text.WriteString(d.Get("text").Str)
			}
		}
	}
	require.NotContains(t, string(b), "4111", "%s", b)
	require.Contains(t, text.String(), "[CREDIT_CARD_REDACTED]", "%s", b)
	require.Contains(t, text.String(), "done", "%s", b)
}
