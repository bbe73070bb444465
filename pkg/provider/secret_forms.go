package provider

import (
	"encoding/base64"
	"net/url"
	"strings"
	"unicode/utf16"
)

// basicCredential returns the credential net/http sends for a URL's userinfo when no
// Authorization header is set ("Authorization: Basic <base64(user:password)>", RFC 7617
// section 2; net/http Transport, Request.SetBasicAuth): an upstream that echoes its request
// headers quotes it, and it decodes to the api_base password. "" when the URL has none.
func basicCredential(apiBase string) string {
	u, err := url.Parse(apiBase)
	if err != nil || u.User == nil {
		return ""
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))
}

// jsonEscapedForms returns the ways common JSON encoders write s inside a string literal,
// other than s itself (RFC 8259 section 7 allows any character to be escaped): an upstream that
// echoes a header in a JSON text (Python's json.dumps of the headers, a PHP or Java error page)
// quotes a credential that way, and a byte search for s would miss it. The forms: quote,
// backslash and control characters escaped (every encoder); plus "<", ">", "&", U+2028 and
// U+2029 as \u escapes (Go's encoding/json); plus every non-ASCII character as \u escapes
// (Python's default ensure_ascii); plus "/" as "\/" (PHP's json_encode). Hex digits lower
// case, as each of them writes them.
func jsonEscapedForms(s string) []string {
	const (
		html = 1 << iota
		ascii
		slash
	)
	var out []string
	for _, mode := range [...]int{0, html, ascii, slash | ascii, slash} {
		var b strings.Builder
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r < 0x20:
				writeU(&b, r)
			case r == '/' && mode&slash != 0:
				b.WriteString(`\/`)
			case (r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029') && mode&html != 0:
				writeU(&b, r)
			case r >= 0x80 && mode&ascii != 0:
				if r > 0xFFFF {
					r1, r2 := utf16.EncodeRune(r)
					writeU(&b, r1)
					writeU(&b, r2)
				} else {
					writeU(&b, r)
				}
			default:
				b.WriteRune(r)
			}
		}
		if e := b.String(); e != s {
			out = append(out, e)
		}
	}
	return out
}

// writeU writes r (at most U+FFFF) as a \uXXXX escape, lower-case hex.
func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xF])
	}
}

const hexDigits = "0123456789abcdef"
