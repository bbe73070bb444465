package fakeupstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"
)

// APIBedrock is Amazon Bedrock's Converse API.
const APIBedrock API = "bedrock"

// Bedrock is what the fake Bedrock runtime accepts.
type Bedrock struct {
	// Region is the signing region the fake serves (e.g. "us-east-1").
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are the only credentials it knows; with a
	// SessionToken every request must carry it (X-Amz-Security-Token).
	AccessKeyID, SecretAccessKey, SessionToken string
	// Service is the SigV4 service the signature must be scoped to; "" is "bedrock".
	Service string
}

// StartBedrock starts a fake Amazon Bedrock runtime: POST /model/{modelId}/converse and
// /model/{modelId}/converse-stream, the latter answered in the AWS event-stream binary framing
// (messageStart, contentBlockDelta…, contentBlockStop, messageStop, metadata). Like AWS it
// first verifies the SigV4 Authorization header: the access key must be the fake's, the
// credential scope its region and service "bedrock", X-Amz-Date within 5 minutes, and the
// signature must equal the one the AWS SDK signer computes over the received request with the
// fake's secret (403 InvalidSignatureException / UnrecognizedClientException otherwise, with
// x-amzn-ErrorType). Then it validates the Converse body as Bedrock does (messages start with
// user and alternate, no blank text blocks) and honours inferenceConfig.maxTokens by cutting
// the answer (stopReason max_tokens). InvokeModel (/model/{modelId}/invoke) serves the Titan and
// Cohere embedding models (embed_native.go).
func StartBedrock(t testing.TB, b Bedrock, opts ...Option) *Server {
	s := Start(t, opts...)
	s.native = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if code, typ, msg := b.verify(r, body); code != 0 {
			writeAWSError(w, code, typ, msg)
			return
		}
		s.converse(w, r, body)
	}
	return s
}

// strconvQuote quotes s for a gjson query value.
func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func writeAWSError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("x-amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, code, map[string]any{"message": msg})
}

// verify checks the request's SigV4 signature by signing the same request again with the
// AWS SDK signer and the fake's credentials.
func (b Bedrock) verify(r *http.Request, body []byte) (int, string, string) {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/") // AKID/date/region/service/aws4_request
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return http.StatusForbidden, "IncompleteSignatureException", "Authorization header requires 'Credential' parameter."
	}
	if scope[0] != b.AccessKeyID {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	service := b.Service
	if service == "" {
		service = "bedrock"
	}
	if scope[2] != b.Region || scope[3] != service {
		return http.StatusForbidden, "InvalidSignatureException", fmt.Sprintf("Credential should be scoped to a valid region and service '%s', not %s/%s.", service, scope[2], scope[3])
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || time.Since(at).Abs() > 5*time.Minute {
		return http.StatusForbidden, "InvalidSignatureException", "Signature expired or X-Amz-Date missing."
	}
	if b.SessionToken != "" && r.Header.Get("X-Amz-Security-Token") != b.SessionToken {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return http.StatusBadRequest, "ValidationException", err.Error()
	}
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h != "host" && h != "content-length" {
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey, SessionToken: b.SessionToken}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), service, b.Region, at); err != nil {
		return http.StatusInternalServerError, "InternalServerException", err.Error()
	}
	if req.Header.Get("Authorization") != auth {
		return http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return 0, "", ""
}

func (s *Server) converse(w http.ResponseWriter, r *http.Request, body []byte) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	escModel, op, ok2 := strings.Cut(rest, "/")
	model, err := url.PathUnescape(escModel)
	if ok && ok2 && err == nil && op == "invoke" && r.Method == http.MethodPost {
		s.bedrockInvoke(w, model, body)
		return
	}
	if !ok || !ok2 || err != nil || (op != "converse" && op != "converse-stream") || r.Method != http.MethodPost {
		writeAWSError(w, http.StatusNotFound, "UnknownOperationException", "Unknown operation")
		return
	}
	if code := int(s.status.Load()); code != 0 && (code < 200 || code > 299) {
		writeAWSError(w, code, "ServiceUnavailableException", fmt.Sprintf("fake upstream error %d", code))
		return
	}
	bad := func(msg string) { writeAWSError(w, http.StatusBadRequest, "ValidationException", msg) }
	if !gjson.ValidBytes(body) {
		bad("Malformed input request, please reformat your input and try again.")
		return
	}
	j := gjson.ParseBytes(body)
	msgs := j.Get("messages").Array()
	if len(msgs) == 0 {
		bad("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
		return
	}
	var userText string
	for i, m := range msgs {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Get("role").Str != want {
			bad("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.")
			return
		}
		var texts []string
		blank := false
		m.Get("content").ForEach(func(_, c gjson.Result) bool {
			if t := c.Get("text"); t.Exists() {
				if strings.TrimSpace(t.Str) == "" {
					blank = true
				}
				texts = append(texts, t.Str)
			}
			return true
		})
		if blank || len(m.Get("content").Array()) == 0 {
			bad("The text field in the ContentBlock object is blank. Add text to the text field, and try again.")
			return
		}
		if want == "user" {
			userText = strings.Join(texts, "\n")
		}
	}
	in := ReplyInput{API: APIBedrock, Path: r.URL.Path, Model: model, Text: userText, Stream: op == "converse-stream", Body: body, Header: r.Header}
	text, cut := truncate(s.cfg.reply(in), j.Get("inferenceConfig.maxTokens").Int())
	stop := "end_turn"
	if cut {
		stop = "max_tokens"
	}
	// WithToolCalls: a toolUse block calling the first toolConfig tool, unless the last user
	// turn carries its toolResult.
	var call map[string]any
	answered := false
	for _, c := range msgs[len(msgs)-1].Get("content").Array() {
		answered = answered || c.Get("toolResult").Exists()
	}
	// A forced tool (toolChoice.tool, which must name a toolConfig tool as Bedrock checks) is
	// always called, whatever WithToolCalls says; its input is then the reply when that is a JSON
	// object (a model filling the json_tool_call schema LiteLLM forces for response_format).
	forced := j.Get("toolConfig.toolChoice.tool.name").Str
	if forced != "" && !j.Get(`toolConfig.tools.#(toolSpec.name==`+strconvQuote(forced)+`)`).Exists() {
		bad("The tool specified in toolChoice is not defined in toolConfig.tools.")
		return
	}
	name := j.Get("toolConfig.tools.0.toolSpec.name").Str
	if forced != "" {
		name = forced
	}
	if name != "" && (s.cfg.toolCalls || forced != "") && !answered {
		var input any = map[string]any{"input": userText}
		if r := gjson.Parse(text); forced != "" && r.IsObject() && gjson.Valid(text) {
			input = json.RawMessage(text)
		}
		call = map[string]any{"toolUseId": fmt.Sprintf("tooluse_fake%d", s.seq.Add(1)), "name": name, "input": input}
		text, stop = "", "tool_use"
	}
	usage := map[string]any{"inputTokens": tokens(userText), "outputTokens": tokens(text), "totalTokens": tokens(userText) + tokens(text)}
	if !in.Stream {
		block := map[string]any{"text": text}
		if call != nil {
			block = map[string]any{"toolUse": call}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": []any{block}}},
			"stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 12},
		})
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	enc := eventstream.NewEncoder()
	send := func(event string, payload any) bool {
		p, _ := json.Marshal(payload)
		err := enc.Encode(w, eventstream.Message{Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(event)},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
		}, Payload: p})
		if err != nil {
			return false
		}
		w.(http.Flusher).Flush()
		return true
	}
	if !send("messageStart", map[string]any{"role": "assistant"}) {
		return
	}
	if call != nil {
		input, _ := json.Marshal(call["input"])
		if !send("contentBlockStart", map[string]any{"contentBlockIndex": 0, "start": map[string]any{"toolUse": map[string]any{"toolUseId": call["toolUseId"], "name": call["name"]}}}) ||
			!send("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"toolUse": map[string]any{"input": string(input)}}}) {
			return
		}
	}
	for _, part := range split(text, s.cfg.chunks) {
		if !send("contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": part}}) {
			return
		}
	}
	if !send("contentBlockStop", map[string]any{"contentBlockIndex": 0}) || !send("messageStop", map[string]any{"stopReason": stop}) {
		return
	}
	send("metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 12}})
}
