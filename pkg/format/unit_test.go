package format

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `q"uote\back`, "tab\tnl\ncr\r", "\x00\x1f\x7f", "é漢字🙂", "bad\xffutf8", "ls\u2028ps\u2029", "<html>&amp;"} {
		got := AppendJSONString(nil, s)
		require.True(t, json.Valid(got), "%q → %s", s, got)
		var back string
		require.NoError(t, json.Unmarshal(got, &back))
		require.Equal(t, strings.ToValidUTF8(s, "\ufffd"), back)
	}
}

func TestRewriteModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, model, want string }{
		{`{"model":"a","x":1}`, "b", `{"model":"b","x":1}`},
		{` { "x" : {"model":"nested"}, "model" : "a" } `, "b/c\"d", ` { "x" : {"model":"nested"}, "model" : "b/c\"d" } `},
		{`{"x":1}`, "b", `{"model":"b","x":1}`},
		{`{}`, "b", `{"model":"b"}`},
		{"{\n}", "b", "{\"model\":\"b\"\n}"},
		{`{"model":null}`, "b", `{"model":"b"}`},
	} {
		got, err := RewriteModel([]byte(tc.in), tc.model)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got))
	}
	same := []byte(`{"model":"b"}`)
	got, err := RewriteModel(same, "b")
	require.NoError(t, err)
	require.Same(t, &same[0], &got[0], "unchanged body is returned as is")
	_, err = RewriteModel([]byte(`[1]`), "b")
	require.Error(t, err)
	_, err = RewriteModel(nil, "b")
	require.Error(t, err)
}

func TestSetBool(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"stream":false,"a":1}`, string(SetBool([]byte(`{"stream":true,"a":1}`), "stream", false)))
	require.Equal(t, `{"stream":true,"a":1}`, string(SetBool([]byte(`{"a":1}`), "stream", true)))
	require.Equal(t, `{"stream":true}`, string(SetBool([]byte(`{}`), "stream", true)))
}

func TestSplitText(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"one ", "two ", "three ", "four five"}, splitText("one two three four five", 4))
	require.Equal(t, []string{"a", "bc"}, splitText("abc", 2))
	require.Equal(t, []string{"é", "漢", "🙂"}, splitText("é漢🙂", 4))
	require.Equal(t, []string{"x"}, splitText("x", 4))
	require.Nil(t, splitText("", 4))
	for _, s := range []string{"a b c d e f g h i j", "nospaceatallhere", "  lead and trail  "} {
		for n := 1; n < 6; n++ {
			parts := splitText(s, n)
			require.LessOrEqual(t, len(parts), n)
			require.Equal(t, s, strings.Join(parts, ""))
			for _, p := range parts {
				require.NotEmpty(t, p)
			}
		}
	}
}

func upper(t Text) (string, error) { return strings.ToUpper(t.Value), nil }

func TestMapRequestText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in         Format
		body, want string
	}{
		{FormatChat,
			`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]},{"role":"assistant","content":"b","tool_calls":[{"function":{"arguments":"{\"k\":\"v\"}"}}]},{"role":"tool","content":"c"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"SYS"},{"role":"user","content":[{"type":"text","text":"A"},{"type":"image_url","image_url":{"url":"u"}}]},{"role":"assistant","content":"B","tool_calls":[{"function":{"arguments":"{\"K\":\"V\"}"}}]},{"role":"tool","content":"C"}]}`},
		{FormatResponses,
			`{"model":"m","instructions":"i","input":[{"role":"user","content":"a"},{"type":"message","role":"user","content":[{"type":"input_text","text":"b"},{"type":"input_image","image_url":"u"}]},{"type":"function_call","arguments":"{}"},{"type":"function_call_output","output":"o"}]}`,
			`{"model":"m","instructions":"I","input":[{"role":"user","content":"A"},{"type":"message","role":"user","content":[{"type":"input_text","text":"B"},{"type":"input_image","image_url":"u"}]},{"type":"function_call","arguments":"{}"},{"type":"function_call_output","output":"O"}]}`},
		{FormatResponses, `{"model":"m","input":"just text"}`, `{"model":"m","input":"JUST TEXT"}`},
		{FormatMessages,
			`{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"},{"type":"tool_use","input":{"q":"x"}}]},{"role":"user","content":[{"type":"tool_result","content":"r"},{"type":"tool_result","content":[{"type":"text","text":"r2"}]}]}]}`,
			`{"model":"m","system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":"A"},{"role":"assistant","content":[{"type":"text","text":"B"},{"type":"tool_use","input":{"Q":"X"}}]},{"role":"user","content":[{"type":"tool_result","content":"R"},{"type":"tool_result","content":[{"type":"text","text":"R2"}]}]}]}`},
		{FormatMessages, `{"model":"m","system":"s","messages":[]}`, `{"model":"m","system":"S","messages":[]}`},
		{FormatEmbeddings, `{"model":"m","input":["a","b",[1,2]]}`, `{"model":"m","input":["A","B",[1,2]]}`},
		{FormatEmbeddings, `{"model":"m","input":"a"}`, `{"model":"m","input":"A"}`},
	}
	for _, tc := range cases {
		got, err := MapRequestText(tc.in, []byte(tc.body), upper)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got), tc.in.String())
	}

	// Nothing changed → the same bytes.
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"ALREADY"}]}`)
	got, err := MapRequestText(FormatChat, body, upper)
	require.NoError(t, err)
	require.Same(t, &body[0], &got[0])

	// Escapes and multi-byte text survive.
	got, err = MapRequestText(FormatChat, []byte(`{"messages":[{"role":"user","content":"mail a@b.c \"q\" \u00e9"}]}`), func(t Text) (string, error) {
		return strings.ReplaceAll(t.Value, "a@b.c", "[EMAIL]"), nil
	})
	require.NoError(t, err)
	require.Equal(t, `mail [EMAIL] "q" é`, gjson.GetBytes(got, "messages.0.content").Str)

	// fn errors are returned as is.
	boom := errors.New("blocked")
	_, err = MapRequestText(FormatChat, body, func(Text) (string, error) { return "", boom })
	require.ErrorIs(t, err, boom)
	_, err = MapRequestText(FormatChat, []byte(`{bad`), upper)
	require.Error(t, err)
}

func TestRequestText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "second\nmore", RequestText(FormatChat, []byte(`{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":[{"type":"text","text":"second"},{"type":"text","text":"more"}]}]}`)))
	require.Equal(t, "hi", RequestText(FormatResponses, []byte(`{"input":"hi"}`)))
	require.Equal(t, "b", RequestText(FormatResponses, []byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"b"}]}]}`)))
	require.Equal(t, "m", RequestText(FormatMessages, []byte(`{"messages":[{"role":"user","content":"m"}]}`)))
	require.Equal(t, "a\nb", RequestText(FormatEmbeddings, []byte(`{"input":["a","b"]}`)))
	require.Equal(t, "", RequestText(FormatChat, []byte(`{}`)))
}

func TestChatRequest(t *testing.T) {
	t.Parallel()
	b := ChatRequest("grp", "say \"hi\"")
	require.JSONEq(t, `{"model":"grp","messages":[{"role":"user","content":"say \"hi\""}]}`, string(b))
	require.False(t, StreamRequested(b))
	require.True(t, StreamRequested([]byte(`{"stream":true}`)))
	require.False(t, StreamRequested([]byte(`{"stream":"true"}`)))
}

func TestErrorEventShapes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "data: {\"error\":{\"message\":\"m\",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"429\"}}\n\n", string(ErrorEvent(FormatChat, 429, "m")))
	require.Equal(t, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"m\"}}\n\n", string(ErrorEvent(FormatMessages, 529, "m")))
	require.Equal(t, "event: error\ndata: {\"type\":\"error\",\"code\":\"502\",\"message\":\"m\",\"param\":null,\"sequence_number\":0}\n\n", string(ErrorEvent(FormatResponses, 502, "m")))
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{FormatChat, FormatResponses, FormatMessages, FormatEmbeddings} {
		got, ok := FormatForPath("/v1" + f.Path())
		require.True(t, ok)
		require.Equal(t, f, got)
		got, ok = FormatForPath(f.Path())
		require.True(t, ok)
		require.Equal(t, f, got)
	}
	require.Equal(t, "anthropic_messages", FormatMessages.RouteName())
	require.Equal(t, "/chat/completions", FormatChat.RouteName())
	_, ok := FormatForPath("/v1/models")
	require.False(t, ok)
}

// Translated streams that end without their terminal event are reported, not silently closed.
func TestDecoderEOF(t *testing.T) {
	t.Parallel()
	d := newChatDecoder(newRenderer(FormatMessages, false))
	out, _, _ := d.Frame(nil, nil, []byte(`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`))
	require.NotEmpty(t, out)
	_, err := d.EOF(nil)
	require.ErrorIs(t, err, ErrTruncated)

	d = newChatDecoder(newRenderer(FormatMessages, false))
	_, _, _ = d.Frame(nil, nil, []byte(`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"length"}]}`))
	out, err = d.EOF(nil)
	require.NoError(t, err)
	require.Contains(t, string(out), `"stop_reason":"max_tokens"`)

	md := newMessagesDecoder(newRenderer(FormatChat, false))
	out, _, done := md.Frame(nil, []byte("error"), []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	require.True(t, done)
	require.Contains(t, string(out), `"code":"529"`)
}

// MapResponseText and MapStreamText visit every answer text: every choice, tool-call
// arguments (masked inside, still valid JSON) and every frame that repeats the text.
func TestMapAnswerText(t *testing.T) {
	t.Parallel()
	mask := func(t Text) (string, error) { return strings.ReplaceAll(t.Value, "secret", "[X]"), nil }
	body := []byte(`{"choices":[{"index":0,"message":{"content":"a secret"}},{"index":1,"message":{"content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"k\":\"the secret\",\"n\":1}"}}]}}]}`)
	out, err := MapResponseText(FormatChat, body, mask)
	require.NoError(t, err)
	require.NotContains(t, string(out), "secret")
	args := gjson.GetBytes(out, "choices.1.message.tool_calls.0.function.arguments").Str
	require.JSONEq(t, `{"k":"the [X]","n":1}`, args)

	frames := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"content_index\":0,\"delta\":\"a secret\"}\n\n" +
		"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"a secret\"}\n\n" +
		"event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"part\":{\"type\":\"output_text\",\"text\":\"a secret\"}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"a secret\"}]}}\n\n" +
		"event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"arguments\":\"{\\\"k\\\":\\\"secret\\\"}\"}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"a secret\"}]},{\"type\":\"function_call\",\"arguments\":\"{\\\"k\\\":\\\"secret\\\"}\"}]}}\n\n"
	var deltas []Text
	got, err := MapStreamText(FormatResponses, []byte(frames), func(t Text) (string, error) {
		if t.Delta {
			deltas = append(deltas, t)
		}
		return mask(t)
	})
	require.NoError(t, err)
	require.NotContains(t, string(got), "secret", "%s", got)
	require.Equal(t, 6, strings.Count(string(got), "event: "))
	require.Len(t, deltas, 1)
	require.Equal(t, "item 0 part 0", deltas[0].Channel)
	require.True(t, deltas[0].Answer)

	// chat: every choice index, tool-call argument fragments on their own channel
	chat := "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\",\"tool_calls\":[{\"index\":2,\"function\":{\"arguments\":\"{\\\"a\"}}]}}]}\n\ndata: [DONE]\n\n"
	var chans []string
	_, err = MapStreamText(FormatChat, []byte(chat), func(t Text) (string, error) {
		chans = append(chans, t.Channel)
		return t.Value, nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"choice 1", "choice 1 tool 2"}, chans)
}
