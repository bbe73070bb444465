package call

import (
	"context"
	"errors"
	"lockstep/pkg/format"
	"sync/atomic"
	"time"

	"lockstep/pkg/provider"
)

// Every streamed call is charged (API.md "Security rules"; docs/api.md "Usage on every
// stream"). The provider asks the upstream for usage and reports it (provider.StreamUsage);
// the spend step (step 8) is told:
//
//   - the upstream's figures, when it reported them for the whole call;
//   - when the client hung up before the end: the upstream is read on to its end (the frames
//     go nowhere) for at most streamDrainTime after the hang-up and streamDrainBytes of
//     frames, so that its figures are known;
//   - when that bound is hit, the upstream failed or never reported usage: an estimate
//     (streamEstimate), never 0 for a stream that delivered anything; a figure the upstream did
//     report (Anthropic's input count in message_start) is kept.
//
// Only a call with a Ticket (a limits or spend step installed) is drained: without one nobody
// is charged, and the hot path stays as it was.

// The drain bounds: how long after the client hung up, and how many bytes of frames, the
// gateway reads an upstream stream to learn its usage.
const (
	streamDrainTime  = 30 * time.Second
	streamDrainBytes = 8 << 20
)

// drainTime is streamDrainTime; tests shorten it.
var drainTime = streamDrainTime

// errDrainTimeout ends an upstream stream still running streamDrainTime after its client hung up.
var errDrainTimeout = errors.New("stream drain bound reached")

// streamEstimate is the usage charged for a stream whose upstream reported no final figures:
// prompt tokens ⌈request body bytes / 4⌉ (the body as sent upstream, JSON included, so rather
// over than under), completion tokens ⌈bytes of streamed text / 4⌉ (the frames' text deltas,
// delivered or drained; OpenAI's rule of thumb of about 4 characters per token), at least 1
// once any frame was streamed. Nothing streamed: 0 (the call failed before its first frame).
func streamEstimate(bodyBytes, textBytes, frames int) format.Usage {
	if frames == 0 {
		return format.Usage{}
	}
	return format.Usage{PromptTokens: int64(bodyBytes+3) / 4, CompletionTokens: max(int64(textBytes+3)/4, 1)}
}

// upstreamCtx is the context of a charged stream's upstream call: it does not end when the
// client's request does, so that the upstream can be read to its end after a hang-up. Before
// the stream is handed to the client (started), the request's end still cancels it at once
// (a client gone before the first byte, a during_call block); after, it ends drainTime later,
// or when the stream is closed.
type upstreamCtx struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    func() bool
	started atomic.Bool
}

func detachUpstream(ctx context.Context) *upstreamCtx {
	u := &upstreamCtx{}
	u.ctx, u.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	u.stop = context.AfterFunc(ctx, func() {
		if !u.started.Load() {
			u.cancel(context.Cause(ctx))
			return
		}
		time.AfterFunc(drainTime, func() { u.cancel(errDrainTimeout) })
	})
	return u
}

// end releases the context (once the stream has ended).
func (u *upstreamCtx) end() {
	u.stop()
	u.cancel(context.Canceled)
}

// count takes one upstream event into the estimate.
func (g *guardedStream) count(ev provider.Event) {
	if g.c.ticket != nil && g.c.respID == "" && g.frames < 4 { // the answer's id, from its first events (for the spend log)
		g.c.respID = streamResponseID(ev.Data)
	}
	g.frames++
	g.textBytes += len(ev.Text)
}

// drain reads the upstream on after the client went away, within the drain bounds, unless
// its usage is already known.
func (g *guardedStream) drain() {
	if g.up == nil {
		return
	}
	if _, final := provider.StreamUsage(g.st); final {
		return
	}
	t := time.AfterFunc(drainTime, func() { g.up.cancel(errDrainTimeout) })
	defer t.Stop()
	for read := 0; read < streamDrainBytes; {
		ev, err := g.st.Next()
		if err != nil {
			return
		}
		read += len(ev.Data)
		g.count(ev)
	}
}

// charge is the usage the spend step is told: the upstream's figures when final, else the
// estimate, keeping what the upstream did report.
func (g *guardedStream) charge() format.Usage {
	u, final := provider.StreamUsage(g.st)
	if final {
		return u
	}
	e := streamEstimate(len(g.c.body), g.textBytes, g.frames)
	if u.PromptTokens == 0 {
		u.PromptTokens = e.PromptTokens
	}
	u.CompletionTokens = max(u.CompletionTokens, e.CompletionTokens)
	return u
}
