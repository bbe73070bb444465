package guardrail

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

type matcherKind uint8

const (
	kindRegex matcherKind = iota
	kindEmail
	kindAWSKey
	kindGitHubToken
	// Kinds from here on start on a digit (or '+'/'(' for phones) and share one scan.
	kindSSN
	kindSSNNoDash
	kindPhone
	kindIPv4
	kindCard // any brand; the brand kinds follow
	kindVisa
	kindMastercard
	kindAmex
	kindDiscover
)

func (k matcherKind) startsOnDigit() bool { return k >= kindSSN }

type prebuilt struct {
	kind matcherKind
	re   *pyRegex // kind == kindRegex
}

var prebuiltByName = map[string]prebuilt{
	"email":          {kind: kindEmail},
	"us_ssn":         {kind: kindSSN},
	"us_ssn_no_dash": {kind: kindSSNNoDash},
	"us_phone":       {kind: kindPhone},
	"credit_card":    {kind: kindCard},
	"visa":           {kind: kindVisa},
	"mastercard":     {kind: kindMastercard},
	"amex":           {kind: kindAmex},
	"discover":       {kind: kindDiscover},
	"ipv4":           {kind: kindIPv4},
	"aws_access_key": {kind: kindAWSKey},
	"github_token":   {kind: kindGitHubToken},
	"slack_token": {re: mustCompilePy(
		`(?i)\b(xox[pboa]-[0-9]{10,13}-[0-9]{10,13}-[a-zA-Z0-9]{24,32})\b`)},
	"generic_api_key": {re: mustCompilePy(
		`(?i)\b([Aa][Pp][Ii][-_]?[Kk][Ee][Yy][\s:=]+['"]?[A-Za-z0-9_\-]{20,}['"]?)\b`)},
	"url": {re: mustCompilePy(
		`(?i)\b(?:https?://|www\.)[^\s/$.?#].[^\s]*\b`)},
}

// PrebuiltPatterns returns the names accepted as a prebuilt pattern_name, sorted. Each mirrors
// the pattern of the same name in LiteLLM's litellm_content_filter/patterns.json, including its
// `\b` word boundaries (Python's Unicode \w: letters, digits, underscore), its Unicode `\d`
// (any decimal digit, category Nd: '１', '٣', ...) and `\s` (str.isspace: U+00A0, U+2009,
// U+202F, U+3000, ...; see pyregex.go), with the validity rules noted below added to cut false
// positives. The common ones are hand-written scanners
// rather than regexes, as they run on every request and a byte scan is an order of magnitude
// faster than Go's regexp.
//
//	email           local@domain.tld: local [A-Za-z0-9._%+-]+, domain [A-Za-z0-9.-]+, TLD 2+ letters
//	us_ssn          AAA-GG-SSSS (\d digits), separators both '-' or both \s; area not 000, 666 or 900-999,
//	                group not 00, serial not 0000 (SSA numbering rules, as in LiteLLM's
//	                us_ssn_no_dash)
//	us_ssn_no_dash  the same nine digits without separators
//	us_phone        optional +1/1 country code, area code optionally in parentheses, 3 + 3 + 4
//	                ASCII digits ([0-9] in LiteLLM), each separator one optional \s, '.' or '-'
//	credit_card     visa (4), mastercard (51-55, 2221-2720), discover (6011, 644-649, 65):
//	                4-4-4-4 digits; amex (34, 37): 4-6-5 digits (\d, the brand prefix too); each
//	                group separator one optional \s or '-'; the digits must pass the Luhn
//	                checksum (ISO/IEC 7812-1)
//	visa, mastercard, amex, discover   credit_card restricted to one brand
//	ipv4            four dot-separated decimal octets 0-255 (1-3 digits each)
//	aws_access_key  AKIA or ASIA + 16 of [0-9A-Z] (AWS access key ID prefixes; case-sensitive)
//	github_token    ghp_/gho_/ghu_/ghs_/ghr_ + 36 of [A-Za-z0-9], or github_pat_ + 82 of
//	                [A-Za-z0-9_] (GitHub token formats; case-sensitive)
//	slack_token, generic_api_key, url   LiteLLM's regexes, case-insensitive, with Python's
//	                \s and \b (compilePy)
func PrebuiltPatterns() []string {
	names := make([]string, 0, len(prebuiltByName))
	for n := range prebuiltByName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// scanPatterns appends a span for every match of every pattern rule. Within one rule, matches
// are found leftmost-first and do not overlap (like re.finditer).
// A regex whose prefilter literals did not occur (prefBit not in regexHits) cannot match and is
// skipped.
func (g *Guardrail) scanPatterns(text string, spans []span, regexHits uint64) []span {
	if len(g.digitRules) > 0 {
		spans = g.scanDigitRules(text, spans)
	}
	for _, i := range g.otherRules {
		p := &g.patterns[i]
		switch p.kind {
		case kindEmail:
			spans = scanEmail(text, i, spans)
		case kindAWSKey:
			spans = scanAWSKey(text, i, spans)
		case kindGitHubToken:
			spans = scanGitHubToken(text, i, spans)
		default:
			if p.prefBit != 0 && regexHits&p.prefBit == 0 {
				continue
			}
			spans = p.re.findAll(text, i, spans)
		}
	}
	return spans
}

// scanDigitRules runs all digit-started matchers in one pass over the candidate starts: a
// decimal digit (any Unicode Nd, as Python's \d) not preceded by a word character, '+' or
// '('.
func (g *Guardrail) scanDigitRules(text string, spans []span) []span {
	var buf [8]int
	var lastEnd []int
	if len(g.digitRules) <= len(buf) {
		lastEnd = buf[:len(g.digitRules)]
	} else {
		lastEnd = make([]int, len(g.digitRules))
	}
	for i := 0; i < len(text); i++ {
		switch digitStart[text[i]] {
		case 0:
			continue
		case startLead:
			if _, w := digitAt(text, i); w == 0 || wordBefore(text, i) {
				continue
			}
		case startDigit:
			if wordBefore(text, i) {
				continue
			}
		}
		for j, ri := range g.digitRules {
			if i < lastEnd[j] {
				continue
			}
			if end := matchDigitRule(g.patterns[ri].kind, text, i); end > 0 {
				spans = append(spans, span{start: i, end: end, prio: ri})
				lastEnd[j] = end
			}
		}
	}
	return spans
}

const (
	startDigit = 1 // an ASCII digit: a candidate start after a non-word character
	startPunct = 2 // '+' or '(': a candidate phone start anywhere
	startLead  = 3 // the UTF-8 lead byte of some non-ASCII decimal digit
)

var digitStart = func() (t [256]uint8) {
	for c := '0'; c <= '9'; c++ {
		t[c] = startDigit
	}
	t['+'], t['('] = startPunct, startPunct
	// The UTF-8 lead bytes of non-ASCII decimal digits: not those of Latin, Greek, Cyrillic or
	// CJK text (U+3000-U+9FFF has none), so such text costs no decoding.
	var enc [utf8.UTFMax]byte
	for _, r16 := range unicode.Nd.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			if r >= utf8.RuneSelf {
				utf8.EncodeRune(enc[:], r)
				t[enc[0]] = startLead
			}
		}
	}
	for _, r32 := range unicode.Nd.R32 {
		for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
			utf8.EncodeRune(enc[:], r)
			t[enc[0]] = startLead
		}
	}
	return t
}()

// matchDigitRule returns the end of a match of kind starting at text[i], or 0.
func matchDigitRule(kind matcherKind, text string, i int) int {
	if kind == kindPhone {
		return matchPhone(text, i)
	}
	if c := text[i]; !isDigit(c) && digitStart[c] != startLead {
		return 0
	}
	switch kind {
	case kindSSN:
		return matchSSN(text, i)
	case kindSSNNoDash:
		return matchSSNNoDash(text, i)
	case kindIPv4:
		return matchIPv4(text, i)
	case kindCard:
		return matchCard(text, i, brandAny)
	case kindVisa:
		return matchCard(text, i, brandVisa)
	case kindMastercard:
		return matchCard(text, i, brandMastercard)
	case kindAmex:
		return matchCard(text, i, brandAmex)
	case kindDiscover:
		return matchCard(text, i, brandDiscover)
	}
	return 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isASCIILetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

func isWordNonASCII(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// wordBefore reports whether the rune ending at text[i] is a word character.
func wordBefore(text string, i int) bool {
	if i == 0 {
		return false
	}
	if c := text[i-1]; c < utf8.RuneSelf {
		return asciiWord[c]
	}
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return isWordNonASCII(r)
}

// wordAt reports whether the rune starting at text[i] is a word character.
func wordAt(text string, i int) bool {
	if i >= len(text) {
		return false
	}
	if c := text[i]; c < utf8.RuneSelf {
		return asciiWord[c]
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return isWordNonASCII(r)
}

// digitsAt reports whether text[i:i+n] is n ASCII digits.
func digitsAt(text string, i, n int) bool {
	if i+n > len(text) {
		return false
	}
	for _, c := range []byte(text[i : i+n]) {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// readDigits reads n decimal digits (Python's \d: any Unicode Nd) at text[i:] into d as ASCII
// digits and returns the offset after them, or -1.
func readDigits(text string, i, n int, d []byte) int {
	for j := range n {
		if i < len(text) && isDigit(text[i]) { // the common case, inline
			d[j] = text[i]
			i++
			continue
		}
		v, w := digitAt(text, i)
		if w == 0 {
			return -1
		}
		d[j] = byte('0' + v)
		i += w
	}
	return i
}

// validSSN applies the SSA rules to the nine digits: no area 000, 666 or 900-999, no group 00,
// no serial 0000.
func validSSN(d []byte) bool {
	a := int(d[0]-'0')*100 + int(d[1]-'0')*10 + int(d[2]-'0')
	return a != 0 && a != 666 && a < 900 && string(d[3:5]) != "00" && string(d[5:9]) != "0000"
}

// ssnSep skips the separator of kind dash ('-') or else one Python whitespace character at
// text[k], returning the offset after it or -1.
func ssnSep(text string, k int, dash bool) int {
	if dash {
		if k < len(text) && text[k] == '-' {
			return k + 1
		}
		return -1
	}
	if w := spaceAt(text, k); w > 0 {
		return k + w
	}
	return -1
}

func matchSSN(text string, i int) int {
	var d [9]byte
	k := readDigits(text, i, 3, d[0:3])
	if k < 0 || k >= len(text) {
		return 0
	}
	dash := text[k] == '-'
	if k = ssnSep(text, k, dash); k < 0 {
		return 0
	}
	if k = readDigits(text, k, 2, d[3:5]); k < 0 {
		return 0
	}
	if k = ssnSep(text, k, dash); k < 0 {
		return 0
	}
	if k = readDigits(text, k, 4, d[5:9]); k < 0 || wordAt(text, k) || !validSSN(d[:]) {
		return 0
	}
	return k
}

func matchSSNNoDash(text string, i int) int {
	var d [9]byte
	k := readDigits(text, i, 9, d[:])
	if k < 0 || wordAt(text, k) || !validSSN(d[:]) {
		return 0
	}
	return k
}

// matchPhone mirrors LiteLLM's us_phone:
// \b(?:\+?1[\s.-]?)?\(?([0-9]{3})\)?[\s.-]?([0-9]{3})[\s.-]?([0-9]{4})\b
func matchPhone(text string, i int) int {
	j := i
	if text[j] == '+' {
		j++
	}
	if j < len(text) && text[j] == '1' {
		if end := phoneBody(text, phoneSep(text, j+1)); end > 0 {
			return end
		}
	}
	if text[i] == '+' {
		return 0
	}
	return phoneBody(text, i)
}

func phoneBody(text string, k int) int {
	if k < len(text) && text[k] == '(' {
		k++
	}
	if !digitsAt(text, k, 3) {
		return 0
	}
	k += 3
	if k < len(text) && text[k] == ')' {
		k++
	}
	k = phoneSep(text, k)
	if !digitsAt(text, k, 3) {
		return 0
	}
	k = phoneSep(text, k+3)
	if !digitsAt(text, k, 4) {
		return 0
	}
	k += 4
	if wordAt(text, k) {
		return 0
	}
	return k
}

// phoneSep skips one optional [\s.-] (Python's \s).
func phoneSep(text string, k int) int {
	if k >= len(text) {
		return k
	}
	if c := text[k]; c == '.' || c == '-' || c == ' ' {
		return k + 1
	} else if isAlnum(c) {
		return k
	}
	return k + spaceAt(text, k)
}

func matchIPv4(text string, i int) int {
	k := i
	for octet := range 4 {
		if octet > 0 {
			if k >= len(text) || text[k] != '.' {
				return 0
			}
			k++
		}
		start, v := k, 0
		for k < len(text) && isDigit(text[k]) && k-start < 4 {
			v = v*10 + int(text[k]-'0')
			k++
		}
		if n := k - start; n == 0 || n > 3 || v > 255 {
			return 0
		}
	}
	if wordAt(text, k) {
		return 0
	}
	return k
}

type brand uint8

const (
	brandVisa brand = 1 << iota
	brandMastercard
	brandAmex
	brandDiscover
	brandAny = brandVisa | brandMastercard | brandAmex | brandDiscover
)

// cardBrand identifies the issuer from the leading digits (IIN ranges).
func cardBrand(d []byte) brand {
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p3 := p2*10 + int(d[2]-'0')
	p4 := p3*10 + int(d[3]-'0')
	switch {
	case d[0] == '4':
		return brandVisa
	case 51 <= p2 && p2 <= 55, 2221 <= p4 && p4 <= 2720:
		return brandMastercard
	case p2 == 34 || p2 == 37:
		return brandAmex
	case p4 == 6011, 644 <= p3 && p3 <= 649, p2 == 65:
		return brandDiscover
	}
	return 0
}

// luhn reports whether the digits pass the Luhn (mod 10) checksum.
func luhn(d []byte) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

var (
	cardLayout16 = []int{4, 4, 4, 4}
	cardLayout15 = []int{4, 6, 5} // amex
)

func matchCard(text string, i int, want brand) int {
	var d [16]byte
	if want&^brandAmex != 0 {
		if end := readCardGroups(text, i, cardLayout16, d[:]); end > 0 {
			if b := cardBrand(d[:16]); b&want != 0 && b != brandAmex && luhn(d[:16]) {
				return end
			}
		}
	}
	if want&brandAmex != 0 {
		if end := readCardGroups(text, i, cardLayout15, d[:]); end > 0 {
			if cardBrand(d[:15]) == brandAmex && luhn(d[:15]) {
				return end
			}
		}
	}
	return 0
}

// readCardGroups reads digit groups (Python's \d) of the given sizes, each after the first
// optionally preceded by one '-' or Python whitespace character ([\s\-]), into d as ASCII
// digits; it returns the end offset if a word boundary follows.
func readCardGroups(text string, i int, layout []int, d []byte) int {
	k, n := i, 0
	for gi, size := range layout {
		if gi > 0 && k < len(text) {
			if c := text[k]; c == '-' || c == ' ' {
				k++
			} else if !isDigit(c) {
				k += spaceAt(text, k)
			}
		}
		if k = readDigits(text, k, size, d[n:n+size]); k < 0 {
			return 0
		}
		n += size
	}
	if wordAt(text, k) {
		return 0
	}
	return k
}

func isEmailLocal(c byte) bool {
	return isASCIILetter(c) || isDigit(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func isEmailDomain(c byte) bool {
	return isASCIILetter(c) || isDigit(c) || c == '.' || c == '-'
}

// scanEmail mirrors LiteLLM's email pattern \b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,}\b
// by working outwards from each '@'.
func scanEmail(text string, prio int, spans []span) []span {
	lastEnd := 0
	for off := 0; off < len(text); {
		j := strings.IndexByte(text[off:], '@')
		if j < 0 {
			break
		}
		at := off + j
		off = at + 1
		a := at
		for a > lastEnd && isEmailLocal(text[a-1]) {
			a--
		}
		// The match starts at the first word boundary of the local part.
		start := -1
		for p := a; p < at; p++ {
			if wordBefore(text, p) != asciiWord[text[p]] {
				start = p
				break
			}
		}
		if start < 0 {
			continue
		}
		de := at + 1
		for de < len(text) && isEmailDomain(text[de]) {
			de++
		}
		end := emailDomainEnd(text, at+1, de)
		if end < 0 {
			continue
		}
		spans = append(spans, span{start: start, end: end, prio: prio})
		lastEnd, off = end, end
	}
	return spans
}

// emailDomainEnd returns the end of the longest prefix of the domain text[ds:de] that has the
// form X.TLD (X non-empty, TLD 2+ letters) followed by a word boundary, or -1.
func emailDomainEnd(text string, ds, de int) int {
	t := de
	for t > ds {
		s := t
		for s > ds && isASCIILetter(text[s-1]) {
			s--
		}
		if t-s >= 2 && s-1 > ds && text[s-1] == '.' && !wordAt(text, t) {
			return t
		}
		if s == t {
			s--
		}
		t = s
		for t > ds && !isASCIILetter(text[t-1]) {
			t--
		}
	}
	return -1
}

func isUpperAlnum(c byte) bool { return isDigit(c) || ('A' <= c && c <= 'Z') }

func isAlnum(c byte) bool { return isDigit(c) || isASCIILetter(c) }

// runOf reports whether text[i:i+n] are n bytes satisfying ok.
func runOf(text string, i, n int, ok func(byte) bool) bool {
	if i+n > len(text) {
		return false
	}
	for _, c := range []byte(text[i : i+n]) {
		if !ok(c) {
			return false
		}
	}
	return true
}

// scanAWSKey finds \b(AKIA|ASIA)[0-9A-Z]{16}\b by searching for the "IA" of the prefix.
func scanAWSKey(text string, prio int, spans []span) []span {
	for off := 0; ; {
		j := strings.Index(text[off:], "IA")
		if j < 0 {
			return spans
		}
		p := off + j
		off = p + 2
		start := p - 2
		if start < 0 || text[start] != 'A' || (text[start+1] != 'K' && text[start+1] != 'S') ||
			wordBefore(text, start) || !runOf(text, p+2, 16, isUpperAlnum) || wordAt(text, p+18) {
			continue
		}
		spans = append(spans, span{start: start, end: p + 18, prio: prio})
		off = p + 18
	}
}

// scanGitHubToken finds \bgh[pousr]_[A-Za-z0-9]{36}\b and \bgithub_pat_[A-Za-z0-9_]{82}\b by
// searching for the '_', which is rare in prose.
func scanGitHubToken(text string, prio int, spans []span) []span {
	lastEnd := 0
	for off := 0; ; {
		j := strings.IndexByte(text[off:], '_')
		if j < 0 {
			return spans
		}
		u := off + j
		off = u + 1
		start, end := 0, 0
		switch {
		case u >= 3 && text[u-3] == 'g' && text[u-2] == 'h' && strings.IndexByte("pousr", text[u-1]) >= 0:
			start = u - 3
			if runOf(text, u+1, 36, isAlnum) {
				end = u + 37
			}
		case u >= 6 && strings.HasPrefix(text[u-6:], "github_pat_"):
			start = u - 6
			if runOf(text, start+11, 82, isWordByte) {
				end = start + 93
			}
		}
		if end == 0 || start < lastEnd || wordBefore(text, start) || wordAt(text, end) {
			continue
		}
		spans = append(spans, span{start: start, end: end, prio: prio})
		lastEnd, off = end, end
	}
}

func isWordByte(c byte) bool { return c < utf8.RuneSelf && asciiWord[c] }
