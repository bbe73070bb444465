package provider

import (
	"lockstep/pkg/format"

	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestAskUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		hide     bool
	}{
		{`{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, true},
		{` { } `, ` {"stream_options":{"include_usage":true} } `, true},
		{"{\"a\":[1] \n}\n", "{\"a\":[1],\"stream_options\":{\"include_usage\":true} \n}\n", true},
		// an escaped name is the same member (jsonscan, the upstream): edited in place, never
		// sent twice; asked for with escapes, it is asked for
		{`{"stream\u005foptions":{"include_usage":false}}`, `{"stream\u005foptions":{"include_usage":true}}`, true},
		{`{"stream_optio\u006es":{"include_u\u0073age":true}}`, `{"stream_optio\u006es":{"include_u\u0073age":true}}`, false},
		{`{"content":"caf\u00e9"}`, `{"content":"caf\u00e9","stream_options":{"include_usage":true}}`, true},
		{`{"stream_options":null,"x":1}`, `{"stream_options":{"include_usage":true},"x":1}`, true},
		{`{"stream_options":{"include_usage":false},"x":1}`, `{"stream_options":{"include_usage":true},"x":1}`, true},
		{`{"stream_options": {"include_obfuscation": false}}`, `{"stream_options": {"include_usage":true,"include_obfuscation": false}}`, true},
		{`{"stream_options":{}}`, `{"stream_options":{"include_usage":true}}`, true},
		{`{"x":{"stream_options":1},"stream_options":{ "include_usage" : null }}`, `{"x":{"stream_options":1},"stream_options":{ "include_usage" : true }}`, true},
		// the client asked: the body is sent as it is, nothing hidden
		{`{"stream_options":{"include_usage":true}}`, `{"stream_options":{"include_usage":true}}`, false},
		// not an object: left for the upstream to refuse
		{`{"stream_options":"x"}`, `{"stream_options":"x"}`, false},
	} {
		in := []byte(tc.in)
		got, hide := askUsage(in)
		require.Equal(t, tc.want, string(got), tc.in)
		require.Equal(t, tc.hide, hide, tc.in)
		require.Equal(t, tc.in, string(in), "the client's body is not modified")
		require.True(t, gjson.ValidBytes(got), tc.in)
	}
}

func TestRemoveMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"id":"c","choices":[],"usage":null}`, `{"id":"c","choices":[]}`},
		{`{"usage":null,"id":"c"}`, `{"id":"c"}`},
		{`{ "usage" : {"a":1} , "id":"c"}`, `{ "id":"c"}`},
		{`{"id":"c" , "usage": null, "obfuscation":"x"}`, `{"id":"c" , "obfuscation":"x"}`},
		{`{"usage":null}`, `{}`},
		{`{"x":{"usage":1},"usage":null}`, `{"x":{"usage":1}}`},
	} {
		v := gjson.Get(tc.in, "usage")
		got, ok := removeMember([]byte("data: "), []byte(tc.in), "usage", v)
		require.True(t, ok, tc.in)
		require.Equal(t, "data: "+tc.want, string(got), tc.in)
		require.True(t, gjson.Valid(tc.want))
	}
	// a key written with an escape is not edited (the frame is kept as it is)
	in := `{"us\u0061ge":null}`
	_, ok := removeMember(nil, []byte(in), "usage", gjson.Get(in, "usage"))
	require.False(t, ok)
}

// Hiding a chunk costs the hot path one member look-up per frame, no allocation.
func BenchmarkPassthroughUsageHidden(b *testing.B) {
	s := &httpStream{in: format.FormatChat, hide: true}
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"Hello there"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	raw := append(append([]byte("data: "), chunk...), "\n\n"...)
	b.ReportAllocs()
	for b.Loop() {
		s.passthroughUsage(raw, nil, chunk)
	}
}

func BenchmarkPassthroughUsageAsked(b *testing.B) {
	s := &httpStream{in: format.FormatChat}
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"Hello there"},"logprobs":null,"finish_reason":null}]}`)
	raw := append(append([]byte("data: "), chunk...), "\n\n"...)
	b.ReportAllocs()
	for b.Loop() {
		s.passthroughUsage(raw, nil, chunk)
	}
}

// BenchmarkAskUsage is the request edit of a streamed call on a ~4 KB chat body (one copy).
func BenchmarkAskUsage(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 340) + `"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if out, hide := askUsage(body); !hide || len(out) == len(body) {
			b.Fatal("not asked")
		}
	}
}

// FuzzRemoveMember: on any JSON object, removing its top-level "usage" leaves valid JSON
// without it, every other member kept.
func FuzzRemoveMember(f *testing.F) {
	for _, s := range []string{`{"usage":null}`, `{"a":1,"usage":{"x":[1]}}`, `{ "usage" : 1 , "b" : "usage" }`, `{"x":{"usage":1},"usage":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if !gjson.Valid(in) || !gjson.Parse(in).IsObject() {
			return
		}
		v := gjson.Get(in, "usage")
		if !v.Exists() {
			return
		}
		out, ok := removeMember(nil, []byte(in), "usage", v)
		if !ok {
			return
		}
		if !gjson.ValidBytes(out) {
			t.Fatalf("%s → invalid %s", in, out)
		}
		n := 0
		gjson.Parse(in).ForEach(func(k, _ gjson.Result) bool { n++; return true })
		m := 0
		gjson.ParseBytes(out).ForEach(func(k, _ gjson.Result) bool { m++; return true })
		if m != n-1 {
			t.Fatalf("%s → %s: %d members, want %d", in, out, m, n-1)
		}
	})
}
