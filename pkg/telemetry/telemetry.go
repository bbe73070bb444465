// Package telemetry is lockstep's OpenTelemetry: traces of every call, management write and
// change-feed apply, and the spend-log export (structured log line, OTLP log record), exported
// by OTLP over HTTP or gRPC and configured with the standard OTEL_* environment variables
// (setup.go; docs/operations.md "Tracing").
//
// Everything is off unless configured. Off, every hook is a nil check: Start returns the
// context it was given and a nil *Span, whose methods do nothing, so the hot path allocates
// nothing for tracing (BenchmarkChatMock, BenchmarkChatPassthrough in pkg/api).
//
// Span names and attributes follow the OpenTelemetry semantic conventions: HTTP server spans
// ("POST /v1/chat/completions", http.request.method, http.route, http.response.status_code)
// and the GenAI conventions for the call and its upstream attempts (gen_ai.operation.name,
// gen_ai.provider.name, gen_ai.request.model, gen_ai.response.model,
// gen_ai.usage.input_tokens, gen_ai.usage.output_tokens), plus lockstep.cost_usd (the
// spend-log cost of the call, from the deployment's model_info).
package telemetry

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span and log record lockstep emits.
const ScopeName = "lockstep"

// tracing holds the tracer while traces are on (nil: off). Set by Setup before serving.
var tracing atomic.Pointer[tracerHolder]

type tracerHolder struct{ t trace.Tracer }

// Enabled reports whether traces are exported (Setup turned them on).
func Enabled() bool { return tracing.Load() != nil }

func tracer() trace.Tracer {
	if h := tracing.Load(); h != nil {
		return h.t
	}
	return nil
}

// SetTracerProvider turns traces on with tp (nil: off). Setup calls it; tests may too.
func SetTracerProvider(tp trace.TracerProvider) {
	if tp == nil {
		tracing.Store(nil)
		return
	}
	tracing.Store(&tracerHolder{t: tp.Tracer(ScopeName)})
}

// Span is one span, or nil when traces are off: every method is a no-op on a nil *Span.
type Span struct{ sp trace.Span }

// Start starts an internal span named name, child of the span in ctx. Off: ctx as given and
// nil.
func Start(ctx context.Context, name string) (context.Context, *Span) {
	t := tracer()
	if t == nil {
		return ctx, nil
	}
	ctx, sp := t.Start(ctx, name)
	return ctx, &Span{sp: sp}
}

// Step starts an internal span for one step of a call (a child of the span in ctx) when the
// step has no children of its own. Off: nil.
func Step(ctx context.Context, name string) *Span {
	t := tracer()
	if t == nil {
		return nil
	}
	_, sp := t.Start(ctx, name)
	return &Span{sp: sp}
}

// End ends the span.
func (s *Span) End() {
	if s != nil {
		s.sp.End()
	}
}

// EndErr ends the span, recording err (nil: none) as its error status.
func (s *Span) EndErr(err error) {
	if s == nil {
		return
	}
	s.Fail(err)
	s.sp.End()
}

// Fail records err as the span's error (status Error, error.type); nil does nothing.
func (s *Span) Fail(err error) {
	if s == nil || err == nil {
		return
	}
	s.sp.SetStatus(codes.Error, err.Error())
	s.sp.SetAttributes(attribute.String("error.type", errorType(err)))
}

// errorType is error.type: the Go type of err (semantic conventions "error.type": a
// low-cardinality name of the error's class).
func errorType(err error) string { return fmt.Sprintf("%T", err) }

// Str sets a string attribute.
func (s *Span) Str(k, v string) {
	if s != nil {
		s.sp.SetAttributes(attribute.String(k, v))
	}
}

// Int sets an integer attribute.
func (s *Span) Int(k string, v int64) {
	if s != nil {
		s.sp.SetAttributes(attribute.Int64(k, v))
	}
}

// Float sets a floating-point attribute.
func (s *Span) Float(k string, v float64) {
	if s != nil {
		s.sp.SetAttributes(attribute.Float64(k, v))
	}
}

// Bool sets a boolean attribute.
func (s *Span) Bool(k string, v bool) {
	if s != nil {
		s.sp.SetAttributes(attribute.Bool(k, v))
	}
}

// Recording reports whether the span records (false for nil).
func (s *Span) Recording() bool { return s != nil && s.sp.IsRecording() }

// --- HTTP server spans -------------------------------------------------------------------------

var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// StartServer starts the server span of one HTTP request, named "METHOD route" (route: the
// matched pattern, e.g. /v1/chat/completions; "" for an unmatched path), continuing the
// caller's trace when the request carries a W3C traceparent header. Off: ctx and nil.
func StartServer(ctx context.Context, r *http.Request, route string) (context.Context, *Span) {
	t := tracer()
	if t == nil {
		return ctx, nil
	}
	ctx = propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	name := r.Method
	if route != "" {
		name += " " + route
	}
	ctx, sp := t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", r.Method),
		attribute.String("http.route", route),
		attribute.String("url.path", r.URL.Path),
	))
	return ctx, &Span{sp: sp}
}

// EndServer ends a server span with the response status (5xx: status Error).
func (s *Span) EndServer(status int) {
	if s == nil {
		return
	}
	s.sp.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		s.sp.SetStatus(codes.Error, http.StatusText(status))
		s.sp.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
	}
	s.sp.End()
}

// MarkWrite marks the server span in ctx as a management write (lockstep.management.write =
// true): the one span of that write, carrying its changes (RecordChange).
func MarkWrite(ctx context.Context) {
	if !Enabled() {
		return
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("lockstep.management.write", true))
}

// --- the call (GenAI) --------------------------------------------------------------------------

// operationName is gen_ai.operation.name for a pipeline route.
func operationName(route string) string {
	switch route {
	case "chat", "responses", "messages":
		return "chat"
	case "completions":
		return "text_completion"
	case "embeddings":
		return "embeddings"
	case "a2a":
		return "invoke_agent"
	}
	return route
}

// StartCall starts the span of one call through the pipeline: "{operation} {model}" (GenAI
// conventions), with gen_ai.operation.name, gen_ai.request.model and lockstep.route; its
// steps and upstream attempts are its children. End it with EndCall. Off: ctx and nil.
func StartCall(ctx context.Context, route, model string, stream bool) (context.Context, *Span) {
	t := tracer()
	if t == nil {
		return ctx, nil
	}
	op := operationName(route)
	ctx, sp := t.Start(ctx, op+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", op),
		attribute.String("gen_ai.request.model", model),
		attribute.String("lockstep.route", route),
		attribute.Bool("lockstep.stream", stream),
	))
	return ctx, &Span{sp: sp}
}

// CallResult is how a call ended, for its span.
type CallResult struct {
	Provider      string // gen_ai.provider.name (and gen_ai.system): the deployment's provider
	ResponseModel string // gen_ai.response.model: the upstream model that answered
	ModelID       string // lockstep.model_id: the deployment's model_info.id
	InputTokens   int64
	OutputTokens  int64
	Cost          float64 // lockstep.cost_usd
	Err           error
}

// EndCall sets the call's outcome on its span and ends it.
func (s *Span) EndCall(r CallResult) {
	if s == nil {
		return
	}
	if r.Provider != "" {
		s.sp.SetAttributes(attribute.String("gen_ai.provider.name", r.Provider), attribute.String("gen_ai.system", r.Provider))
	}
	if r.ResponseModel != "" {
		s.sp.SetAttributes(attribute.String("gen_ai.response.model", r.ResponseModel))
	}
	if r.ModelID != "" {
		s.sp.SetAttributes(attribute.String("lockstep.model_id", r.ModelID))
	}
	s.sp.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", r.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", r.OutputTokens),
		attribute.Float64("lockstep.cost_usd", r.Cost))
	s.EndErr(r.Err)
}

// StartUpstream starts the span of one upstream attempt (a child of the call span): "upstream
// {provider}", kind Client, with gen_ai.provider.name, gen_ai.request.model (the upstream's
// model name) and server.address. Off: ctx and nil.
func StartUpstream(ctx context.Context, provider, model, server string) (context.Context, *Span) {
	t := tracer()
	if t == nil {
		return ctx, nil
	}
	ctx, sp := t.Start(ctx, "upstream "+provider, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", model),
		attribute.String("server.address", server),
	))
	return ctx, &Span{sp: sp}
}

// --- the change feed -----------------------------------------------------------------------

// A change (one row of gateway.registry_changes) is named by its version: registry versions
// come from one global sequence (sql/001_registry.sql), a delete's tombstone is the row's
// version + 1, so no two changes share one. From that version every replica derives the same
// trace context (ChangeSpanContext): the applying replicas' apply spans are children of it,
// the writing replica's management-write span links to it. An operator follows a write from
// its span's link (or its lockstep.change.version attribute) to the trace holding one
// "change.apply" span per replica that applied it.

// ChangeSpanContext is the trace context of the change of version v: trace id and span id are
// the first 16 and next 8 bytes of sha256("lockstep.change/" + v). The span itself is never
// exported (the change happens in Postgres); it is the parent every replica's apply span
// shares and the target of the writer's link.
func ChangeSpanContext(v int64) trace.SpanContext {
	sum := sha256.Sum256([]byte("lockstep.change/" + strconv.FormatInt(v, 10)))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// RecordChange records on the span in ctx (the management write's) one change it committed:
// a "lockstep.change" event with lockstep.change.type, .op, .id and .version, the attribute
// lockstep.change.version (the last change's) and a link to ChangeSpanContext(version).
// Called by the store for every registry row it writes.
func RecordChange(ctx context.Context, typ, op, id string, version int64) {
	if !Enabled() {
		return
	}
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("lockstep.change.type", typ), attribute.String("lockstep.change.op", op),
		attribute.String("lockstep.change.id", id), attribute.Int64("lockstep.change.version", version)}
	sp.AddEvent("lockstep.change", trace.WithAttributes(attrs...))
	sp.SetAttributes(attribute.Int64("lockstep.change.version", version))
	sp.AddLink(trace.Link{SpanContext: ChangeSpanContext(version), Attributes: attrs})
}

// Applied is one change the change feed applied.
type Applied struct {
	Type, Op, ID string
	Version, Seq int64
	// Committed is when the change was logged (the NOTIFY payload's ts); zero: unknown.
	Committed time.Time
}

// ChangesApplied emits one "change.apply" span per change (at most maxApplySpans per batch),
// each a child of ChangeSpanContext(version), from start to now: lockstep.change.type, .op,
// .id, .version, .seq and lockstep.change.lag_ms (now minus Committed).
func ChangesApplied(start time.Time, changes []Applied) {
	t := tracer()
	if t == nil {
		return
	}
	now := time.Now()
	for i, c := range changes {
		if i == maxApplySpans {
			break
		}
		ctx := trace.ContextWithRemoteSpanContext(context.Background(), ChangeSpanContext(c.Version))
		attrs := []attribute.KeyValue{attribute.String("lockstep.change.type", c.Type), attribute.String("lockstep.change.op", c.Op),
			attribute.String("lockstep.change.id", c.ID), attribute.Int64("lockstep.change.version", c.Version),
			attribute.Int64("lockstep.change.seq", c.Seq)}
		if !c.Committed.IsZero() {
			attrs = append(attrs, attribute.Float64("lockstep.change.lag_ms", float64(now.Sub(c.Committed))/float64(time.Millisecond)))
		}
		_, sp := t.Start(ctx, "change.apply", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
		sp.End(trace.WithTimestamp(now))
	}
}

// maxApplySpans bounds the apply spans of one batch (a burst of thousands of changes is
// applied in one batch; its first maxApplySpans changes are traced).
const maxApplySpans = 256

// Child starts an internal span named name, child of s; nil when s is nil.
func (s *Span) Child(name string) *Span {
	if s == nil {
		return nil
	}
	t := tracer()
	if t == nil {
		return nil
	}
	_, sp := t.Start(trace.ContextWithSpan(context.Background(), s.sp), name)
	return &Span{sp: sp}
}

// UpstreamHeader returns h with the W3C trace context of the span in ctx added (traceparent,
// tracestate), as a copy (h is shared); nil when tracing is off or ctx holds no span: the
// upstream then joins the call's trace (W3C Trace Context, "traceparent Header").
func UpstreamHeader(ctx context.Context, h http.Header) http.Header {
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(out))
	return out
}
