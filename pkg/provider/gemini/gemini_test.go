package gemini

import (
	"lockstep/pkg/format"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
)

// A chat request with a tool round trip, translated for Gemini.
const toolChat = `{"model":"grp","max_tokens":50,"temperature":0.2,"stop":["END"],
	"messages":[{"role":"system","content":"sys"},{"role":"user","content":"weather?"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
	{"role":"tool","tool_call_id":"call_1","content":"cold"}],
	"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}],"tool_choice":"required"}`

func TestGeminiRequestAndAnswer(t *testing.T) {
	t.Parallel()
	r, err := format.ParseRequest(format.FormatChat, []byte(toolChat))
	require.NoError(t, err)
	d := &provider.Deployment{Provider: "gemini", Model: "gemini-x"}
	b, err := API{}.Request(d, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},
		{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}}]},
		{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"content":"cold"}}}]}],
		"systemInstruction":{"parts":[{"text":"sys"}]},
		"generationConfig":{"maxOutputTokens":50,"temperature":0.2,"stopSequences":["END"]},
		"tools":[{"functionDeclarations":[{"name":"get_weather","description":"d","parameters":{"type":"object"}}]}],
		"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, string(b))

	res, err := API{}.Result([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking","thought":true},{"text":"Calling."},{"functionCall":{"name":"get_weather","args":{"city":"Bergen"}}}]},"finishReason":"STOP"}],
		"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"thoughtsTokenCount":3,"cachedContentTokenCount":4},"modelVersion":"gemini-x","responseId":"abc"}`))
	require.NoError(t, err)
	out := format.RenderResult(format.FormatMessages, res)
	require.Equal(t, "tool_use", gjson.GetBytes(out, "stop_reason").Str)
	require.Equal(t, "Calling.", gjson.GetBytes(out, "content.0.text").Str)
	require.Equal(t, `{"city":"Bergen"}`, gjson.GetBytes(out, "content.1.input").Raw)
	require.Equal(t, format.Tokens{In: 12, Out: 8, CacheRead: 4}, res.Tokens())

	res, err = API{}.Result([]byte(`{"candidates":[{"content":{"parts":[{"text":"cut"}]},"finishReason":"MAX_TOKENS"}]}`))
	require.NoError(t, err)
	require.Equal(t, format.StopLength, res.Stop())
	res, err = API{}.Result([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	require.NoError(t, err)
	require.Equal(t, format.StopFilter, res.Stop())
}
