// Package remote is the provider.Vendor of remote A2A agents (provider "a2a_agent", LiteLLM's
// A2A agent gateway): an agent registered with litellm_params.model "a2a_agent/<name>" is
// served by calling the remote agent's JSON-RPC endpoint, in the A2A version its card pins
// (a2a.PinnedInterface), through the gateway's call pipeline like any model — key auth,
// access, guardrails on the texts, limits and spend. Registered by cmd/gateway:
// provider.NewBuilder(policy, remote.Vendor, …).
package remote

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"lockstep/pkg/a2a"
	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// Vendor serves the a2a_agent/<name> prefix. litellm_params: api_base (the remote's JSON-RPC
// URL; the agent's card url by default, see a2a.Agent.UpstreamParams), api_key (sent as
// "Authorization: Bearer"), a2a_protocol_version ("0.3", the default, or "1.0").
var Vendor = provider.Vendor{Names: []string{a2a.RemoteProvider}, Setup: setup}

func setup(s *provider.Setup) error {
	d := s.Deployment()
	v, err := s.Param(a2a.RemoteVersionParam)
	if err != nil {
		return err
	}
	w := wire{}
	switch v {
	case "", "0.3":
	case "1.0":
		w.v10 = true
		s.SetHeader(a2a.VersionHeader, "1.0") // A2A 1.0 §3.2.6: the version the request is in
	default:
		return fmt.Errorf("litellm_params.%s: %q is not an A2A version this gateway speaks (0.3, 1.0)", a2a.RemoteVersionParam, v)
	}
	s.SetWire(w, d.APIBase, "")
	s.SetHeader("Accept", "application/json, text/event-stream")
	if d.APIKey != "" {
		s.SetHeader("Authorization", "Bearer "+d.APIKey)
	}
	return nil
}

// wire is an A2A agent's JSON-RPC 2.0 binding as a provider.Wire: the last user turn's text
// goes out as one A2A message and the agent's reply — a Message, or a Task's artifacts
// (status message when it has none) — comes back as the answer text.
//
//   - 0.3 (A2A v0.3 §7.1, §7.2): "message/send" / "message/stream", message
//     {"kind": "message", "role": "user", "messageId", "parts": [{"kind": "text", "text"}]};
//     results {"kind": "message" | "task" | "status-update" | "artifact-update", …}, a stream's
//     end the status update with "final": true.
//   - 1.0 (A2A 1.0 §9, the ProtoJSON shapes): "SendMessage" / "SendStreamingMessage" with the
//     A2A-Version: 1.0 header, message {"role": "ROLE_USER", "messageId", "parts": [{"text"}]};
//     results {"message"} | {"task"} | {"statusUpdate"} | {"artifactUpdate"}, a stream's end a
//     terminal TASK_STATE_*.
//
// A2A reports no token usage: as LiteLLM (A2ARequestUtils.calculate_usage_from_request_response)
// the gateway counts ⌈characters / 4⌉ of the sent and the answered text. The request id
// carries the prompt's count ("lockstep-<n>"), which every JSON-RPC answer echoes.
type wire struct{ v10 bool }

var _ provider.Wire = wire{}

func (w wire) Request(_ *provider.Deployment, r *format.Request) ([]byte, error) {
	text := lastUserText(r)
	if text == "" {
		return nil, format.BadRequest("messages: the A2A agent needs a user message with text")
	}
	method, role, kind := "message/send", `"user"`, `"kind":"text",`
	if r.Stream() {
		method = "message/stream"
	}
	if w.v10 {
		method, role, kind = "SendMessage", `"ROLE_USER"`, ""
		if r.Stream() {
			method = "SendStreamingMessage"
		}
	}
	b := []byte(`{"jsonrpc":"2.0","id":"lockstep-`)
	b = strconv.AppendInt(b, estimate(text), 10)
	b = append(b, `","method":"`...)
	b = append(b, method...)
	b = append(b, `","params":{"message":{`...)
	if !w.v10 {
		b = append(b, `"kind":"message",`...)
	}
	b = append(b, `"role":`...)
	b = append(b, role...)
	b = append(b, `,"messageId":"`...)
	b = append(b, newID()...)
	b = append(b, `","parts":[{`...)
	b = append(b, kind...)
	b = append(b, `"text":`...)
	b = format.AppendJSONString(b, text)
	return append(b, `}]}}}`...), nil
}

// lastUserText joins the text parts of the request's last user message.
func lastUserText(r *format.Request) string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role() != "user" {
			continue
		}
		var sb strings.Builder
		for _, p := range msgs[i].Parts() {
			if p.Kind() == format.PartText && p.Text() != "" {
				if sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(p.Text())
			}
		}
		return sb.String()
	}
	return ""
}

// estimate is ⌈characters / 4⌉, at least 1 for non-empty text.
func estimate(s string) int64 {
	if s == "" {
		return 0
	}
	return max(int64(len([]rune(s))+3)/4, 1)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// promptTokens reads the prompt count back from an answer's echoed id.
func promptTokens(j gjson.Result) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(j.Get("id").Str, "lockstep-"), 10, 64)
	return n
}

// rpcError is a JSON-RPC error answer as an upstream error: invalid params (-32602) a 400,
// an unknown method (-32601: the remote does not speak this version) or anything else a
// retryable 502. An error member that is not the Error object of JSON-RPC 2.0 §5.1
// ("error":"boom") is a retryable 502 carrying it as given: "a2a agent: boom (not a JSON-RPC
// error object)".
func rpcError(e gjson.Result) *format.UpstreamError {
	if !e.IsObject() {
		what := e.Raw
		if e.Type == gjson.String {
			what = e.Str
		}
		return &format.UpstreamError{Status: 502, Message: "a2a agent: " + what + " (not a JSON-RPC error object)", Retryable: true}
	}
	code := e.Get("code").Int()
	msg := "a2a agent: " + e.Get("message").Str + " (JSON-RPC error " + strconv.FormatInt(code, 10) + ")"
	if code == -32602 {
		return &format.UpstreamError{Status: 400, Type: "invalid_request_error", Message: msg}
	}
	return &format.UpstreamError{Status: 502, Message: msg, Retryable: code != -32601}
}

// checkParts refuses a message whose parts (at path) are missing or not an array (A2A v0.3
// §6.4, 1.0 §4.1.4: a Message's parts are a required array): a retryable 502 naming the
// member, "a2a agent: malformed answer: result.parts must be an array of parts, got object",
// rather than a success with no text.
func checkParts(parts gjson.Result, path string, raw []byte) *format.UpstreamError {
	if parts.IsArray() {
		return nil
	}
	got := "nothing"
	switch {
	case parts.IsObject():
		got = "object"
	case parts.Type == gjson.String:
		got = "string"
	case parts.Type == gjson.Number:
		got = "number"
	case parts.Type == gjson.True, parts.Type == gjson.False:
		got = "boolean"
	case parts.Type == gjson.Null && parts.Exists():
		got = "null"
	}
	return &format.UpstreamError{Status: 502, Message: "a2a agent: malformed answer: " + path + " must be an array of parts, got " + got, Body: raw, Retryable: true}
}

// partsText joins the text parts of an A2A parts array (0.3 {"kind": "text", "text"}, 1.0
// {"text"}; other parts carry no text).
func partsText(parts gjson.Result) string {
	var sb strings.Builder
	parts.ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Type == gjson.String && (p.Get("kind").Str == "" || p.Get("kind").Str == "text") {
			sb.WriteString(t.Str)
		}
		return true
	})
	return sb.String()
}

// taskText is a Task's answer: its artifacts' text, else its status message's.
func taskText(t gjson.Result) string {
	var sb strings.Builder
	t.Get("artifacts").ForEach(func(_, a gjson.Result) bool {
		sb.WriteString(partsText(a.Get("parts")))
		return true
	})
	if sb.Len() == 0 {
		return partsText(t.Get("status.message.parts"))
	}
	return sb.String()
}

// failed reports a task state that is not a success: failed, canceled, rejected (both
// spellings), with the status message's text.
func failed(status gjson.Result) (bool, string) {
	switch strings.TrimPrefix(strings.ToLower(status.Get("state").Str), "task_state_") {
	case "failed", "canceled", "cancelled", "rejected":
		msg := partsText(status.Get("message.parts"))
		if msg == "" {
			msg = "the agent's task ended " + strings.ToLower(strings.TrimPrefix(status.Get("state").Str, "TASK_STATE_"))
		}
		return true, msg
	}
	return false, ""
}

func (w wire) Result(raw []byte) (*format.Result, error) {
	if !gjson.ValidBytes(raw) {
		return nil, format.ErrBadUpstreamJSON
	}
	j := gjson.ParseBytes(raw)
	if e := j.Get("error"); e.Exists() {
		return nil, rpcError(e)
	}
	res := j.Get("result")
	var text string
	var status gjson.Result
	switch {
	case res.Get("message").IsObject(): // 1.0
		if ue := checkParts(res.Get("message.parts"), "result.message.parts", raw); ue != nil {
			return nil, ue
		}
		text = partsText(res.Get("message.parts"))
	case res.Get("task").IsObject():
		text, status = taskText(res.Get("task")), res.Get("task.status")
	case res.Get("kind").Str == "message": // 0.3
		if ue := checkParts(res.Get("parts"), "result.parts", raw); ue != nil {
			return nil, ue
		}
		text = partsText(res.Get("parts"))
	case res.Get("kind").Str == "task":
		text, status = taskText(res), res.Get("status")
	default:
		return nil, &format.UpstreamError{Status: 502, Message: "a2a agent: the answer holds neither a message nor a task", Body: raw, Retryable: true}
	}
	if bad, msg := failed(status); bad {
		return nil, &format.UpstreamError{Status: 502, Message: "a2a agent: " + msg}
	}
	r := format.NewResult(format.NewID("chatcmpl-"), "")
	r.AddText(text)
	r.SetStop(format.StopEnd)
	r.SetUsage(format.Tokens{In: promptTokens(j), Out: estimate(text)})
	return r, nil
}

func (wire) Frames(body io.Reader) provider.FrameReader { return provider.NewSSEReader(body) }

func (w wire) Decoder(r format.Renderer, model string) format.Decoder {
	return &decoder{r: r, model: model}
}

// decoder reads an A2A stream: each SSE data is one JSON-RPC answer (A2A §7.2 / 1.0 §9.4.2).
// Artifact updates and a message carry the text; a final (0.3) or terminal (1.0) status
// update, or a message, ends the answer.
type decoder struct {
	r       format.Renderer
	model   string
	started bool
	done    bool
	in, out int64
}

func (d *decoder) begin(b []byte) []byte {
	if !d.started {
		d.started = true
		b = d.r.Start(b, format.NewID("chatcmpl-"), d.model, format.Tokens{})
	}
	return b
}

func (d *decoder) text(b []byte, t string) ([]byte, string) {
	if t == "" {
		return b, ""
	}
	t = strings.Clone(t)
	d.out += estimate(t)
	return d.r.Text(d.begin(b), t), t
}

func (d *decoder) finish(b []byte) []byte {
	d.done = true
	return d.r.Finish(d.begin(b), format.StopEnd, "", format.Tokens{In: d.in, Out: max(d.out, 1)})
}

func (d *decoder) Frame(b []byte, _, data []byte) ([]byte, string, bool) {
	j := gjson.Parse(unsafe.String(unsafe.SliceData(data), len(data)))
	if d.in == 0 {
		d.in = promptTokens(j)
	}
	if e := j.Get("error"); e.Exists() {
		ue := rpcError(e)
		return d.r.Fail(d.begin(b), ue.Status, ue.Message), "", true
	}
	res := j.Get("result")
	var text string
	var status gjson.Result
	final := false
	switch {
	case res.Get("artifactUpdate").IsObject():
		b, text = d.text(b, partsText(res.Get("artifactUpdate.artifact.parts")))
	case res.Get("kind").Str == "artifact-update":
		b, text = d.text(b, partsText(res.Get("artifact.parts")))
	case res.Get("message").IsObject():
		if ue := checkParts(res.Get("message.parts"), "result.message.parts", nil); ue != nil {
			return d.r.Fail(d.begin(b), ue.Status, ue.Message), "", true
		}
		b, text = d.text(b, partsText(res.Get("message.parts")))
		final = true
	case res.Get("kind").Str == "message":
		if ue := checkParts(res.Get("parts"), "result.parts", nil); ue != nil {
			return d.r.Fail(d.begin(b), ue.Status, ue.Message), "", true
		}
		b, text = d.text(b, partsText(res.Get("parts")))
		final = true
	case res.Get("statusUpdate").IsObject():
		status = res.Get("statusUpdate.status")
		final = terminal(status.Get("state").Str)
	case res.Get("kind").Str == "status-update":
		status = res.Get("status")
		final = res.Get("final").Bool() || terminal(status.Get("state").Str)
	case res.Get("task").IsObject(), res.Get("kind").Str == "task":
		t := res
		if res.Get("task").IsObject() {
			t = res.Get("task")
		}
		status = t.Get("status")
		if terminal(status.Get("state").Str) {
			b, text = d.text(b, taskText(t))
			final = true
		}
	default:
		b = d.begin(b)
	}
	if bad, msg := failed(status); bad {
		return d.r.Fail(d.begin(b), 502, "a2a agent: "+msg), text, true
	}
	if final {
		return d.finish(b), text, true
	}
	return b, text, false
}

// terminal reports a task state after which nothing more comes (either version's spelling);
// input-required and auth-required end the stream too (A2A §7.2: the stream closes on an
// interrupted state).
func terminal(state string) bool {
	switch strings.TrimPrefix(strings.ToLower(state), "task_state_") {
	case "completed", "failed", "canceled", "cancelled", "rejected", "input_required", "input-required", "auth_required", "auth-required":
		return true
	}
	return false
}

func (d *decoder) EOF(b []byte) ([]byte, error) {
	if !d.done {
		return b, format.ErrTruncated
	}
	return b, nil
}
