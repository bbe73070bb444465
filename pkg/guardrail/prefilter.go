package guardrail

import (
	"regexp"
	"regexp/syntax"
	"slices"
)

// regexLiterals returns literals of which at least one occurs, case-insensitively, in every
// match of re; nil when no such set is known (then re runs on every text). The keyword
// automaton looks for them in its single pass, so a regex whose literals are absent costs
// nothing: `\bEMP-\d{6}\b` only runs on texts containing "emp-".
func regexLiterals(re *regexp.Regexp) []string {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	return requiredLiterals(parsed.Simplify())
}

// requiredLiterals is regexLiterals on a syntax tree. Matching is case-insensitive in the
// automaton, so the result is a superset filter for both (?i) and case-sensitive parts.
func requiredLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpConcat:
		// Adjacent literal runes form one literal; otherwise keep the best child's set.
		var best []string
		var run []rune
		consider := func(lits []string) {
			if betterLiterals(lits, best) {
				best = lits
			}
		}
		flush := func() {
			if len(run) > 0 {
				consider([]string{string(run)})
				run = nil
			}
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				run = append(run, sub.Rune...)
				continue
			}
			if r, ok := caseClassRune(sub); ok {
				run = append(run, r)
				continue
			}
			flush()
			consider(requiredLiterals(sub))
		}
		flush()
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			lits := requiredLiterals(sub)
			if lits == nil {
				return nil
			}
			all = append(all, lits...)
		}
		return all
	case syntax.OpCharClass:
		if r, ok := caseClassRune(re); ok {
			return []string{string(r)}
		}
	}
	return nil
}

// caseClassRune reports whether re is a character class of one rune and its case variants
// ([Aa], [Kk\x{212A}]), returning that rune.
func caseClassRune(re *syntax.Regexp) (rune, bool) {
	if re.Op != syntax.OpCharClass {
		return 0, false
	}
	var runes []rune
	for i := 0; i+1 < len(re.Rune); i += 2 {
		for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
			if len(runes) == 4 {
				return 0, false
			}
			runes = append(runes, r)
		}
	}
	if len(runes) == 0 {
		return 0, false
	}
	f := foldRune(runes[0])
	for _, r := range runes[1:] {
		if foldRune(r) != f {
			return 0, false
		}
	}
	return runes[0], true
}

// betterLiterals prefers the set whose shortest literal is longest (more selective), then the
// smaller set.
func betterLiterals(a, b []string) bool {
	if len(a) == 0 {
		return false
	}
	if len(b) == 0 {
		return true
	}
	shortest := func(s []string) int {
		return len(slices.MinFunc(s, func(x, y string) int { return len(x) - len(y) }))
	}
	if sa, sb := shortest(a), shortest(b); sa != sb {
		return sa > sb
	}
	return len(a) < len(b)
}
