package textcompletion

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// A chat call to a text-completion-openai deployment is sent as a prompt to /completions and
// answered as chat, plain and streamed (usage asked for and read); a bare instruct model name
// infers the provider (LiteLLM's get_llm_provider).
func TestTextCompletionOpenAI(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/completions", r.URL.Path)
		require.Equal(t, "Bearer sk-up", r.Header.Get("Authorization"))
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
		if gjson.GetBytes(b, "stream").Bool() {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\":\"cmpl-1\",\"model\":\"gpt-3.5-turbo-instruct\",\"choices\":[{\"text\":\"Hel\",\"index\":0,\"finish_reason\":null}]}\n\n"+
				"data: {\"id\":\"cmpl-1\",\"choices\":[{\"text\":\"lo\",\"index\":0,\"finish_reason\":\"length\"}]}\n\n"+
				"data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,\"total_tokens\":6}}\n\ndata: [DONE]\n\n")
			return
		}
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","model":"gpt-3.5-turbo-instruct","choices":[{"text":"Hello","index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}`)
	}))
	defer srv.Close()
	pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
	require.NoError(t, err)
	d, err := pb.NewDeployment("id", "grp", []byte(`{"model":"text-completion-openai/gpt-3.5-turbo-instruct","api_base":"`+srv.URL+`/v1","api_key":"sk-up"}`))
	require.NoError(t, err)
	require.Equal(t, "text-completion-openai", d.Provider)
	chat := `{"model":"grp","max_tokens":7,"temperature":0.5,"stop":["\n"],"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello"}]}`
	res, err := provider.NewClient().Do(context.Background(), d, format.FormatChat, []byte(chat))
	require.NoError(t, err)
	require.JSONEq(t, `{"model":"gpt-3.5-turbo-instruct","prompt":"Be brief.\n\nSay hello","max_tokens":7,"temperature":0.5,"stop":["\n"]}`, got[0])
	require.Equal(t, "Hello", gjson.GetBytes(res.Body, "choices.0.message.content").Str, "%s", res.Body)
	require.Equal(t, "stop", gjson.GetBytes(res.Body, "choices.0.finish_reason").Str)
	require.Equal(t, int64(4), gjson.GetBytes(res.Body, "usage.prompt_tokens").Int())

	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatChat, []byte(`{"model":"grp","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say hello"}]}`))
	require.NoError(t, err)
	var all strings.Builder
	for {
		e, err := st.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		all.Write(e.Data)
	}
	require.JSONEq(t, `{"model":"gpt-3.5-turbo-instruct","prompt":"Say hello","stream":true,"stream_options":{"include_usage":true}}`, got[1])
	s := all.String()
	require.Contains(t, s, `"content":"Hel"`)
	require.Contains(t, s, `"content":"lo"`)
	require.Contains(t, s, `"finish_reason":"length"`)
	require.Contains(t, s, `"completion_tokens":2`)

	// a tool call cannot be a prompt
	_, err = provider.NewClient().Do(context.Background(), d, format.FormatChat,
		[]byte(`{"model":"grp","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`))
	var ue *format.RequestError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 400, ue.Status())
	require.Equal(t, "tools: not supported by provider text-completion-openai (a completions model takes a prompt)", ue.Message)

	// bare names: an instruct model is text-completion-openai, dall-e-3 openai
	d, err = pb.NewDeployment("id", "grp", []byte(`{"model":"gpt-3.5-turbo-instruct","api_key":"k"}`))
	require.NoError(t, err)
	require.Equal(t, "text-completion-openai", d.Provider)
	d, err = pb.NewDeployment("id", "grp", []byte(`{"model":"dall-e-3","api_key":"k"}`))
	require.NoError(t, err)
	require.Equal(t, "openai", d.Provider)
	require.Equal(t, "dall-e-3", d.Model)
}
