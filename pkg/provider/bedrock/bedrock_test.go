package bedrock

import (
	"bytes"
	"context"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/provider"
)

// A chat request with a tool round trip, translated for Bedrock Converse.
const toolChat = `{"model":"grp","max_tokens":50,"temperature":0.2,"stop":["END"],
	"messages":[{"role":"system","content":"sys"},{"role":"user","content":"weather?"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
	{"role":"tool","tool_call_id":"call_1","content":"cold"}],
	"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}],"tool_choice":"required"}`

func TestBedrockRequestAndStream(t *testing.T) {
	t.Parallel()
	r, err := format.ParseRequest(format.FormatChat, []byte(toolChat))
	require.NoError(t, err)
	b, err := bedrockAPI{}.Request(&provider.Deployment{Provider: "bedrock"}, r)
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
	pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
	require.NoError(t, err)
	d, err := pb.NewDeployment("id", "grp", []byte(`{"model":"bedrock/m:0","api_base":"`+srv.URL+`","aws_region_name":"us-west-2","aws_access_key_id":"AKIDUNIT","aws_secret_access_key":"unit-secret-0001"}`))
	require.NoError(t, err)
	st, err := provider.NewClient().Stream(context.Background(), d, format.FormatMessages, []byte(`{"model":"grp","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"q"}]}`))
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

// Structured output (issue 21): response_format becomes the forced json_tool_call tool
// (LiteLLM's Converse mapping; json_object: any object) and the tool's input comes back as
// the message text with finish_reason stop, no x-lockstep-dropped.
func TestBedrockStructuredOutput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ format, schema string }{
		{`{"type":"json_schema","json_schema":{"name":"city","schema":{"type":"object","properties":{"name":{"type":"string"}}}}}`, `{"type":"object","properties":{"name":{"type":"string"}}}`},
		{`{"type":"json_object"}`, `{"type":"object","properties":{},"additionalProperties":true}`},
	} {
		r, err := format.ParseRequest(format.FormatChat, []byte(`{"model":"grp","messages":[{"role":"user","content":"city?"}],"response_format":`+c.format+`}`))
		require.NoError(t, err)
		b, err := bedrockAPI{}.Request(&provider.Deployment{Provider: "bedrock"}, r)
		require.NoError(t, err)
		require.JSONEq(t, `{"messages":[{"role":"user","content":[{"text":"city?"}]}],
			"toolConfig":{"tools":[{"toolSpec":{"name":"json_tool_call","inputSchema":{"json":`+c.schema+`}}}],"toolChoice":{"tool":{"name":"json_tool_call"}}}}`, string(b))
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"tu_1","name":"json_tool_call","input":{"name":"Oslo"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":2}}`)
	}))
	defer srv.Close()
	pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
	require.NoError(t, err)
	d, err := pb.NewDeployment("id", "grp", []byte(`{"model":"bedrock/m:0","api_base":"`+srv.URL+`","aws_region_name":"us-west-2","aws_access_key_id":"AKIDUNIT","aws_secret_access_key":"unit-secret-0001"}`))
	require.NoError(t, err)
	out := http.Header{}
	res, err := provider.NewClient().DoWith(context.Background(), d, format.FormatChat,
		[]byte(`{"model":"grp","messages":[{"role":"user","content":"city?"}],"response_format":{"type":"json_object"}}`), provider.Headers{Out: out})
	require.NoError(t, err)
	body := string(res.Body)
	require.Contains(t, body, `"content":"{\"name\":\"Oslo\"}"`)
	require.Contains(t, body, `"finish_reason":"stop"`)
	require.NotContains(t, body, `tool_calls`)
	require.Empty(t, out.Get(format.DroppedHeader))
}

// Issue 19 item 13: a bedrock deployment without a region (LiteLLM's example bedrock/*) loads;
// its region is resolved when it is called, in LiteLLM's order, and the request goes to that
// region's endpoint, signed for it.
func TestBedrockRegionAtCallTime(t *testing.T) {
	for _, env := range []string{"AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(env, "")
	}
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	pb, err := provider.NewBuilder(provider.Policy{}, Vendor)
	require.NoError(t, err)
	_, err = pb.NewDeployment("id", "bedrock/*", []byte(`{"model":"bedrock/*","aws_access_key_id":"AKIDUNIT","aws_secret_access_key":"unit-secret-0001"}`))
	require.NoError(t, err)
	require.Equal(t, "us-west-2", callRegion("")) // LiteLLM's last resort
	t.Setenv("AWS_REGION", "eu-west-3")
	require.Equal(t, "eu-west-3", callRegion(""))
	t.Setenv("AWS_REGION_NAME", "eu-north-1")
	require.Equal(t, "eu-north-1", callRegion(""))

	bs := &bedrockSigner{signer: v4.NewSigner(), creds: credentials.NewStaticCredentialsProvider("AKIDUNIT", "s", ""),
		lazyRegion: provider.NewLazy(func() (string, error) { return callRegion(""), nil }), regionHost: true}
	req, err := http.NewRequest("POST", "https://bedrock-runtime.amazonaws.com/model/m/converse", nil)
	require.NoError(t, err)
	shared := req.URL
	require.NoError(t, bs.Sign(context.Background(), req, []byte(`{}`)))
	require.Equal(t, "bedrock-runtime.eu-north-1.amazonaws.com", req.URL.Host)
	require.Equal(t, "bedrock-runtime.amazonaws.com", shared.Host) // the shared URL is not touched
	require.Contains(t, req.Header.Get("Authorization"), "/eu-north-1/bedrock/aws4_request")
}
