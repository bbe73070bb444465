package provider

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// A chat request with a tool round trip, translated for Gemini and Bedrock Converse.
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

func TestBedrockRequestAndStream(t *testing.T) {
	t.Parallel()
	r, err := parseChatRequest([]byte(toolChat))
	require.NoError(t, err)
	b, err := bedrockAPI{}.request(&Deployment{Provider: "bedrock"}, r)
	require.NoError(t, err)
	require.JSONEq(t, `{"messages":[{"role":"user","content":[{"text":"weather?"}]},
		{"role":"assistant","content":[{"toolUse":{"toolUseId":"call_1","name":"get_weather","input":{"city":"Oslo"}}}]},
		{"role":"user","content":[{"toolResult":{"toolUseId":"call_1","content":[{"text":"cold"}]}}]}],
		"system":[{"text":"sys"}],"inferenceConfig":{"maxTokens":50,"temperature":0.2,"stopSequences":["END"]},
		"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"d","inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"any":{}}}}`, string(b))

	// ConverseStream: a tool call streamed, then an exception-free end with usage.
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	ev := func(typ string, payload string) {
		require.NoError(t, enc.Encode(&buf, eventstream.Message{Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(typ)}, {Name: ":message-type", Value: eventstream.StringValue("event")}}, Payload: []byte(payload)}))
	}
	ev("messageStart", `{"role":"assistant"}`)
	ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Let me check."}}`)
	ev("contentBlockStop", `{"contentBlockIndex":0}`)
	ev("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tu_1","name":"get_weather"}}}`)
	ev("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\":"}}}`)
	ev("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"Oslo\"}"}}}`)
	ev("contentBlockStop", `{"contentBlockIndex":1}`)
	ev("messageStop", `{"stopReason":"tool_use"}`)
	ev("metadata", `{"usage":{"inputTokens":9,"outputTokens":4,"cacheReadInputTokens":2},"metrics":{"latencyMs":1}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.True(t, strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDUNIT/"))
		require.Equal(t, "/model/m%3A0/converse-stream", r.URL.EscapedPath())
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		_, _ = w.Write(buf.Bytes())
	}))
	defer srv.Close()
	d, err := NewDeployment("id", "grp", []byte(`{"model":"bedrock/m:0","api_base":"`+srv.URL+`","aws_region_name":"us-west-2","aws_access_key_id":"AKIDUNIT","aws_secret_access_key":"unit-secret-0001"}`))
	require.NoError(t, err)
	st, err := NewClient().Stream(context.Background(), d, FormatMessages, []byte(`{"model":"grp","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"q"}]}`))
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
	s := all.String()
	require.Contains(t, s, `"text":"Let me check."`)
	require.Contains(t, s, `"type":"tool_use","id":"tu_1","name":"get_weather"`)
	require.Contains(t, s, `"partial_json":"\"Oslo\"}"`)
	require.Contains(t, s, `"stop_reason":"tool_use"`)
	require.Contains(t, s, `"input_tokens":9,"output_tokens":4`)
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
