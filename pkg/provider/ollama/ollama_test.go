package ollama_test

import (
	"context"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
	"lockstep/pkg/provider/ollama"
)

// Ollama's native /api/chat: the translated request, NDJSON stream and usage/stop mapping.
func TestOllamaWire(t *testing.T) {
	t.Parallel()
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/api/chat", r.URL.Path)
		got, _ = io.ReadAll(r.Body)
		if !gjson.GetBytes(got, "stream").Bool() {
			_, _ = io.WriteString(w, `{"model":"llama3","message":{"role":"assistant","content":"hi there"},"done":true,"done_reason":"length","prompt_eval_count":7,"eval_count":2}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, "{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"hi \"},\"done\":false}\n\n"+
			"{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":\"get\",\"arguments\":{\"q\":1}}}]},\"done\":false}\n"+
			"{\"model\":\"llama3\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":7,\"eval_count\":3}\n")
	}))
	defer srv.Close()
	b, err := provider.NewBuilder(provider.Policy{}, ollama.Vendor)
	require.NoError(t, err)
	d, err := b.NewDeployment("id", "grp", []byte(`{"model":"ollama/llama3","api_base":"`+srv.URL+`"}`))
	require.NoError(t, err)
	c := provider.NewClient()
	res, err := c.Do(context.Background(), d, format.FormatMessages, []byte(`{"model":"grp","max_tokens":2,"system":"sys","temperature":0.5,
		"messages":[{"role":"user","content":[{"type":"text","text":"q"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA="}}]}]}`))
	require.NoError(t, err)
	require.Equal(t, `{"model":"llama3","messages":[{"role":"system","content":"sys"},{"role":"user","content":"q","images":["AAA="]}],"stream":false,"options":{"num_predict":2,"temperature":0.5}}`, string(got))
	require.Equal(t, "max_tokens", gjson.GetBytes(res.Body, "stop_reason").Str)
	require.Equal(t, "hi there", gjson.GetBytes(res.Body, "content.0.text").Str)
	require.Equal(t, format.Usage{PromptTokens: 7, CompletionTokens: 2}, res.Usage)

	st, err := c.Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"grp","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"q"}]}`))
	require.NoError(t, err)
	var all strings.Builder
	for {
		ev, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		all.Write(ev.Data)
	}
	s := all.String()
	require.Contains(t, s, `"content":"hi "`)
	require.Contains(t, s, `"name":"get","arguments":""`)
	require.Contains(t, s, `"arguments":"{\"q\":1}"`)
	require.Contains(t, s, `"finish_reason":"tool_calls"`)
	require.Contains(t, s, `"prompt_tokens":7,"completion_tokens":3`)

	_, err = c.Do(context.Background(), d, format.FormatImages, []byte(`{"model":"grp","prompt":"x"}`))
	require.ErrorContains(t, err, "/images/generations not supported by provider ollama")
}
