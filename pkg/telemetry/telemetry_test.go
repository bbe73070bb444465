package telemetry

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name      string
		callbacks []string
		env       map[string]string
		want      Config
		err       bool
	}{
		{name: "nothing configured: off"},
		{name: "an endpoint alone does not turn it on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "callbacks otel: traces and logs over http/protobuf", callbacks: []string{"langfuse", "otel"},
			want: Config{Traces: true, Logs: true, TracesProtocol: "http/protobuf", LogsProtocol: "http/protobuf"}},
		{name: "callbacks otel, logs none", callbacks: []string{"otel"}, env: map[string]string{"OTEL_LOGS_EXPORTER": "none"},
			want: Config{Traces: true, TracesProtocol: "http/protobuf"}},
		{name: "callbacks otel, OTEL_SDK_DISABLED", callbacks: []string{"otel"}, env: map[string]string{"OTEL_SDK_DISABLED": "true"}},
		{name: "traces exporter otlp over grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: Config{Traces: true, TracesProtocol: "grpc"}},
		{name: "per-signal protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: Config{Traces: true, TracesProtocol: "http/protobuf"}},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(Options{Callbacks: tc.callbacks, Getenv: envOf(tc.env)})
			if tc.err {
				require.ErrorIs(t, err, ErrConfig)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// Off, every hook costs no allocation: the call pipeline's hot path calls them on every call.
func TestHooksOffAllocateNothing(t *testing.T) {
	SetTracerProvider(nil)
	ctx := context.Background()
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	err := errors.New("x")
	n := testing.AllocsPerRun(100, func() {
		c, sp := StartServer(ctx, r, "/v1/chat/completions")
		c, call := StartCall(c, "chat", "m", false)
		st := call.Child("resolve")
		st.EndErr(err)
		_, up := StartUpstream(c, "openai", "gpt", "http://x")
		up.Str("k", "v")
		up.Int("k", 1)
		up.EndErr(nil)
		Step(c, "auth").End()
		RecordChange(c, "model", "insert", "id", 2)
		MarkWrite(c)
		if UpstreamHeader(c, r.Header) != nil {
			panic("UpstreamHeader off must be nil")
		}
		call.EndCall(CallResult{InputTokens: 1})
		sp.EndServer(200)
	})
	require.Zero(t, n)
}

func TestChangeSpanContextIsDeterministic(t *testing.T) {
	a, b := ChangeSpanContext(42), ChangeSpanContext(42)
	require.True(t, a.IsValid())
	require.Equal(t, a, b)
	require.NotEqual(t, a.TraceID(), ChangeSpanContext(43).TraceID())
}

// The writer's span links to the change's context; the apply spans are its children.
func TestChangeLinkAndApply(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	SetTracerProvider(tp)
	t.Cleanup(func() { SetTracerProvider(nil) })

	ctx, sp := StartServer(context.Background(), httptest.NewRequest("POST", "/model/new", nil), "/model/new")
	MarkWrite(ctx)
	RecordChange(ctx, "model", "insert", "m1", 8)
	sp.EndServer(200)
	ChangesApplied(time.Now(), []Applied{{Type: "model", Op: "insert", ID: "m1", Version: 8, Seq: 3, Committed: time.Now()}})

	spans := rec.Ended()
	require.Len(t, spans, 2)
	write, apply := spans[0], spans[1]
	require.Equal(t, "POST /model/new", write.Name())
	require.Len(t, write.Links(), 1)
	cs := ChangeSpanContext(8)
	require.Equal(t, cs.TraceID(), write.Links()[0].SpanContext.TraceID())
	require.Equal(t, cs.SpanID(), write.Links()[0].SpanContext.SpanID())
	require.Len(t, write.Events(), 1)
	require.Equal(t, "change.apply", apply.Name())
	require.Equal(t, cs.TraceID(), apply.SpanContext().TraceID())
	require.Equal(t, cs.SpanID(), apply.Parent().SpanID())
}

// A trace context sent by the caller (W3C traceparent) is continued.
func TestServerSpanContinuesTraceparent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { SetTracerProvider(nil) })
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, sp := StartServer(context.Background(), r, "/v1/chat/completions")
	sp.EndServer(502)
	got := rec.Ended()[0]
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got.SpanContext().TraceID().String())
	require.Nil(t, UpstreamHeader(context.Background(), r.Header), "no span: no header")
	require.Equal(t, "00f067aa0ba902b7", got.Parent().SpanID().String())
	require.Equal(t, "Error", got.Status().Code.String())
}
