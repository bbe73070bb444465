package call

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/format"
	"lockstep/pkg/provider"
)

// fakeStream yields events; after them it reports final usage (done), blocks until its
// context ends (block), or fails (fail).
type fakeStream struct {
	events []provider.Event
	i      int
	usage  format.Usage
	final  bool
	block  context.Context
	fail   error
	nexts  int
	ctx    context.Context // the upstream call's context: reads fail once it ends
}

func (f *fakeStream) Next() (provider.Event, error) {
	f.nexts++
	if f.ctx != nil && f.ctx.Err() != nil {
		return provider.Event{}, f.ctx.Err()
	}
	if f.i < len(f.events) {
		f.i++
		if f.i == len(f.events) && f.block == nil && f.fail == nil {
			f.final = true // the last event carried the usage
		}
		return f.events[f.i-1], nil
	}
	switch {
	case f.block != nil:
		<-f.block.Done()
		return provider.Event{}, f.block.Err()
	case f.fail != nil:
		return provider.Event{}, f.fail
	}
	return provider.Event{}, io.EOF
}

func (f *fakeStream) Close() error { return nil }

func (f *fakeStream) StreamUsage() (format.Usage, bool) {
	if f.final {
		return f.usage, true
	}
	return format.Usage{}, false
}

type recTicket struct{ got []Outcome }

func (r *recTicket) Done(o Outcome) { r.got = append(r.got, o) }

func textEvents(n int, text string) []provider.Event {
	evs := make([]provider.Event, n)
	for i := range evs {
		evs[i] = provider.Event{Data: []byte("data: {}\n\n"), Text: text}
	}
	return evs
}

// chargedStream starts a charged stream on st, as Call.Stream does.
func chargedStream(st provider.Stream, body string) (*guardedStream, *recTicket) {
	g, rec, _ := chargedStreamOn(context.Background(), st, body)
	return g, rec
}

func chargedStreamOn(client context.Context, st provider.Stream, body string) (*guardedStream, *recTicket, *upstreamCtx) {
	rec := &recTicket{}
	c := &Call{p: &Pipeline{}, f: format.FormatChat, body: []byte(body), ticket: rec}
	up := detachUpstream(client)
	if f, ok := st.(*fakeStream); ok {
		f.ctx = up.ctx
	}
	up.started.Store(true)
	g := newGuardedStream(c, st, nil)
	g.up = up
	return g, rec, up
}

func TestStreamChargeHungUpDrainsToTheUsage(t *testing.T) {
	t.Parallel()
	st := &fakeStream{events: textEvents(10, "abcd"), usage: format.Usage{PromptTokens: 7, CompletionTokens: 11}}
	client, hangUp := context.WithCancel(context.Background())
	g, rec, up := chargedStreamOn(client, st, `{"model":"m"}`)
	_, err := g.Next() // the client reads one frame and hangs up
	require.NoError(t, err)
	hangUp()
	require.NoError(t, g.Close())
	require.Error(t, up.ctx.Err(), "released once read")
	require.Len(t, rec.got, 1)
	require.Equal(t, format.Usage{PromptTokens: 7, CompletionTokens: 11}, rec.got[0].Usage, "read to the end: the upstream's figures")
	require.ErrorIs(t, rec.got[0].Err, context.Canceled)
	require.Equal(t, 11, st.nexts)
}

func TestStreamChargeEstimates(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 401) // ⌈401/4⌉ = 101 prompt tokens
	// the upstream fails after 3 frames of 10 bytes of text: ⌈30/4⌉ = 8
	st := &fakeStream{events: textEvents(3, "0123456789"), fail: &format.UpstreamError{Status: 502, Message: "cut"}}
	g, rec := chargedStream(st, body)
	for {
		if _, err := g.Next(); err != nil {
			break
		}
	}
	require.NoError(t, g.Close())
	require.Equal(t, format.Usage{PromptTokens: 101, CompletionTokens: 8}, rec.got[0].Usage)

	// hung up after 1 frame, the upstream fails during the drain: what it streamed counts
	st = &fakeStream{events: textEvents(3, "0123456789"), fail: errors.New("reset")}
	g, rec = chargedStream(st, body)
	_, _ = g.Next()
	require.NoError(t, g.Close())
	require.Equal(t, format.Usage{PromptTokens: 101, CompletionTokens: 8}, rec.got[0].Usage)

	// frames without text still cost a token; nothing streamed costs nothing
	require.Equal(t, format.Usage{PromptTokens: 1, CompletionTokens: 1}, streamEstimate(1, 0, 1))
	require.Equal(t, format.Usage{}, streamEstimate(100, 0, 0))
}

// The byte bound: an upstream streaming on without end is read up to streamDrainBytes.
func TestStreamChargeDrainByteBound(t *testing.T) {
	t.Parallel()
	frame := provider.Event{Data: make([]byte, 64<<10), Text: "abcd"}
	st := &endless{ev: frame}
	g, rec := chargedStream(st, "{}")
	_, _ = g.Next()
	require.NoError(t, g.Close())
	require.Equal(t, streamDrainBytes/(64<<10)+1, st.n, "1 delivered + 8 MiB drained")
	require.EqualValues(t, st.n, rec.got[0].Usage.CompletionTokens)
}

type endless struct {
	ev provider.Event
	n  int
}

func (e *endless) Next() (provider.Event, error) { e.n++; return e.ev, nil }
func (e *endless) Close() error                  { return nil }

// The time bound: an upstream that stalls after the hang-up is given up drainTime later, and
// the estimate charged. (drainTime is shortened here; no test runs in parallel with this one.)
func TestStreamChargeDrainTimeBound(t *testing.T) {
	old := drainTime
	drainTime = 50 * time.Millisecond
	defer func() { drainTime = old }()
	rec := &recTicket{}
	c := &Call{p: &Pipeline{}, f: format.FormatChat, body: []byte("12345678"), ticket: rec}
	client, hangUp := context.WithCancel(context.Background())
	up := detachUpstream(client)
	up.started.Store(true)
	st := &fakeStream{events: textEvents(2, "abcdefgh"), block: up.ctx}
	g := newGuardedStream(c, st, nil)
	g.up = up
	_, err := g.Next()
	require.NoError(t, err)
	hangUp()
	require.NoError(t, g.Close())
	require.ErrorIs(t, context.Cause(up.ctx), errDrainTimeout)
	require.Equal(t, format.Usage{PromptTokens: 2, CompletionTokens: 4}, rec.got[0].Usage)

	// before it started, the client's end cancels the upstream call at once
	client, hangUp = context.WithCancel(context.Background())
	up = detachUpstream(client)
	hangUp()
	<-up.ctx.Done()
}

// BenchmarkChargedStreamOverhead is what charging adds to one streamed call: the upstream's
// detached context and the charge at its end.
func BenchmarkChargedStreamOverhead(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &Call{p: &Pipeline{}, f: format.FormatChat, body: []byte(`{}`), ticket: &recTicket{}}
	st := &fakeStream{}
	b.ReportAllocs()
	for b.Loop() {
		up := detachUpstream(ctx)
		up.started.Store(true)
		g := newGuardedStream(c, st, nil)
		g.up = up
		g.ended = true
		up.end()
		_ = g.charge()
	}
}
