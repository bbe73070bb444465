package format

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// StreamError finds the error event a stream in format f carries in data (one or more
// complete SSE frames, as a stream's Event holds them): the upstream's own mid-stream error
// passed through, or one a decoder rendered ([ErrorEvent]). at is the offset of that frame in
// data and end the offset after it; ue the error it reports (Status from its code, the
// Anthropic type or 500; Type and Message as sent). ue is nil when data has no error event.
// The frames recognised:
//
//	chat, completions: data: {"error": {"message", "type", "code"}}   (OpenAI; code a status or a word)
//	messages:          event: error / data: {"type": "error", "error": {"type", "message"}}
//	responses:         event: error / data: {"type": "error", "code", "message"}
//
// Only a frame that starts as an error frame does (event: error, or data: {"error"...) is
// parsed, so an ordinary event costs a look at its first bytes.
func StreamError(f Format, data []byte) (at, end int, ue *UpstreamError) {
	for off := 0; off < len(data); {
		n := bytes.Index(data[off:], []byte("\n\n"))
		stop := len(data)
		if n >= 0 {
			stop = off + n + 2
		}
		if frame := data[off:stop]; errorFrameStart(frame) {
			if e := frameError(f, frame); e != nil {
				return off, stop, e
			}
		}
		off = stop
	}
	return 0, 0, nil
}

// errorFrameStart reports whether an SSE frame starts as an error frame: "event: error" or a
// data line whose JSON object opens with an "error" member.
func errorFrameStart(frame []byte) bool {
	if v, ok := bytes.CutPrefix(frame, []byte("event:")); ok {
		v = bytes.TrimLeft(v, " ")
		return bytes.HasPrefix(v, []byte("error\n")) || bytes.HasPrefix(v, []byte("error\r"))
	}
	v, ok := bytes.CutPrefix(frame, []byte("data:"))
	return ok && bytes.HasPrefix(bytes.TrimLeft(v, " "), []byte(`{"error"`))
}

// frameError is the error one SSE frame reports in format f (nil: none).
func frameError(f Format, frame []byte) *UpstreamError {
	var event, payload []byte
	for _, line := range bytes.Split(frame, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			event = bytes.TrimSpace(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			payload = bytes.TrimSpace(v)
		}
	}
	if len(payload) == 0 || payload[0] != '{' {
		return nil
	}
	j := gjson.ParseBytes(payload)
	switch f {
	case FormatMessages:
		if string(event) != "error" && j.Get("type").Str != "error" {
			return nil
		}
		e := j.Get("error")
		return &UpstreamError{Status: anthropicErrorStatus(e.Get("type").Str), Type: e.Get("type").Str, Message: e.Get("message").Str}
	case FormatResponses:
		if string(event) != "error" && j.Get("type").Str != "error" {
			return nil
		}
		return &UpstreamError{Status: statusOf(j.Get("code")), Message: j.Get("message").Str}
	}
	e := j.Get("error")
	if !e.IsObject() {
		return nil
	}
	msg := e.Get("message").Str
	if msg == "" {
		msg = e.Raw
	}
	ue := &UpstreamError{Status: statusOf(e.Get("code")), Type: e.Get("type").Str, Message: msg}
	if c := e.Get("code"); c.Type == gjson.String && ue.Status == 500 && c.Str != "500" {
		ue.Code = c.Str // a word (OpenAI's "server_error", "context_length_exceeded"): kept
	}
	return ue
}

// statusOf reads an error's code as an HTTP status (a number or a numeric string, 400..599),
// else 500.
func statusOf(c gjson.Result) int {
	if n := int(c.Int()); n >= 400 && n <= 599 {
		return n
	}
	return 500
}
