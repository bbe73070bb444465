package notify

import (
	"encoding/json"
	"strconv"

	"lockstep/pkg/store"
)

// parseEvent decodes a gateway_registry payload (sql/001: json_build_object of seq, type, op,
// id, v, ts) into ev. Every notification of every write reaches every replica, so the common
// shape is read without reflection or allocation: one flat object whose members are those six
// names, strings of printable ASCII without escapes, integers without sign or leading zeros
// (seq, v, ts are positive), as json_build_object writes them. Anything else (an escape, a
// non-ASCII byte, another member, a duplicate, null, a fraction) is decoded by encoding/json
// instead, so a payload means exactly what json.Unmarshal makes of it and fails as it does.
func parseEvent(payload string, ev *event) error {
	if scanEvent(payload, ev) {
		return nil
	}
	*ev = event{}
	return json.Unmarshal([]byte(payload), ev)
}

// scanEvent is parseEvent's fast path: it reports false, leaving ev partly set, when payload
// is not of the common shape.
func scanEvent(p string, ev *event) bool {
	*ev = event{}
	i := skipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return false
	}
	var seen uint8
	for {
		// a member follows '{' or ',' ("{}" is valid, but never ours: encoding/json decides)
		i = skipSpace(p, i+1)
		name, j, ok := scanString(p, i)
		if !ok {
			return false
		}
		i = skipSpace(p, j)
		if i >= len(p) || p[i] != ':' {
			return false
		}
		i = skipSpace(p, i+1)
		var bit uint8
		switch name {
		case "seq", "v", "ts":
			n, j, ok := scanUint(p, i)
			if !ok {
				return false
			}
			switch name {
			case "seq":
				ev.Seq, bit = n, 1
			case "v":
				ev.V, bit = n, 2
			default:
				ev.TS, bit = n, 4
			}
			i = j
		case "type", "op", "id":
			v, j, ok := scanString(p, i)
			if !ok {
				return false
			}
			switch name {
			case "type":
				ev.Type, bit = store.ObjectType(v), 8
			case "op":
				ev.Op, bit = v, 16
			default:
				ev.ID, bit = v, 32
			}
			i = j
		default:
			return false
		}
		if seen&bit != 0 {
			return false // a duplicate member: encoding/json keeps the last
		}
		seen |= bit
		i = skipSpace(p, i)
		if i >= len(p) {
			return false
		}
		if p[i] == '}' {
			break
		}
		if p[i] != ',' {
			return false
		}
	}
	return skipSpace(p, i+1) == len(p)
}

func skipSpace(p string, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// scanString reads a JSON string at p[i] made of printable ASCII without escapes; returns it
// (a substring of p) and the index after its closing quote.
func scanString(p string, i int) (string, int, bool) {
	if i >= len(p) || p[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(p); j++ {
		switch c := p[j]; {
		case c == '"':
			return p[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", 0, false
		}
	}
	return "", 0, false
}

// scanUint reads a JSON integer at p[i]: digits without sign or leading zero, fitting int64.
func scanUint(p string, i int) (int64, int, bool) {
	j := i
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	if j == i || (p[i] == '0' && j-i > 1) || (j < len(p) && (p[j] == '.' || p[j] == 'e' || p[j] == 'E')) {
		return 0, 0, false
	}
	n, err := strconv.ParseInt(p[i:j], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return n, j, true
}
