package guardrail

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func keywordGuard(t *testing.T, action string, keywords ...string) *Guardrail {
	t.Helper()
	words := make([]map[string]string, len(keywords))
	for i, k := range keywords {
		words[i] = map[string]string{"keyword": k, "action": action}
	}
	params, err := json.Marshal(map[string]any{"guardrail": "litellm_content_filter", "blocked_words": words})
	require.NoError(t, err)
	return compile(t, string(params))
}

func TestKeywordMask(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		keywords []string
		in, want string
	}{
		{"case-insensitive", []string{"secret"}, "The SECRET is Secret", "The [KEYWORD_REDACTED] is [KEYWORD_REDACTED]"},
		{"substring", []string{"secret"}, "secretary", "[KEYWORD_REDACTED]ary"},
		{"keyword upper-case", []string{"SeCrEt"}, "a secret", "a [KEYWORD_REDACTED]"},
		{"phrase", []string{"top secret"}, "TOP SECRET plan, top  secret", "[KEYWORD_REDACTED] plan, top  secret"},
		{"no match", []string{"secret"}, "nothing to see", "nothing to see"},
		{"adjacent", []string{"secret"}, "secretsecret", "[KEYWORD_REDACTED][KEYWORD_REDACTED]"},
		{"self-overlap merged", []string{"aa"}, "xaaay", "x[KEYWORD_REDACTED]y"},
		{"overlapping keywords merged", []string{"abc", "bcd"}, "-abcd-", "-[KEYWORD_REDACTED]-"},
		{"nested keywords merged", []string{"password", "word"}, "password", "[KEYWORD_REDACTED]"},
		{"shared suffix (AC output links)", []string{"she", "he", "hers"}, "ushers", "u[KEYWORD_REDACTED]"},
		{"duplicate keyword", []string{"x1", "X1"}, "ax1b", "a[KEYWORD_REDACTED]b"},

		// Unicode: simple case folding, multi-byte offsets, emoji, invalid UTF-8.
		{"cyrillic", []string{"пароль"}, "Мой ПАРОЛЬ: 123", "Мой [KEYWORD_REDACTED]: 123"},
		{"german sharp s", []string{"straße"}, "Die STRAẞE, die Straße", "Die [KEYWORD_REDACTED], die [KEYWORD_REDACTED]"},
		{"sharp s is not ss", []string{"straße"}, "STRASSE", "STRASSE"},
		{"greek final sigma", []string{"σοφός"}, "ΣΟΦΌΣ!", "[KEYWORD_REDACTED]!"},
		{"kelvin sign folds to k", []string{"kelvin"}, "\u212Aelvin", "[KEYWORD_REDACTED]"},
		{"long s folds to s", []string{"sun"}, "ſun", "[KEYWORD_REDACTED]"},
		{"turkish dotted I does not fold (as Python lower)", []string{"istanbul"}, "İSTANBUL ISTANBUL", "İSTANBUL [KEYWORD_REDACTED]"},
		{"turkish dotless i does not fold", []string{"kırmızı"}, "KIRMIZI kırmızı", "KIRMIZI [KEYWORD_REDACTED]"},
		{"emoji around", []string{"secret"}, "🔥secret🔥", "🔥[KEYWORD_REDACTED]🔥"},
		{"emoji keyword", []string{"🔥fire"}, "a🔥FIRE!", "a[KEYWORD_REDACTED]!"},
		{"cjk", []string{"秘密"}, "这是秘密。", "这是[KEYWORD_REDACTED]。"},
		{"multi-byte before", []string{"secret"}, "ÄÖÜ secret ÄÖÜ", "ÄÖÜ [KEYWORD_REDACTED] ÄÖÜ"},
		{"invalid utf-8 around", []string{"secret"}, "\xffsecret\xfe", "\xff[KEYWORD_REDACTED]\xfe"},
		{"astral letters fold", []string{"𐐨𐐨"}, "𐐀𐐨", "[KEYWORD_REDACTED]"},

		// Wildcards: '*' is any run of non-space characters.
		{"wildcard middle", []string{"pass*word"}, "my password, pass123word, PASS_the_WORD", "my [KEYWORD_REDACTED], [KEYWORD_REDACTED], [KEYWORD_REDACTED]"},
		{"wildcard does not cross space", []string{"pass*word"}, "pass word, pass\u00a0word", "pass word, pass\u00a0word"},
		{"wildcard leading", []string{"*word"}, "passwords", "[KEYWORD_REDACTED]s"},
		{"wildcard trailing", []string{"pass*"}, "a passport b", "a [KEYWORD_REDACTED] b"},
		{"wildcard collapsed", []string{"a**b"}, "axxb ab", "[KEYWORD_REDACTED] [KEYWORD_REDACTED]"},
		{"wildcard unicode", []string{"пар*ль"}, "ПАРОООЛЬ", "[KEYWORD_REDACTED]"},
		{"wildcard prefilter miss", []string{"xyz*abc"}, "abc xyz", "abc xyz"},
		{"wildcard regex metachars quoted", []string{"a.b*(c)"}, "a.b-(c) axb(c)", "[KEYWORD_REDACTED] axb(c)"},
		{"wildcard and literal", []string{"pass*word", "secret"}, "secret password", "[KEYWORD_REDACTED] [KEYWORD_REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := keywordGuard(t, "MASK", tt.keywords...)
			got, err := g.Check(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestKeywordBlock(t *testing.T) {
	t.Parallel()

	g := compile(t, `{"guardrail": "litellm_content_filter", "blocked_words": [
		{"keyword": "Confidential", "action": "BLOCK", "description": "internal docs"},
		{"keyword": "pass*word", "action": "block"}]}`)

	_, err := g.Check("This is CONFIDENTIAL.")
	var be *BlockedError
	require.ErrorAs(t, err, &be)
	require.EqualError(t, err, "Content blocked: keyword 'confidential' detected")
	require.Equal(t, &BlockedError{
		Guardrail:   "test-guard",
		Message:     "Content blocked: keyword 'confidential' detected",
		Keyword:     "confidential",
		Description: "internal docs",
	}, be)

	_, err = g.Check("my Pass-Word")
	require.EqualError(t, err, "Content blocked: keyword 'pass*word' detected")

	out, err := g.Check("nothing here, pass word")
	require.NoError(t, err)
	require.Equal(t, "nothing here, pass word", out)
}

func TestFoldTable(t *testing.T) {
	t.Parallel()
	tab := foldTable()
	for r := range rune(len(tab)) {
		f := foldRune(r)
		require.Less(t, f, rune(0x10000), "BMP rune %U folds outside the BMP", r)
		require.Equal(t, f, rune(tab[r]))
	}
	// The fold agrees with strings.EqualFold (Unicode simple folding) on every rune.
	for r := rune(0); r <= unicode.MaxRune; r += 7 {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			require.Equal(t, foldRune(r), foldRune(f))
		}
	}
}

// TestKeywordScanMatchesNaive compares the automaton against a naive search over folded runes
// on random texts drawn from a small alphabet, so that overlaps and partial matches are common.
func TestKeywordScanMatchesNaive(t *testing.T) {
	t.Parallel()

	alphabet := []rune{'a', 'B', 'b', 'K', '\u212A', 'k', 'ß', 'ẞ', 'σ', 'Σ', 'ς', '🙂', ' ', 'я', 'Я', 'ſ', 'S'}
	rng := rand.New(rand.NewPCG(1, 2))
	randString := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(10) == 0 {
			b.WriteString("\xff")
		}
		return b.String()
	}
	for iter := range 300 {
		keywords := make([]string, 1+rng.IntN(6))
		for i := range keywords {
			keywords[i] = randString(1 + rng.IntN(3))
			for strings.TrimSpace(keywords[i]) == "" || strings.ContainsRune(keywords[i], utf8.RuneError) {
				keywords[i] = randString(1 + rng.IntN(3))
			}
		}
		g := keywordGuard(t, "MASK", keywords...)
		for range 20 {
			text := randString(rng.IntN(40))
			got := g.scanKeywords(text, nil, &scanState{})
			want := naiveKeywordSpans(text, keywords, len(g.patterns))
			sortSpans(got)
			sortSpans(want)
			require.Equal(t, want, got, "iter %d keywords %q text %q", iter, keywords, text)
		}
	}
}

func naiveKeywordSpans(text string, keywords []string, prio0 int) []span {
	type pos struct {
		r          rune
		start, end int
	}
	var runes []pos
	for i, r := range text {
		runes = append(runes, pos{foldRune(r), i, i + utf8.RuneLen(r)})
		if r == utf8.RuneError {
			runes[len(runes)-1].end = i + 1
		}
	}
	var out []span
	for ki, kw := range keywords {
		var k []rune
		for _, r := range kw {
			k = append(k, foldRune(r))
		}
		for i := 0; i+len(k) <= len(runes); i++ {
			ok := true
			for j := range k {
				if runes[i+j].r != k[j] {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, span{start: runes[i].start, end: runes[i+len(k)-1].end, prio: prio0 + ki})
			}
		}
	}
	return out
}

func sortSpans(s []span) {
	slices.SortFunc(s, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if a.end != b.end {
			return a.end - b.end
		}
		return a.prio - b.prio
	})
}

func TestManyKeywords(t *testing.T) {
	t.Parallel()
	kws := make([]string, 2000)
	for i := range kws {
		kws[i] = fmt.Sprintf("word%04dx", i)
	}
	for i := range 70 { // more wildcards than bits in the prefilter mask
		kws = append(kws, fmt.Sprintf("wild%02d*end", i))
	}
	g := keywordGuard(t, "MASK", kws...)
	out, err := g.Check("a WORD1234X b word0000x wild69-the-end wild00end wild42end c")
	require.NoError(t, err)
	require.Equal(t, "a [KEYWORD_REDACTED] b [KEYWORD_REDACTED] [KEYWORD_REDACTED] [KEYWORD_REDACTED] [KEYWORD_REDACTED] c", out)
}
