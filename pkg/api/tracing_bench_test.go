package api_test

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"lockstep/pkg/router"
	"lockstep/pkg/telemetry"
)

// countSpans is a span processor that counts ended spans and drops them.
type countSpans struct{ n atomic.Int64 }

func (c *countSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *countSpans) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *countSpans) Shutdown(context.Context) error                  { return nil }
func (c *countSpans) ForceFlush(context.Context) error                { return nil }

// BenchmarkTracedChatMock is BenchmarkChatMock with tracing on (every span built and ended,
// none exported): what the spans of one call cost. With tracing off (BenchmarkChatMock) the
// hooks cost nothing.
func BenchmarkTracedChatMock(b *testing.B) {
	rec := &countSpans{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	telemetry.SetTracerProvider(tp)
	b.Cleanup(func() { telemetry.SetTracerProvider(nil) })
	srv := newServer(b, map[string]*router.Deployment{"m1": deployment(b, "m1", "mock", `{"model":"openai/x","mock_response":"hello"}`)})
	benchChat(b, srv, []byte(`{"model":"mock","messages":[{"role":"user","content":"hi"}]}`))
	b.ReportMetric(float64(rec.n.Load())/float64(b.N), "spans/op")
}
