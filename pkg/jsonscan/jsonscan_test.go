package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func kindOf(err error) Kind {
	var je *Error
	if errors.As(err, &je) {
		return je.Kind
	}
	return 0
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		kind Kind
		msg  string
	}{
		{`{}`, 0, ""},
		{` {"a":[1,-0.5e+3,true,false,null,"x\u00e9\n"],"b":{}} `, 0, ""},
		{`"top"`, 0, ""},
		{`[]`, 0, ""},
		{``, Syntax, "invalid JSON at byte offset 0"},
		{`{"a":1,}`, Syntax, "invalid JSON at byte offset 7"},
		{`{"a" 1}`, Syntax, ""},
		{`[01]`, Syntax, ""},
		{`[1.]`, Syntax, ""},
		{`[1e]`, Syntax, ""},
		{`[-]`, Syntax, ""},
		{`[+1]`, Syntax, ""},
		{`[.5]`, Syntax, ""},
		{`["\x"]`, Syntax, ""},
		{`["\u12g4"]`, Syntax, ""},
		{"[\"a\tb\"]", Syntax, ""},
		{`[tru]`, Syntax, ""},
		{`{} {}`, Syntax, ""},
		{`{"a":1]`, Syntax, ""},
		{`[1}`, Syntax, ""},
		{"\xef\xbb\xbf{}", Syntax, ""},
		{`{"model":"a","messages":[],"model":"b"}`, Duplicate, `duplicate member "model" at model`},
		{`{"model":"a","mod\u0065l":"b"}`, Duplicate, `duplicate member "model" at model`},
		{`{"m\u006fdel":"a","mod\u0065l":"b"}`, Duplicate, `duplicate member "model" at model`},
		{`{"messages":[{"role":"user","content":"a"},{"content":"b","role":"user","content":"c"}]}`,
			Duplicate, `duplicate member "content" at messages[1].content`},
		{`{"metadata":{"x-tag":{"a":1,"a":2}}}`, Duplicate, `duplicate member "a" at metadata["x-tag"].a`},
		{`[[{"q\"":1,"q\"":2}]]`, Duplicate, `duplicate member "q\"" at [0][0]["q\""]`},
		{`{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":1}]}`, 0, ""}, // same names, other objects
		{`{"\ud83d\ude00":1,"😀":2}`, Duplicate, `duplicate member "😀" at ["😀"]`},
		{`{"\ud800":1,"\ud801":2}`, Duplicate, "duplicate member \"\uFFFD\" at [\"\uFFFD\"]"}, // as encoding/json reads them
		{"[\"\xff\"]", InvalidUTF8, "invalid UTF-8 in a JSON string at byte offset 2"},
		{"{\"k\xc3\":1}", InvalidUTF8, ""},
		{"[\"\xed\xa0\x80\"]", InvalidUTF8, ""}, // a surrogate written in UTF-8
		{"[\"\xc0\xaf\"]", InvalidUTF8, ""},     // overlong
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), 0, ""},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), TooDeep,
			"JSON nesting deeper than the limit of 128 levels"},
		{strings.Repeat(`{"a":`, MaxDepth+1), TooDeep, ""},
		{strings.Repeat("[", 12<<20), TooDeep, ""},
	} {
		err := Check([]byte(tc.body))
		name := tc.body
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		require.Equal(t, tc.kind, kindOf(err), "%s: %v", name, err)
		if tc.msg != "" {
			require.EqualError(t, err, tc.msg, name)
		}
		if tc.kind == 0 || tc.kind == Syntax {
			require.Equal(t, json.Valid([]byte(tc.body)), err == nil, name)
		}
	}
}

// A long name is cut in the message (not in Error.Name).
func TestLongNameClipped(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 100) // 200 bytes
	err := Check([]byte(`{"` + long + `":{"` + long + `":1,"` + long + `":2}}`))
	cut := strings.Repeat("é", 64) + "…"
	require.EqualError(t, err, `duplicate member "`+cut+`" at ["`+cut+`"]["`+cut+`"]`)
	var je *Error
	require.ErrorAs(t, err, &je)
	require.Equal(t, long, je.Name)
}

// CheckNesting is Check without the duplicate rule.
func TestCheckNesting(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckNesting([]byte(`{"a":1,"a":{"b":2,"b":3}}`)))
	require.NoError(t, Check([]byte(`{"a":1}`)), "the pooled scanner is reset")
	require.Error(t, Check([]byte(`{"a":1,"a":2}`)), "the pooled scanner is reset")
	require.Equal(t, TooDeep, kindOf(CheckNesting([]byte(`{"a":1,"a":`+strings.Repeat("[", 200)))))
	require.Equal(t, InvalidUTF8, kindOf(CheckNesting([]byte("[\"\xff\"]"))))
	require.Equal(t, Syntax, kindOf(CheckNesting([]byte(`{"a":}`))))
}

// An object of many members keeps its names in a map: a duplicate far apart is found, and a
// long object without one is valid.
func TestLargeObject(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(`{"messages":[{"role":"user"},{`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `_` + strconv.Itoa(i) + `":1`)
	}
	valid := b.String() + `}]}`
	require.NoError(t, Check([]byte(valid)))
	dup := b.String() + `,"k\u0078b_1":2}]}` // "kxb_1" is member 1
	require.EqualError(t, Check([]byte(dup)), `duplicate member "kxb_1" at messages[1].kxb_1`)
}

// Scan reports every top-level member, unescaped, with its raw value.
func TestScanMembers(t *testing.T) {
	t.Parallel()
	var got []string
	err := Scan([]byte(` { "model" : "m" , "mess\u0061ges":[{"a":1}],"n":-1.5e3,"o":{"p":[]} } `), func(name, value []byte) {
		got = append(got, string(name)+"="+string(value))
	})
	require.NoError(t, err)
	require.Equal(t, []string{`model="m"`, `messages=[{"a":1}]`, `n=-1.5e3`, `o={"p":[]}`}, got)
	got = nil
	require.NoError(t, Scan([]byte(`[{"a":1}]`), func(name, value []byte) { got = append(got, string(name)) }))
	require.Empty(t, got) // not a top-level object
}

// A valid body without escaped names costs no allocation.
func TestNoAllocs(t *testing.T) {
	body := chatBody(4 << 10)
	require.NoError(t, Check(body))
	allocs := testing.AllocsPerRun(100, func() { _ = Check(body) })
	require.Zero(t, allocs)
}

// ref is an independent reading of body with encoding/json's tokenizer: its depth, whether an
// object repeats a name (as encoding/json unescapes it), and whether it is JSON at all.
func ref(body []byte) (valid bool, depth int, dup bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type obj struct {
		names   map[string]bool
		wantKey bool
	}
	var stack []*obj
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return json.Valid(body), depth, dup
		}
		if err != nil {
			return false, depth, dup
		}
		var top *obj
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.wantKey {
			if s, ok := tok.(string); ok {
				if top.names[s] {
					dup = true
				}
				top.names[s] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if top != nil && top.names != nil {
				top.wantKey = true
			}
			o := &obj{}
			if tok == json.Delim('{') {
				o.names, o.wantKey = map[string]bool{}, true
			}
			stack = append(stack, o)
			depth = max(depth, len(stack))
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].names != nil {
				stack[len(stack)-1].wantKey = true
			}
		default:
			if top != nil && top.names != nil {
				top.wantKey = true
			}
		}
	}
}

// FuzzCheck compares Check with encoding/json: a body Check accepts is valid JSON (json.Valid),
// of depth <= MaxDepth, without a repeated name, in UTF-8; a body it refuses is refused for
// the right reason.
//
//	go test ./pkg/jsonscan -run '^$' -fuzz FuzzCheck -fuzztime 60s
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,2,{"c":"d"}]}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
		`[-0.0e+10, 1E5, 0.5, -12]`, `[01]`, `"\ud83d\ude00"`, "[\"\xff\"]", `[[[[[[]]]]]]`, `{"a":{"a":{"b":1,"b":2}}}`,
		`[1e400]`, `[true,false,null]`, `{"x":"\u0000\/\b\f\n\r\t\\\""}`, string(chatBody(300))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := Check(body)
		valid, depth, dup := ref(body)
		if err == nil {
			if !valid || depth > MaxDepth || dup || !utf8.Valid(body) {
				t.Fatalf("accepted %q: json.Valid %v depth %d dup %v", body, valid, depth, dup)
			}
			return
		}
		switch kindOf(err) {
		case Syntax:
			if valid {
				t.Fatalf("%q: %v, but json.Valid", body, err)
			}
		case TooDeep:
			if valid && depth <= MaxDepth {
				t.Fatalf("%q: %v, but depth %d", body, err, depth)
			}
		case Duplicate:
			if valid && !dup {
				t.Fatalf("%q: %v, but no repeated name", body, err)
			}
		case InvalidUTF8:
			if utf8.Valid(body) {
				t.Fatalf("%q: %v, but valid UTF-8", body, err)
			}
		default:
			t.Fatalf("%q: untyped error %v", body, err)
		}
	})
}

// chatBody is a chat request of about n bytes: a system prompt and turns of plain text.
func chatBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-4o-mini","stream":true,"temperature":0.7,"max_tokens":512,"user":"u-123",` +
		`"metadata":{"guardrails":["pii"],"tags":["a","b"]},"messages":[{"role":"system","content":"You are a helpful assistant."}`)
	for i := 0; b.Len() < n-120; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b.WriteString(`,{"role":"` + role + `","content":"The quick brown fox jumps over the lazy dog; ` +
			`café ≥ naïve, 12345 numbers and some more words to read."}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkCheck: the one body pass on a 4 KB and a 1 MB chat body.
//
//	go test ./pkg/jsonscan -run '^$' -bench Check -benchmem
func BenchmarkCheck(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"4KB", 4 << 10}, {"1MB", 1 << 20}} {
		body := chatBody(size.n)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := Check(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"-gjson.ValidBytes", func(b *testing.B) { // the check it replaces
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if !gjson.ValidBytes(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
