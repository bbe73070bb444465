package call

import (
	"context"
	"io"
	"strings"
	"unicode/utf8"

	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/router"
)

// guardedStream applies post_call guardrails to a stream and reports its end to the limits
// step.
//
// Every text of every frame is checked (format.MapStreamText). A streamed text (a delta:
// the content of one choice, one tool call's arguments, one content block, ...) is BLOCK-
// checked as the tail of its whole text so far (streamCheckWindow) when its frame arrives, so
// a keyword split across chunks is caught before the chunk completing it is sent. With a MASK
// rule in play, frames carrying deltas are held back until streamHold more bytes of their
// text have arrived (or the end comes); a frame without deltas waits behind held frames, in
// order, and releases nothing (a match can still span it): each released delta then
// carries the masked text up to its end, moved back to before any match still open there
// (guardrail.SafeCut), so a value split across chunks is masked whole and never leaves in
// pieces. A frame that repeats a whole text (*.done, response.completed) is masked whole.
type guardedStream struct {
	c     *Call
	st    provider.Stream
	d     *router.Deployment
	hold  int // bytes of each streamed text held back; 0 without MASK rules
	chans map[string]*streamText
	queue []*heldFrame
	out   []byte // frames ready to return
	text  strings.Builder
	next  error // error (or io.EOF) to return once out is drained
	err   error // how the call ended, for the limits step
	ended bool

	// up is the upstream's context of a charged call (nil: not charged); frames and textBytes
	// count what the upstream streamed, for the estimate (stream_charge.go)
	up        *upstreamCtx
	frames    int
	textBytes int
}

// streamText is one streamed text (channel) of a guardedStream.
type streamText struct {
	all      strings.Builder // the whole text so far (BLOCK window)
	pending  string          // received, not yet released
	released int             // length of the text released so far
	queued   int             // held deltas of this text
}

// heldFrame is a frame whose deltas wait for more text.
type heldFrame struct {
	frame  []byte
	deltas []heldDelta
}

type heldDelta struct {
	ch  *streamText
	end int // offset in its text where this delta ends
}

// streamHold is how many bytes of each streamed text a MASK guardrail holds back: longer than
// any email, card number, phone number, SSN, IBAN or keyword a content filter masks.
const streamHold = 256

func newGuardedStream(c *Call, st provider.Stream, d *router.Deployment) *guardedStream {
	g := &guardedStream{c: c, st: st, d: d}
	if c.post {
		for _, gr := range c.gs {
			if gr.Runs(guardrail.PostCall) && gr.Masks() {
				g.hold = streamHold
			}
		}
	}
	return g
}

// Next returns the next event, its texts checked and masked; a BLOCK is returned as a
// *Blocked (the upstream stream is closed). Held frames make some events carry the
// frames of several upstream events.
func (g *guardedStream) Next() (provider.Event, error) {
	if !g.c.post {
		ev, err := g.st.Next()
		if err != nil {
			g.finish(err)
			return ev, err
		}
		g.count(ev)
		return ev, nil
	}
	for len(g.out) == 0 {
		if g.next != nil {
			g.finish(g.next)
			return provider.Event{}, g.next
		}
		ev, err := g.st.Next()
		if err != nil {
			g.next = err
			if ferr := g.release(true); ferr != nil {
				g.next = ferr
			}
			continue
		}
		g.count(ev)
		if err := g.add(ev.Data); err != nil {
			g.next = err
			g.out, g.queue = nil, nil
			g.st.Close()
		}
	}
	ev := provider.Event{Data: g.out, Text: g.text.String()}
	g.out = nil
	g.text.Reset()
	return ev, nil
}

// add takes the frames of one upstream event: BLOCK-checks their deltas, holds or releases.
func (g *guardedStream) add(data []byte) error {
	for pos := 0; pos < len(data); {
		n := format.SSEFrameLen(data[pos:])
		frame := data[pos : pos+n]
		pos += n
		var deltas []heldDelta
		_, err := format.MapStreamText(g.c.f, frame, func(t format.Text) (string, error) {
			if !t.Delta {
				return t.Value, nil
			}
			ch := g.channel(t.Channel)
			ch.all.WriteString(t.Value)
			ch.pending += strings.Clone(t.Value) // t.Value aliases data, a reused buffer
			ch.queued++
			if _, err := g.c.apply(guardrail.PostCall, streamCheckWindow(ch.all.String(), len(t.Value)), false); err != nil {
				return "", err
			}
			deltas = append(deltas, heldDelta{ch: ch, end: ch.all.Len()})
			return t.Value, nil
		})
		if err != nil {
			return err
		}
		if len(deltas) == 0 {
			// No streamed text (an empty or role-only delta, a finish_reason, a ping): it
			// changes nothing for the held text, so it passes at once only when nothing is
			// held, else waits in order behind the held frames (issue 17 input 13: releasing
			// them here sent a card split around such a frame in clear).
			if len(g.queue) == 0 {
				if err := g.emit(&heldFrame{frame: frame}, true); err != nil {
					return err
				}
				continue
			}
			g.queue = append(g.queue, &heldFrame{frame: append([]byte(nil), frame...)})
			continue
		}
		g.queue = append(g.queue, &heldFrame{frame: append([]byte(nil), frame...), deltas: deltas})
		if err := g.release(false); err != nil {
			return err
		}
	}
	return nil
}

func (g *guardedStream) channel(name string) *streamText {
	if g.chans == nil {
		g.chans = map[string]*streamText{}
	}
	ch := g.chans[name]
	if ch == nil {
		ch = &streamText{}
		g.chans[name] = ch
	}
	return ch
}

// release emits held frames from the head of the queue: all of them when final, else those
// whose deltas are followed by at least hold bytes of their text.
func (g *guardedStream) release(final bool) error {
	for len(g.queue) > 0 {
		f := g.queue[0]
		if !final {
			for _, d := range f.deltas {
				if d.ch.all.Len()-d.end < g.hold {
					return nil
				}
			}
		}
		g.queue = g.queue[1:]
		if err := g.emit(f, final); err != nil {
			return err
		}
	}
	return nil
}

// emit appends frame f to the output with its texts masked: each delta carries its text's
// pending bytes up to its end (moved back before an open match, unless it is the last held
// delta of its text on a final release), complete texts are masked whole.
func (g *guardedStream) emit(f *heldFrame, final bool) error {
	i := 0
	frame, err := format.MapStreamText(g.c.f, f.frame, func(t format.Text) (string, error) {
		if !t.Delta || i >= len(f.deltas) {
			return g.c.apply(guardrail.PostCall, t.Value, false)
		}
		d := f.deltas[i]
		i++
		ch := d.ch
		ch.queued--
		cut := min(d.end-ch.released, len(ch.pending))
		if final && ch.queued == 0 {
			cut = len(ch.pending)
		} else if g.hold > 0 {
			for _, gr := range g.c.gs {
				if gr.Runs(guardrail.PostCall) {
					cut = gr.SafeCut(ch.pending, cut)
				}
			}
		}
		out, err := g.c.apply(guardrail.PostCall, ch.pending[:cut], false)
		if err != nil {
			return "", err
		}
		ch.pending, ch.released = ch.pending[cut:], ch.released+cut
		if t.Answer {
			g.text.WriteString(out)
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	g.out = append(g.out, frame...)
	return nil
}

func (g *guardedStream) finish(err error) {
	if err != io.EOF {
		g.err = err
	}
	g.end()
}

func (g *guardedStream) end() {
	if !g.ended {
		g.ended = true
		if g.up != nil {
			g.up.end()
		}
		g.c.done(g.d, g.charge(), g.err)
	}
}

// Close releases the upstream stream and ends the call (a client that went away mid-stream
// ends it with context.Canceled, charged for what the upstream generated: see drain).
func (g *guardedStream) Close() error {
	if !g.ended {
		if g.err == nil {
			g.err = context.Canceled
		}
		g.drain()
	}
	g.end()
	return g.st.Close()
}

// postCallWindow is how much of a streamed answer (bytes before the newest chunk) each
// post_call re-check covers: far longer than any keyword, PII value or PEM key, while keeping
// the per-chunk cost bounded on long answers (a full re-scan per chunk is quadratic).
const postCallWindow = 8 << 10

// streamCheckWindow returns the tail of text a post_call BLOCK check scans after a chunk of
// added bytes: everything when short, else the last postCallWindow bytes before the chunk
// plus the chunk, starting after a whitespace (or at least on a rune boundary) so the cut
// does not create a match that the whole text would not have.
func streamCheckWindow(text string, added int) string {
	limit := len(text) - added
	start := limit - postCallWindow
	if start <= 0 {
		return text
	}
	if i := strings.IndexAny(text[start:limit], " \t\r\n"); i >= 0 {
		return text[start+i+1:]
	}
	for start < limit && !utf8.RuneStart(text[start]) {
		start++
	}
	return text[start:]
}
