package format

import (
	"bytes"
	"testing"

	"github.com/tidwall/gjson"
)

var walkFormats = []Format{FormatChat, FormatResponses, FormatMessages, FormatEmbeddings, FormatCompletions, FormatImages, FormatModerations, FormatSpeech, FormatTranscriptions}

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

// FuzzTextWalker walks arbitrary bodies and SSE frames in every  Invariants: no panic;
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
		ident := func(t Text) (string, error) { return t.Value, nil }
		replace := func(Text) (string, error) { return repl, nil }
		only := func(tt Text) (string, error) {
			if tt.Value != repl && !tt.JSON {
				t.Fatalf("%v: a text survived the rewrite: %q in %s", fm, tt.Value, body)
			}
			return tt.Value, nil
		}
		valid := gjson.ValidBytes(body)
		type walk func(Format, []byte, TextFunc) ([]byte, error)
		for _, w := range []walk{MapRequestText, MapResponseText} {
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
		out, err := MapStreamText(fm, body, ident)
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("%v: identity changed the frames (%v):\n%q\n%q", fm, err, body, out)
		}
		out, err = MapStreamText(fm, body, replace)
		if err != nil {
			t.Fatal(err)
		}
		// every rewritten frame is one event line and one valid JSON data line
		for pos := 0; pos < len(out); {
			n := SSEFrameLen(out[pos:])
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
		if _, err := MapStreamText(fm, out, only); err != nil {
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
