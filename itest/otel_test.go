package itest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	collectorlogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"lockstep/itest/fakeupstream"
	"lockstep/itest/pgtest"
	"lockstep/pkg/telemetry"
)

// otlpReceiver is an in-test OpenTelemetry collector speaking the real OTLP protocols:
// OTLP/HTTP protobuf (POST /v1/traces, /v1/logs) and OTLP/gRPC (the collector TraceService).
// It keeps every span and log record it receives with its resource's service.instance.id.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []gotSpan
	logs  []gotLog
}

type gotSpan struct {
	replica string
	span    *tracepb.Span
}

type gotLog struct {
	replica string
	rec     *logspb.LogRecord
}

func resourceReplica(attrs []*commonpb.KeyValue) string {
	for _, kv := range attrs {
		if kv.Key == "service.instance.id" {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func (r *otlpReceiver) addTraces(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		id := resourceReplica(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				r.spans = append(r.spans, gotSpan{replica: id, span: sp})
			}
		}
	}
}

// Export is the OTLP/gRPC trace service.
func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.addTraces(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is the OTLP/HTTP protobuf receiver.
func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf", 400)
		return
	}
	var out proto.Message
	switch req.URL.Path {
	case "/v1/traces":
		var m collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &m); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.addTraces(&m)
		out = &collectortrace.ExportTraceServiceResponse{}
	case "/v1/logs":
		var m collectorlogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(raw, &m); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		for _, rl := range m.ResourceLogs {
			id := resourceReplica(rl.GetResource().GetAttributes())
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					r.logs = append(r.logs, gotLog{replica: id, rec: lr})
				}
			}
		}
		r.mu.Unlock()
		out = &collectorlogs.ExportLogsServiceResponse{}
	default:
		http.NotFound(w, req)
		return
	}
	b, _ := proto.Marshal(out)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// find returns the spans of replica matching ok.
func (r *otlpReceiver) find(replica string, ok func(*tracepb.Span) bool) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.replica == replica && ok(s.span) {
			out = append(out, s.span)
		}
	}
	return out
}

func attrOf(attrs []*commonpb.KeyValue, k string) *commonpb.AnyValue {
	for _, kv := range attrs {
		if kv.Key == k {
			return kv.Value
		}
	}
	return nil
}

func strAttr(attrs []*commonpb.KeyValue, k string) string { return attrOf(attrs, k).GetStringValue() }
func intAttr(attrs []*commonpb.KeyValue, k string) int64  { return attrOf(attrs, k).GetIntValue() }

// TestOpenTelemetry is issue 23's "Must show": two replicas export OTLP to an in-test receiver
// (A over OTLP/HTTP protobuf, turned on by litellm_settings.callbacks ["otel"]; B over
// OTLP/gRPC, turned on by OTEL_TRACES_EXPORTER=otlp). A management write on A, a chat call on A
// and a psql write are found as spans with their attributes: the write's span links to the
// change's trace, where B's change.apply span carries the same change version; the call's span
// carries the GenAI attributes and its steps as children; the spend log is an OTLP log record
// and a structured log line.
func TestOpenTelemetry(t *testing.T) {
	t.Parallel()
	rcv := &otlpReceiver{}
	httpSrv := httptest.NewServer(rcv)
	t.Cleanup(httpSrv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, rcv)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)

	up := fakeupstream.Start(t)
	db := pgtest.NewDB(t)
	common := []string{"OTEL_SERVICE_NAME=lockstep-itest", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_BLRP_SCHEDULE_DELAY=50"}
	a := StartGateway(t, db, "a", GatewayOpts{
		Config: "general_settings:\n  spend_log_lines: true\nlitellm_settings:\n  callbacks: [\"otel\"]\n",
		Env:    append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + httpSrv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}, common...),
	})
	b := StartGateway(t, db, "b", GatewayOpts{
		Env: append([]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(),
			"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_INSECURE=true"}, common...),
	})

	// a management write on A: one server span marked as a write, linked to the change's trace
	st, body := a.Do(t, "POST", "/model/new", newModelBody("otel-m", up))
	require.Equal(t, 200, st, string(body))
	var write *tracepb.Span
	Eventually(t, "A exports the span of POST /model/new", func() bool {
		got := rcv.find("a", func(s *tracepb.Span) bool {
			return s.Name == "POST /model/new" && attrOf(s.Attributes, "lockstep.management.write").GetBoolValue()
		})
		if len(got) > 0 {
			write = got[0]
		}
		return write != nil
	})
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, write.Kind)
	require.EqualValues(t, 200, intAttr(write.Attributes, "http.response.status_code"))
	version := intAttr(write.Attributes, "lockstep.change.version")
	require.Positive(t, version, "the write's span names the change's version")
	require.Len(t, write.Links, 1)
	link := write.Links[0]
	want := telemetry.ChangeSpanContext(version)
	require.Equal(t, want.TraceID().String(), hex.EncodeToString(link.TraceId))
	require.Equal(t, want.SpanID().String(), hex.EncodeToString(link.SpanId))
	require.Equal(t, "model", strAttr(link.Attributes, "lockstep.change.type"))
	require.Equal(t, "insert", strAttr(link.Attributes, "lockstep.change.op"))

	// ... followed to the other replica: B's apply span of that change, in the linked trace
	var apply *tracepb.Span
	Eventually(t, "B exports the change.apply span of the write's change", func() bool {
		got := rcv.find("b", func(s *tracepb.Span) bool {
			return s.Name == "change.apply" && intAttr(s.Attributes, "lockstep.change.version") == version
		})
		if len(got) > 0 {
			apply = got[0]
		}
		return apply != nil
	})
	require.Equal(t, link.TraceId, apply.TraceId, "B's apply span is in the trace A's write links to")
	require.Equal(t, link.SpanId, apply.ParentSpanId)
	require.Equal(t, "model", strAttr(apply.Attributes, "lockstep.change.type"))
	require.Equal(t, "insert", strAttr(apply.Attributes, "lockstep.change.op"))
	require.Positive(t, intAttr(apply.Attributes, "lockstep.change.seq"))
	require.Equal(t, strAttr(link.Attributes, "lockstep.change.id"), strAttr(apply.Attributes, "lockstep.change.id"))
	require.NotNil(t, attrOf(apply.Attributes, "lockstep.change.lag_ms"))

	// a chat call on A: the call span with the GenAI attributes, its steps as children
	st, body = a.Do(t, "POST", "/v1/chat/completions", chatBody("otel-m", "hello", false))
	require.Equal(t, 200, st, string(body))
	var callSpan *tracepb.Span
	Eventually(t, "A exports the call span", func() bool {
		got := rcv.find("a", func(s *tracepb.Span) bool { return s.Name == "chat otel-m" })
		if len(got) > 0 {
			callSpan = got[0]
		}
		return callSpan != nil
	})
	require.Equal(t, "chat", strAttr(callSpan.Attributes, "gen_ai.operation.name"))
	require.Equal(t, "otel-m", strAttr(callSpan.Attributes, "gen_ai.request.model"))
	require.Equal(t, "openai", strAttr(callSpan.Attributes, "gen_ai.provider.name"))
	require.Equal(t, "gpt-up", strAttr(callSpan.Attributes, "gen_ai.response.model"))
	require.Positive(t, intAttr(callSpan.Attributes, "gen_ai.usage.input_tokens"))
	require.Positive(t, intAttr(callSpan.Attributes, "gen_ai.usage.output_tokens"))
	require.NotNil(t, attrOf(callSpan.Attributes, "lockstep.cost_usd"))
	inTrace := func(name string) *tracepb.Span {
		var found *tracepb.Span
		Eventually(t, "A exports the call's "+name+" span", func() bool {
			got := rcv.find("a", func(s *tracepb.Span) bool { return s.Name == name && bytes.Equal(s.TraceId, callSpan.TraceId) })
			if len(got) > 0 {
				found = got[0]
			}
			return found != nil
		})
		return found
	}
	server := inTrace("POST /v1/chat/completions")
	require.Equal(t, server.SpanId, callSpan.ParentSpanId, "the call span is the server span's child")
	require.Equal(t, server.SpanId, inTrace("auth").ParentSpanId)
	for _, step := range []string{"resolve", "access", "limits", "spend"} {
		require.Equal(t, callSpan.SpanId, inTrace(step).ParentSpanId, step)
	}
	attempt := inTrace("upstream openai")
	require.Equal(t, callSpan.SpanId, attempt.ParentSpanId)
	require.Equal(t, "gpt-up", strAttr(attempt.Attributes, "gen_ai.request.model"))
	require.EqualValues(t, 200, intAttr(attempt.Attributes, "http.response.status_code"))
	upReq, ok := up.LastRequest("/v1/chat/completions")
	require.True(t, ok)
	require.Equal(t, fmt.Sprintf("00-%x-%x-01", attempt.TraceId, attempt.SpanId), upReq.Header.Get("traceparent"),
		"the upstream is sent the attempt's trace context")

	// a streamed call on B (OTLP/gRPC): its call span ends with the stream
	st, body = b.Do(t, "POST", "/v1/chat/completions", chatBody("otel-m", "hello", true))
	require.Equal(t, 200, st, string(body))
	Eventually(t, "B exports the streamed call's span", func() bool {
		return len(rcv.find("b", func(s *tracepb.Span) bool {
			return s.Name == "chat otel-m" && attrOf(s.Attributes, "lockstep.stream").GetBoolValue() &&
				strAttr(s.Attributes, "gen_ai.provider.name") == "openai"
		})) > 0
	})
	require.Empty(t, rcv.find("a", func(s *tracepb.Span) bool { return s.Name == "GET /health/readiness" }), "probes are not traced")

	// the call's spend log: an OTLP log record and a structured log line
	Eventually(t, "A exports the spend log as an OTLP log record", func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, l := range rcv.logs {
			if l.replica == "a" && l.rec.EventName == "lockstep.spend_log" && strAttr(l.rec.Attributes, "model") == "otel-m" &&
				intAttr(l.rec.Attributes, "total_tokens") > 0 {
				return true
			}
		}
		return false
	})
	Eventually(t, "A writes the spend log as a structured log line", func() bool {
		for _, line := range strings.Split(a.Log(), "\n") {
			if strings.Contains(line, `"message":"spend_log"`) && strings.Contains(line, `"model":"otel-m"`) {
				return true
			}
		}
		return false
	})

	// a psql write: no writer span, but both replicas' apply spans carry its change
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('otel-psql', 'otel-psql', '{"model": "openai/x", "mock_response": "hi"}')`)
	var seqs []int64
	for _, r := range []string{"a", "b"} {
		Eventually(t, fmt.Sprintf("replica %s exports the apply span of the psql write", r), func() bool {
			got := rcv.find(r, func(s *tracepb.Span) bool {
				return s.Name == "change.apply" && strAttr(s.Attributes, "lockstep.change.id") == "otel-psql"
			})
			if len(got) == 0 {
				return false
			}
			v := intAttr(got[0].Attributes, "lockstep.change.version")
			sc := telemetry.ChangeSpanContext(v)
			require.Equal(t, sc.TraceID().String(), hex.EncodeToString(got[0].TraceId))
			seqs = append(seqs, intAttr(got[0].Attributes, "lockstep.change.seq"))
			return true
		})
	}
	require.Equal(t, seqs[0], seqs[1], "both replicas name the same change-log row")
}
