package provider

import (
	"lockstep/pkg/format"

	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain", `q"uote\back`, "tab\tnl\ncr\r", "\x00\x1f\x7f", "é漢字🙂", "bad\xffutf8", "ls\u2028ps\u2029", "<html>&amp;"} {
		got := format.AppendJSONString(nil, s)
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
		got, err := format.RewriteModel([]byte(tc.in), tc.model)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got))
	}
	same := []byte(`{"model":"b"}`)
	got, err := format.RewriteModel(same, "b")
	require.NoError(t, err)
	require.Same(t, &same[0], &got[0], "unchanged body is returned as is")
	_, err = format.RewriteModel([]byte(`[1]`), "b")
	require.Error(t, err)
	_, err = format.RewriteModel(nil, "b")
	require.Error(t, err)
}

func TestSetBool(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{"stream":false,"a":1}`, string(format.SetBool([]byte(`{"stream":true,"a":1}`), "stream", false)))
	require.Equal(t, `{"stream":true,"a":1}`, string(format.SetBool([]byte(`{"a":1}`), "stream", true)))
	require.Equal(t, `{"stream":true}`, string(format.SetBool([]byte(`{}`), "stream", true)))
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100<<10)
	in := "\n\nevent: a\ndata: {\"x\":1}\n\n" +
		": comment\n\n" +
		"data: line1\r\ndata: line2\r\n\r\n" +
		"event:b\ndata:" + long + "\n\n" +
		"id: 7\nretry: 10\ndata: last" // no trailing newline
	rd := newSSEReader(strings.NewReader(in))
	type frame struct{ raw, event, data string }
	var got []frame
	for {
		err := rd.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, frame{string(rd.frame), string(rd.event), string(rd.data)})
	}
	require.Equal(t, []frame{
		{"event: a\ndata: {\"x\":1}\n\n", "a", `{"x":1}`},
		{": comment\n\n", "", ""},
		{"data: line1\r\ndata: line2\r\n\r\n", "", "line1\nline2"},
		{"event:b\ndata:" + long + "\n\n", "b", long},
		{"id: 7\nretry: 10\ndata: last\n\n", "", "last"},
	}, got)
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

func upper(t format.Text) (string, error) { return strings.ToUpper(t.Value), nil }

func TestMapRequestText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in         format.Format
		body, want string
	}{
		{format.FormatChat,
			`{"model":"m","messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]},{"role":"assistant","content":"b","tool_calls":[{"function":{"arguments":"{\"k\":\"v\"}"}}]},{"role":"tool","content":"c"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"SYS"},{"role":"user","content":[{"type":"text","text":"A"},{"type":"image_url","image_url":{"url":"u"}}]},{"role":"assistant","content":"B","tool_calls":[{"function":{"arguments":"{\"K\":\"V\"}"}}]},{"role":"tool","content":"C"}]}`},
		{format.FormatResponses,
			`{"model":"m","instructions":"i","input":[{"role":"user","content":"a"},{"type":"message","role":"user","content":[{"type":"input_text","text":"b"},{"type":"input_image","image_url":"u"}]},{"type":"function_call","arguments":"{}"},{"type":"function_call_output","output":"o"}]}`,
			`{"model":"m","instructions":"I","input":[{"role":"user","content":"A"},{"type":"message","role":"user","content":[{"type":"input_text","text":"B"},{"type":"input_image","image_url":"u"}]},{"type":"function_call","arguments":"{}"},{"type":"function_call_output","output":"O"}]}`},
		{format.FormatResponses, `{"model":"m","input":"just text"}`, `{"model":"m","input":"JUST TEXT"}`},
		{format.FormatMessages,
			`{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"},{"type":"tool_use","input":{"q":"x"}}]},{"role":"user","content":[{"type":"tool_result","content":"r"},{"type":"tool_result","content":[{"type":"text","text":"r2"}]}]}]}`,
			`{"model":"m","system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":"A"},{"role":"assistant","content":[{"type":"text","text":"B"},{"type":"tool_use","input":{"Q":"X"}}]},{"role":"user","content":[{"type":"tool_result","content":"R"},{"type":"tool_result","content":[{"type":"text","text":"R2"}]}]}]}`},
		{format.FormatMessages, `{"model":"m","system":"s","messages":[]}`, `{"model":"m","system":"S","messages":[]}`},
		{format.FormatEmbeddings, `{"model":"m","input":["a","b",[1,2]]}`, `{"model":"m","input":["A","B",[1,2]]}`},
		{format.FormatEmbeddings, `{"model":"m","input":"a"}`, `{"model":"m","input":"A"}`},
	}
	for _, tc := range cases {
		got, err := format.MapRequestText(tc.in, []byte(tc.body), upper)
		require.NoError(t, err)
		require.Equal(t, tc.want, string(got), tc.in.String())
	}

	// Nothing changed → the same bytes.
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"ALREADY"}]}`)
	got, err := format.MapRequestText(format.FormatChat, body, upper)
	require.NoError(t, err)
	require.Same(t, &body[0], &got[0])

	// Escapes and multi-byte text survive.
	got, err = format.MapRequestText(format.FormatChat, []byte(`{"messages":[{"role":"user","content":"mail a@b.c \"q\" \u00e9"}]}`), func(t format.Text) (string, error) {
		return strings.ReplaceAll(t.Value, "a@b.c", "[EMAIL]"), nil
	})
	require.NoError(t, err)
	require.Equal(t, `mail [EMAIL] "q" é`, gjson.GetBytes(got, "messages.0.content").Str)

	// fn errors are returned as is.
	boom := errors.New("blocked")
	_, err = format.MapRequestText(format.FormatChat, body, func(format.Text) (string, error) { return "", boom })
	require.ErrorIs(t, err, boom)
	_, err = format.MapRequestText(format.FormatChat, []byte(`{bad`), upper)
	require.Error(t, err)
}

func TestRequestText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "second\nmore", format.RequestText(format.FormatChat, []byte(`{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":[{"type":"text","text":"second"},{"type":"text","text":"more"}]}]}`)))
	require.Equal(t, "hi", format.RequestText(format.FormatResponses, []byte(`{"input":"hi"}`)))
	require.Equal(t, "b", format.RequestText(format.FormatResponses, []byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"b"}]}]}`)))
	require.Equal(t, "m", format.RequestText(format.FormatMessages, []byte(`{"messages":[{"role":"user","content":"m"}]}`)))
	require.Equal(t, "a\nb", format.RequestText(format.FormatEmbeddings, []byte(`{"input":["a","b"]}`)))
	require.Equal(t, "", format.RequestText(format.FormatChat, []byte(`{}`)))
}

func TestChatRequest(t *testing.T) {
	t.Parallel()
	b := format.ChatRequest("grp", "say \"hi\"")
	require.JSONEq(t, `{"model":"grp","messages":[{"role":"user","content":"say \"hi\""}]}`, string(b))
	require.False(t, format.StreamRequested(b))
	require.True(t, format.StreamRequested([]byte(`{"stream":true}`)))
	require.False(t, format.StreamRequested([]byte(`{"stream":"true"}`)))
}

func TestNewDeployment(t *testing.T) {
	t.Setenv("LOCKSTEP_TEST_API_KEY", "sk-from-env")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-env")

	d, err := NewDeployment("id1", "grp", []byte(`{"model":"openai/gpt-4o-mini","api_key":"os.environ/LOCKSTEP_TEST_API_KEY","rpm":60,"max_retries":2,"extra_headers":{"X-A":"b"}}`))
	require.NoError(t, err)
	require.Equal(t, "openai", d.Provider)
	require.Equal(t, "gpt-4o-mini", d.Model)
	require.Equal(t, "https://api.openai.com/v1", d.APIBase)
	require.Equal(t, "sk-from-env", d.APIKey)
	require.Equal(t, DefaultTimeout, d.Timeout)
	require.Equal(t, DefaultTimeout, d.StreamTimeout)
	require.Equal(t, 2, d.MaxRetries)
	require.EqualValues(t, 60, d.RPM)
	require.Equal(t, "https://api.openai.com/v1/chat/completions", d.urls[format.FormatChat])
	require.Equal(t, "Bearer sk-from-env", d.header.Get("Authorization"))
	require.Equal(t, "b", d.header.Get("X-A"))
	require.Nil(t, d.MockResponse)

	d, err = NewDeployment("id2", "grp", []byte(`{"model":"anthropic/claude-sonnet-4-5","timeout":"30","stream_timeout":12.5}`))
	require.NoError(t, err)
	require.Equal(t, "https://api.anthropic.com", d.APIBase)
	require.Equal(t, "https://api.anthropic.com/v1/messages", d.urls[format.FormatMessages])
	require.Equal(t, "sk-ant-env", d.header.Get("x-api-key"))
	require.Equal(t, AnthropicVersion, d.header.Get("anthropic-version"))
	require.Equal(t, 30*time.Second, d.Timeout)
	require.Equal(t, 12500*time.Millisecond, d.StreamTimeout)
	require.Equal(t, -1, d.MaxRetries)
	require.False(t, d.Supports(format.FormatEmbeddings))
	require.True(t, d.Supports(format.FormatChat))

	d, err = NewDeployment("id3", "grp", []byte(`{"model":"anthropic/claude-x","api_base":"http://h:1/v1/"}`))
	require.NoError(t, err)
	require.Equal(t, "http://h:1/v1/messages", d.urls[format.FormatMessages])

	d, err = NewDeployment("id4", "grp", []byte(`{"model":"hosted_vllm/meta-llama/Llama-3.1-8B","api_base":"http://vllm:8000/v1"}`))
	require.NoError(t, err)
	require.Equal(t, "meta-llama/Llama-3.1-8B", d.Model)
	require.Empty(t, d.header.Get("Authorization"), "no key, no auth header")

	d, err = NewDeployment("id5", "grp", []byte(`{"model":"meta-llama/Llama-3.1-8B","custom_llm_provider":"hosted_vllm","api_base":"http://vllm:8000/v1"}`))
	require.NoError(t, err)
	require.Equal(t, "hosted_vllm", d.Provider)
	require.Equal(t, "meta-llama/Llama-3.1-8B", d.Model)

	d, err = NewDeployment("id6", "grp", []byte(`{"model":"claude-3-haiku"}`))
	require.NoError(t, err)
	require.Equal(t, "anthropic", d.Provider)

	d, err = NewDeployment("id7", "grp", []byte(`{"model":"hosted_vllm/x","mock_response":"hi"}`))
	require.NoError(t, err, "a mock needs no api_base")
	require.Equal(t, "hi", *d.MockResponse)
	require.True(t, d.Supports(format.FormatEmbeddings))

	for _, tc := range []struct{ params, err string }{
		{`{}`, "litellm_params.model is required"},
		{`{"model":""}`, "litellm_params.model is required"},
		{`[]`, "litellm_params: must be a JSON object"},
		{`{bad`, "litellm_params: invalid JSON"},
		{`{"model":5}`, "litellm_params.model: must be a string, got 5"},
		{`{"model":"foo/bar"}`, `litellm_params.model: unknown provider "foo" in "foo/bar" (supported: openai, anthropic, azure, `},
		{`{"model":"llama3"}`, `litellm_params.model: "llama3" has no provider prefix`},
		{`{"model":"openai/"}`, `litellm_params.model: "openai/" has no model name`},
		{`{"model":"m","custom_llm_provider":"nope"}`, `litellm_params.custom_llm_provider: unknown provider "nope"`},
		{`{"model":"openai/x","api_base":"ftp://x"}`, `litellm_params.api_base: "ftp://x" is not an http(s) URL`},
		{`{"model":"openai/x","api_base":"not a url"}`, `litellm_params.api_base: "not a url" is not an http(s) URL`},
		{`{"model":"openai/x","api_base":"http://h/v1?x=1"}`, `litellm_params.api_base: "http://h/v1?x=1" must not have a query`},
		{`{"model":"hosted_vllm/x"}`, `litellm_params.api_base is required for provider "hosted_vllm"`},
		{`{"model":"openai/x","api_key":"os.environ/LOCKSTEP_NOT_SET_API_KEY"}`, "litellm_params.api_key: environment variable LOCKSTEP_NOT_SET_API_KEY is not set"},
		{`{"model":"openai/x","timeout":-1}`, "litellm_params.timeout: -1 seconds is out of range"},
		{`{"model":"openai/x","timeout":"soon"}`, `litellm_params.timeout: "soon" is not a number of seconds`},
		{`{"model":"openai/x","stream_timeout":{}}`, "litellm_params.stream_timeout: must be a number of seconds"},
		{`{"model":"openai/x","mock_response":{"a":1}}`, "litellm_params.mock_response: must be a string"},
		{`{"model":"openai/x","max_retries":1.5}`, "litellm_params.max_retries: must be an integer"},
		{`{"model":"openai/x","rpm":-3}`, "litellm_params.rpm: must not be negative"},
		{`{"model":"openai/x","extra_headers":["a"]}`, "litellm_params.extra_headers: must be an object of strings"},
		{`{"model":"openai/x","extra_headers":{"a":1}}`, "litellm_params.extra_headers.a: must be a string"},
	} {
		_, err := NewDeployment("id", "grp", []byte(tc.params))
		require.Error(t, err, tc.params)
		require.Contains(t, err.Error(), tc.err, tc.params)
	}
}

func TestMaskParams(t *testing.T) {
	t.Parallel()
	in := `{"model":"openai/x", "api_key":"sk-1234567890abcdef","max_tokens":100,"aws_secret_access_key":"short",` +
		`"vertex_credentials":"os.environ/VC","extra_headers":{"Authorization":"Bearer abcdefghijklmnop","X-Other":"visible"},` +
		`"list":[{"token":"tok-0123456789xyz"}],"password":""}`
	want := `{"model":"openai/x", "api_key":"sk****cdef","max_tokens":100,"aws_secret_access_key":"****",` +
		`"vertex_credentials":"os.environ/VC","extra_headers":{"Authorization":"Be****mnop","X-Other":"****"},` +
		`"list":[{"token":"to****9xyz"}],"password":"****"}`
	require.Equal(t, want, string(MaskParams([]byte(in))))
	require.Equal(t, "{}", string(MaskParams([]byte(`{"api_key":`))))
	plain := []byte(`{"model":"openai/x"}`)
	require.Equal(t, string(plain), string(MaskParams(plain)))
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, msg, typ string }{
		{`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`, "Rate limit reached", "requests"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Overloaded", "overloaded_error"},
		{`{"object":"error","message":"The model does not exist.","type":"NotFoundError","code":404}`, "The model does not exist.", "NotFoundError"},
		{`{"detail":"Not Found"}`, "Not Found", ""},
		{`{"detail":[{"loc":["body"],"msg":"field required"}]}`, `[{"loc":["body"],"msg":"field required"}]`, ""},
		{`{"error":"plain"}`, "plain", ""},
		{"<html>bad gateway</html>", "<html>bad gateway</html>", ""},
	} {
		msg, typ := errorMessage([]byte(tc.body))
		require.Equal(t, tc.msg, msg)
		require.Equal(t, tc.typ, typ)
	}
}

func TestErrorEventShapes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "data: {\"error\":{\"message\":\"m\",\"type\":\"rate_limit_error\",\"param\":null,\"code\":\"429\"}}\n\n", string(format.ErrorEvent(format.FormatChat, 429, "m")))
	require.Equal(t, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"m\"}}\n\n", string(format.ErrorEvent(format.FormatMessages, 529, "m")))
	require.Equal(t, "event: error\ndata: {\"type\":\"error\",\"code\":\"502\",\"message\":\"m\",\"param\":null,\"sequence_number\":0}\n\n", string(format.ErrorEvent(format.FormatResponses, 502, "m")))
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, f := range []format.Format{format.FormatChat, format.FormatResponses, format.FormatMessages, format.FormatEmbeddings} {
		got, ok := format.FormatForPath("/v1" + f.Path())
		require.True(t, ok)
		require.Equal(t, f, got)
		got, ok = format.FormatForPath(f.Path())
		require.True(t, ok)
		require.Equal(t, f, got)
	}
	require.Equal(t, "anthropic_messages", format.FormatMessages.RouteName())
	require.Equal(t, "/chat/completions", format.FormatChat.RouteName())
	_, ok := format.FormatForPath("/v1/models")
	require.False(t, ok)
}

// Translated streams that end without their terminal event are reported, not silently closed.
func TestDecoderEOF(t *testing.T) {
	t.Parallel()
	d := newChatDecoder(newRenderer(format.FormatMessages, false))
	out, _, _ := d.Frame(nil, nil, []byte(`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}`))
	require.NotEmpty(t, out)
	_, err := d.EOF(nil)
	require.ErrorIs(t, err, format.ErrTruncated)

	d = newChatDecoder(newRenderer(format.FormatMessages, false))
	_, _, _ = d.Frame(nil, nil, []byte(`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"length"}]}`))
	out, err = d.EOF(nil)
	require.NoError(t, err)
	require.Contains(t, string(out), `"stop_reason":"max_tokens"`)

	md := newMessagesDecoder(newRenderer(format.FormatChat, false))
	out, _, done := md.Frame(nil, []byte("error"), []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	require.True(t, done)
	require.Contains(t, string(out), `"code":"529"`)
}

// BenchmarkStreamFrames measures the per-frame cost of reading an upstream chat stream:
// verbatim passthrough, and translation into Anthropic events.
func BenchmarkStreamFrames(b *testing.B) {
	var sb strings.Builder
	const frames = 100
	for i := 0; i < frames; i++ {
		sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"token "},"finish_reason":null}]}` + "\n\n")
	}
	sb.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	src := sb.String()
	run := func(b *testing.B, translate bool) {
		b.ReportAllocs()
		rd := strings.NewReader(src)
		for b.Loop() {
			rd.Reset(src)
			s := &httpStream{parent: b.Context(), ctx: b.Context(), cancel: func(error) {}, timer: time.NewTimer(time.Hour), idle: time.Hour, in: format.FormatChat, d: &Deployment{}, body: io.NopCloser(rd), rd: newSSEReader(rd)}
			if translate {
				s.in = format.FormatMessages
				s.dec = newChatDecoder(newRenderer(format.FormatMessages, false))
			}
			n := 0
			for {
				if _, err := s.Next(); err != nil {
					break
				}
				n++
			}
			if n < frames {
				b.Fatal(n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/frames, "ns/frame")
	}
	b.Run("passthrough", func(b *testing.B) { run(b, false) })
	b.Run("chat_to_messages", func(b *testing.B) { run(b, true) })
}

// MapResponseText and MapStreamText visit every answer text: every choice, tool-call
// arguments (masked inside, still valid JSON) and every frame that repeats the text.
func TestMapAnswerText(t *testing.T) {
	t.Parallel()
	mask := func(t format.Text) (string, error) { return strings.ReplaceAll(t.Value, "secret", "[X]"), nil }
	body := []byte(`{"choices":[{"index":0,"message":{"content":"a secret"}},{"index":1,"message":{"content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"k\":\"the secret\",\"n\":1}"}}]}}]}`)
	out, err := format.MapResponseText(format.FormatChat, body, mask)
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
	var deltas []format.Text
	got, err := format.MapStreamText(format.FormatResponses, []byte(frames), func(t format.Text) (string, error) {
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
	_, err = format.MapStreamText(format.FormatChat, []byte(chat), func(t format.Text) (string, error) {
		chans = append(chans, t.Channel)
		return t.Value, nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"choice 1", "choice 1 tool 2"}, chans)
}
