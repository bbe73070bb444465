package fakeupstream

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"
)

// bedrockClaude serves InvokeModel and InvokeModelWithResponseStream with a Claude model
// (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html):
// the body is Anthropic's Messages request with "anthropic_version": "bedrock-2023-05-31"
// and, as Bedrock checks, no "model" or "stream" member ("Extra inputs are not permitted");
// "anthropic_beta", when present, is an array of strings. The answer is Anthropic's Messages
// JSON; the stream is the AWS event-stream framing, each Anthropic event the base64 "bytes"
// of a "chunk" event, the last (message_stop) carrying amazon-bedrock-invocationMetrics.
func (s *Server) bedrockClaude(w http.ResponseWriter, r *http.Request, model string, stream bool, body []byte) {
	bad := func(msg string) { writeAWSError(w, http.StatusBadRequest, "ValidationException", msg) }
	if !gjson.ValidBytes(body) {
		bad("Malformed input request, please reformat your input and try again.")
		return
	}
	j := gjson.ParseBytes(body)
	switch {
	case j.Get("anthropic_version").Str != "bedrock-2023-05-31":
		bad("Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again.")
		return
	case j.Get("max_tokens").Type != gjson.Number || !j.Get("messages").IsArray():
		bad("Malformed input request: #: required key [max_tokens] not found, please reformat your input and try again.")
		return
	}
	extra := ""
	j.ForEach(func(k, _ gjson.Result) bool {
		if !bedrockClaudeFields[k.Str] {
			extra = k.Str
		}
		return extra == ""
	})
	if extra != "" {
		bad("Malformed input request: #: extraneous key [" + extra + "] is not permitted, please reformat your input and try again.")
		return
	}
	if b := j.Get("anthropic_beta"); b.Exists() {
		ok := b.IsArray()
		b.ForEach(func(_, v gjson.Result) bool { ok = ok && v.Type == gjson.String; return ok })
		if !ok {
			bad("Malformed input request: #/anthropic_beta: expected type: JSONArray, please reformat your input and try again.")
			return
		}
	}
	in := ReplyInput{API: APIMessages, Path: r.URL.Path, Model: model, Text: lastUserText(j.Get("messages")), Stream: stream, Body: body, Header: r.Header, maxTokens: j.Get("max_tokens").Int()}
	n := s.seq.Add(1)
	if !stream {
		s.messages(w, r, in, n)
		return
	}
	// s.messages writes Anthropic SSE frames; eventStreamWriter re-frames each as Bedrock does.
	es := &eventStreamWriter{w: w, enc: eventstream.NewEncoder()}
	s.messages(es, r, in, n)
}

// eventStreamWriter is an http.ResponseWriter that takes whole SSE frames ("event: …\ndata:
// <json>\n\n", one per Write, as sse.frame writes them) and writes each as an AWS event-stream
// "chunk" message whose payload is {"bytes": base64(json)}.
type eventStreamWriter struct {
	w       http.ResponseWriter
	enc     *eventstream.Encoder
	started bool
}

func (e *eventStreamWriter) Header() http.Header { return e.w.Header() }

func (e *eventStreamWriter) WriteHeader(code int) {
	if e.started {
		return
	}
	e.started = true
	e.w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	e.w.Header().Del("Cache-Control")
	e.w.WriteHeader(code)
}

func (e *eventStreamWriter) Write(p []byte) (int, error) {
	e.WriteHeader(http.StatusOK)
	var data []byte
	sc := bufio.NewScanner(bytes.NewReader(p))
	sc.Buffer(make([]byte, 0, len(p)+1), len(p)+1)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			data = append(data, d...)
		}
	}
	if len(data) == 0 {
		return len(p), nil
	}
	if gjson.GetBytes(data, "type").Str == "message_stop" {
		var ev map[string]any
		_ = json.Unmarshal(data, &ev)
		ev["amazon-bedrock-invocationMetrics"] = map[string]any{"inputTokenCount": 1, "outputTokenCount": 1, "invocationLatency": 12, "firstByteLatency": 5}
		data, _ = json.Marshal(ev)
	}
	payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString(data), "p": "abcdefghij"[:1+len(data)%10]})
	err := e.enc.Encode(e.w, eventstream.Message{Headers: eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue("chunk")},
		{Name: ":content-type", Value: eventstream.StringValue("application/json")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, Payload: payload})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (e *eventStreamWriter) Flush() {
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// bedrockClaudeFields are the top-level members Bedrock takes with Claude
// (model-parameters-anthropic-claude-messages-request-response.html; LiteLLM's
// BedrockInvokeAnthropicMessagesRequest).
var bedrockClaudeFields = map[string]bool{"anthropic_version": true, "max_tokens": true, "messages": true, "anthropic_beta": true,
	"system": true, "stop_sequences": true, "temperature": true, "top_p": true, "top_k": true, "tools": true,
	"tool_choice": true, "thinking": true, "metadata": true, "output_config": true, "context_management": true}

// isBedrockClaude reports a Claude model id (with or without a region prefix).
func isBedrockClaude(model string) bool { return strings.Contains(model, "anthropic.claude") }
