package format

import (
	"strings"

	"github.com/tidwall/gjson"
)

// passthroughDone reports a verbatim frame that ends the stream: "data: [DONE]" (chat),
// message_stop (Anthropic), response.completed/failed/incomplete (Responses). Nothing after it
// is read, so the client's answer ends even if the upstream keeps the connection open.
func passthroughDone(f Format, event, data []byte) bool {
	switch f {
	case FormatChat, FormatCompletions:
		return string(data) == "[DONE]"
	case FormatMessages:
		return string(event) == "message_stop"
	case FormatResponses:
		switch string(event) {
		case "response.completed", "response.failed", "response.incomplete":
			return true
		}
	}
	return false
}

// passthroughText extracts the text delta of a verbatim upstream frame.
func passthroughText(f Format, event, data []byte) string {
	if len(data) == 0 || data[0] != '{' {
		return ""
	}
	var r gjson.Result
	switch f {
	case FormatChat:
		r = gjson.Get(bytesView(data), "choices.0.delta.content")
	case FormatCompletions:
		r = gjson.Get(bytesView(data), "choices.0.text")
	case FormatResponses:
		if string(event) != "response.output_text.delta" && !(len(event) == 0 && gjson.Get(bytesView(data), "type").Str == "response.output_text.delta") {
			return ""
		}
		r = gjson.Get(bytesView(data), "delta")
	case FormatMessages:
		if string(event) != "content_block_delta" && len(event) != 0 {
			return ""
		}
		r = gjson.Get(bytesView(data), "delta")
		if r.Get("type").Str != "text_delta" {
			return ""
		}
		r = r.Get("text")
	}
	if r.Type != gjson.String || r.Str == "" {
		return ""
	}
	return strings.Clone(r.Str)
}

// Replay renders a complete result as a stream in format in (includeUsage: a chat client's
// stream_options.include_usage), its text split into up to chunks deltas: emit is called once
// per event with its frames (a fresh slice each time) and the text delta they carry ("" for
// none), in order.
func Replay(in Format, res *Result, includeUsage bool, chunks int, emit func(data []byte, text string)) {
	r := newRenderer(in, includeUsage)
	emit(r.start(nil, res.id, res.model, res.usage), "")
	for _, b := range res.blocks {
		if b.think {
			ev := streamThinking(r, nil, b.text)
			if b.sig != "" {
				ev = streamSignature(r, ev, b.sig)
			}
			if len(ev) > 0 {
				emit(ev, "")
			}
			continue
		}
		if b.tool {
			var ev []byte
			if rr, ok := r.(*responsesRenderer); ok && b.ns != "" {
				ev = rr.addItem(nil, b) // a namespace tool's call keeps its namespace
			} else {
				ev = r.toolStart(nil, b.id, b.name)
			}
			if b.args != "" {
				ev = r.toolArgs(ev, b.args)
			}
			emit(ev, "")
			continue
		}
		for _, piece := range splitText(b.text, chunks) {
			emit(r.text(nil, piece), piece)
		}
	}
	emit(r.finish(nil, res.stop, res.stopSeq, res.usage), "")
}

// splitText cuts s into at most n pieces, evenly by words (each keeping its trailing space)
// when s has at least n words, else evenly by runes; concatenated they give s back.
func splitText(s string, n int) []string {
	if s == "" {
		return nil
	}
	if n <= 1 {
		return []string{s}
	}
	// Word starts: offsets where a non-space follows a space.
	var cuts []int
	for i := 1; i < len(s); i++ {
		if s[i-1] == ' ' && s[i] != ' ' {
			cuts = append(cuts, i)
		}
	}
	units := len(cuts) + 1
	if units < n {
		cuts = cuts[:0]
		for i := range s {
			if i > 0 {
				cuts = append(cuts, i)
			}
		}
		units = len(cuts) + 1
	}
	n = min(n, units)
	out := make([]string, 0, n)
	prev := 0
	for k := 1; k < n; k++ {
		// the piece k ends before unit k*units/n
		at := cuts[k*units/n-1]
		out = append(out, s[prev:at])
		prev = at
	}
	return append(out, s[prev:])
}
