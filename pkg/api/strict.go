package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// decodeStrict reads a management write's JSON object body into v (a pointer to a struct) and
// refuses any member v does not declare (API.md "Keys": "Any field the route does not know →
// 400 naming it; nothing is stored. A field is never accepted and then ignored."). So the
// request struct of a route is its one list of accepted fields: adding a json-tagged field is
// what makes the route accept it. It is decodeFields for routes that decode into a struct:
// the same check (checkFields) and the same error texts.
//
// Known names are the json tags of v's fields, exactly (encoding/json would also match
// "Models" to "models"; a strict route does not). Embedded structs contribute their fields;
// a field whose type is one of this package's structs (or a pointer to one) is checked the
// same way one level down ("guardrail.default_on"). json.RawMessage, maps and interfaces stay
// open: they hold objects LiteLLM defines loosely (litellm_params, whose unknown keys LiteLLM
// passes to the provider, model_info, metadata, agent_card_params) and are validated by their
// builders.
//
// Errors (400, in the route's envelope): malformed JSON as decodeJSON, an unknown field as
// checkFields, a field of the wrong JSON type: "malformed JSON body: models must be a list,
// got string".
func decodeStrict(c echo.Context, v any) error {
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	return unmarshalStrict(c, raw, v)
}

// unmarshalStrict is decodeStrict of a body already read.
func unmarshalStrict(c echo.Context, raw json.RawMessage, v any) error {
	if err := checkStruct(raw, reflect.TypeOf(v).Elem(), "", c.Path()); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return badRequest("malformed JSON body: %v", jsonErrText(err))
	}
	return nil
}

// checkStruct refuses members of the JSON object raw that struct type t does not declare, one
// level down too for this package's structs (see decodeStrict). A raw that is not an object is
// left to json.Unmarshal to refuse.
func checkStruct(raw json.RawMessage, t reflect.Type, prefix, where string) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return nil
	}
	sf := structFieldsOf(t)
	if err := checkFields(obj, sf.known, prefix, where); err != nil {
		return err
	}
	for name, sub := range sf.nested {
		if v, ok := obj[name]; ok && !isNull(v) {
			if err := checkStruct(v, sub, prefix+name+".", name); err != nil {
				return err
			}
		}
	}
	return nil
}

// structFields is a request struct's accepted JSON members, and those checked one level down
// with the struct type they decode into.
type structFields struct {
	known  fields
	nested map[string]reflect.Type
}

var structFieldsCache sync.Map // reflect.Type → *structFields

// jsonUnmarshaler: a type that decodes itself (keys' optional) is not checked a level down.
var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// apiPkg is this package's path: only its own request structs are checked a level down.
var apiPkg = reflect.TypeFor[structFields]().PkgPath()

func structFieldsOf(t reflect.Type) *structFields {
	if sf, ok := structFieldsCache.Load(t); ok {
		return sf.(*structFields)
	}
	sf := &structFields{known: fields{}, nested: map[string]reflect.Type{}}
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
			sf.known[tag] = fAny // json.Unmarshal checks the type
			if ft.Kind() == reflect.Struct && ft.PkgPath() == apiPkg && !reflect.PointerTo(ft).Implements(jsonUnmarshaler) {
				sf.nested[tag] = ft
			}
		}
	}
	collect(t)
	structFieldsCache.Store(t, sf)
	return sf
}

// jsonErrText names the field of a type mismatch the way a caller wrote it.
func jsonErrText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("%s must be %s, got %s", te.Field, jsonTypeName(te.Type), te.Value)
	}
	if errors.As(err, &te) && te.Type.Kind() == reflect.Struct {
		// the body itself is not an object ([1], "x"): say so, not the Go type it missed
		return fmt.Sprintf("the body must be a JSON object, got %s", te.Value)
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

func typeOfElem(v any) reflect.Type { return reflect.TypeOf(v).Elem() }
