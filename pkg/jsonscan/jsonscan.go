// Package jsonscan is the one reader of a request body a route forwards (API.md "Request
// bodies"): a single, iterative pass that accepts exactly RFC 8259 JSON and refuses
//
//   - nesting deeper than [MaxDepth] arrays and objects (no recursion on the goroutine stack:
//     the open containers live on an explicit stack of MaxDepth frames, so a body of 12 MiB of
//     "[" costs one frame, not a stack overflow);
//   - a duplicate member name in any object, the names compared after unescaping ("model" and
//     "mod\u0065l" are the same member), so that what the gateway reads (gjson keeps the first
//     member, as Go's own readers do not) is what the upstream reads (Python's json and most
//     parsers keep the last);
//   - invalid UTF-8 in a string (RFC 8259 section 8.1; outside strings every byte of valid JSON
//     is ASCII). Escapes are not UTF-8: a lone surrogate such as "\ud800" is accepted, as by
//     encoding/json, and reads as U+FFFD when names are compared.
//
// Paths in errors name a member from the root: object members as ".name" (no dot at the
// start), array elements as "[i]" (from 0), and a name that is not [A-Za-z_][A-Za-z0-9_]* as
// ["name"] in JSON string syntax, e.g. messages[1].content, metadata["x-tag"].
//
// A valid body without escaped member names costs no allocation (the scanner's state is
// pooled); an object of more than 16 members keeps its names in a map.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a body may have: "[[1]]" has depth 2.
const MaxDepth = 128

// Kind is what was wrong with a body.
type Kind uint8

const (
	// Syntax: not JSON (RFC 8259 grammar), including an empty body or trailing data.
	Syntax Kind = iota + 1
	// TooDeep: nested deeper than MaxDepth.
	TooDeep
	// Duplicate: an object has two members of the same name.
	Duplicate
	// InvalidUTF8: a string holds bytes that are not UTF-8.
	InvalidUTF8
)

// Error describes the first fault of a body. Its message is the one a client sees (API.md
// "Request bodies"):
//
//	Syntax:      invalid JSON at byte offset <n>
//	TooDeep:     JSON nesting deeper than the limit of 128 levels
//	Duplicate:   duplicate member "<name>" at <path> (a name over 128 bytes cut, ending in "…")
//	InvalidUTF8: invalid UTF-8 in a JSON string at byte offset <n>
type Error struct {
	Kind   Kind
	Offset int    // byte offset of the fault in the body
	Name   string // Duplicate: the member name, unescaped (whole)
	Path   string // Duplicate: the member's path (package doc)
}

func (e *Error) Error() string {
	switch e.Kind {
	case TooDeep:
		return "JSON nesting deeper than the limit of " + strconv.Itoa(MaxDepth) + " levels"
	case Duplicate:
		return "duplicate member " + quote(clip(e.Name)) + " at " + e.Path
	case InvalidUTF8:
		return "invalid UTF-8 in a JSON string at byte offset " + strconv.Itoa(e.Offset)
	}
	return "invalid JSON at byte offset " + strconv.Itoa(e.Offset)
}

// Check checks body (see the package doc); nil when it is valid.
func Check(body []byte) error { return Scan(body, nil) }

// CheckNesting is Check without the duplicate rule: syntax, depth and UTF-8 only. For JSON
// text the gateway walks but never forwards as members of the body, such as tool-call
// arguments (a JSON string to the upstream): it bounds the walk's recursion.
func CheckNesting(body []byte) error {
	s := pool.Get().(*scanner)
	s.noDup = true
	err := s.scan(body, nil)
	s.reset()
	pool.Put(s)
	return err
}

// Scan checks body as Check does and, in the same pass, calls member (when not nil) for each
// member of a top-level object, in order: name is the member name unescaped, value its raw
// value (no surrounding space). Both alias body or the scanner's buffer: valid during the call
// only. member is called as members are read, so it may have seen some when Scan then fails.
func Scan(body []byte, member func(name, value []byte)) error {
	s := pool.Get().(*scanner)
	err := s.scan(body, member)
	s.reset()
	pool.Put(s)
	return err
}

// smallObject is how many member names of an object are compared one by one; past it the
// object's names go into a map.
const smallObject = 16

type frame struct {
	obj      bool
	n        int  // members or elements read so far
	keyBase  int  // index of the object's first name in scanner.keys
	key      span // the current member's name (objects)
	valStart int  // where the current member's value starts (top-level object only)
	set      map[string]struct{}
}

// span is a member name in the body: the bytes between the quotes, esc when it has escapes.
type span struct {
	start, end int
	esc        bool
}

type scanner struct {
	stack [MaxDepth]frame
	used  int    // frames used in this scan (reset clears them)
	noDup bool   // CheckNesting: no duplicate rule
	keys  []span // the names of the open objects' first smallObject members, object by object
	buf1  []byte // unescaped names
	buf2  []byte
}

var pool = sync.Pool{New: func() any { return &scanner{keys: make([]span, 0, 64)} }}

func (s *scanner) reset() {
	for i := range s.stack[:s.used] {
		s.stack[i].set = nil
	}
	s.used = 0
	s.noDup = false
	s.keys = s.keys[:0]
	if cap(s.buf1) > 1<<16 {
		s.buf1 = nil
	}
	if cap(s.buf2) > 1<<16 {
		s.buf2 = nil
	}
}

func syntax(i int) error { return &Error{Kind: Syntax, Offset: i} }

func (s *scanner) scan(b []byte, member func(name, value []byte)) error {
	depth := 0
	i := skipSpace(b, 0)
	var err error
	for {
		// a value starts at i
		if i >= len(b) {
			return syntax(i)
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == MaxDepth {
				return &Error{Kind: TooDeep, Offset: i}
			}
			f := &s.stack[depth]
			*f = frame{obj: c == '{', keyBase: len(s.keys)}
			depth++
			s.used = max(s.used, depth)
			i = skipSpace(b, i+1)
			if i < len(b) && (b[i] == '}' && f.obj || b[i] == ']' && !f.obj) {
				depth--
				i++
				break
			}
			if f.obj {
				if i, err = s.name(b, i, depth); err != nil {
					return err
				}
			}
			continue
		case '"':
			if i, _, err = str(b, i); err != nil {
				return err
			}
		case 't':
			if i, err = literal(b, i, "true"); err != nil {
				return err
			}
		case 'f':
			if i, err = literal(b, i, "false"); err != nil {
				return err
			}
		case 'n':
			if i, err = literal(b, i, "null"); err != nil {
				return err
			}
		default:
			if i, err = number(b, i); err != nil {
				return err
			}
		}
		// a value ends at i: a separator, a closer or the end follows
		for {
			if depth == 0 {
				if i = skipSpace(b, i); i != len(b) {
					return syntax(i)
				}
				return nil
			}
			f := &s.stack[depth-1]
			if depth == 1 && f.obj && member != nil {
				member(s.unescaped(b, f.key, &s.buf1), b[f.valStart:i])
			}
			if i = skipSpace(b, i); i >= len(b) {
				return syntax(i)
			}
			if b[i] == ',' {
				f.n++
				i = skipSpace(b, i+1)
				if f.obj {
					if i, err = s.name(b, i, depth); err != nil {
						return err
					}
				}
				break
			}
			if b[i] == '}' && f.obj || b[i] == ']' && !f.obj {
				depth--
				i++
				s.keys = s.keys[:f.keyBase]
				f.set = nil
				continue
			}
			return syntax(i)
		}
	}
}

// name reads the member name at i of the object at depth, the ':' after it and the space up
// to its value; it refuses a name the object already has.
func (s *scanner) name(b []byte, i, depth int) (int, error) {
	f := &s.stack[depth-1]
	if i >= len(b) || b[i] != '"' {
		return i, syntax(i)
	}
	end, esc, err := str(b, i)
	if err != nil {
		return i, err
	}
	k := span{start: i + 1, end: end - 1, esc: esc}
	f.key = k
	if !s.noDup && s.seen(b, f, k) {
		return i, &Error{Kind: Duplicate, Offset: i, Name: string(s.unescaped(b, k, &s.buf1)), Path: s.path(b, depth)}
	}
	if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
		return i, syntax(i)
	}
	i = skipSpace(b, i+1)
	f.valStart = i
	return i, nil
}

// seen records name k in object f and reports whether f already had it.
func (s *scanner) seen(b []byte, f *frame, k span) bool {
	if f.set != nil {
		name := s.unescaped(b, k, &s.buf1)
		if _, ok := f.set[string(name)]; ok {
			return true
		}
		f.set[string(name)] = struct{}{}
		return false
	}
	prev := s.keys[f.keyBase:]
	for _, p := range prev {
		if !p.esc && !k.esc {
			if bytes.Equal(b[p.start:p.end], b[k.start:k.end]) {
				return true
			}
			continue
		}
		if bytes.Equal(s.unescaped(b, p, &s.buf1), s.unescaped(b, k, &s.buf2)) {
			return true
		}
	}
	if len(prev) < smallObject {
		s.keys = append(s.keys, k)
		return false
	}
	// a large object: its names move to a map
	f.set = make(map[string]struct{}, 2*smallObject)
	for _, p := range prev {
		f.set[string(s.unescaped(b, p, &s.buf1))] = struct{}{}
	}
	f.set[string(s.unescaped(b, k, &s.buf1))] = struct{}{}
	s.keys = s.keys[:f.keyBase]
	return false
}

// unescaped is name k, unescaped into *buf when it has escapes.
func (s *scanner) unescaped(b []byte, k span, buf *[]byte) []byte {
	raw := b[k.start:k.end]
	if !k.esc {
		return raw
	}
	*buf = unescape((*buf)[:0], raw)
	return *buf
}

// path is the path of the current member of the object at depth (package doc).
func (s *scanner) path(b []byte, depth int) string {
	var p []byte
	for d := 0; d < depth; d++ {
		f := &s.stack[d]
		if !f.obj {
			p = append(p, '[')
			p = strconv.AppendInt(p, int64(f.n), 10)
			p = append(p, ']')
			continue
		}
		name := clip(string(s.unescaped(b, f.key, &s.buf2)))
		if identifier(name) {
			if len(p) > 0 {
				p = append(p, '.')
			}
			p = append(p, name...)
		} else {
			p = append(p, '[')
			p = append(p, quote(name)...)
			p = append(p, ']')
		}
	}
	return string(p)
}

// maxName is how much of a member name an error message shows.
const maxName = 128

// clip cuts a name longer than maxName bytes at a rune boundary and marks the cut with "…".
func clip(s string) string {
	if len(s) <= maxName {
		return s
	}
	i := maxName
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// quote is s as a JSON string (only '"', '\\' and control characters escaped).
func quote(s string) string {
	q := make([]byte, 0, len(s)+2)
	q = append(q, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			q = append(q, '\\', c)
		case c < 0x20:
			q = append(q, `\u00`...)
			q = append(q, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			q = append(q, c)
		}
	}
	return string(append(q, '"'))
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	return i
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, syntax(i)
	}
	return i + len(lit), nil
}

// number reads an RFC 8259 number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(b []byte, i int) (int, error) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return start, syntax(i)
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return start, syntax(j)
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return start, syntax(j)
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// plain marks the bytes a string holds as they are: printable ASCII but '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads the string at i (b[i] == '"') and returns the index after its closing quote and
// whether it has escapes.
func str(b []byte, i int) (end int, esc bool, err error) {
	i++
	for {
		// eight bytes at a time while none is special (SWAR: a byte < 0x20, '"', '\\' or
		// >= 0x80 sets its high bit in special), then byte by byte
		for len(b)-i >= 8 {
			if sp := special(binary.LittleEndian.Uint64(b[i:])); sp != 0 {
				i += bits.TrailingZeros64(sp) / 8 // the lowest flagged byte is special
				break
			}
			i += 8
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, esc, syntax(i)
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return i, esc, syntax(i + 1)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !hex4(b[i+2:i+6]) {
					return i, esc, syntax(i)
				}
				i += 6
			default:
				return i, esc, syntax(i + 1)
			}
		case c < 0x20:
			return i, esc, syntax(i)
		default: // >= 0x80
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, esc, &Error{Kind: InvalidUTF8, Offset: i}
			}
			i += size
		}
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special has the high bit of each byte of w set that is < 0x20, '"', '\\' or >= 0x80, and
// possibly of a byte after such a byte (a borrow), never of one before: the lowest set bit is
// in the first special byte (little endian).
func special(w uint64) uint64 {
	quote := w ^ (ones * '"')
	bslash := w ^ (ones * '\\')
	return ((w - ones*0x20) | (quote - ones) | (bslash - ones) | w) & highs
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hexVal(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c <= '9':
			r |= rune(c - '0')
		case c >= 'a':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unescape appends the text of raw (a valid string's content) to dst, as encoding/json reads
// it: a lone surrogate is U+FFFD.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hexVal(raw[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hexVal(raw[i+2:i+6])); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst
}
