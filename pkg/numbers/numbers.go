// Package numbers guards the numeric settings that money, time and capacity hang on: every
// timeout, price, budget and limit is a finite number >= 0 (API.md "Security rules": NaN,
// infinite or negative timeouts, prices, budgets and limits → 400 naming the field).
//
// Why a package of its own: the same rule holds on every write path (the management API, the
// config file, rows written by psql), so each object kind's one builder (router.Build,
// keys.BuildRow, accounts' Limits) calls it rather than each handler. JSON has no NaN or
// Infinity literal, but a number like 1e999 parses to +Inf, and lenient parsers (Go's
// strconv.ParseFloat, Python's float) turn the strings "NaN", "Inf" and "-Infinity" into them;
// a NaN compares false with everything, so a range check written as `f < 0 || f > max` lets it
// through. LiteLLM itself accepts such values (pydantic float), which is what made them
// dangerous there: a NaN timeout fails every call, a negative price lowers spend.
package numbers

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// ErrInvalid is wrapped by every error of this package (errors.Is).
var ErrInvalid = errors.New("invalid number")

// FieldError is a refused value: Field is its path ("model_info.input_cost_per_token"), Got
// the value as given.
type FieldError struct {
	Field, Got string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s must be a finite number >= 0, got %s", e.Field, e.Got)
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

// Valid reports whether f is finite and >= 0 (written so that NaN fails).
func Valid(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

// Check returns a *FieldError naming field when f is NaN, ±Inf or negative.
func Check(field string, f float64) error {
	if Valid(f) {
		return nil
	}
	return &FieldError{Field: field, Got: strconv.FormatFloat(f, 'g', -1, 64)}
}

// CheckPtr is Check for an optional value (nil: unset, valid).
func CheckPtr[T ~float64 | ~int64 | ~int](field string, p *T) error {
	if p == nil {
		return nil
	}
	return Check(field, float64(*p))
}

// Guarded reports whether a member named name is a timeout, price, budget or limit:
// *cost* (input_cost_per_token, output_cost_per_second, cache_read_input_token_cost, …),
// *budget (max_budget, soft_budget, model_max_budget, max_budget_in_team), *timeout (timeout,
// stream_timeout), rpm, tpm, *_limit (rpm_limit, tpm_limit, budget_limit) and
// max_parallel_requests. budget_duration and budget_id are not numbers and not guarded.
func Guarded(name string) bool {
	switch name {
	case "rpm", "tpm", "max_parallel_requests":
		return true
	}
	return strings.Contains(name, "cost") || strings.HasSuffix(name, "budget") ||
		strings.HasSuffix(name, "timeout") || strings.HasSuffix(name, "_limit")
}

// CheckObject checks the guarded members (Guarded) of the JSON object obj, whose path is
// prefix ("model_info"): each must be null, a number, or a string holding a number (as LiteLLM
// coerces one), and every number in it, nested objects and arrays included (LiteLLM's
// search_context_cost_per_query is an object of prices), must pass Check. A string
// "os.environ/NAME" is left to the caller, which resolves it. Other members are not looked at.
func CheckObject(prefix string, obj gjson.Result) error {
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		if Guarded(k.Str) {
			err = checkValue(prefix+"."+k.Str, v, true)
		}
		return err == nil
	})
	return err
}

func checkValue(field string, v gjson.Result, top bool) error {
	switch v.Type {
	case gjson.Null:
		return nil
	case gjson.Number:
		return Check(field, v.Num)
	case gjson.String:
		if strings.HasPrefix(v.Str, "os.environ/") {
			return nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v.Str), 64)
		if err != nil {
			if top {
				return &FieldError{Field: field, Got: strconv.Quote(v.Str)}
			}
			return nil // a label inside a nested price table
		}
		if !Valid(f) {
			return &FieldError{Field: field, Got: strconv.Quote(v.Str)}
		}
		return nil
	case gjson.JSON:
		var err error
		if v.IsArray() {
			for i, e := range v.Array() {
				if err = checkValue(fmt.Sprintf("%s[%d]", field, i), e, false); err != nil {
					return err
				}
			}
			return nil
		}
		v.ForEach(func(k, e gjson.Result) bool {
			err = checkValue(field+"."+k.Str, e, false)
			return err == nil
		})
		return err
	default: // true, false
		return &FieldError{Field: field, Got: v.Raw}
	}
}

// OutOfRange reports whether raw (a JSON value) is a number too large in magnitude for a
// float64 (1e400: encoding/json refuses it as "cannot unmarshal number 1e400", strconv
// with ErrRange), so that a handler names the real problem instead of "must be a number".
func OutOfRange(raw []byte) bool {
	s := strings.TrimSpace(string(raw))
	if s == "" || !gjson.Valid(s) || gjson.Parse(s).Type != gjson.Number {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	return errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0)
}

// RangeError is the text for a value OutOfRange refuses: "<field> is out of range: a number
// must be at most 1.7976931348623157e+308, got <raw>".
func RangeError(field string, raw []byte) string {
	return fmt.Sprintf("%s is out of range: a number must be at most %g, got %s", field, math.MaxFloat64, strings.TrimSpace(string(raw)))
}
