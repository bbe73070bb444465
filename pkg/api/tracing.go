package api

import (
	"context"
	mgmt "lockstep/pkg/admin"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"

	"lockstep/pkg/telemetry"
)

// Tracing of the call pipeline and the request log export (pkg/telemetry; docs/operations.md
// "Tracing"). Every hook is a nil check when tracing is off: no allocation on the hot path.

// untraced are the routes without a server span: probes and scrapes, polled every few
// seconds by every orchestrator and Prometheus, would drown the traces an operator looks for.
var untraced = map[string]bool{"/health/liveliness": true, "/health/liveness": true, "/health/readiness": true, "/metrics": true}

// startServerSpan starts the request's server span (telemetry.StartServer), except for the
// untraced routes. Off: ctx and nil.
func startServerSpan(ctx context.Context, req *http.Request, route string) (context.Context, *telemetry.Span) {
	if !telemetry.Enabled() || untraced[route] {
		return ctx, nil
	}
	return telemetry.StartServer(ctx, req, route)
}

// startAuthSpan starts the request's "auth" span (ended by authPassed, or by front when auth
// refused the request). Off: nothing.
func startAuthSpan(c echo.Context) {
	if !telemetry.Enabled() {
		return
	}
	if rc, ok := c.Request().Context().(*requestContext); ok && rc.authSpan == nil {
		rc.authSpan = telemetry.Step(rc, "auth")
	}
}

// authPassed wraps the handler auth lets through: it ends the auth span first.
func authPassed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if rc, ok := c.Request().Context().(*requestContext); ok && rc.authSpan != nil {
			rc.authSpan.End()
			rc.authSpan = nil
		}
		return next(c)
	}
}

// endAuthSpan ends an auth span still open after the request (auth refused it with err).
func (rc *requestContext) endAuthSpan(err error) {
	if rc.authSpan != nil {
		rc.authSpan.EndErr(err)
		rc.authSpan = nil
	}
}

// exportSpendLog writes a call's spend-log row to the request log exports: a structured log
// line (general_settings.spend_log_lines: message "spend_log" at info, the row's columns as
// fields) and an OTLP log record (event name lockstep.spend_log, the columns as attributes,
// when OTLP logs are on; telemetry.Setup).
func (s *Server) exportSpendLog(l *mgmt.SpendLog) {
	if s.SpendLogLines {
		s.Log.Info().Str("request_id", l.RequestID).Str("call_type", l.CallType).Str("model", l.Model).
			Str("model_group", l.ModelGroup).Str("model_id", l.ModelID).Str("api_key", l.APIKey).
			Str("user", l.User).Str("team_id", l.TeamID).Str("organization_id", l.OrganizationID).
			Str("end_user", l.EndUser).Float64("spend", l.Spend).Int64("prompt_tokens", l.PromptTokens).
			Int64("completion_tokens", l.CompletionTokens).Int64("total_tokens", l.TotalTokens).
			Time("start_time", l.StartTime).Time("end_time", l.EndTime).Str("spend_replica_id", l.ReplicaID).
			Str("status", spendStatus(l)).Msg("spend_log")
	}
	if telemetry.LogsEnabled() {
		telemetry.EmitLog(context.Background(), "lockstep.spend_log", "spend_log", l.EndTime,
			attribute.String("request_id", l.RequestID), attribute.String("call_type", l.CallType),
			attribute.String("model", l.Model), attribute.String("model_group", l.ModelGroup),
			attribute.String("model_id", l.ModelID), attribute.String("api_key", l.APIKey),
			attribute.String("user", l.User), attribute.String("team_id", l.TeamID),
			attribute.String("organization_id", l.OrganizationID), attribute.String("end_user", l.EndUser),
			attribute.Float64("spend", l.Spend), attribute.Int64("prompt_tokens", l.PromptTokens),
			attribute.Int64("completion_tokens", l.CompletionTokens), attribute.Int64("total_tokens", l.TotalTokens),
			attribute.String("start_time", l.StartTime.UTC().Format(time.RFC3339Nano)),
			attribute.String("end_time", l.EndTime.UTC().Format(time.RFC3339Nano)),
			attribute.String("replica_id", l.ReplicaID), attribute.String("status", spendStatus(l)))
	}
}

// spendStatus is the row's status as stored: "success" or "failure" ("" is stored as success).
func spendStatus(l *mgmt.SpendLog) string {
	if l.Status == "" {
		return "success"
	}
	return l.Status
}
