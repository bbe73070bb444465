package bedrock

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
)

func TestInvokeMessagesBody(t *testing.T) {
	t.Parallel()
	in := http.Header{}
	in.Add("anthropic-beta", "a-1, b-2")
	in.Add("anthropic-beta", "c-3")
	out, dropped, err := invokeMessages{}.Body([]byte(`{"model":"m","stream":true,"max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"service_tier":"auto","messages":[{"role":"user","content":"hi"}]}`), true, in)
	require.NoError(t, err)
	require.JSONEq(t, `{"max_tokens":5,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}],
		"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["a-1","b-2","c-3"]}`, string(out))
	require.Equal(t, []string{"service_tier"}, dropped)

	// the client's anthropic_version and anthropic_beta are kept
	out, _, err = invokeMessages{}.Body([]byte(`{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["x"],"max_tokens":5,"messages":[]}`), false, in)
	require.NoError(t, err)
	require.JSONEq(t, `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["x"],"max_tokens":5,"messages":[]}`, string(out))

	// an image URL, also inside a tool result, is refused
	_, _, err = invokeMessages{}.Body([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]}]}]}`), false, nil)
	var ue *format.RequestError
	require.True(t, errors.As(err, &ue))
	require.Equal(t, 400, ue.Status())
	_, _, err = invokeMessages{}.Body([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"see \"url\""}]}]}`), false, nil)
	require.NoError(t, err, "a text that mentions url is no image")
}

func TestInvokeStreamFrames(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	msg := func(headers eventstream.Headers, payload string) {
		require.NoError(t, enc.Encode(&buf, eventstream.Message{Headers: headers, Payload: []byte(payload)}))
	}
	chunk := func(event string) {
		msg(eventstream.Headers{{Name: ":event-type", Value: eventstream.StringValue("chunk")}, {Name: ":message-type", Value: eventstream.StringValue("event")}},
			`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(event))+`","p":"abc"}`)
	}
	chunk(`{"type":"message_start","message":{"id":"msg_1"}}`)
	chunk(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`)
	msg(eventstream.Headers{{Name: ":message-type", Value: eventstream.StringValue("exception")}, {Name: ":exception-type", Value: eventstream.StringValue("throttlingException")}},
		`{"message":"Too many requests"}`)

	fr := invokeMessages{}.Frames(&buf)
	require.NoError(t, fr.Next())
	raw, event, data := fr.Current()
	require.Equal(t, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n", string(raw))
	require.Equal(t, "message_start", string(event))
	require.JSONEq(t, `{"type":"message_start","message":{"id":"msg_1"}}`, string(data))
	require.NoError(t, fr.Next())
	_, event, _ = fr.Current()
	require.Equal(t, "content_block_delta", string(event))
	err := fr.Next()
	var ue *format.UpstreamError
	require.True(t, errors.As(err, &ue), "%v", err)
	require.Equal(t, 429, ue.Status)
	require.Equal(t, "throttlingException: Too many requests", ue.Message)
	require.ErrorIs(t, fr.Next(), io.EOF)
}
