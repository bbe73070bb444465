package admin

import (
	"encoding/json"
	"time"

	"lockstep/pkg/numbers"
)

// CheckTempBudget checks /key/update's temp_budget_increase (USD >= 0) and temp_budget_expiry
// (an ISO 8601 date-time, or a date meaning its midnight UTC as LiteLLM's datetime parsing
// takes it, in the future) in the request's LiteLLM fields: both or neither (LiteLLM raises
// the key's max_budget by the increase until the expiry). Errors: Invalid
// "temp_budget_increase and temp_budget_expiry must be set together",
// "temp_budget_expiry must be an ISO 8601 date or date-time, got <v>",
// "temp_budget_expiry must be in the future, got <v>".
func CheckTempBudget(extra map[string]json.RawMessage, now time.Time) error {
	inc, hasInc := extra["temp_budget_increase"]
	exp, hasExp := extra["temp_budget_expiry"]
	if hasInc && string(inc) == "null" {
		hasInc = false
	}
	if hasExp && string(exp) == "null" {
		hasExp = false
	}
	if !hasInc && !hasExp {
		return nil
	}
	if hasInc != hasExp {
		return invalid("temp_budget_expiry", "temp_budget_increase and temp_budget_expiry must be set together")
	}
	var f float64
	if err := json.Unmarshal(inc, &f); err != nil {
		return invalid("temp_budget_increase", "temp_budget_increase must be a number (USD)")
	}
	if err := numbers.Check("temp_budget_increase", f); err != nil {
		return invalid("temp_budget_increase", "%v", err)
	}
	var s string
	_ = json.Unmarshal(exp, &s)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, err = time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
	}
	if err != nil {
		t, err = time.ParseInLocation(time.DateOnly, s, time.UTC) // a date is its midnight UTC, as LiteLLM's datetime parsing
	}
	if err != nil {
		return invalid("temp_budget_expiry", "temp_budget_expiry must be an ISO 8601 date or date-time, got %s", exp)
	}
	if !t.After(now) {
		return invalid("temp_budget_expiry", "temp_budget_expiry must be in the future, got %s", exp)
	}
	// stored as RFC 3339, as the key row builder reads it
	b, _ := json.Marshal(t.UTC())
	extra["temp_budget_expiry"] = b
	return nil
}
