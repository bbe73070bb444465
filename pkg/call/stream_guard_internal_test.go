package call

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
)

// Property of the post_call MASK hold-back (issue 17 input 13): however a sentinel (card
// number, email, SSN) is split across chat chunks, with any frames without text between the
// pieces, the client never receives it in clear, and frames reach it in upstream order.

// sliceStream is a provider.Stream over fixed events.
type sliceStream struct {
	events [][]byte
	closed bool
}

func (s *sliceStream) Next() (provider.Event, error) {
	if len(s.events) == 0 {
		return provider.Event{}, io.EOF
	}
	// Event.Data is only valid until the next call: hand out a copy that is then scribbled.
	d := append([]byte(nil), s.events[0]...)
	s.events = s.events[1:]
	return provider.Event{Data: d}, nil
}

func (s *sliceStream) Close() error { s.closed = true; return nil }

var streamSentinels = []string{
	"4111 1111 1111 1111",
	"4111\u00a01111\u00a01111\u00a01111",
	"5500-0000-0000-0004",
	"carol.smith@example.net",
	"123-45-6789",
	"１２３-４５-６７８９",
}

// textlessFrames are chat chunks that carry no text: empty delta, role-only delta, a tool
// call's first frame, a refusal-less frame, an SSE comment.
var textlessFrames = []string{
	`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup"}}]},"finish_reason":null}]}` + "\n\n",
	`data: {"id":"c","object":"chat.completion.chunk","choices":[]}` + "\n\n",
	": keep-alive\n\n",
}

func contentFrame(text string) string {
	b, _ := json.Marshal(text)
	return `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}` + "\n\n"
}

func streamMaskGuard(t testing.TB) *guardrail.Guardrail {
	g, err := guardrail.Compile("mask", []byte(`{"guardrail": "litellm_content_filter", "mode": "post_call",
		"patterns": [
			{"pattern_type": "prebuilt", "pattern_name": "credit_card", "action": "MASK"},
			{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"},
			{"pattern_type": "prebuilt", "pattern_name": "us_ssn", "action": "MASK"}]}`))
	require.NoError(t, err)
	return g
}

// runGuarded streams frames (grouped into events as sizes says) through a guardedStream and
// returns the frames the client receives and the concatenated content.
func runGuarded(t testing.TB, g *guardrail.Guardrail, events [][]byte) ([]string, string) {
	c := &Call{f: format.FormatChat, gs: []*guardrail.Guardrail{g}, post: true}
	st := &sliceStream{events: events}
	gs := newGuardedStream(c, st, nil)
	var out []byte
	for {
		ev, err := gs.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		out = append(out, ev.Data...)
	}
	require.NoError(t, gs.Close())
	var frames []string
	var content strings.Builder
	for pos := 0; pos < len(out); {
		n := format.SSEFrameLen(out[pos:])
		f := string(out[pos : pos+n])
		pos += n
		frames = append(frames, f)
		if data, ok := strings.CutPrefix(f, "data: "); ok {
			content.WriteString(gjson.Get(data, "choices.0.delta.content").String())
		}
	}
	return frames, content.String()
}

// splitStream cuts text at the given rune offsets into content frames, puts the given
// textless frames after each piece, and groups frames into events of 1-3 frames.
func splitStream(rng *rand.Rand, text string, pieces int, gapMax int) (frames []string) {
	runes := []rune(text)
	cuts := map[int]bool{}
	for range pieces - 1 {
		cuts[1+rng.IntN(max(len(runes)-1, 1))] = true
	}
	var piece strings.Builder
	for i, r := range runes {
		if cuts[i] && piece.Len() > 0 {
			frames = append(frames, contentFrame(piece.String()))
			piece.Reset()
			for range rng.IntN(gapMax + 1) {
				frames = append(frames, textlessFrames[rng.IntN(len(textlessFrames))])
			}
		}
		piece.WriteRune(r)
	}
	frames = append(frames, contentFrame(piece.String()))
	frames = append(frames, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n", "data: [DONE]\n\n")
	return frames
}

func groupEvents(rng *rand.Rand, frames []string) [][]byte {
	var events [][]byte
	for i := 0; i < len(frames); {
		n := min(1+rng.IntN(3), len(frames)-i)
		events = append(events, []byte(strings.Join(frames[i:i+n], "")))
		i += n
	}
	return events
}

const filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit; sed do eiusmod tempor incididunt "

func fillerText(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.IntN(400); b.Len() < n; {
		w := strings.Fields(filler)
		b.WriteString(w[rng.IntN(len(w))])
		b.WriteByte(' ')
	}
	return b.String()
}

// checkStreamed asserts that the client got every frame in order (textless frames byte for
// byte) and, when the guardrail masks the sentinel in the whole text, never the sentinel.
func checkStreamed(t testing.TB, g *guardrail.Guardrail, text, sentinel string, in []string, out []string, content string) {
	whole, err := g.Check(text)
	require.NoError(t, err)
	require.Len(t, out, len(in), "one frame out per frame in")
	for i := range in {
		if !strings.Contains(in[i], `"content":`) {
			require.Equal(t, in[i], out[i], "frame %d: a frame without text passes unchanged, in order", i)
		}
	}
	if !strings.Contains(whole, sentinel) {
		require.NotContains(t, content, sentinel, "sentinel leaked from %q", text)
	}
}

func TestGuardedStreamSplitNeverLeaks(t *testing.T) {
	g := streamMaskGuard(t)
	rng := rand.New(rand.NewPCG(17, 13))
	for i := range 3000 {
		sentinel := streamSentinels[i%len(streamSentinels)]
		text := fillerText(rng) + "card " + sentinel + " done " + fillerText(rng)
		frames := splitStream(rng, text, 1+rng.IntN(12), 3)
		out, content := runGuarded(t, g, groupEvents(rng, frames))
		checkStreamed(t, g, text, sentinel, frames, out, content)
		// With words around the sentinel, the streamed answer is the whole text masked.
		whole, _ := g.Check(text)
		require.Equal(t, whole, content, "case %d", i)
	}
}

// TestGuardedStreamInput13 is issue 17 input 13 exactly: card, a frame without text, rest.
func TestGuardedStreamInput13(t *testing.T) {
	g := streamMaskGuard(t)
	for _, gap := range textlessFrames {
		frames := []string{textlessFrames[1], contentFrame("card 4111 1111"), gap, contentFrame(" 1111 1111 done"), "data: [DONE]\n\n"}
		var events [][]byte
		for _, f := range frames {
			events = append(events, []byte(f))
		}
		out, content := runGuarded(t, g, events)
		require.Equal(t, "card [CREDIT_CARD_REDACTED] done", content, "gap %q", gap)
		checkStreamed(t, g, "card 4111 1111 1111 1111 done", "4111 1111 1111 1111", frames, out, content)
	}
}

func FuzzGuardedStreamSplit(f *testing.F) {
	f.Add("card ", " done", uint8(0), []byte{14, 0x80, 5, 0x40})
	f.Add("", "", uint8(3), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add("x ", "\u00a0y", uint8(1), []byte{0xff, 0xff, 3})
	g := streamMaskGuard(f)
	f.Fuzz(func(t *testing.T, pre, post string, which uint8, cuts []byte) {
		if !utf8.ValidString(pre) || !utf8.ValidString(post) || len(cuts) > 64 {
			return
		}
		sentinel := streamSentinels[int(which)%len(streamSentinels)]
		text := pre + sentinel + post
		// Each cut byte: low 6 bits advance the cut point (runes), high 2 bits add that many
		// textless frames after the piece.
		runes := []rune(text)
		var frames []string
		pos := 0
		for _, c := range cuts {
			n := int(c & 0x3f)
			if n == 0 || pos+n >= len(runes) {
				continue
			}
			frames = append(frames, contentFrame(string(runes[pos:pos+n])))
			pos += n
			for k := range int(c >> 6) {
				frames = append(frames, textlessFrames[(int(c)+k)%len(textlessFrames)])
			}
		}
		frames = append(frames, contentFrame(string(runes[pos:])), "data: [DONE]\n\n")
		var events [][]byte
		for _, fr := range frames {
			events = append(events, []byte(fr))
		}
		out, content := runGuarded(t, g, events)
		checkStreamed(t, g, text, sentinel, frames, out, content)
	})
}
