package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
)

// logging holds the OTLP logger while log export is on (nil: off).
var logging atomic.Pointer[loggerHolder]

type loggerHolder struct{ l otellog.Logger }

func setLoggerProvider(lp otellog.LoggerProvider) {
	if lp == nil {
		logging.Store(nil)
		return
	}
	logging.Store(&loggerHolder{l: lp.Logger(ScopeName)})
}

// SetLoggerProvider turns OTLP log export on with lp (nil: off). Setup calls it; tests may too.
func SetLoggerProvider(lp otellog.LoggerProvider) { setLoggerProvider(lp) }

// LogsEnabled reports whether log records are exported by OTLP.
func LogsEnabled() bool { return logging.Load() != nil }

// EmitLog exports one log record at INFO: body, its event name, time t and attrs. The span in
// ctx (if any) gives the record its trace and span ids. Off: nothing.
func EmitLog(ctx context.Context, event, body string, t time.Time, attrs ...attribute.KeyValue) {
	h := logging.Load()
	if h == nil {
		return
	}
	var r otellog.Record
	r.SetEventName(event)
	r.SetTimestamp(t)
	r.SetObservedTimestamp(time.Now())
	r.SetSeverity(otellog.SeverityInfo)
	r.SetSeverityText("INFO")
	r.SetBody(attribute.StringValue(body))
	r.AddAttributes(attrs...)
	h.l.Emit(ctx, r)
}
