package format

import (
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"lockstep/pkg/jsonscan"
)

// bytesView returns b as a string without copying. The string must not outlive b or see it
// mutated; use it only for read-only gjson look-ups whose results are copied out.
func bytesView(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// validJSON reports whether b is one JSON value (RFC 8259) nested at most jsonscan.MaxDepth
// deep, with UTF-8 strings: jsonscan.CheckNesting, an iterative pass. It replaces
// gjson.ValidBytes, which recurses once per nesting level, so that 12 MiB of "[" in text the
// gateway checks (tool-call arguments or a tool result inside a client's body, an upstream's
// answer) is a fatal stack overflow of the whole replica, which recover cannot catch.
func ValidJSON(b []byte) bool { return jsonscan.CheckNesting(b) == nil }

// validJSONString is validJSON of s, without copying it.
func ValidJSONString(s string) bool {
	return ValidJSON(unsafe.Slice(unsafe.StringData(s), len(s)))
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal (RFC 8259 §7). Control characters,
// quote and backslash are escaped, as are U+2028/U+2029; invalid UTF-8 becomes U+FFFD.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// edit replaces body[start:end] by the JSON string literal of text.
type Edit struct {
	Start, End int
	Text       string
}

// applyEdits applies edits (not overlapping; in any order: they are sorted by start here, as
// walkers may visit a body's members in another order than they are written, e.g. a Responses
// request's "instructions" before an earlier "input") in one copy. No edits → body.
func ApplyEdits(body []byte, edits []Edit) []byte {
	if len(edits) == 0 {
		return body
	}
	cmp := func(a, b Edit) int { return a.Start - b.Start }
	if !slices.IsSortedFunc(edits, cmp) {
		edits = slices.Clone(edits)
		slices.SortFunc(edits, cmp)
	}
	n := len(body)
	for _, e := range edits {
		n += len(e.Text) + 2 - (e.End - e.Start)
	}
	out := make([]byte, 0, n+16)
	prev := 0
	for _, e := range edits {
		out = append(out, body[prev:e.Start]...)
		out = AppendJSONString(out, e.Text)
		prev = e.End
	}
	return append(out, body[prev:]...)
}

var errNotObject = errors.New("request body must be a JSON object")

// RewriteModel returns body with its top-level "model" value replaced by model, editing the
// bytes in place of a decode/re-encode: everything else, key order and whitespace included,
// is kept byte for byte. A body without "model" gets one inserted as the first member. The
// body itself is returned (no allocation) when it already names model. The body must be a JSON
// object; it is not otherwise validated (the upstream rejects malformed JSON).
func RewriteModel(body []byte, model string) ([]byte, error) {
	i := 0
	for i < len(body) && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r') {
		i++
	}
	if i == len(body) || body[i] != '{' {
		return nil, errNotObject
	}
	r := gjson.Get(bytesView(body), "model")
	if r.Exists() && r.Index > 0 {
		if r.Type == gjson.String && r.Str == model {
			return body, nil
		}
		out := make([]byte, 0, len(body)-len(r.Raw)+len(model)+2)
		out = append(out, body[:r.Index]...)
		out = AppendJSONString(out, model)
		return append(out, body[r.Index+len(r.Raw):]...), nil
	}
	// Insert `"model":"…",` right after the opening brace (no comma for an empty object).
	rest := body[i+1:]
	empty := true
	for _, c := range rest {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		empty = c == '}'
		break
	}
	out := make([]byte, 0, len(body)+len(model)+12)
	out = append(out, body[:i+1]...)
	out = append(out, `"model":`...)
	out = AppendJSONString(out, model)
	if !empty {
		out = append(out, ',')
	}
	return append(out, rest...), nil
}

// setBool sets a top-level boolean member (used for "stream"), by byte edit like RewriteModel.
func SetBool(body []byte, key string, v bool) []byte {
	lit := "false"
	if v {
		lit = "true"
	}
	r := gjson.Get(bytesView(body), key)
	if r.Exists() && r.Index > 0 {
		if r.Raw == lit {
			return body
		}
		out := make([]byte, 0, len(body)+5)
		out = append(out, body[:r.Index]...)
		out = append(out, lit...)
		return append(out, body[r.Index+len(r.Raw):]...)
	}
	i := 0
	for i < len(body) && body[i] != '{' {
		i++
	}
	if i == len(body) {
		return body
	}
	out := make([]byte, 0, len(body)+len(key)+10)
	out = append(out, body[:i+1]...)
	out = AppendJSONString(out, key)
	out = append(out, ':')
	out = append(out, lit...)
	rest := body[i+1:]
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
