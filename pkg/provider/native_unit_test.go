package provider

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// A chat request with a tool round trip, translated for Gemini (and Bedrock Converse, in
// pkg/provider/bedrock).
const toolChat = `{"model":"grp","max_tokens":50,"temperature":0.2,"stop":["END"],
	"messages":[{"role":"system","content":"sys"},{"role":"user","content":"weather?"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
	{"role":"tool","tool_call_id":"call_1","content":"cold"}],
	"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}],"tool_choice":"required"}`

func TestGeminiRequestAndAnswer(t *testing.T) {
	t.Parallel()
	r, err := parseChatRequest([]byte(toolChat))
	require.NoError(t, err)
	d := &Deployment{Provider: "gemini", Model: "gemini-x"}
	b, err := geminiAPI{}.request(d, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"contents":[{"role":"user","parts":[{"text":"weather?"}]},
		{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Oslo"}}}]},
		{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"content":"cold"}}}]}],
		"systemInstruction":{"parts":[{"text":"sys"}]},
		"generationConfig":{"maxOutputTokens":50,"temperature":0.2,"stopSequences":["END"]},
		"tools":[{"functionDeclarations":[{"name":"get_weather","description":"d","parameters":{"type":"object"}}]}],
		"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`, string(b))

	res, err := geminiAPI{}.result([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking","thought":true},{"text":"Calling."},{"functionCall":{"name":"get_weather","args":{"city":"Bergen"}}}]},"finishReason":"STOP"}],
		"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"thoughtsTokenCount":3,"cachedContentTokenCount":4},"modelVersion":"gemini-x","responseId":"abc"}`))
	require.NoError(t, err)
	out := renderMessages(res)
	require.Equal(t, "tool_use", gjson.GetBytes(out, "stop_reason").Str)
	require.Equal(t, "Calling.", gjson.GetBytes(out, "content.0.text").Str)
	require.Equal(t, `{"city":"Bergen"}`, gjson.GetBytes(out, "content.1.input").Raw)
	require.Equal(t, usage{in: 12, out: 8, cacheRead: 4}, res.usage)

	res, err = geminiAPI{}.result([]byte(`{"candidates":[{"content":{"parts":[{"text":"cut"}]},"finishReason":"MAX_TOKENS"}]}`))
	require.NoError(t, err)
	require.Equal(t, stopLength, res.stop)
	res, err = geminiAPI{}.result([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	require.NoError(t, err)
	require.Equal(t, stopFilter, res.stop)
}

// Guardrail walkers visit members in their own order: edits out of body order must apply.
func TestMapRequestTextOutOfOrderMembers(t *testing.T) {
	t.Parallel()
	up := func(t Text) (string, error) { return strings.ToUpper(t.Value), nil }
	out, err := MapRequestText(FormatResponses, []byte(`{"input":"a b","instructions":"c d","model":"m"}`), up)
	require.NoError(t, err)
	require.Equal(t, `{"input":"A B","instructions":"C D","model":"m"}`, string(out))
	out, err = MapRequestText(FormatMessages, []byte(`{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"system":"s"}`), up)
	require.NoError(t, err)
	require.Equal(t, `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"X"}]}],"system":"S"}`, string(out))
}
