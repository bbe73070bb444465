package api

import (
	"encoding/json"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/keys"
)

// budgetLinkedFields are the budget-table fields an organization's or a customer's route
// takes besides its columns (catalogue budgetTable; admin.AccountExtras): model_max_budget
// (keys.ParseModelBudgets' shape) on /organization/new, /organization/update and /customer/new,
// budget_reset_at (an ISO 8601 / RFC 3339 time) on /customer/new.
var budgetLinkedFields = fields{"model_max_budget": fObject}

// accountExtras reads the checked extra fields of an account write's body: spend (a number >=
// 0), model_max_budget (400 `Invalid model_max_budget: ...` as LiteLLM's
// validate_model_max_budget words it), budget_reset_at (400 naming it).
func accountExtras(body map[string]json.RawMessage) (mgmt.AccountExtras, error) {
	var x mgmt.AccountExtras
	if v, ok, err := optNumber(body, "spend"); err != nil {
		return x, err
	} else if ok {
		x.Spend = &v
	}
	if raw, ok := body["model_max_budget"]; ok {
		if _, err := keys.ParseModelBudgets(raw); err != nil {
			return x, badRequest("%v", err)
		}
		x.ModelMaxBudget = raw
	}
	if raw, ok := body["budget_reset_at"]; ok && !isNull(raw) {
		var s string
		_ = json.Unmarshal(raw, &s) // kind-checked (fString)
		t, err := parseISOTime(s)
		if err != nil {
			return x, badRequest("budget_reset_at must be an ISO 8601 date-time (2025-01-31T00:00:00Z), got %q", s)
		}
		x.BudgetResetAt = &t
	}
	return x, nil
}
