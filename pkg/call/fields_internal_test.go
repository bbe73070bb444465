package call

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Scan finds what gjson.Get finds: nested "metadata.guardrails" and end user fields,
// escaped keys, null and non-string values. A repeated key (at any depth) is refused in the
// same pass (pkg/api TestScanRequestChecked).
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
		rf := Scan([]byte(body))
		members := map[string]gjson.Result{"model": rf.Model, "stream": rf.Stream,
			"guardrails": rf.guardrails, "metadata.guardrails": rf.metaGuardrails}
		for i, path := range endUserFields {
			members[path] = rf.endUser[i]
		}
		for path, got := range members {
			want := gjson.Get(body, path)
			if !isObject([]byte(body)) {
				want = gjson.Result{}
			}
			require.Equal(t, want.Exists(), got.Exists(), "%s in %s", path, body)
			require.Equal(t, want.Type, got.Type, "%s in %s", path, body)
			require.Equal(t, want.Raw, got.Raw, "%s in %s", path, body)
			require.Equal(t, want.String(), got.String(), "%s in %s", path, body)
		}
	}
}

// isObject reports whether body's first non-space byte opens an object.
func isObject(body []byte) bool {
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

// One pass over a chat body's top level against a gjson.Get per member (each absent member
// scans the whole body), for a short request and one with a long history.
//
//	go test ./pkg/call -run '^$' -bench ScanRequest
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
				_ = Scan(body)
			}
		})
		b.Run(name+"/checked", func(b *testing.B) { // the route's one pass: check and scan
			b.ReportAllocs()
			for range b.N {
				if _, err := ScanChecked(body); err != nil {
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
