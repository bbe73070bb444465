package provider

import (
	"lockstep/pkg/format"

	"context"
	"errors"
	"io"
	"time"
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
	in     format.Format
	d      *Deployment // its secrets are redacted from events and errors
	body   io.ReadCloser
	rd     frameReader
	dec    format.Decoder
	out    []byte
	done   bool
	closed bool
	// hide: the gateway asked for the usage chunk the client did not ask for (askUsage);
	// usage and final are what the upstream reported (StreamUsage).
	hide  bool
	usage format.Usage
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
			out, err := s.dec.EOF(s.out[:0])
			s.out = out
			if err != nil {
				_ = s.Close()
				return Event{}, &format.UpstreamError{Status: 502, Message: err.Error(), Retryable: true}
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
			s.done = format.PassthroughDone(s.in, event, data)
			out, drop := s.passthroughUsage(raw, event, data)
			if drop {
				continue
			}
			return Event{Data: out, Text: format.PassthroughText(s.in, event, data)}, nil
		}
		out, text, done := s.dec.Frame(s.out[:0], event, data)
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

// sliceStream yields prepared events (mock answers, replays).
type sliceStream struct {
	events []Event
	i      int
	usage  format.Usage // the answer's usage (StreamUsage)
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

// replayJSON serves an upstream that answered a stream request with a plain JSON body.
func (s *httpStream) replayJSON(in, up format.Format, includeUsage bool, x *format.AnswerFixes) (Stream, error) {
	defer s.Close()
	raw, err := io.ReadAll(io.LimitReader(s.body, maxResponseBody))
	if err != nil {
		return nil, transportError(s.parent, err, s.idle, "stream")
	}
	res, err := format.ParseResult(up, raw)
	if err != nil {
		return nil, &format.UpstreamError{Status: 502, Message: "invalid upstream answer: " + err.Error(), Body: raw, Retryable: true}
	}
	x.FixResult(res)
	return &sliceStream{events: replayEvents(in, res, includeUsage, 1), usage: res.Usage()}, nil
}

// replayEvents renders a complete result as a stream in format in, its text split into up to
// chunks deltas (see [format.Replay]).
func replayEvents(in format.Format, res *format.Result, includeUsage bool, chunks int) []Event {
	var events []Event
	format.Replay(in, res, includeUsage, chunks, func(data []byte, text string) {
		events = append(events, Event{Data: data, Text: text})
	})
	return events
}
