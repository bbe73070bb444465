package api_test

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// logLine returns the log line with request id rid and message msg.
func logLine(t *testing.T, log, rid, msg string) string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		if gjson.Get(line, "request_id").String() == rid && gjson.Get(line, "message").String() == msg {
			return line
		}
	}
	t.Fatalf("no %q line with request id %s in:\n%s", msg, rid, log)
	return ""
}

// Every request gets an x-request-id (the client's, else 32 new characters [0-9A-Za-z]) in
// its answer and an access log line with it; what a handler logs through zerolog.Ctx carries
// the same id; a panic is logged with its stack under the id and answered 500.
func TestRequestIDAndAccessLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Echo().GET("/test/logs", func(c echo.Context) error {
		zerolog.Ctx(c.Request().Context()).Info().Msg("from the handler")
		return c.String(200, "ok")
	})
	b.srv.Echo().GET("/test/panics", func(echo.Context) error { panic("boom") })

	w := b.do(t, "sk-master", "GET", "/test/logs", "")
	require.Equal(t, 200, w.Code)
	rid := w.Header().Get(echo.HeaderXRequestID)
	require.Regexp(t, regexp.MustCompile(`^[0-9A-Za-z]{32}$`), rid)
	line := logLine(t, b.log.String(), rid, "request")
	require.Equal(t, "GET", gjson.Get(line, "method").String())
	require.Equal(t, "/test/logs", gjson.Get(line, "path").String())
	require.Equal(t, int64(200), gjson.Get(line, "status").Int())
	require.Equal(t, int64(2), gjson.Get(line, "bytes_out").Int())
	require.True(t, gjson.Get(line, "duration").Exists())
	require.Equal(t, "info", gjson.Get(line, "level").String())
	logLine(t, b.log.String(), rid, "from the handler")

	w2 := b.do(t, "sk-master", "GET", "/test/logs", "")
	require.NotEqual(t, rid, w2.Header().Get(echo.HeaderXRequestID), "ids are not reused")

	req := httptest.NewRequest("GET", "/test/logs", nil)
	req.Header.Set("Authorization", "Bearer sk-master")
	req.Header.Set("X-Request-ID", "client-chosen-id")
	rec := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(rec, req)
	require.Equal(t, "client-chosen-id", rec.Header().Get(echo.HeaderXRequestID))
	logLine(t, b.log.String(), "client-chosen-id", "request")

	w = b.do(t, "sk-master", "GET", "/test/panics", "")
	require.Equal(t, 500, w.Code)
	rid = w.Header().Get(echo.HeaderXRequestID)
	p := logLine(t, b.log.String(), rid, "panic")
	require.Equal(t, "boom", gjson.Get(p, "error").String())
	require.Contains(t, gjson.Get(p, "stack").String(), "goroutine")
	require.Equal(t, "warn", gjson.Get(logLine(t, b.log.String(), rid, "request"), "level").String())
}
