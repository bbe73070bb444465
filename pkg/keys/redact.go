package keys

import "strings"

// RedactText returns s with every virtual key in it ("sk-" then key characters, at the start
// of s or after a character that is not a letter, digit, '_' or '-') shortened to "sk-…" and
// its last 4 characters ("sk-…abcd"; a key of 8 characters or fewer after "sk-" keeps none):
// the one helper for log lines that carry request paths or queries (API.md "Security rules":
// raw virtual keys never appear in logs), e.g. POST /key/sk-…abcd/regenerate. Key characters
// are those of Generate's keys and of custom keys: letters, digits, '_', '-', '.', '~', '+',
// '/' excluded (a path separator ends the key). s without "sk-" is returned as is, without
// allocating.
func RedactText(s string) string {
	i := strings.Index(s, "sk-")
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		if i > 0 && isKeyChar(s[i-1]) { // "task-…", "disk-…": not a key
			b.WriteString(s[:i+3])
			s = s[i+3:]
			i = strings.Index(s, "sk-")
			continue
		}
		j := i + 3
		for j < len(s) && (isKeyChar(s[j]) || s[j] == '.' || s[j] == '~' || s[j] == '+') {
			j++
		}
		b.WriteString(s[:i])
		b.WriteString("sk-…")
		if body := s[i+3 : j]; len(body) > 8 {
			b.WriteString(body[len(body)-4:])
		}
		s = s[j:]
		i = strings.Index(s, "sk-")
	}
	b.WriteString(s)
	return b.String()
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
