package guardrail

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Python 3 `re` on str patterns (docs.python.org/3/library/re.html, "\d", "\s", "\w", "\b"),
// which LiteLLM's content filter uses, is Unicode-aware where Go's regexp is ASCII-only:
//
//	\d  a Unicode decimal digit (general category Nd): '0'-'9', '０'-'９', '٠'-'٩', ...
//	\s  a character for which str.isspace is true: \t \n \v \f \r, \x1c-\x1f, ' ', U+0085 and
//	    the separators (categories Zs, Zl, Zp: U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
//	    U+202F, U+205F, U+3000)
//	\w  a character for which str.isalnum is true (letters and numbers: categories L*, N*),
//	    or '_'
//	\b  the boundary between a \w and a non-\w character (or the text's start or end)
//
// The hand-written scanners in patterns.go use these definitions; regexes are rewritten to
// them by compilePy.

// Character class bodies of Python's \s and \w in RE2 syntax.
const (
	pySpaceClass = `\t\n\v\f\r\x1c-\x1f \x{85}\p{Z}`
	pyWordClass  = `\p{L}\p{N}_`
)

// isPySpace reports whether r is Python's \s (str.isspace).
func isPySpace(r rune) bool {
	switch {
	case r <= ' ':
		return r == ' ' || ('\t' <= r && r <= '\r') || (0x1c <= r && r <= 0x1f)
	case r < 0x85:
		return false
	case r == 0x85 || r == 0xa0:
		return true
	}
	return r >= 0x1680 && unicode.In(r, unicode.Z)
}

// spaceAt returns the byte length of the Python whitespace character at text[i], or 0.
func spaceAt(text string, i int) int {
	if i >= len(text) {
		return 0
	}
	if c := text[i]; c < utf8.RuneSelf {
		if isPySpace(rune(c)) {
			return 1
		}
		return 0
	}
	r, w := utf8.DecodeRuneInString(text[i:])
	if isPySpace(r) {
		return w
	}
	return 0
}

// digitAt returns the value and byte length of the Unicode decimal digit (Python's \d) at
// text[i], or (0, 0).
func digitAt(text string, i int) (int, int) {
	if i >= len(text) {
		return 0, 0
	}
	c := text[i]
	if isDigit(c) {
		return int(c - '0'), 1
	}
	if digitStart[c] != startLead { // no decimal digit starts with this byte
		return 0, 0
	}
	r, w := utf8.DecodeRuneInString(text[i:])
	if r < rune(len(ndBMP)) {
		if v := ndBMP[r]; v != 0 {
			return int(v - 1), w
		}
		return 0, 0
	}
	if !unicode.Is(unicode.Nd, r) {
		return 0, 0
	}
	return ndValue(r), w
}

// ndBMP holds 1 + the value of each BMP decimal digit, 0 for other runes (64 KiB).
var ndBMP = func() *[0x10000]uint8 {
	var t [0x10000]uint8
	for _, r16 := range unicode.Nd.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			t[r] = uint8(1 + ndValue(r))
		}
	}
	return &t
}()

// ndRuns are the maximal runs of consecutive Nd code points. Unicode encodes each decimal
// digit set as ten consecutive code points starting at its zero (Unicode Standard, section
// 4.6 "Numeric Value"), so a digit's value is its offset in its run modulo 10 (TestNdRuns).
var ndRuns = sync.OnceValue(func() []rune {
	var starts []rune
	prev := rune(-2)
	for _, rt := range []*unicode.RangeTable{unicode.Nd} {
		for _, r16 := range rt.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				if r != prev+1 {
					starts = append(starts, r)
				}
				prev = r
			}
		}
		for _, r32 := range rt.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				if r != prev+1 {
					starts = append(starts, r)
				}
				prev = r
			}
		}
	}
	return starts
})

// ndValue is the value 0-9 of the decimal digit r (unicode.Is(unicode.Nd, r)).
func ndValue(r rune) int {
	starts := ndRuns()
	i := sort.Search(len(starts), func(i int) bool { return starts[i] > r }) - 1
	return int(r-starts[i]) % 10
}

// pyRegex is a regex with Python's meaning of \d, \s, \w and their negations, and of a \b at
// the start or end of the pattern (every alternative's, when the pattern is an alternation).
// Go's regexp knows only the ASCII \b, so an edge \b is taken out of the compiled regex and
// checked on each match with Python's \w. When the preferred match at a start does not end at
// a \b, the longest match from that start that does is taken (Python backtracks into the
// pattern for it; for greedy patterns, the usual case, that is the same match). Limitation: a
// \b elsewhere in the pattern is Go's ASCII one.
type pyRegex struct {
	re         *regexp.Regexp
	wordStart  bool           // every match must start at a Python \b
	wordEnd    bool           // every match must end at a Python \b
	resumeFrom bool           // re has no other assertion, so it can be re-run on text[pos:]
	longest    *regexp.Regexp // ^(?:re), leftmost-longest; wordEnd && resumeFrom
	whole      *regexp.Regexp // ^(?:re)$; wordEnd && resumeFrom
}

// compilePy rewrites expr (Python/RE2 syntax) to Python's classes and compiles it.
func compilePy(expr string) (*pyRegex, error) {
	tree, err := syntax.Parse(translatePy(expr), syntax.Perl)
	if err != nil {
		return nil, err
	}
	p := &pyRegex{}
	if hasEdgeBoundary(tree, true) {
		stripEdgeBoundary(tree, true)
		p.wordStart = true
	}
	if hasEdgeBoundary(tree, false) {
		stripEdgeBoundary(tree, false)
		p.wordEnd = true
	}
	p.resumeFrom = !hasAssertion(tree)
	src := tree.String()
	if p.re, err = regexp.Compile(src); err != nil {
		return nil, err
	}
	if p.wordEnd && p.resumeFrom {
		if p.longest, err = regexp.Compile(`^(?:` + src + `)`); err != nil {
			return nil, err
		}
		p.longest.Longest()
		if p.whole, err = regexp.Compile(`^(?:` + src + `)$`); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func mustCompilePy(expr string) *pyRegex {
	p, err := compilePy(expr)
	if err != nil {
		panic(fmt.Sprintf("guardrail: %q: %v", expr, err))
	}
	return p
}

// hasEdgeBoundary reports whether every match of re starts (first) or ends (!first) with \b.
func hasEdgeBoundary(re *syntax.Regexp, first bool) bool {
	switch re.Op {
	case syntax.OpWordBoundary:
		return true
	case syntax.OpCapture:
		return hasEdgeBoundary(re.Sub[0], first)
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return false
		}
		if first {
			return hasEdgeBoundary(re.Sub[0], first)
		}
		return hasEdgeBoundary(re.Sub[len(re.Sub)-1], first)
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !hasEdgeBoundary(sub, first) {
				return false
			}
		}
		return true
	}
	return false
}

// stripEdgeBoundary replaces the edge \b found by hasEdgeBoundary with an empty match.
func stripEdgeBoundary(re *syntax.Regexp, first bool) {
	switch re.Op {
	case syntax.OpWordBoundary:
		*re = syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
	case syntax.OpCapture:
		stripEdgeBoundary(re.Sub[0], first)
	case syntax.OpConcat:
		if first {
			stripEdgeBoundary(re.Sub[0], first)
		} else {
			stripEdgeBoundary(re.Sub[len(re.Sub)-1], first)
		}
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			stripEdgeBoundary(sub, first)
		}
	}
}

// hasAssertion reports whether re contains a zero-width assertion (^ $ \A \z \b \B).
func hasAssertion(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, sub := range re.Sub {
		if hasAssertion(sub) {
			return true
		}
	}
	return false
}

// pyBoundary reports whether text[i] is at a Python \b.
func pyBoundary(text string, i int) bool { return wordBefore(text, i) != wordAt(text, i) }

// findAll appends a span for every non-empty match (leftmost-first, non-overlapping, like
// re.finditer) to spans.
func (p *pyRegex) findAll(text string, prio int, spans []span) []span {
	if !p.wordStart && !p.wordEnd {
		for _, m := range p.re.FindAllStringIndex(text, -1) {
			if m[0] < m[1] { // an empty match masks nothing
				spans = append(spans, span{start: m[0], end: m[1], prio: prio})
			}
		}
		return spans
	}
	ok := func(s, e int) bool {
		return (!p.wordStart || pyBoundary(text, s)) && (!p.wordEnd || pyBoundary(text, e))
	}
	if !p.resumeFrom {
		for _, m := range p.re.FindAllStringIndex(text, -1) {
			if m[0] < m[1] && ok(m[0], m[1]) {
				spans = append(spans, span{start: m[0], end: m[1], prio: prio})
			}
		}
		return spans
	}
	for pos := 0; pos < len(text); {
		m := p.re.FindStringIndex(text[pos:])
		if m == nil {
			break
		}
		s, e := pos+m[0], pos+m[1]
		if s < e && !ok(s, e) && p.wordEnd && (!p.wordStart || pyBoundary(text, s)) {
			e = p.boundaryEnd(text, s)
		}
		if s < e && ok(s, e) {
			spans = append(spans, span{start: s, end: e, prio: prio})
			pos = e
			continue
		}
		// No match is taken at s: go on from the next character.
		_, w := utf8.DecodeRuneInString(text[s:])
		pos = s + max(w, 1)
	}
	return spans
}

// boundaryEnd returns the end of the longest match of p at text[s:] that ends at a Python \b,
// or s.
func (p *pyRegex) boundaryEnd(text string, s int) int {
	m := p.longest.FindStringIndex(text[s:])
	if m == nil {
		return s
	}
	for e := s + m[1]; e > s; {
		if pyBoundary(text, e) && p.whole.MatchString(text[s:e]) {
			return e
		}
		_, w := utf8.DecodeLastRuneInString(text[s:e])
		e -= w
	}
	return s
}

// translatePy rewrites \d \D \s \S \w \W in expr, in and outside bracket classes, to
// Python's Unicode classes; everything else (\b included, see pyRegex) is kept.
func translatePy(expr string) string {
	if !strings.Contains(expr, `\`) {
		return expr
	}
	var b strings.Builder
	inClass := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '\\' && i+1 < len(expr):
			n := expr[i+1]
			if n == 'Q' { // \Q...\E is literal text
				end := len(expr)
				if j := strings.Index(expr[i+2:], `\E`); j >= 0 {
					end = i + 2 + j + 2
				}
				b.WriteString(expr[i:end])
				i = end - 1
				continue
			}
			i++
			if s, ok := pyClass(n, inClass); ok {
				b.WriteString(s)
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(n)
			continue
		case inClass && c == '[' && strings.HasPrefix(expr[i:], "[:"):
			if j := strings.Index(expr[i+2:], ":]"); j >= 0 { // [:alpha:]
				b.WriteString(expr[i : i+2+j+2])
				i += 2 + j + 1
				continue
			}
		case inClass && c == ']':
			inClass = false
		case !inClass && c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(expr) && expr[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(expr) && expr[i+1] == ']' { // a leading ']' is literal
				b.WriteByte(']')
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// pyClass is the RE2 text for Python's \n (n one of dDsSwW), for use inside a bracket class
// or on its own.
func pyClass(n byte, inClass bool) (string, bool) {
	switch n {
	case 'd':
		return `\p{Nd}`, true
	case 'D':
		return `\P{Nd}`, true
	case 's', 'w':
		body := pySpaceClass
		if n == 'w' {
			body = pyWordClass
		}
		if inClass {
			return body, true
		}
		return "[" + body + "]", true
	case 'S', 'W':
		body := pySpaceClass
		if n == 'W' {
			body = pyWordClass
		}
		if inClass {
			return negatedBody(body), true
		}
		return "[^" + body + "]", true
	}
	return "", false
}

var negatedBodies sync.Map // class body -> its complement as explicit ranges

// negatedBody returns the complement of a class body as ranges usable inside another class
// (RE2 has no nested negated class).
func negatedBody(body string) string {
	if v, ok := negatedBodies.Load(body); ok {
		return v.(string)
	}
	re, err := syntax.Parse("[^"+body+"]", syntax.Perl)
	if err != nil || re.Op != syntax.OpCharClass {
		panic(fmt.Sprintf("guardrail: class %q: %v", body, err))
	}
	var b strings.Builder
	for i := 0; i+1 < len(re.Rune); i += 2 {
		fmt.Fprintf(&b, `\x{%x}-\x{%x}`, re.Rune[i], re.Rune[i+1])
	}
	negatedBodies.Store(body, b.String())
	return b.String()
}
