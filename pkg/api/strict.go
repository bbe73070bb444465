package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// decodeStrict reads a management write's JSON object body into v (a pointer to a struct) and
// refuses any member v does not declare (API.md "Keys": "Any field the route does not know →
// 400 naming it; nothing is stored. A field is never accepted and then ignored."). So the
// request struct of a route is its one list of accepted fields: adding a json-tagged field is
// what makes the route accept it.
//
// Known names are the json tags of v's fields, exactly (encoding/json would also match
// "Models" to "models"; a strict route does not). Embedded structs contribute their fields;
// a field whose type is a struct (or a pointer to one) is checked the same way one level
// down ("guardrail.default_on"). json.RawMessage, maps and interfaces stay open: they hold
// objects LiteLLM defines loosely (litellm_params, which passes unknown keys to the
// provider, model_info, metadata, agent_card_params) and are validated by their builders.
//
// Errors (400, in the route's envelope): malformed JSON as decodeJSON, and
//
//	unknown field "rpm_limit" (known fields: duration, key_alias, metadata, models)
//	unknown fields "a", "b" (known fields: ...)
//	unknown field "guardrail.default_on" (known fields of guardrail: ...)
func decodeStrict(c echo.Context, v any) error {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	if err := checkKnownFields(raw, reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return badRequest("malformed JSON body: %v", jsonErrText(err))
	}
	return nil
}

// jsonErrText names the field of a type mismatch the way a caller wrote it.
func jsonErrText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s must be %s, got %s", te.Field, jsonTypeName(te.Type), te.Value)
	}
	return err.Error()
}

func jsonTypeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}

// checkKnownFields refuses members of the JSON object raw that struct type t does not declare;
// path is the dotted name of raw's parent ("" at the top). A raw that is not an object is left
// to json.Unmarshal to refuse.
func checkKnownFields(raw json.RawMessage, t reflect.Type, path string) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	fs := fieldsOf(t)
	var unknown []string
	for name, v := range obj {
		sub, ok := fs.byName[name]
		if !ok {
			unknown = append(unknown, name)
			continue
		}
		if sub != nil && !isNull(v) {
			if err := checkKnownFields(v, sub, path+name+"."); err != nil {
				return err
			}
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	for i, u := range unknown {
		unknown[i] = fmt.Sprintf("%q", path+u)
	}
	noun := "field"
	if len(unknown) > 1 {
		noun = "fields"
	}
	where := ""
	if path != "" {
		where = " of " + strings.TrimSuffix(path, ".")
	}
	return badRequest("unknown %s %s (known fields%s: %s)", noun, strings.Join(unknown, ", "), where, strings.Join(fs.names, ", "))
}

// knownFields is a struct type's accepted JSON member names; byName maps each to the struct
// type it is checked against one level down, or nil when its value is open.
type knownFields struct {
	names  []string // sorted
	byName map[string]reflect.Type
}

var knownFieldsCache sync.Map // reflect.Type → *knownFields

// apiPkg is this package's path: only its own request structs are checked a level down.
var apiPkg = reflect.TypeFor[knownFields]().PkgPath()

func fieldsOf(t reflect.Type) *knownFields {
	if kf, ok := knownFieldsCache.Load(t); ok {
		return kf.(*knownFields)
	}
	kf := &knownFields{byName: map[string]reflect.Type{}}
	var collect func(t reflect.Type)
	collect = func(t reflect.Type) {
		for f := range t.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" {
				continue
			}
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
				collect(ft)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			var sub reflect.Type
			if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[json.RawMessage]() && ft.PkgPath() == apiPkg {
				sub = ft
			}
			kf.byName[tag] = sub
			kf.names = append(kf.names, tag)
		}
	}
	collect(t)
	slices.Sort(kf.names)
	knownFieldsCache.Store(t, kf)
	return kf
}
