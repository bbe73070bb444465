package guardrail

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

const mixedParams = `{
	"guardrail": "litellm_content_filter",
	"mode": ["pre_call", "post_call"],
	"patterns": [
		{"pattern_type": "prebuilt", "pattern_name": "email", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "credit_card", "action": "MASK"},
		{"pattern_type": "prebuilt", "pattern_name": "us_ssn", "action": "BLOCK"},
		{"pattern_type": "regex", "pattern": "\\bcase-\\d+\\b", "name": "case_id", "action": "BLOCK"}
	],
	"blocked_words": [
		{"keyword": "john", "action": "MASK"},
		{"keyword": "id 4111", "action": "MASK"},
		{"keyword": "forbidden", "action": "BLOCK"},
		{"keyword": "ssn", "action": "MASK"}
	]
}`

func TestCheck(t *testing.T) {
	t.Parallel()
	g := compile(t, mixedParams)

	tests := []struct {
		name, in, want, blocked string
	}{
		{name: "empty", in: "", want: ""},
		{name: "no match", in: "hello world", want: "hello world"},
		{name: "pattern and keyword", in: "mail john at a@b.io", want: "mail [KEYWORD_REDACTED] at [EMAIL_REDACTED]"},
		{name: "keyword inside pattern: pattern starts first", in: "x john.doe@example.com", want: "x [EMAIL_REDACTED]"},
		{name: "same start: longer wins", in: "john@example.com", want: "[EMAIL_REDACTED]"},
		{name: "keyword starts first, spans into pattern", in: "id 4111 1111 1111 1111!", want: "[KEYWORD_REDACTED]!"},
		{name: "block wins over mask", in: "a@b.io then forbidden", blocked: "Content blocked: keyword 'forbidden' detected"},
		{name: "first block by position: pattern", in: "ssn 123-45-6789 and forbidden", blocked: "Content blocked: us_ssn pattern detected"},
		{name: "first block by position: keyword", in: "forbidden, then 123-45-6789", blocked: "Content blocked: keyword 'forbidden' detected"},
		{name: "first block by position: regex", in: "CASE-42 and forbidden", blocked: "Content blocked: case_id pattern detected"},
		{name: "masked ssn keyword next to blocked ssn", in: "SSN: 078-05-1120", blocked: "Content blocked: us_ssn pattern detected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := g.Check(tt.in)
			if tt.blocked != "" {
				var be *BlockedError
				require.ErrorAs(t, err, &be)
				require.EqualError(t, err, tt.blocked)
				require.Equal(t, "test-guard", be.Guardrail)
				require.Empty(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCheckBlockTieGoesToPattern(t *testing.T) {
	t.Parallel()
	g := compile(t, `{"guardrail": "litellm_content_filter",
		"blocked_words": [{"keyword": "4111", "action": "BLOCK"}],
		"patterns": [{"pattern_type": "prebuilt", "pattern_name": "credit_card", "action": "BLOCK"}]}`)
	_, err := g.Check("card 4111111111111111")
	require.EqualError(t, err, "Content blocked: credit_card pattern detected")
}

func TestZeroGuardrail(t *testing.T) {
	t.Parallel()
	var g Guardrail
	out, err := g.Check("anything a@b.io")
	require.NoError(t, err)
	require.Equal(t, "anything a@b.io", out)
	require.False(t, g.Runs(PreCall))
}

// TestCheckNoMatchDoesNotAllocate guards the hot-path promise of Check. Not parallel:
// testing.AllocsPerRun refuses to run in a parallel test.
func TestCheckNoMatchDoesNotAllocate(t *testing.T) {
	g := compile(t, benchParams)
	text := benchText(false)
	out, err := g.Check(text)
	require.NoError(t, err)
	require.Equal(t, text, out)
	allocs := testing.AllocsPerRun(20, func() {
		_, _ = g.Check(text)
	})
	require.Zero(t, allocs)
}

func TestCheckConcurrent(t *testing.T) {
	t.Parallel()
	g := compile(t, benchParams)
	text := benchText(true)
	want, err := g.Check(text)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(want, "Reach me at [EMAIL_REDACTED] or [US_PHONE_REDACTED]; this is [KEYWORD_REDACTED].\n"), want)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				got, err := g.Check(text)
				if err != nil || got != want {
					t.Errorf("concurrent Check: got %q, %v", got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzCheck checks invariants on arbitrary input: no panic, and valid UTF-8 stays valid (no rune
// is split by a replacement).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"", "a@b.io", "4111 1111 1111 1111", "пароль 123-45-6789", "\xff\xfe", "pass word", "ghp_x", "1.2.3.4.5"} {
		f.Add(s)
	}
	g, err := Compile("fuzz", []byte(benchParams))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := g.Check(s)
		if err != nil {
			return
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Check(%q) = %q: invalid UTF-8", s, out)
		}
	})
}

// SafeCut moves a cut back to before any match that spans it, so a streamed answer released
// piece by piece never splits a value a MASK rule would replace.
func TestSafeCut(t *testing.T) {
	t.Parallel()
	g, err := Compile("g", []byte(`{"guardrail":"litellm_content_filter","mode":"post_call","patterns":[{"pattern_type":"prebuilt","pattern_name":"email","action":"MASK"}],"blocked_words":[{"keyword":"alpha bravo","action":"MASK"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	text := "mail bob@example.com and alpha bravo now"
	at := strings.Index(text, "bob")
	for _, tc := range []struct{ cut, want int }{
		{0, 0}, {3, 3}, {at, at}, {at + 3, at}, {at + 16, at + 16},
		{strings.Index(text, "bravo"), strings.Index(text, "alpha")}, {len(text), len(text)},
	} {
		if got := g.SafeCut(text, tc.cut); got != tc.want {
			t.Errorf("SafeCut(%d) = %d, want %d", tc.cut, got, tc.want)
		}
	}
	if !g.Masks() {
		t.Error("Masks() = false for a guardrail with MASK rules")
	}
}
