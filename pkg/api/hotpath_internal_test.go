package api

import (
	"errors"
	"io"
	"lockstep/pkg/format"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
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

// scanRequest finds what gjson.Get finds: nested "metadata.guardrails" and end user fields,
// escaped keys, null and non-string values. A repeated key (at any depth) is refused in the
// same pass (TestScanRequestChecked).
func TestScanRequest(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi","model":"no"}],"stream":true,"user":"u1"}`,
		`{"mod\u0065l":"esc","str\u0065am":true}`,
		`{"model":null,"user":42,"guardrails":["g1",{"name":"g2"}],"metadata":{"guardrails":["g3"],"x":1}}`,
		`{"litellm_metadata":{"user":"lu"},"metadata":{"user_id":"mu","x":"second"},"safety_identifier":"si","user":""}`,
		`{"litellm_metadata":"x","metadata":[1],"safety_identifier":7}`,
		`{"metadata":"text","guardrails":null}`,
		`{"metadata":{"guardrails":null}}`,
		`{"model":7}`, `{}`, `[{"model":"x"}]`, ` {"model":"space"}`,
	} {
		rf := scanRequest([]byte(body))
		members := map[string]gjson.Result{"model": rf.model, "stream": rf.stream,
			"guardrails": rf.guardrails, "metadata.guardrails": rf.metaGuardrails}
		for i, path := range endUserFields {
			members[path] = rf.endUser[i]
		}
		for path, got := range members {
			want := gjson.Get(body, path)
			if !isJSONObject([]byte(body)) {
				want = gjson.Result{}
			}
			require.Equal(t, want.Exists(), got.Exists(), "%s in %s", path, body)
			require.Equal(t, want.Type, got.Type, "%s in %s", path, body)
			require.Equal(t, want.Raw, got.Raw, "%s in %s", path, body)
			require.Equal(t, want.String(), got.String(), "%s in %s", path, body)
		}
	}
}

// scanRequestChecked refuses what jsonscan refuses, in the route's envelope text (bodyError),
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
		rf, err := scanRequestChecked([]byte(body))
		require.False(t, rf.model.Exists(), body)
		var ae *Error
		require.ErrorAs(t, bodyError(format.FormatChat, err), &ae, body)
		require.Equal(t, 400, ae.Status, body)
		require.Equal(t, want, ae.Message, body)
	}
}

// One pass over a chat body's top level against a gjson.Get per member (each absent member
// scans the whole body), for a short request and one with a long history.
//
//	go test ./pkg/api -run '^$' -bench ScanRequest
func BenchmarkScanRequest(b *testing.B) {
	short := []byte(`{"model":"bench-chat","messages":[{"role":"user","content":"Say hello in one short sentence."}]}`)
	var long strings.Builder
	long.WriteString(`{"model":"bench-chat","messages":[`)
	for i := range 200 {
		if i > 0 {
			long.WriteByte(',')
		}
		long.WriteString(`{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 10) + `"}`)
	}
	long.WriteString(`],"stream":true}`)
	for name, body := range map[string][]byte{"short": short, "long": []byte(long.String())} {
		b.Run(name+"/one-pass", func(b *testing.B) {
			for range b.N {
				_ = scanRequest(body)
			}
		})
		b.Run(name+"/checked", func(b *testing.B) { // the route's one pass: check and scan
			b.ReportAllocs()
			for range b.N {
				if _, err := scanRequestChecked(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/valid-then-foreach", func(b *testing.B) { // before jsonscan: two passes
			b.ReportAllocs()
			for range b.N {
				_ = gjson.ValidBytes(body)
				gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool { return true })
			}
		})
		b.Run(name+"/get-each", func(b *testing.B) {
			for range b.N {
				for _, p := range []string{"model", "stream", "guardrails", "metadata.guardrails", "user", "litellm_metadata.user", "metadata.user_id", "safety_identifier"} {
					_ = gjson.GetBytes(body, p)
				}
			}
		})
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
