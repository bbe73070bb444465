package guardrail

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Keyword matching: every literal keyword goes into one Aho-Corasick automaton over the UTF-8
// bytes of the case-folded text, so one pass over the text finds all occurrences of all keywords
// without lower-casing a copy. The same pass serves as a prefilter for the regexes: the longest
// literal segment of each wildcard keyword, and literals required by each regex pattern (see
// requiredLiterals), are in the automaton too, and a regex only runs when one of its literals
// occurs. Case folding is Unicode simple case folding (the orbits of
// unicode.SimpleFold, as used by strings.EqualFold and RE2's (?i)), so the regexes of wildcard
// keywords agree with the automaton.

// foldRune maps r to the representative of its simple case-folding orbit: the orbit's smallest
// rune, lower-cased when that is an ASCII letter (so ASCII folds to lower case). 'K', 'k' and
// KELVIN SIGN fold to 'k'; 'ß' and 'ẞ' to 'ß'; 'Σ', 'σ' and 'ς' to one rune. Like Python's
// str.lower used by LiteLLM, 'İ' (U+0130) does not fold to 'i'.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	if 'A' <= m && m <= 'Z' {
		m += 'a' - 'A'
	}
	return m
}

// foldTable caches foldRune for the BMP (128 KiB, built in about 1 ms on first use). No BMP
// orbit reaches outside the BMP, which TestFoldTable checks.
var foldTable = sync.OnceValue(func() *[0x10000]uint16 {
	var t [0x10000]uint16
	for r := range rune(len(t)) {
		t[r] = uint16(foldRune(r))
	}
	return &t
})

// acOut is one literal ending at an automaton state.
type acOut struct {
	idx  int32 // index into Guardrail.keywords, or Guardrail.patterns for outRegex
	kind outKind
}

type outKind uint8

const (
	outKeyword  outKind = iota // a literal keyword: report a span
	outWildcard                // a wildcard keyword's prefilter segment
	outRegex                   // a regex pattern's required literal
)

// scanState collects the prefilter hits of one scan.
type scanState struct {
	wild  uint64 // keywordRule.wildBit of wildcard keywords whose segment occurs
	regex uint64 // patternRule.prefBit of regex patterns one of whose literals occurs
}

// automaton is a dense Aho-Corasick DFA over byte classes. A transition value is
// (row of the next state << 1) | 1 if the next state has outputs, where row = state * nclass.
type automaton struct {
	nclass   int32
	class    [256]int32           // byte -> class; bytes in no keyword are class 0
	ascii    [utf8.RuneSelf]int32 // ASCII byte -> class of its folded (lower-case) byte
	delta    []int32              // len(states) * nclass
	outStart []int32              // per state, into outs; len(states)+1
	outs     []acOut              //
	fold     *[0x10000]uint16     // foldTable()
}

type acNode struct {
	next map[byte]int32
	outs []acOut
}

type acBuilder struct {
	nodes []acNode
}

func newACBuilder() *acBuilder {
	return &acBuilder{nodes: []acNode{{}}}
}

func (b *acBuilder) empty() bool { return len(b.nodes) == 1 }

// add inserts the case-folded literal and returns its rune count.
func (b *acBuilder) add(keyword string, idx int, kind outKind) int {
	var enc [utf8.UTFMax]byte
	state, runes := int32(0), 0
	for _, r := range keyword {
		runes++
		n := utf8.EncodeRune(enc[:], foldRune(r))
		for _, c := range enc[:n] {
			next, ok := b.nodes[state].next[c]
			if !ok {
				next = int32(len(b.nodes))
				b.nodes = append(b.nodes, acNode{})
				if b.nodes[state].next == nil {
					b.nodes[state].next = map[byte]int32{}
				}
				b.nodes[state].next[c] = next
			}
			state = next
		}
	}
	b.nodes[state].outs = append(b.nodes[state].outs, acOut{idx: int32(idx), kind: kind})
	return runes
}

var errTooManyKeywords = errors.New("too many keywords")

func (b *acBuilder) build() (*automaton, error) {
	a := &automaton{fold: foldTable()}
	var used [256]bool
	for _, n := range b.nodes {
		for c := range n.next {
			used[c] = true
		}
	}
	a.nclass = 1
	for c := range used {
		if used[c] {
			a.class[c] = a.nclass
			a.nclass++
		}
	}
	for c := range utf8.RuneSelf {
		a.ascii[c] = a.class[foldRune(rune(c))]
	}
	nstates := len(b.nodes)
	if int64(nstates)*int64(a.nclass)*2 >= math.MaxInt32 {
		return nil, errTooManyKeywords
	}
	nc := int(a.nclass)
	next := make([]int32, nstates*nc) // plain state ids; encoded below
	fail := make([]int32, nstates)
	outs := make([][]acOut, nstates)
	outs[0] = b.nodes[0].outs
	queue := make([]int32, 0, nstates)
	for c, child := range b.nodes[0].next {
		next[a.class[c]] = child
		queue = append(queue, child)
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := fail[s]
		outs[s] = append(outs[s], b.nodes[s].outs...)
		outs[s] = append(outs[s], outs[f]...)
		row, frow := int(s)*nc, int(f)*nc
		copy(next[row:row+nc], next[frow:frow+nc])
		for c, child := range b.nodes[s].next {
			cl := a.class[c]
			fail[child] = next[frow+int(cl)]
			next[row+int(cl)] = child
			queue = append(queue, child)
		}
	}
	a.delta = make([]int32, len(next))
	for i, t := range next {
		v := t * a.nclass << 1
		if len(outs[t]) > 0 {
			v |= 1
		}
		a.delta[i] = v
	}
	a.outStart = make([]int32, nstates+1)
	for s, o := range outs {
		a.outs = append(a.outs, o...)
		a.outStart[s+1] = int32(len(a.outs))
	}
	return a, nil
}

// scanKeywords appends a span for every keyword occurrence in text, and records the regex
// prefilter hits in st.
func (g *Guardrail) scanKeywords(text string, spans []span, st *scanState) []span {
	a := g.ac
	delta, ascii, class, fold := a.delta, &a.ascii, &a.class, a.fold
	row := int32(0)
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			i++
			v := delta[row+ascii[c]]
			row = v >> 1
			if v&1 != 0 {
				spans = g.keywordHits(text, i, row, spans, st)
			}
			continue
		}
		r, w := utf8.DecodeRuneInString(text[i:])
		i += w
		if r < 0x10000 {
			r = rune(fold[r])
		} else {
			r = foldRune(r)
		}
		var enc [utf8.UTFMax]byte
		n := utf8.EncodeRune(enc[:], r)
		hit := false
		for _, b := range enc[:n] {
			v := delta[row+class[b]]
			row = v >> 1
			hit = v&1 != 0
		}
		if hit {
			spans = g.keywordHits(text, i, row, spans, st)
		}
	}
	if st.wild != 0 {
		spans = g.scanWildcards(text, st.wild, spans)
	}
	return spans
}

// keywordHits handles the outputs of the state at row, reached at text offset end.
func (g *Guardrail) keywordHits(text string, end int, row int32, spans []span, st *scanState) []span {
	a := g.ac
	s := row / a.nclass
	for _, o := range a.outs[a.outStart[s]:a.outStart[s+1]] {
		switch o.kind {
		case outWildcard:
			st.wild |= g.keywords[o.idx].wildBit
			continue
		case outRegex:
			st.regex |= g.patterns[o.idx].prefBit
			continue
		}
		k := &g.keywords[o.idx]
		// Text runes and folded runes correspond one to one, so the match starts k.runes
		// runes before end.
		start := end
		for range k.runes {
			_, w := utf8.DecodeLastRuneInString(text[:start])
			start -= w
		}
		spans = append(spans, span{start: start, end: end, prio: len(g.patterns) + int(o.idx)})
	}
	return spans
}

// scanWildcards runs the regexes of the wildcard keywords selected by the wild bits.
func (g *Guardrail) scanWildcards(text string, wild uint64, spans []span) []span {
	for i := range g.keywords {
		k := &g.keywords[i]
		if k.wildcard == nil || wild&k.wildBit == 0 {
			continue
		}
		for _, m := range k.wildcard.FindAllStringIndex(text, -1) {
			if m[0] < m[1] {
				spans = append(spans, span{start: m[0], end: m[1], prio: len(g.patterns) + i})
			}
		}
	}
	return spans
}

// nonSpaceRun is what '*' in a keyword matches: any run of characters that are not Python's
// \s (str.isspace; see pySpaceClass).
const nonSpaceRun = `[^` + pySpaceClass + `]*`

// compileWildcard compiles a keyword containing '*' into a case-insensitive regex and returns
// its longest literal segment, used as the automaton prefilter.
func compileWildcard(keyword string) (*regexp.Regexp, string, error) {
	var b strings.Builder
	b.WriteString("(?i)")
	longest, lastRun := "", false
	for i, seg := range strings.Split(keyword, "*") {
		if i > 0 && !lastRun {
			b.WriteString(nonSpaceRun)
			lastRun = true
		}
		if seg != "" {
			b.WriteString(regexp.QuoteMeta(seg))
			lastRun = false
		}
		if len(seg) > len(longest) {
			longest = seg
		}
	}
	if longest == "" {
		return nil, "", errors.New("must contain at least one character other than the wildcard '*'")
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, "", fmt.Errorf("cannot compile wildcard keyword: %v", err)
	}
	return re, longest, nil
}
