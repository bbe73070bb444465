package provider

import (
	"lockstep/pkg/format"

	"bytes"

	"github.com/tidwall/gjson"
)

// Usage on every stream (API.md "Security rules": every call is charged). An OpenAI-compatible
// upstream reports a stream's usage only when asked (stream_options.include_usage, OpenAI API
// reference "Create chat completion" / "Create completion"): then every chunk carries
// "usage": null and one more chunk, with "choices": [] and the usage, comes before
// "data: [DONE]". The gateway asks on every passed-through chat and completions stream
// (askUsage) and, when the client did not ask itself, removes what the question added
// (hideUsage), so the client receives the stream it asked for. Anthropic Messages streams
// always carry usage (message_start, message_delta), Responses streams in response.completed
// (and .incomplete / .failed); translated streams request it in the upstream body they render
// (renderChatRequest) and native APIs always report it; nothing is added there.

// UsageReporter is a Stream that knows the token usage its upstream reported.
type UsageReporter interface {
	// StreamUsage is the usage reported so far, and final: the upstream's figures for the
	// whole call were seen (chat/completions usage chunk, Anthropic message_delta,
	// response.completed, a native API's final frame, a mock or replayed answer).
	StreamUsage() (u format.Usage, final bool)
}

// StreamUsage is st's UsageReporter figures; a Stream that reports none gives (0, false).
func StreamUsage(st Stream) (format.Usage, bool) {
	if r, ok := st.(UsageReporter); ok {
		return r.StreamUsage()
	}
	return format.Usage{}, false
}

var (
	_ UsageReporter = (*httpStream)(nil)
	_ UsageReporter = (*sliceStream)(nil)
)

// StreamUsage implements UsageReporter.
func (s *httpStream) StreamUsage() (format.Usage, bool) { return s.usage, s.final }

// StreamUsage implements UsageReporter: a prepared stream's usage is known from the start.
func (s *sliceStream) StreamUsage() (format.Usage, bool) { return s.usage, true }

// askUsage returns a streamed chat or completions body that asks for the usage chunk
// (stream_options.include_usage: true), and hide: the client did not ask for it itself (absent,
// false, or stream_options null), so the stream must not show it. A body that already asks is
// returned as is; otherwise the member is edited in a copy (body is never modified), every
// other byte kept. A stream_options that is not an object (nor null) is left for the upstream
// to refuse.
func askUsage(body []byte) (out []byte, hide bool) {
	// the usual case, no member look-up: no "stream_options", nor a \u escape that could
	// spell its name ("stream_optio\u006es", one member to jsonscan and to the upstream)
	if !bytes.Contains(body, streamOptionsKey) && !bytes.Contains(body, unicodeEscape) {
		return appendMember(body, `"stream_options":{"include_usage":true}`), true
	}
	so := gjson.Get(bytesView(body), "stream_options")
	switch {
	case !so.Exists():
		return appendMember(body, `"stream_options":{"include_usage":true}`), true
	case so.Type == gjson.Null:
		return replaceRaw(body, so, `{"include_usage":true}`), true
	case !so.IsObject():
		return body, false
	}
	iu := so.Get("include_usage")
	switch {
	case iu.Type == gjson.True:
		return body, false
	case iu.Exists():
		return replaceRaw(body, iu, "true"), true
	}
	return insertMember(body, so.Index, `"include_usage":true`), true
}

// appendMember adds member (`"key":value`) as the last member of the object body, in a copy:
// last, so that an upstream parser keeping the last of repeated members (most do) reads it even
// if the client wrote the same key with escapes the byte search above did not see.
func appendMember(body []byte, member string) []byte {
	end := bytes.LastIndexByte(body, '}')
	if end < 0 {
		return body
	}
	p := skipSpaceBack(body, end)
	out := make([]byte, 0, len(body)+len(member)+1)
	out = append(out, body[:p]...)
	if p > 0 && body[p-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, member...)
	return append(out, body[p:]...)
}

// insertMember inserts member (`"key":value`) as the first member of the object opening at
// body[at] ('{'), in a copy.
func insertMember(body []byte, at int, member string) []byte {
	if at >= len(body) {
		return body
	}
	out := make([]byte, 0, len(body)+len(member)+1)
	out = append(out, body[:at+1]...)
	out = append(out, member...)
	rest := body[at+1:]
	for _, c := range rest {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if c != '}' {
			out = append(out, ',')
		}
		break
	}
	return append(out, rest...)
}

// replaceRaw replaces the value r (found in body, r.Index its offset) by raw, in a copy.
func replaceRaw(body []byte, r gjson.Result, raw string) []byte {
	out := make([]byte, 0, len(body)-len(r.Raw)+len(raw))
	out = append(out, body[:r.Index]...)
	out = append(out, raw...)
	return append(out, body[r.Index+len(r.Raw):]...)
}

// record takes the usage of one report: later reports replace earlier ones field by field
// (Anthropic's message_start has the input, message_delta the final output).
// TapUsage records the usage a translated stream reports (final: at its finish).
func (s *httpStream) TapUsage(u format.Usage, final bool) {
	s.record(u)
	if final {
		s.final = u.PromptTokens > 0 || u.CompletionTokens > 0
	}
}

func (s *httpStream) record(got format.Usage) {
	if got.PromptTokens > 0 {
		s.usage.PromptTokens = got.PromptTokens
	}
	if got.CompletionTokens > 0 {
		s.usage.CompletionTokens = got.CompletionTokens
	}
}

// passthroughUsage reads the usage a verbatim upstream frame reports (format s.in) and, with
// s.hide, returns the frame as the client asked for it: the usage-only chunk dropped (drop),
// a "usage" member (null, or the figures on a chunk that also has choices) removed from a chat
// or completions chunk. A chat or completions frame costs a byte search for "usage" (and a
// member look-up where it occurs); a messages or responses frame a comparison of its event
// name.
func (s *httpStream) passthroughUsage(raw, event, data []byte) (out []byte, drop bool) {
	if len(data) == 0 || data[0] != '{' {
		return raw, false
	}
	switch s.in {
	case format.FormatChat, format.FormatCompletions:
		if !bytes.Contains(data, usageKey) {
			return raw, false // most chunks of a stream whose client asked
		}
		u := gjson.Get(bytesView(data), "usage")
		if !u.Exists() {
			return raw, false
		}
		if u.IsObject() {
			s.record(format.UsageFrom(format.FormatChat, u))
			s.final = true
		}
		if !s.hide {
			return raw, false
		}
		if u.IsObject() {
			if c := gjson.Get(bytesView(data), "choices"); !c.Exists() || (c.IsArray() && !c.Get("0").Exists()) {
				return nil, true // the usage-only chunk the client did not ask for
			}
		}
		frame, ok := removeMember(append(s.out[:0], "data: "...), data, "usage", u)
		if !ok {
			return raw, false
		}
		s.out = append(frame, "\n\n"...) // the chunk's only line: chat chunks carry no event or id
		return s.out, false
	case format.FormatMessages:
		typ := string(event)
		if typ == "" {
			typ = gjson.Get(bytesView(data), "type").Str
		}
		switch typ {
		case "message_start":
			s.record(format.UsageFrom(format.FormatMessages, gjson.Get(bytesView(data), "message.usage")))
		case "message_delta":
			s.record(format.UsageFrom(format.FormatMessages, gjson.Get(bytesView(data), "usage")))
			s.final = true
		}
	case format.FormatResponses:
		typ := string(event)
		if typ == "" {
			typ = gjson.Get(bytesView(data), "type").Str
		}
		switch typ {
		case "response.completed", "response.incomplete", "response.failed":
			if u := gjson.Get(bytesView(data), "response.usage"); u.IsObject() {
				s.record(format.UsageFrom(format.FormatResponses, u))
				s.final = true
			}
		}
	}
	return raw, false
}

var (
	usageKey         = []byte(`"usage"`)
	streamOptionsKey = []byte(`"stream_options"`)
	unicodeEscape    = []byte(`\u`)
)

// removeMember appends to dst the JSON object obj without its top-level member key, whose
// value v was found by gjson.Get(obj, key) (v.Index its offset in obj). ok is false (dst
// unchanged) when the bytes before v are not `"key":` (a key written with escapes).
func removeMember(dst, obj []byte, key string, v gjson.Result) ([]byte, bool) {
	if v.Index <= 0 || v.Index+len(v.Raw) > len(obj) {
		return dst, false
	}
	i := skipSpaceBack(obj, v.Index)
	if i == 0 || obj[i-1] != ':' {
		return dst, false
	}
	i = skipSpaceBack(obj, i-1)
	start := i - len(key) - 2
	if start < 0 || obj[start] != '"' || string(obj[start+1:i-1]) != key || obj[i-1] != '"' {
		return dst, false
	}
	end := v.Index + len(v.Raw)
	if p := skipSpaceBack(obj, start); p > 0 && obj[p-1] == ',' {
		start = p - 1 // `, "key": v` after another member
	} else {
		for end < len(obj) && isSpace(obj[end]) {
			end++
		}
		if end < len(obj) && obj[end] == ',' {
			end++ // `"key": v,` as the first member
			for end < len(obj) && isSpace(obj[end]) {
				end++
			}
		}
	}
	dst = append(dst, obj[:start]...)
	return append(dst, obj[end:]...), true
}

func skipSpaceBack(b []byte, i int) int {
	for i > 0 && isSpace(b[i-1]) {
		i--
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
