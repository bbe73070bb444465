package provider

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

var errIdleTimeout = errors.New("stream idle timeout")

// httpStream reads an upstream SSE body: verbatim frames on passthrough (dec == nil), else
// frames translated by dec.
type httpStream struct {
	parent context.Context // the caller's context
	ctx    context.Context // the call's context, cancelled with errIdleTimeout by timer
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
	in     Format
	d      *Deployment // its secrets are redacted from events and errors
	body   io.ReadCloser
	rd     frameReader
	dec    decoder
	out    []byte
	done   bool
	closed bool
	// hide: the gateway asked for the usage chunk the client did not ask for (askUsage);
	// usage and final are what the upstream reported (StreamUsage).
	hide  bool
	usage Usage
	final bool
}

var _ Stream = (*httpStream)(nil)

// Next returns the next event. The upstream connection is released as soon as the stream
// has ended (io.EOF or an error); Close is still safe to call.
func (s *httpStream) Next() (Event, error) {
	ev, err := s.next()
	if err != nil {
		return ev, s.d.redactErr(err)
	}
	if len(s.d.secrets) > 0 {
		// An upstream may echo its key in a mid-stream error event (passthrough frames are
		// otherwise sent verbatim).
		ev.Data = s.d.redactBytes(ev.Data)
		ev.Text = s.d.Redact(ev.Text)
	}
	return ev, nil
}

func (s *httpStream) next() (Event, error) {
	for {
		if s.done {
			_ = s.Close()
			return Event{}, io.EOF
		}
		// The idle timer runs only while waiting for the upstream, not while the caller writes
		// the previous event to a slow client.
		s.timer.Reset(s.idle)
		err := s.rd.Next()
		s.timer.Stop()
		if err == io.EOF {
			s.done = true
			if s.dec == nil {
				continue
			}
			out, err := s.dec.eof(s.out[:0])
			s.out = out
			if err != nil {
				_ = s.Close()
				return Event{}, &UpstreamError{Status: 502, Message: err.Error(), Retryable: true}
			}
			if len(out) > 0 {
				return Event{Data: out}, nil
			}
			continue
		}
		if err != nil {
			if context.Cause(s.ctx) == errIdleTimeout {
				err = errIdleTimeout
			}
			err = transportError(s.parent, err, s.idle, "stream")
			_ = s.Close()
			return Event{}, err
		}
		raw, event, data := s.rd.Current()
		if s.dec == nil {
			s.done = passthroughDone(s.in, event, data)
			out, drop := s.passthroughUsage(raw, event, data)
			if drop {
				continue
			}
			return Event{Data: out, Text: passthroughText(s.in, event, data)}, nil
		}
		out, text, done := s.dec.frame(s.out[:0], event, data)
		s.out = out
		s.done = done
		if len(out) > 0 {
			return Event{Data: out, Text: text}, nil
		}
	}
}

func (s *httpStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed, s.done = true, true
	s.timer.Stop()
	s.cancel(context.Canceled)
	var err error
	if s.body != nil {
		err = s.body.Close()
	}
	if r, ok := s.rd.(*sseReader); ok { // the last event's Data is no longer valid (see Event)
		s.rd = nil
		r.release()
	}
	return err
}

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

// sliceStream yields prepared events (mock answers, replays).
type sliceStream struct {
	events []Event
	i      int
	usage  Usage // the answer's usage (StreamUsage)
}

func (s *sliceStream) Next() (Event, error) {
	if s.i >= len(s.events) {
		return Event{}, io.EOF
	}
	s.i++
	return s.events[s.i-1], nil
}

func (s *sliceStream) Close() error {
	s.i = len(s.events)
	return nil
}

// replayEvents renders a complete result as a stream in format in, its text split into up to
// chunks deltas.
func replayEvents(in Format, res *result, includeUsage bool, chunks int) []Event {
	r := newRenderer(in, includeUsage)
	events := []Event{{Data: r.start(nil, res.id, res.model, res.usage)}}
	for _, b := range res.blocks {
		if b.think {
			ev := streamThinking(r, nil, b.text)
			if b.sig != "" {
				ev = streamSignature(r, ev, b.sig)
			}
			if len(ev) > 0 {
				events = append(events, Event{Data: ev})
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
			events = append(events, Event{Data: ev})
			continue
		}
		for _, piece := range splitText(b.text, chunks) {
			events = append(events, Event{Data: r.text(nil, piece), Text: piece})
		}
	}
	return append(events, Event{Data: r.finish(nil, res.stop, res.stopSeq, res.usage)})
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

// replayJSON serves an upstream that answered a stream request with a plain JSON body.
func (s *httpStream) replayJSON(in, up Format, includeUsage bool, x *xlate) (Stream, error) {
	defer s.Close()
	raw, err := io.ReadAll(io.LimitReader(s.body, maxResponseBody))
	if err != nil {
		return nil, transportError(s.parent, err, s.idle, "stream")
	}
	var res *result
	switch up {
	case FormatMessages:
		res, err = parseMessagesResult(raw)
	case FormatResponses:
		res, err = parseResponsesResult(raw)
	default:
		res, err = parseChatResult(raw)
	}
	if err != nil {
		return nil, &UpstreamError{Status: 502, Message: "invalid upstream answer: " + err.Error(), Body: raw, Retryable: true}
	}
	x.fixResult(res)
	return &sliceStream{events: replayEvents(in, res, includeUsage, 1), usage: res.usage.public()}, nil
}
