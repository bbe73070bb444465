package provider_test

import (
	"context"
	"io"
	"lockstep/pkg/format"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/itest/fakeupstream"
	"lockstep/pkg/provider"
)

// readStream reads st to its end: the frames' bytes and the text.
func readStream(t *testing.T, st provider.Stream) (string, string) {
	t.Helper()
	defer st.Close()
	var data, text strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return data.String(), text.String()
		}
		require.NoError(t, err)
		data.Write(ev.Data)
		text.WriteString(ev.Text)
	}
}

// Every stream reports its usage to the gateway; a client that did not ask for the usage
// chunk (no stream_options, or include_usage false) never sees it, nor the "usage": null the
// question adds to every chunk; one that asked gets the upstream's frames unchanged.
func TestStreamUsageAskedAndHidden(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t) // honours include_usage as OpenAI does
	c := provider.NewClient()
	ctx := context.Background()
	const user = "one two three"
	wantUsage := format.Usage{PromptTokens: 3, CompletionTokens: 6} // "fake reply to: one two three"
	chat := func(extra string) string {
		return `{"model":"g","messages":[{"role":"user","content":"` + user + `"}],"stream":true` + extra + `}`
	}
	for _, tc := range []struct {
		name, body string
		asked      bool
	}{
		{"absent", chat(""), false},
		{"false", chat(`,"stream_options":{"include_usage":false}`), false},
		{"null", chat(`,"stream_options":null`), false},
		{"asked", chat(`,"stream_options":{"include_usage":true}`), true},
	} {
		d := deployment(t, up, "openai", "")
		st, err := c.Stream(ctx, d, format.FormatChat, []byte(tc.body))
		require.NoError(t, err, tc.name)
		data, text := readStream(t, st)
		u, final := provider.StreamUsage(st)
		require.True(t, final, tc.name)
		require.Equal(t, wantUsage, u, tc.name)
		require.Equal(t, "fake reply to: "+user, text, tc.name)
		req, ok := up.LastRequest("/v1/chat/completions")
		require.True(t, ok)
		require.Equal(t, gjson.True, gjson.GetBytes(req.Body, "stream_options.include_usage").Type, "%s: the upstream is asked: %s", tc.name, req.Body)
		require.True(t, strings.HasSuffix(data, "data: [DONE]\n\n"), tc.name)
		if tc.asked {
			require.Contains(t, data, `"choices":[],`, tc.name)
			require.Contains(t, data, `"usage":{"completion_tokens":6`, tc.name)
			require.Contains(t, data, `"usage":null`, tc.name)
			continue
		}
		require.NotContains(t, data, "usage", "%s: the client did not ask: %s", tc.name, data)
		require.NotContains(t, data, `"choices":[]`, tc.name)
		// every frame is still a valid chunk
		for _, f := range strings.Split(strings.TrimSuffix(data, "\n\n"), "\n\n") {
			j := strings.TrimPrefix(f, "data: ")
			require.True(t, j == "[DONE]" || gjson.Valid(j), "frame %q", f)
		}
	}
}

// Completions: a usage member on a chunk that also has choices is removed, the chunk kept.
func TestStreamUsageCompletionsHidden(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	d := deployment(t, up, "openai", "")
	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatCompletions, []byte(`{"model":"g","prompt":"a b","stream":true}`))
	require.NoError(t, err)
	data, _ := readStream(t, st)
	u, final := provider.StreamUsage(st)
	require.True(t, final)
	require.Equal(t, format.Usage{PromptTokens: 2, CompletionTokens: 5}, u)
	require.NotContains(t, data, "usage")
	require.Contains(t, data, `"finish_reason":"stop"`, "the finish chunk is kept")
	require.Contains(t, data, `"object":"text_completion"}`+"\n\ndata: [DONE]")
}

// The formats that always carry usage (Anthropic messages, Responses) and translated streams
// (a /v1/messages or /v1/responses client on an OpenAI-compatible deployment without
// /responses, a chat client on Anthropic) report it too; nothing is added to the client's
// stream.
func TestStreamUsageOtherFormats(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t)
	c := provider.NewClient()
	msgs := `{"model":"g","max_tokens":50,"messages":[{"role":"user","content":"a b c d"}],"stream":true}`
	for _, tc := range []struct {
		kind string
		in   format.Format
		body string
	}{
		{"anthropic", format.FormatMessages, msgs},
		{"openai", format.FormatResponses, `{"model":"g","input":"a b c d","stream":true}`},
		{"openai", format.FormatMessages, msgs},
		{"deepseek", format.FormatResponses, `{"model":"g","input":"a b c d","stream":true}`},
		{"anthropic", format.FormatChat, `{"model":"g","messages":[{"role":"user","content":"a b c d"}],"stream":true}`},
	} {
		d := deployment(t, up, tc.kind, "")
		st, err := c.Stream(context.Background(), d, tc.in, []byte(tc.body))
		require.NoError(t, err, "%s %s", tc.kind, tc.in)
		data, _ := readStream(t, st)
		u, final := provider.StreamUsage(st)
		require.True(t, final, "%s %s", tc.kind, tc.in)
		require.Equal(t, format.Usage{PromptTokens: 4, CompletionTokens: 7}, u, "%s %s", tc.kind, tc.in)
		if tc.in == format.FormatChat {
			require.NotContains(t, data, "usage", "a chat client that did not ask")
		}
	}
	// a mock answer knows its usage (LiteLLM's 10 + 20)
	st, err := c.Stream(context.Background(), deployment(t, up, "mock", ""), format.FormatChat, []byte(`{"model":"g","messages":[],"stream":true}`))
	require.NoError(t, err)
	readStream(t, st)
	u, final := provider.StreamUsage(st)
	require.True(t, final)
	require.Equal(t, format.Usage{PromptTokens: 10, CompletionTokens: 20}, u)
}

// A stream cut before its usage reports what it saw, not final.
func TestStreamUsageCut(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithStreamCutAfter(2))
	d := deployment(t, up, "openai", "")
	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"g","messages":[{"role":"user","content":"x"}],"stream":true}`))
	require.NoError(t, err)
	defer st.Close()
	for {
		if _, err := st.Next(); err != nil {
			require.NotEqual(t, io.EOF, err)
			break
		}
	}
	u, final := provider.StreamUsage(st)
	require.False(t, final)
	require.Zero(t, u)
}
