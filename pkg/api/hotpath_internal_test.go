package api

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	pipeline "lockstep/pkg/call"
	"lockstep/pkg/format"
)

// readBody reads what io.ReadAll reads, whatever Content-Length says, with one allocation
// when it is right.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 3000)
	for _, cl := range []int64{-1, 0, 1, 2999, 3000, 3001, 1 << 20} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		req.ContentLength = cl
		got, err := readBody(req)
		require.NoError(t, err, "Content-Length %d", cl)
		require.Equal(t, body, string(got), "Content-Length %d", cl)
	}
	// a read error is returned with what was read, as io.ReadAll does
	req := httptest.NewRequest("POST", "/", io.MultiReader(strings.NewReader("abc"), errReader{}))
	req.ContentLength = 10
	got, err := readBody(req)
	require.ErrorIs(t, err, errBoom)
	require.Equal(t, "abc", string(got))

	req = httptest.NewRequest("POST", "/", strings.NewReader(body))
	allocs := testing.AllocsPerRun(20, func() {
		req.Body = io.NopCloser(strings.NewReader(body))
		_, _ = readBody(req)
	})
	require.LessOrEqual(t, allocs, 3.0) // the body, and the test's own reader and NopCloser
}

var errBoom = errors.New("boom")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBoom }

// pipeline.ScanChecked refuses what jsonscan refuses, in the route's envelope text (bodyError),
// and reads nothing from a refused body.
func TestScanRequestChecked(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"model":"cheap","messages":[],"model":"gpt-4-expensive"}`:              `duplicate member "model" at model`,
		`{"model":"cheap","mod\u0065l":"x"}`:                                     `duplicate member "model" at model`,
		`{"model":"m","metadata":{"user_id":"a","user_id":"b"}}`:                 `duplicate member "user_id" at metadata.user_id`,
		`{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}`: `duplicate member "content" at messages[0].content`,
		strings.Repeat("[", 200):                                                 "JSON nesting deeper than the limit of 128 levels",
		"{\"model\":\"m\xff\"}":                                                  "invalid UTF-8 in a JSON string at byte offset 11",
		`{"model":"m",}`:                                                         "/chat/completions: malformed JSON body: expected a JSON object",
	} {
		rf, err := pipeline.ScanChecked([]byte(body))
		require.False(t, rf.Model.Exists(), body)
		var ae *Error
		require.ErrorAs(t, bodyError(format.FormatChat, err), &ae, body)
		require.Equal(t, 400, ae.Status, body)
		require.Equal(t, want, ae.Message, body)
	}
}

// The API key headers are read without allocating (canonical names), in their order.
func TestBearerHeaders(t *testing.T) {
	e := echo.New()
	for _, tc := range []struct{ header, value, want string }{
		{"Authorization", "Bearer sk-1", "sk-1"}, {"authorization", "bearer sk-2", "sk-2"},
		{"x-api-key", " sk-3 ", "sk-3"}, {"api-key", "sk-4", "sk-4"}, {"X-Other", "sk-5", ""},
	} {
		req := httptest.NewRequest("POST", "/", nil)
		req.Header.Set(tc.header, tc.value)
		c := e.NewContext(req, httptest.NewRecorder())
		require.Equal(t, tc.want, bearer(c), tc.header)
		if tc.want != "" {
			require.Zero(t, testing.AllocsPerRun(10, func() { _ = bearer(c) }), tc.header)
		}
	}
}
