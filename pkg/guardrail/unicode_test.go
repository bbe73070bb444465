package guardrail

import (
	"fmt"
	"regexp/syntax"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// pythonSpaces is [c for c in range(0x110000) if chr(c).isspace()] in CPython 3.11: Python's
// \s on str patterns.
var pythonSpaces = []rune{0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0,
	0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009,
	0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000}

func TestPySpaceMatchesPython(t *testing.T) {
	t.Parallel()
	want := map[rune]bool{}
	for _, r := range pythonSpaces {
		want[r] = true
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if isPySpace(r) != want[r] {
			t.Fatalf("isPySpace(%U) = %v, Python: %v", r, isPySpace(r), want[r])
		}
	}
}

func TestNdRuns(t *testing.T) {
	t.Parallel()
	starts := ndRuns()
	for i, s := range starts {
		n := 0
		for r := s; unicode.Is(unicode.Nd, r); r++ {
			n++
		}
		require.Zero(t, n%10, "Nd run at %U has %d digits", s, n)
		if i > 0 {
			require.Less(t, starts[i-1], s)
		}
	}
	for s, v := range map[string]int{"0": 0, "7": 7, "０": 0, "９": 9, "٣": 3, "۸": 8, "५": 5, "𝟕": 7, "𝟡": 9} {
		got, w := digitAt(s, 0)
		require.Equal(t, len(s), w, s)
		require.Equal(t, v, got, s)
	}
	for _, s := range []string{"a", "²", "½", "Ⅻ", "é", "一"} { // not Nd
		_, w := digitAt(s, 0)
		require.Zero(t, w, s)
	}
}

// unicodeSpaces are the spaces of issue 17 input 9, as pasted from web pages and PDFs.
var unicodeSpaces = []string{"\u00a0", "\u2009", "\u202f", "\u3000"}

// TestPrebuiltUnicodeDigitsAndSpaces: LiteLLM's patterns use Python's \s and \d, so a card
// number with no-break or thin spaces between its groups, or an SSN in full-width digits, is
// a match (issue 17 input 9).
func TestPrebuiltUnicodeDigitsAndSpaces(t *testing.T) {
	t.Parallel()
	card := maskPattern(t, "credit_card")
	visa := maskPattern(t, "visa")
	amex := maskPattern(t, "amex")
	ssn := maskPattern(t, "us_ssn")
	ssnNoDash := maskPattern(t, "us_ssn_no_dash")
	phone := maskPattern(t, "us_phone")
	for _, sp := range unicodeSpaces {
		in := fmt.Sprintf("card 4111%[1]s1111%[1]s1111%[1]s1111 done", sp)
		for _, g := range []*Guardrail{card, visa} {
			out, err := g.Check(in)
			require.NoError(t, err)
			require.NotContains(t, out, "1111", "%q", in)
		}
		out, _ := amex.Check(fmt.Sprintf("amex 3782%[1]s822463%[1]s10005.", sp))
		require.Equal(t, "amex [AMEX_REDACTED].", out, "%q", sp)
		out, _ = ssn.Check(fmt.Sprintf("ssn 123%[1]s45%[1]s6789", sp))
		require.Equal(t, "ssn [US_SSN_REDACTED]", out, "%q", sp)
		out, _ = phone.Check(fmt.Sprintf("call 555%[1]s123%[1]s4567 now", sp))
		require.Equal(t, "call [US_PHONE_REDACTED] now", out, "%q", sp)
	}
	for in, want := range map[string]string{
		"SSN １２３-４５-６７８９ ok":          "SSN [US_SSN_REDACTED] ok",
		"SSN ١٢٣-٤٥-٦٧٨٩":             "SSN [US_SSN_REDACTED]",
		"SSN １２３\u3000４５\u3000６７８９":   "SSN [US_SSN_REDACTED]",
		"SSN ０００-４５-６７８９":             "SSN ０００-４５-６７８９", // SSA rules hold for any digits
		"SSN １２３-４５-６７８９１":            "SSN １２３-４５-６７８９１",
		"x１２３-４５-６７８９":                "x１２３-４５-６７８９", // no \b: 'x' is a word character
		"card ４１１１ １１１１ １１１１ １１１１ ok": "card [CREDIT_CARD_REDACTED] ok",
	} {
		g := ssn
		if want[:4] == "card" {
			g = card
		}
		out, err := g.Check(in)
		require.NoError(t, err)
		require.Equal(t, want, out, "%q", in)
	}
	out, _ := ssnNoDash.Check("id １２３４５６７８９.")
	require.Equal(t, "id [US_SSN_NO_DASH_REDACTED].", out)

	// BLOCK sees them too.
	g := compile(t, `{"guardrail": "litellm_content_filter", "patterns": [
		{"pattern_type": "prebuilt", "pattern_name": "credit_card", "action": "BLOCK"},
		{"pattern_type": "prebuilt", "pattern_name": "us_ssn", "action": "BLOCK"}]}`)
	for _, in := range []string{"pay 4111\u00a01111\u00a01111\u00a01111", "SSN １２３-４５-６７８９"} {
		_, err := g.Check(in)
		var be *BlockedError
		require.ErrorAs(t, err, &be, "%q", in)
	}
}

func TestTranslatePy(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`abc`:           `abc`,
		`\d{3}`:         `\p{Nd}{3}`,
		`[\d\s-]`:       `[\p{Nd}` + pySpaceClass + `-]`,
		`\s+\S\w\W\D`:   `[` + pySpaceClass + `]+[^` + pySpaceClass + `][` + pyWordClass + `][^` + pyWordClass + `]\P{Nd}`,
		`\\d`:           `\\d`,
		`\Q\d\E\d`:      `\Q\d\E\p{Nd}`,
		`[]\d]`:         `[]\p{Nd}]`,
		`[^]\s]`:        `[^]` + pySpaceClass + `]`,
		`[[:alpha:]\d]`: `[[:alpha:]\p{Nd}]`,
		`\bx\b`:         `\bx\b`,
	} {
		require.Equal(t, want, translatePy(in), in)
	}
	// A negated class inside a class becomes explicit ranges.
	p, err := compilePy(`[\S]+`)
	require.NoError(t, err)
	require.Equal(t, []string{"a\u00e9"}, p.re.FindAllString("a\u00e9\u00a0", -1))
	p, err = compilePy(`[\W]`)
	require.NoError(t, err)
	require.Equal(t, []string{"\u00a0", "-"}, p.re.FindAllString("a\u00a0é١_-", -1))
}

// TestCustomRegexPython: a custom regex means what it means to Python's re (LiteLLM compiles
// it with re.IGNORECASE): Unicode \d, \s, \w and \b. Expected outputs checked with CPython
// 3.11 re.sub.
func TestCustomRegexPython(t *testing.T) {
	t.Parallel()
	tests := []struct{ expr, in, want string }{
		{`\b\d{3}-\d{2}-\d{4}\b`, "SSN １２３-４５-６７８９ ok", "SSN [X] ok"},
		{`\b\d{3}-\d{2}-\d{4}\b`, "SSN 123-45-67890", "SSN 123-45-67890"},
		{`\b\d{3}-\d{2}-\d{4}\b`, "é123-45-6789", "é123-45-6789"}, // é is \w: no \b
		{`\d{3}-\d{2}-\d{4}\b`, "123-45-6789é 123-45-6789", "123-45-6789é [X]"},
		{`card\s+\d{4}`, "card\u00a04111", "[X]"},
		{`card\s+\d{4}`, "card\u3000４１１１", "[X]"},
		{`\bEMP-\d{6}\b`, "id EMP-１２３４５６.", "id [X]."},
		{`\bEMP-\d{6}\b`, "id EMP-１２３４５６７", "id EMP-１２３４５６７"},
		{`\b\w+@\w+\.com\b`, "mail josé@café.com now", "mail [X] now"},
		{`[^\s]+@x\.io`, "to\u00a0me@x.io", "to\u00a0[X]"},
		{`\bab|a\b`, "a ab", "[X] [X]"},
		{`\b(a|ab)\b`, "ab", "[X]"}, // Python backtracks into the group for the \b
		{`\bkey[\s:=]+\w{4}['"]?\b`, "key: abcd'", "[X]'"},
	}
	for _, tt := range tests {
		g := compile(t, fmt.Sprintf(`{"guardrail": "litellm_content_filter", "pattern_redaction_format": "[X]",
			"patterns": [{"pattern_type": "regex", "pattern": %q, "action": "MASK"}]}`, tt.expr))
		out, err := g.Check(tt.in)
		require.NoError(t, err)
		require.Equal(t, tt.want, out, "%s on %q", tt.expr, tt.in)
	}
}

// FuzzCompilePy: every expression Go accepts is still accepted after the rewrite to Python's
// classes, and its matches are ordered, non-overlapping and on rune boundaries.
func FuzzCompilePy(f *testing.F) {
	for _, s := range []string{`\b\d{3}-\d{2}-\d{4}\b`, `[\S\W]+`, `\Q\d\E[^]\s]`, `(?i)\bab|a\b`, `[[:alpha:]\D]\w*\b`} {
		f.Add(s, "SSN １２３-４５-６７８９ ok 4111\u00a01111 ab a")
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		if len(expr) > 200 {
			return
		}
		if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
			return
		}
		p, err := compilePy(expr)
		if err != nil {
			t.Fatalf("%q accepted by Go, refused after translation %q: %v", expr, translatePy(expr), err)
		}
		end := 0
		for _, s := range p.findAll(text, 0, nil) {
			if s.start < end || s.end <= s.start || s.end > len(text) ||
				!utf8.RuneStart(text[s.start]) || (s.end < len(text) && !utf8.RuneStart(text[s.end])) {
				if utf8.ValidString(text) {
					t.Fatalf("%q on %q: bad span %+v", expr, text, s)
				}
			}
			end = s.end
		}
	})
}
