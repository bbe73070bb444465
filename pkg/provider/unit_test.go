package provider

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

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
	require.Equal(t, "Bearer sk-from-env", d.headers().Get("Authorization"))
	require.Equal(t, "b", d.headers().Get("X-A"))
	require.Nil(t, d.MockResponse)

	d, err = NewDeployment("id2", "grp", []byte(`{"model":"anthropic/claude-sonnet-4-5","timeout":"30","stream_timeout":12.5}`))
	require.NoError(t, err)
	require.Equal(t, "https://api.anthropic.com", d.APIBase)
	require.Equal(t, "https://api.anthropic.com/v1/messages", d.urls[format.FormatMessages])
	require.Equal(t, "sk-ant-env", d.headers().Get("x-api-key"))
	require.Equal(t, AnthropicVersion, d.headers().Get("anthropic-version"))
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
	require.Empty(t, d.headers().Get("Authorization"), "no key, no auth header")

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
				s.dec = format.NewDecoder(format.FormatChat, format.NewRenderer(format.FormatMessages, false))
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
