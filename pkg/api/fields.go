package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/keys"
	"lockstep/pkg/numbers"
)

// fieldKind is the JSON type a management field takes, checked before anything is written.
type fieldKind int

const (
	fString   fieldKind = iota // string (null: unset)
	fStrings                   // array of strings
	fNumber                    // number >= 0
	fInt                       // integer >= 0
	fBool                      // true or false
	fObject                    // JSON object
	fDuration                  // budget duration string ("30s", "1h", "30d", "1mo")
	fMembers                   // array of {"user_id"?, "user_email"?, "role": "admin"|"user"}
	fAny                       // any JSON value (route-specific, checked by the handler)
)

// fields is one route's declared known-field list: field name → kind. A body field not in it
// is a 400 naming the field, and nothing is stored (API.md "Any field the route does not know").
type fields map[string]fieldKind

func (f fields) names() []string {
	out := make([]string, 0, len(f))
	for n := range f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// with returns f plus more (f is not changed).
func (f fields) with(more fields) fields {
	out := make(fields, len(f)+len(more))
	for k, v := range f {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// decodeFields reads the body as a JSON object whose every field must be in known, each of its
// declared kind. Errors (400): malformed JSON, a body that is not an object, an unknown field
// (named, with the fields the route accepts), a field of the wrong type (named).
func decodeFields(c echo.Context, known fields) (map[string]json.RawMessage, error) {
	var body map[string]json.RawMessage
	if err := decodeJSON(c, &body); err != nil {
		return nil, err
	}
	if body == nil {
		return nil, badRequest("malformed JSON body: expected a JSON object")
	}
	if err := checkFields(body, known, "", c.Path()); err != nil {
		return nil, err
	}
	return body, nil
}

// checkFields checks that every member of body is in known, of its declared kind. prefix is
// the dotted path of body in the request ("" at the top, "guardrail." one level down) and
// where names what accepts known in the error: the route at the top, else the parent field.
// The first unknown field in name order is named:
//
//	unknown field "rpm_limit": /key/generate accepts duration, key_alias, metadata, models
//	unknown field "guardrail.default_on": guardrail accepts guardrail_info, guardrail_name, ...
func checkFields(body map[string]json.RawMessage, known fields, prefix, where string) error {
	names := make([]string, 0, len(body))
	for n := range body {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		kind, ok := known[n]
		if !ok {
			return badRequest("unknown field %q: %s accepts %s", prefix+n, where, strings.Join(known.names(), ", "))
		}
		if err := checkKind(prefix+n, kind, body[n]); err != nil {
			return err
		}
	}
	return nil
}

func checkKind(name string, kind fieldKind, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	switch kind {
	case fString:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return badRequest("%s must be a string", name)
		}
	case fStrings:
		var l []string
		if json.Unmarshal(raw, &l) != nil {
			return badRequest("%s must be an array of strings", name)
		}
	case fNumber:
		var f float64
		if numbers.OutOfRange(raw) {
			return badRequest("%s", numbers.RangeError(name, raw))
		}
		if json.Unmarshal(raw, &f) != nil || f < 0 || math.IsInf(f, 0) {
			return badRequest("%s must be a number >= 0", name)
		}
	case fInt:
		var i int64
		if json.Unmarshal(raw, &i) != nil || i < 0 {
			return badRequest("%s must be an integer >= 0", name)
		}
	case fBool:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return badRequest("%s must be true or false", name)
		}
	case fObject:
		if _, err := objectOf(raw, name); err != nil {
			return err
		}
	case fDuration:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return badRequest("%s must be a string like 30s, 1h, 30d or 1mo", name)
		}
		if _, err := keys.ParseDuration(s); err != nil {
			return badRequest("%s", keys.DurationError(name, err))
		}
	case fMembers:
		if _, err := parseMembers(name, raw); err != nil {
			return err
		}
	}
	return nil
}

// parseMembers reads a member or a list of members (LiteLLM accepts both in /team/member_add).
// Each needs user_id or user_email, and role admin or user (default user).
func parseMembers(name string, raw json.RawMessage) ([]accounts.Member, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' {
		raw = append(append([]byte{'['}, raw...), ']')
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("%s must be a member object or an array of them: {\"user_id\", \"user_email\"?, \"role\": \"admin\" | \"user\"}", name)
	}
	out := make([]accounts.Member, 0, len(list))
	for i, m := range list {
		var mb accounts.Member
		for k, v := range m {
			var s string
			if !isNull(v) && json.Unmarshal(v, &s) != nil {
				return nil, badRequest("%s[%d].%s must be a string", name, i, k)
			}
			switch k {
			case "user_id":
				mb.UserID = s
			case "user_email":
				mb.UserEmail = s
			case "role":
				mb.Role = s
			default:
				return nil, badRequest("unknown field %q in %s[%d]: a member has user_id, user_email, role", k, name, i)
			}
		}
		if mb.UserID == "" && mb.UserEmail == "" {
			return nil, badRequest("%s[%d]: user_id or user_email is required", name, i)
		}
		if mb.Role == "" {
			mb.Role = accounts.RoleUser
		}
		if mb.Role != accounts.RoleAdmin && mb.Role != accounts.RoleUser {
			return nil, badRequest("%s[%d].role: %q is not a team role (want admin or user)", name, i, mb.Role)
		}
		out = append(out, mb)
	}
	return out, nil
}

// columnValues turns the checked body fields that are columns (every field of cols present in
// body) into store values: null clears a column (text[] and jsonb columns to their empty value).
func columnValues(body map[string]json.RawMessage, cols fields) (mgmt.Values, error) {
	v := mgmt.Values{}
	for name, kind := range cols {
		raw, ok := body[name]
		if !ok {
			continue
		}
		if isNull(raw) {
			switch kind {
			case fStrings:
				v[name] = []string{}
			case fObject:
				v[name] = []byte("{}")
			case fMembers:
				v[name] = []byte("[]")
			case fBool:
				v[name] = false
			default:
				v[name] = nil
			}
			continue
		}
		switch kind {
		case fString, fDuration:
			var s string
			_ = json.Unmarshal(raw, &s)
			v[name] = s
		case fStrings:
			var l []string
			_ = json.Unmarshal(raw, &l)
			if l == nil {
				l = []string{}
			}
			v[name] = l
		case fNumber:
			var f float64
			_ = json.Unmarshal(raw, &f)
			v[name] = f
		case fInt:
			var i int64
			_ = json.Unmarshal(raw, &i)
			v[name] = i
		case fBool:
			var b bool
			_ = json.Unmarshal(raw, &b)
			v[name] = b
		case fObject:
			v[name] = []byte(raw)
		case fMembers:
			ms, err := parseMembers(name, raw)
			if err != nil {
				return nil, err
			}
			b, _ := json.Marshal(ms)
			v[name] = b
		default:
			return nil, fmt.Errorf("field %s: kind %d is not a column", name, kind)
		}
	}
	return v, nil
}

// str returns a string field of a checked body ("" when absent or null).
func str(body map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := body[name]; ok && !isNull(raw) {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// strs returns a string-list field of a checked body (nil when absent or null).
func strs(body map[string]json.RawMessage, name string) []string {
	var l []string
	if raw, ok := body[name]; ok && !isNull(raw) {
		_ = json.Unmarshal(raw, &l)
	}
	return l
}
