package provider

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
)

// Fuzz target (go test ./pkg/provider -run '^$' -fuzz FuzzSSETranslators -fuzztime 60s). Crashers
// found are kept under testdata/fuzz/FuzzSSETranslators/ and run as seeds by every plain `go test`.

// sseSeeds are upstream streams in the chat and messages formats.
var sseSeeds = []string{
	"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n" +
		"data: [DONE]\n\n",
	"data: {\"error\":{\"message\":\"boom\",\"code\":503}}\n\n",
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n",
}

var inbound = []format.Format{format.FormatChat, format.FormatResponses, format.FormatMessages, format.FormatCompletions}

// FuzzSSETranslators feeds arbitrary upstream SSE bodies (OpenAI chat or Anthropic messages)
// through the stream translators into every inbound format (chat ⇄ messages ⇄ responses,
// completions). Invariants: no panic; every produced event is whole SSE frames, each an
// optional "event:" line and one "data:" line holding valid JSON (or chat's [DONE]); the text
// deltas reported are exactly the texts the frames carry; nothing follows a terminal event.
func FuzzSSETranslators(f *testing.F) {
	for _, s := range sseSeeds {
		for up := range 2 {
			for in := range inbound {
				f.Add(uint8(up), uint8(in), true, []byte(s))
			}
		}
	}
	f.Fuzz(func(t *testing.T, upi, ini uint8, usage bool, body []byte) {
		in := inbound[int(ini)%len(inbound)]
		r := format.NewRenderer(in, usage)
		var dec format.Decoder = format.NewDecoder(format.FormatChat, r)
		if upi%2 == 1 {
			dec = format.NewDecoder(format.FormatMessages, r)
		}
		rd := newSSEReader(bytes.NewReader(body))
		var out []byte
		check := func(b []byte, text string) {
			var got strings.Builder
			for pos := 0; pos < len(b); {
				n := format.SSEFrameLen(b[pos:])
				frame := b[pos : pos+n]
				pos += n
				if !bytes.HasSuffix(frame, []byte("\n\n")) {
					t.Fatalf("%v: frame not terminated: %q", in, frame)
				}
				lines := strings.Split(strings.TrimSuffix(string(frame), "\n\n"), "\n")
				if strings.HasPrefix(lines[0], "event: ") {
					lines = lines[1:]
				}
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "data: ") {
					t.Fatalf("%v: frame is not one data line: %q", in, frame)
				}
				data := strings.TrimPrefix(lines[0], "data: ")
				if data != "[DONE]" && !gjson.Valid(data) {
					t.Fatalf("%v: invalid JSON in %q", in, frame)
				}
			}
			// the reported delta is what the frames carry as answer text
			_, _ = format.MapStreamText(in, b, func(tt format.Text) (string, error) {
				if tt.Answer && tt.Delta {
					got.WriteString(tt.Value)
				}
				return tt.Value, nil
			})
			if got.String() != text {
				t.Fatalf("%v: reported text %q, frames carry %q: %q", in, text, got.String(), b)
			}
		}
		for {
			if err := rd.Next(); err != nil {
				b, err := dec.EOF(out[:0])
				if err == nil {
					check(b, "")
				}
				return
			}
			b, text, done := dec.Frame(out[:0], rd.event, rd.data)
			out = b
			check(b, text)
			if done {
				return
			}
		}
	})
}
