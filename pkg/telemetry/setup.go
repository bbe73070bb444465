package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options is what Setup is told besides the environment.
type Options struct {
	// Callbacks are LiteLLM's litellm_settings.callbacks and success_callback: "otel" turns
	// OTLP traces and logs on (LiteLLM's OpenTelemetry callback), unless OTEL_TRACES_EXPORTER
	// or OTEL_LOGS_EXPORTER says "none". Other names are LiteLLM integrations lockstep does not
	// have; they are ignored.
	Callbacks []string
	// InstanceID is service.instance.id (the replica id); Version is service.version.
	InstanceID, Version string
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
}

// Config is what the environment and the callbacks select.
type Config struct {
	Traces, Logs                 bool
	TracesProtocol, LogsProtocol string // "http/protobuf" or "grpc"
}

// ErrConfig is the class of every configuration error Setup and Resolve return.
var ErrConfig = errors.New("telemetry")

// Resolve decides which signals are exported (OpenTelemetry SDK environment variables
// specification): a signal is on when its OTEL_{TRACES,LOGS}_EXPORTER is "otlp", or when it is
// unset and Callbacks names "otel"; "none" (or OTEL_SDK_DISABLED=true) turns it off. The
// protocol is OTEL_EXPORTER_OTLP_{TRACES,LOGS}_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else
// http/protobuf. Errors (ErrConfig): an exporter other than otlp or none, a protocol other
// than http/protobuf or grpc.
func Resolve(o Options) (Config, error) {
	env := o.Getenv
	if env == nil {
		env = os.Getenv
	}
	var c Config
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	otel := slices.ContainsFunc(o.Callbacks, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "otel") })
	on := func(name string) (bool, error) {
		switch v := strings.ToLower(strings.TrimSpace(env(name))); v {
		case "":
			return otel, nil
		case "otlp":
			return true, nil
		case "none":
			return false, nil
		default:
			return false, fmt.Errorf("%w: %s=%q: lockstep exports otlp or none", ErrConfig, name, v)
		}
	}
	proto := func(name string) (string, error) {
		v := strings.TrimSpace(env(name))
		if v == "" {
			v = strings.TrimSpace(env("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		switch v {
		case "", "http/protobuf":
			return "http/protobuf", nil
		case "grpc":
			return "grpc", nil
		}
		return "", fmt.Errorf("%w: OTLP protocol %q (%s or OTEL_EXPORTER_OTLP_PROTOCOL): use http/protobuf or grpc", ErrConfig, v, name)
	}
	var err error
	if c.Traces, err = on("OTEL_TRACES_EXPORTER"); err != nil {
		return Config{}, err
	}
	if c.Logs, err = on("OTEL_LOGS_EXPORTER"); err != nil {
		return Config{}, err
	}
	if c.Traces {
		if c.TracesProtocol, err = proto("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); err != nil {
			return Config{}, err
		}
	}
	if c.Logs {
		if c.LogsProtocol, err = proto("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// Setup starts the exporters Resolve selects and turns the hooks on. The exporters read their
// endpoint, headers, timeout, compression and TLS settings from the OTEL_EXPORTER_OTLP_*
// variables themselves (default endpoint localhost:4318 for HTTP, localhost:4317 for gRPC);
// the resource carries service.name (OTEL_SERVICE_NAME, default "lockstep"),
// service.instance.id, service.version and OTEL_RESOURCE_ATTRIBUTES. Spans are batched
// (OTEL_BSP_*), log records too (OTEL_BLRP_*). shutdown flushes and stops them (call it once,
// on exit). Nothing configured: a no-op shutdown, hooks stay off.
func Setup(ctx context.Context, o Options) (cfg Config, shutdown func(context.Context) error, err error) {
	cfg, err = Resolve(o)
	shutdown = func(context.Context) error { return nil }
	if err != nil || (!cfg.Traces && !cfg.Logs) {
		return cfg, shutdown, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "lockstep")}
	if o.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.InstanceID))
	}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	// WithFromEnv after the defaults: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return cfg, shutdown, fmt.Errorf("%w: resource: %v", ErrConfig, err)
	}
	var stops []func(context.Context) error
	if cfg.Traces {
		var exp sdktrace.SpanExporter
		if cfg.TracesProtocol == "grpc" {
			exp, err = otlptracegrpc.New(ctx)
		} else {
			exp, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return cfg, shutdown, fmt.Errorf("%w: OTLP trace exporter: %v", ErrConfig, err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(tp)
		SetTracerProvider(tp)
		stops = append(stops, tp.Shutdown)
	}
	if cfg.Logs {
		var exp sdklog.Exporter
		if cfg.LogsProtocol == "grpc" {
			exp, err = otlploggrpc.New(ctx)
		} else {
			exp, err = otlploghttp.New(ctx)
		}
		if err != nil {
			return cfg, shutdown, fmt.Errorf("%w: OTLP log exporter: %v", ErrConfig, err)
		}
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)), sdklog.WithResource(res))
		setLoggerProvider(lp)
		stops = append(stops, lp.Shutdown)
	}
	shutdown = func(ctx context.Context) error {
		SetTracerProvider(nil)
		setLoggerProvider(nil)
		var errs []error
		for _, stop := range stops {
			errs = append(errs, stop(ctx))
		}
		return errors.Join(errs...)
	}
	return cfg, shutdown, nil
}
