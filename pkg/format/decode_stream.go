package format

import (
	"strings"

	"github.com/tidwall/gjson"
)

// chatDecoder reads OpenAI chat.completion.chunk frames
// (https://platform.openai.com/docs/api-reference/chat-streaming).
type chatDecoder struct {
	r        renderer
	started  bool
	finished bool // a finish_reason was seen
	stop     stopReason
	usage    usage
	toolIdx  int64
	toolID   string
}

func newChatDecoder(r renderer) *chatDecoder { return &chatDecoder{r: r, toolIdx: -1} }

func (d *chatDecoder) Frame(b []byte, _, data []byte) ([]byte, string, bool) {
	if len(data) == 0 {
		return b, "", false
	}
	if string(data) == "[DONE]" {
		if !d.started {
			b = d.r.start(b, newID("chatcmpl-"), "", d.usage)
		}
		return d.r.finish(b, d.stop, "", d.usage), "", true
	}
	j := gjson.Parse(bytesView(data))
	if e := j.Get("error"); e.Exists() {
		status := int(e.Get("code").Int())
		if status < 400 || status > 599 {
			status = 500
		}
		msg := e.Get("message").Str
		if msg == "" {
			msg = e.Raw
		}
		return d.r.fail(b, status, msg), "", true
	}
	if !d.started {
		d.started = true
		b = d.r.start(b, strings.Clone(j.Get("id").Str), strings.Clone(j.Get("model").Str), usage{})
	}
	var text string
	choice := j.Get("choices.0")
	delta := choice.Get("delta")
	if c := delta.Get("reasoning_content"); c.Type == gjson.String && c.Str != "" {
		b = streamThinking(d.r, b, strings.Clone(c.Str))
	}
	delta.Get("thinking_blocks").ForEach(func(_, tb gjson.Result) bool {
		if s := tb.Get("signature").Str; s != "" {
			b = streamSignature(d.r, b, strings.Clone(s))
		}
		return true
	})
	if c := delta.Get("content"); c.Type == gjson.String && c.Str != "" {
		text = strings.Clone(c.Str)
		b = d.r.text(b, text)
	} else if c := delta.Get("refusal"); c.Type == gjson.String && c.Str != "" {
		text = strings.Clone(c.Str)
		b = d.r.text(b, text)
	}
	delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		idx := tc.Get("index").Int()
		// A call starts when its index changes or a new id appears (some servers repeat the id
		// on every delta of the same call).
		if id := tc.Get("id").Str; idx != d.toolIdx || (id != "" && id != d.toolID) {
			d.toolIdx, d.toolID = idx, strings.Clone(id)
			b = d.r.toolStart(b, d.toolID, strings.Clone(tc.Get("function.name").Str))
		}
		if a := tc.Get("function.arguments").Str; a != "" {
			b = d.r.toolArgs(b, a)
		}
		return true
	})
	if fr := choice.Get("finish_reason"); fr.Type == gjson.String {
		d.finished = true
		d.stop = stopFromChat(fr.Str)
	}
	if u := j.Get("usage"); u.IsObject() {
		d.usage = usage{in: u.Get("prompt_tokens").Int(), out: u.Get("completion_tokens").Int(), cacheRead: u.Get("prompt_tokens_details.cached_tokens").Int()}
	}
	return b, text, false
}

func (d *chatDecoder) EOF(b []byte) ([]byte, error) {
	if !d.finished {
		return b, ErrTruncated
	}
	return d.r.finish(b, d.stop, "", d.usage), nil
}

// messagesDecoder reads Anthropic Messages stream events
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming).
type messagesDecoder struct {
	r       renderer
	inTool  bool // the open content block is a tool_use (not a server tool's, whose input is Anthropic's own)
	stopped bool // message_delta seen
	stop    stopReason
	stopSeq string
	usage   usage
}

func newMessagesDecoder(r renderer) *messagesDecoder { return &messagesDecoder{r: r} }

func (d *messagesDecoder) Frame(b []byte, event, data []byte) ([]byte, string, bool) {
	if len(data) == 0 {
		return b, "", false
	}
	j := gjson.Parse(bytesView(data))
	typ := j.Get("type").Str
	if typ == "" {
		typ = string(event)
	}
	var text string
	switch typ {
	case "message_start":
		m := j.Get("message")
		u := m.Get("usage")
		cr, cw := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
		d.usage = usage{in: u.Get("input_tokens").Int() + cr + cw, out: u.Get("output_tokens").Int(), cacheRead: cr, cacheWrite: cw}
		b = d.r.start(b, strings.Clone(m.Get("id").Str), strings.Clone(m.Get("model").Str), d.usage)
	case "content_block_start":
		cb := j.Get("content_block")
		d.inTool = cb.Get("type").Str == "tool_use"
		switch cb.Get("type").Str {
		case "text":
			if t := cb.Get("text").Str; t != "" {
				text = strings.Clone(t)
				b = d.r.text(b, text)
			}
		case "tool_use":
			b = d.r.toolStart(b, strings.Clone(cb.Get("id").Str), strings.Clone(cb.Get("name").Str))
		}
	case "content_block_delta":
		delta := j.Get("delta")
		switch delta.Get("type").Str {
		case "text_delta":
			if t := delta.Get("text").Str; t != "" {
				text = strings.Clone(t)
				b = d.r.text(b, text)
			}
		case "input_json_delta":
			if p := delta.Get("partial_json").Str; p != "" && d.inTool {
				b = d.r.toolArgs(b, p)
			}
		case "thinking_delta":
			if t := delta.Get("thinking").Str; t != "" {
				b = streamThinking(d.r, b, strings.Clone(t))
			}
		case "signature_delta":
			if s := delta.Get("signature").Str; s != "" {
				b = streamSignature(d.r, b, strings.Clone(s))
			}
		}
	case "message_delta":
		d.stopped = true
		d.stop = stopFromAnthropic(j.Get("delta.stop_reason").Str)
		d.stopSeq = strings.Clone(j.Get("delta.stop_sequence").Str)
		u := j.Get("usage")
		if v := u.Get("output_tokens"); v.Exists() {
			d.usage.out = v.Int()
		}
		if v := u.Get("input_tokens"); v.Exists() {
			cr, cw := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
			d.usage.in, d.usage.cacheRead, d.usage.cacheWrite = v.Int()+cr+cw, cr, cw
		}
	case "message_stop":
		return d.r.finish(b, d.stop, d.stopSeq, d.usage), "", true
	case "error":
		e := j.Get("error")
		return d.r.fail(b, anthropicErrorStatus(e.Get("type").Str), e.Get("message").Str), "", true
	}
	return b, text, false
}

func (d *messagesDecoder) EOF(b []byte) ([]byte, error) {
	if !d.stopped {
		return b, ErrTruncated
	}
	return d.r.finish(b, d.stop, d.stopSeq, d.usage), nil
}

// anthropicErrorStatus maps an Anthropic error type to its HTTP status
// (https://docs.anthropic.com/en/api/errors).
func anthropicErrorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return 400
	case "authentication_error":
		return 401
	case "billing_error":
		return 402
	case "permission_error":
		return 403
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "rate_limit_error":
		return 429
	case "timeout_error":
		return 504
	case "overloaded_error":
		return 529
	}
	return 500
}
