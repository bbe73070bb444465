package api

import (
	"bytes"
	"encoding/json"
	mgmt "lockstep/pkg/admin"
	"strings"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/catalogue"
	"lockstep/pkg/keys"
	"lockstep/pkg/router"
)

// LiteLLM request fields without a lockstep column (pkg/catalogue; API.md "Compatibility
// policy"): the strict decoders consult the catalogue for a member the route's own decoder
// does not declare. Honoured and stored fields are taken out of the body and kept in the
// object's litellm_fields jsonb (sql/011); a not-yet-supported field with a value other than
// LiteLLM's default is a 400 naming it; a name LiteLLM does not define stays for checkFields
// to refuse as unknown.

// splitLiteLLM takes the members of body that model m defines but known does not out of body:
// the honoured and stored ones are returned (checked against their kind); a NotYet one with
// LiteLLM's default value (null, {}, [], false, 0, "", "default") is dropped, with any other
// value it is the error
//
//	field "model_max_budget" is not supported yet: lockstep does not enforce it, and a field that would limit a caller is never accepted and ignored
func splitLiteLLM(m catalogue.Model, body map[string]json.RawMessage, known func(string) bool) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	for name, raw := range body {
		if known(name) {
			continue
		}
		f, ok := catalogue.Lookup(m, name)
		if !ok {
			continue
		}
		switch f.Treatment {
		case catalogue.NotYet:
			if !isDefault(raw) {
				return nil, notYetField(name)
			}
		case catalogue.Honoured, catalogue.Stored:
			if err := checkCatalogueKind(name, f.Kind, raw); err != nil {
				return nil, err
			}
			if out == nil {
				out = map[string]json.RawMessage{}
			}
			out[name] = raw
		default:
			continue // a Column the route does not declare: checkFields names it
		}
		delete(body, name)
	}
	return out, nil
}

// isDefault reports whether raw is a LiteLLM default that changes nothing.
func isDefault(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "null", "{}", "[]", "false", "0", "0.0", `""`, `"default"`:
		return true
	}
	return false
}

// notYetField is the 400 for a LiteLLM field (or member, "object_permission.models") lockstep
// does not enforce yet, set to a value that would change what a caller may do.
func notYetField(name string) error {
	return badRequest("field %q is not supported yet: lockstep does not enforce it, and a field that would limit a caller is never accepted and ignored", name)
}

func checkCatalogueKind(name string, k catalogue.Kind, raw json.RawMessage) error {
	switch k {
	case catalogue.ObjectPermission, catalogue.KeyType, catalogue.LimitType, catalogue.Duration, catalogue.Permissions, catalogue.KeyRoutes:
		return checkAccessKind(name, k, raw)
	case catalogue.RouterSettings:
		if _, err := router.ParseCallerSettings(raw); err != nil {
			return badRequest("%v", err)
		}
	case catalogue.GroupIDs:
		return checkGroupIDs(name, raw)
	case catalogue.String:
		return checkKind(name, fString, raw)
	case catalogue.Strings:
		return checkKind(name, fStrings, raw)
	case catalogue.Bool:
		return checkKind(name, fBool, raw)
	case catalogue.Number:
		return checkKind(name, fNumber, raw)
	case catalogue.Object:
		return checkKind(name, fObject, raw)
	case catalogue.IntMap:
		if isNull(raw) {
			return nil
		}
		var m map[string]int64
		if json.Unmarshal(raw, &m) != nil {
			return badRequest("%s must be an object of integers >= 0 by model group: {\"model group\": 10}", name)
		}
		for mg, n := range m {
			if n < 0 {
				return badRequest("%s[%q] must be an integer >= 0, got %d", name, mg, n)
			}
		}
	case catalogue.ModelBudgetMap:
		if _, err := keys.ParseModelBudgets(raw); err != nil {
			return badRequest("%v", err)
		}
	case catalogue.StringMap:
		if isNull(raw) {
			return nil
		}
		var m map[string]string
		if json.Unmarshal(raw, &m) != nil {
			return badRequest("%s must be an object of model names: {\"alias\": \"model group\"}", name)
		}
	}
	return nil
}

// maxGroupIDs bounds a key's or team's access_group_ids.
const maxGroupIDs = 100

// checkGroupIDs checks access_group_ids: null or a list of at most maxGroupIDs non-blank,
// distinct strings (whether each group exists is checked in the write's transaction).
func checkGroupIDs(name string, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var l []string
	if json.Unmarshal(raw, &l) != nil {
		return badRequest("%s must be a list of access group ids (strings)", name)
	}
	if len(l) > maxGroupIDs {
		return badRequest("%s: at most %d access groups, got %d", name, maxGroupIDs, len(l))
	}
	seen := make(map[string]bool, len(l))
	for i, id := range l {
		if strings.TrimSpace(id) == "" {
			return badRequest("%s[%d] must be a non-blank access group id", name, i)
		}
		if seen[id] {
			return badRequest("%s: %q is listed twice", name, id)
		}
		seen[id] = true
	}
	return nil
}

// litellmFieldsValue is the litellm_fields value of a write: the fields merged into the
// stored object (nil: none given).
func litellmFieldsValue(extra map[string]json.RawMessage) mgmt.Values {
	if len(extra) == 0 {
		return nil
	}
	b, _ := json.Marshal(extra)
	return mgmt.Values{"litellm_fields": mgmt.JSONMerge(b)}
}

// decodeFieldsModel is decodeFields for a route serving LiteLLM request model m: the body's
// members the route declares (known), plus the catalogue's honoured and stored ones
// (returned apart, see splitLiteLLM).
func decodeFieldsModel(c echo.Context, known fields, m catalogue.Model) (map[string]json.RawMessage, map[string]json.RawMessage, error) {
	var body map[string]json.RawMessage
	if err := decodeJSON(c, &body); err != nil {
		return nil, nil, err
	}
	if body == nil {
		return nil, nil, badRequest("malformed JSON body: expected a JSON object")
	}
	extra, err := splitLiteLLM(m, body, func(n string) bool { _, ok := known[n]; return ok })
	if err != nil {
		return nil, nil, err
	}
	if err := checkFields(body, known, "", c.Path()); err != nil {
		return nil, nil, err
	}
	return body, extra, nil
}

// decodeStrictModel is decodeStrict for a route serving LiteLLM request model m (see
// decodeFieldsModel): v gets the members its struct declares, the catalogue's honoured and
// stored ones are returned.
func decodeStrictModel(c echo.Context, v any, m catalogue.Model) (map[string]json.RawMessage, error) {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return nil, err
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(raw, &body) != nil || body == nil {
		return nil, unmarshalStrict(c, raw, v)
	}
	sf := structFieldsOf(typeOfElem(v))
	extra, err := splitLiteLLM(m, body, func(n string) bool { _, ok := sf.known[n]; return ok })
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 {
		if raw, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	return extra, unmarshalStrict(c, raw, v)
}

// withLiteLLMFields renders an object's answer with its litellm_fields members at the top
// level, as LiteLLM returns them (a column of the same name wins), and without
// litellm_fields itself.
func withLiteLLMFields(out map[string]any) {
	lf, ok := out["litellm_fields"].(map[string]any)
	delete(out, "litellm_fields")
	if !ok {
		return
	}
	for k, v := range lf {
		if _, taken := out[k]; !taken {
			out[k] = v
		}
	}
}

// memberNulls gives every member of a team row's members_with_roles both "user_id" and
// "user_email", null when the member has none, as LiteLLM's Member model serialises
// (user_email: null for a member added by user_id only).
func memberNulls(m map[string]any) {
	ms, ok := m["members_with_roles"].([]any)
	if !ok {
		return
	}
	for _, v := range ms {
		mm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		for _, f := range [...]string{"user_id", "user_email"} {
			if _, ok := mm[f]; !ok {
				mm[f] = nil
			}
		}
	}
}
