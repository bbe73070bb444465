package provider

import (
	"lockstep/pkg/format"

	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Fuzz targets (go test ./pkg/provider -run '^$' -fuzz FuzzX -fuzztime 60s). Crashers found
// are kept under testdata/fuzz/<FuzzX>/ and run as seeds by every plain `go test`.

var walkFormats = []format.Format{format.FormatChat, format.FormatResponses, format.FormatMessages, format.FormatEmbeddings, format.FormatCompletions, format.FormatImages, format.FormatModerations, format.FormatSpeech, format.FormatTranscriptions}

// walkSeeds are bodies and frames with texts in many locations.
var walkSeeds = []string{
	`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a@b.co"}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"card\":\"4111 1111 1111 1111\",\"n\":[1,\"x\"]}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}`,
	`{"model":"m","instructions":"i","input":[{"role":"user","content":"a"},{"type":"function_call","arguments":"{\"a\":\"b\"}"},{"type":"function_call_output","output":[{"type":"input_text","text":"o"}]}]}`,
	`{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"assistant","content":[{"type":"tool_use","input":{"k":["v",{"w":"x"}]}}]},{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"r"}]}]}]}`,
	`{"choices":[{"index":0,"message":{"content":"a","tool_calls":[{"function":{"arguments":"not json"}}]}},{"index":1,"message":{"content":[{"type":"text","text":"b"}],"refusal":"no"}}]}`,
	`{"output":[{"type":"message","content":[{"type":"output_text","text":"t"}]},{"type":"function_call","arguments":"{}"}]}`,
	`{"content":[{"type":"text","text":"t"},{"type":"tool_use","input":{"a":"b"}}]}`,
	`{"input":["a",[1,2],{"type":"text","text":"m"}],"prompt":"p","data":[{"revised_prompt":"r"}],"text":"t","segments":[{"text":"s"}]}`,
	"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\",\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\"}}]}}]}\n\ndata: [DONE]\n\n",
	"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"t\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"t\"}]}]}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\": \\\"\"}}\n\n",
	"data: {\"a\":\n data: 1}\r\n\r\n:comment\n\n",
}

// FuzzTextWalker walks arbitrary bodies and SSE frames in every format. Invariants: no panic;
// the identity function returns the input unchanged; a JSON input stays valid JSON whatever
// the replacements (quotes and backslashes included); after replacing every text, a second
// walk finds only replaced texts (the rewrite targets exactly the locations the walk visits).
func FuzzTextWalker(f *testing.F) {
	for _, s := range walkSeeds {
		for i := range walkFormats {
			f.Add(uint8(i), []byte(s))
		}
	}
	const repl = "R\"\\\u2028é"
	f.Fuzz(func(t *testing.T, fi uint8, body []byte) {
		fm := walkFormats[int(fi)%len(walkFormats)]
		ident := func(t format.Text) (string, error) { return t.Value, nil }
		replace := func(format.Text) (string, error) { return repl, nil }
		only := func(tt format.Text) (string, error) {
			if tt.Value != repl && !tt.JSON {
				t.Fatalf("%v: a text survived the rewrite: %q in %s", fm, tt.Value, body)
			}
			return tt.Value, nil
		}
		valid := gjson.ValidBytes(body)
		type walk func(format.Format, []byte, format.TextFunc) ([]byte, error)
		for _, w := range []walk{format.MapRequestText, format.MapResponseText} {
			out, err := w(fm, body, ident)
			if err == nil && !bytes.Equal(out, body) {
				t.Fatalf("%v: identity changed the body:\n%s\n%s", fm, body, out)
			}
			out, err = w(fm, body, replace)
			if err != nil {
				continue
			}
			if valid && !fm.Multipart() && !gjson.ValidBytes(out) {
				t.Fatalf("%v: rewrite made invalid JSON:\n%s\n%s", fm, body, out)
			}
			if valid && !fm.Multipart() {
				if _, err := w(fm, out, only); err != nil {
					t.Fatal(err)
				}
			}
		}
		out, err := format.MapStreamText(fm, body, ident)
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("%v: identity changed the frames (%v):\n%q\n%q", fm, err, body, out)
		}
		out, err = format.MapStreamText(fm, body, replace)
		if err != nil {
			t.Fatal(err)
		}
		// every rewritten frame is one event line and one valid JSON data line
		for pos := 0; pos < len(out); {
			n := format.SSEFrameLen(out[pos:])
			frame := out[pos : pos+n]
			pos += n
			if bytes.Equal(frame, sliceAt(body, frame)) {
				continue
			}
			_, data, ok := bytes.Cut(frame, []byte("data: "))
			if !ok || !gjson.ValidBytes(bytes.TrimRight(data, "\n")) {
				t.Fatalf("%v: rewritten frame is not one JSON data line: %q", fm, frame)
			}
		}
		if _, err := format.MapStreamText(fm, out, only); err != nil {
			t.Fatal(err)
		}
	})
}

// sliceAt returns frame when it occurs verbatim in body (an unchanged frame), else nil.
func sliceAt(body, frame []byte) []byte {
	if bytes.Contains(body, frame) {
		return frame
	}
	return nil
}

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
		r := newRenderer(in, usage)
		var dec Decoder = newChatDecoder(r)
		if upi%2 == 1 {
			dec = newMessagesDecoder(r)
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
