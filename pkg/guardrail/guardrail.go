// Package guardrail implements the "litellm_content_filter" guardrail engine: keyword and regex
// detection that either blocks a text or masks the matched parts. It mirrors LiteLLM's built-in
// content filter (litellm/proxy/guardrails/guardrail_hooks/litellm_content_filter, documented at
// docs.litellm.ai "LiteLLM Content Filter"), with the differences listed on [Guardrail.Check].
//
// The package is pure Go: no database, no HTTP. [Compile] turns a guardrail's litellm_params
// (the JSON object stored with the guardrail) into an immutable [*Guardrail]; [Guardrail.Check]
// runs it on one text. Everything that can be precomputed is precomputed in Compile, and Check
// does not allocate when nothing matches.
package guardrail

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Mode is when a guardrail runs on an LLM route (LiteLLM's guardrail "mode" / event hook).
type Mode string

const (
	// PreCall runs on the request input before the model is called.
	PreCall Mode = "pre_call"
	// PostCall runs on the model output before it is returned.
	PostCall Mode = "post_call"
	// DuringCall runs on the request input in parallel with the model call.
	DuringCall Mode = "during_call"
)

// Action is what a rule does when it matches. Input is case-insensitive; Compile normalises it.
type Action string

const (
	// Block rejects the whole text with a *BlockedError.
	Block Action = "BLOCK"
	// Mask replaces the matched part with a redaction tag.
	Mask Action = "MASK"
)

// Guardrail is an immutable compiled litellm_content_filter guardrail, safe for concurrent use.
// Build it with [Compile]; the zero value checks nothing.
type Guardrail struct {
	// Name is the guardrail_name, reported in BlockedError.Guardrail.
	Name string
	// Modes lists when the guardrail runs, deduplicated, in config order; never empty after
	// Compile (default [PreCall]). Do not modify.
	Modes []Mode
	// DefaultOn makes the guardrail run on every request, not only when the request names it.
	DefaultOn bool
	// Params is the litellm_params document the guardrail was compiled from (compacted JSON),
	// for management reads of guardrails that have no database row (config-file ones). Do not
	// modify.
	Params []byte

	patterns []patternRule // in config order
	keywords []keywordRule // in config order
	ac       *automaton    // keywords and regex prefilters; nil when there are none

	digitRules []int // indexes into patterns of hand-written matchers started on digits/'+'/'('
	otherRules []int // indexes into patterns of the other matchers, in config order
}

// Runs reports whether the guardrail is configured to run in mode m.
func (g *Guardrail) Runs(m Mode) bool {
	return slices.Contains(g.Modes, m)
}

// BlockedError is returned by [Guardrail.Check] when a BLOCK rule matches. Error returns Message
// exactly; the HTTP layer sends it as the 400 detail, like LiteLLM does.
type BlockedError struct {
	// Guardrail is the name of the guardrail that blocked.
	Guardrail string
	// Message is one of (LiteLLM content filter wording):
	//   Content blocked: keyword '<keyword, lower-cased>' detected
	//   Content blocked: <pattern_name> pattern detected
	// where pattern_name is the prebuilt name (e.g. "email") or a regex pattern's "name"
	// ("custom_regex" when unnamed). Unlike LiteLLM, a keyword's description is not appended;
	// it is in Description.
	Message string
	// Keyword is the matching keyword as configured, lower-cased ("" for a pattern match).
	Keyword string
	// Pattern is the matching pattern's name ("" for a keyword match).
	Pattern string
	// Description is the keyword's optional description from the config.
	Description string
}

func (e *BlockedError) Error() string { return e.Message }

// span is one match in the scanned text: text[start:end], found by rule prio (patterns first,
// then keywords, each in config order).
type span struct {
	start, end int
	prio       int
}

// Check scans text and returns it with every MASK match replaced by its redaction tag, or a
// *BlockedError when any BLOCK rule matches anywhere in text.
//
// Rules (LiteLLM content filter behaviour unless noted):
//   - Keywords match case-insensitively as substrings (Unicode simple case folding, as in
//     strings.EqualFold); '*' in a keyword matches any run of non-space characters (LiteLLM
//     treats it as at most one character).
//   - Patterns are the prebuilt detectors listed by [PrebuiltPatterns] and custom regexes; every
//     match of every rule is found (all occurrences, like re.sub).
//   - All rules scan the original text in one pass; LiteLLM instead applies them one after the
//     other, so a later rule there can see an earlier rule's redaction tag.
//   - BLOCK wins over MASK: the error names the BLOCK match that starts first (ties: patterns
//     before keywords, then config order).
//   - MASK matches that overlap are merged into one region, replaced by the tag of the match that
//     starts first (the longest one on a tie), so no tag is ever half-replaced. Adjacent matches
//     keep one tag each.
//   - Empty text is returned unchanged. When nothing is masked, text itself is returned and
//     Check does not allocate.
//
// Offsets never split a UTF-8 sequence; invalid UTF-8 bytes are treated as U+FFFD.
func (g *Guardrail) Check(text string) (string, error) {
	if text == "" {
		return text, nil
	}
	var buf [16]span
	spans := buf[:0]
	var st scanState
	if g.ac != nil {
		spans = g.scanKeywords(text, spans, &st)
	}
	spans = g.scanPatterns(text, spans, st.regex)
	if len(spans) == 0 {
		return text, nil
	}

	// BLOCK wins: report the first BLOCK match by position.
	blocked := -1
	for i, s := range spans {
		if g.action(s.prio) != Block {
			continue
		}
		if blocked < 0 || s.start < spans[blocked].start ||
			(s.start == spans[blocked].start && s.prio < spans[blocked].prio) {
			blocked = i
		}
	}
	if blocked >= 0 {
		return "", g.blockedError(spans[blocked].prio)
	}

	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if a.end != b.end {
			return b.end - a.end
		}
		return a.prio - b.prio
	})
	// Merge overlaps in place; the first span of a merged run keeps its tag.
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s.start < last.end {
			last.end = max(last.end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	size := len(text)
	for _, s := range merged {
		size += len(g.tag(s.prio)) - (s.end - s.start)
	}
	var b strings.Builder
	b.Grow(size)
	pos := 0
	for _, s := range merged {
		b.WriteString(text[pos:s.start])
		b.WriteString(g.tag(s.prio))
		pos = s.end
	}
	b.WriteString(text[pos:])
	return b.String(), nil
}

// Masks reports whether any rule of g is a MASK rule.
func (g *Guardrail) Masks() bool {
	for i := range g.patterns {
		if g.patterns[i].action == Mask {
			return true
		}
	}
	for i := range g.keywords {
		if g.keywords[i].action == Mask {
			return true
		}
	}
	return false
}

// SafeCut returns the largest c <= cut (0 <= cut <= len(text)) such that no match of any rule
// of g in text starts before c and ends after it, so that text[:c] can be checked on its own
// without cutting a match in two. Used to release a streamed answer piece by piece: the caller
// keeps text[c:] until more text (or the end) arrives. A match longer than the text kept after
// cut may still be cut in two; callers keep more text than any match they care about.
func (g *Guardrail) SafeCut(text string, cut int) int {
	if text == "" || cut <= 0 {
		return 0
	}
	var buf [16]span
	spans := buf[:0]
	var st scanState
	if g.ac != nil {
		spans = g.scanKeywords(text, spans, &st)
	}
	spans = g.scanPatterns(text, spans, st.regex)
	for moved := true; moved; {
		moved = false
		for _, s := range spans {
			if s.start < cut && cut < s.end {
				cut, moved = s.start, true
			}
		}
	}
	return cut
}

func (g *Guardrail) action(prio int) Action {
	if prio < len(g.patterns) {
		return g.patterns[prio].action
	}
	return g.keywords[prio-len(g.patterns)].action
}

func (g *Guardrail) tag(prio int) string {
	if prio < len(g.patterns) {
		return g.patterns[prio].tag
	}
	return g.keywords[prio-len(g.patterns)].tag
}

func (g *Guardrail) blockedError(prio int) *BlockedError {
	if prio < len(g.patterns) {
		p := &g.patterns[prio]
		return &BlockedError{
			Guardrail: g.Name,
			Message:   "Content blocked: " + p.name + " pattern detected",
			Pattern:   p.name,
		}
	}
	k := &g.keywords[prio-len(g.patterns)]
	return &BlockedError{
		Guardrail:   g.Name,
		Message:     "Content blocked: keyword '" + k.report + "' detected",
		Keyword:     k.report,
		Description: k.description,
	}
}

var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-32] = true
	}
	t['_'] = true
	return t
}()
