package admin

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"lockstep/pkg/store"
)

// AccountExtras.check: the cross-field rules refused before anything is written, each naming
// its field.
func TestAccountExtrasCheck(t *testing.T) {
	neg, at := -1.0, time.Now()
	link := store.Values{"litellm_fields": store.JSONMerge(`{"budget_id": "tier"}`)}
	unlink := store.Values{"litellm_fields": store.JSONMerge(`{"budget_id": null}`)}
	for _, c := range []struct {
		x       AccountExtras
		vals    store.Values
		create  bool
		field   string
		comment string
	}{
		{AccountExtras{Spend: &neg}, store.Values{}, true, "spend", "a negative spend"},
		{AccountExtras{ModelMaxBudget: json.RawMessage(`{"m": {"budget_limit": 1}}`)}, link, true, "model_max_budget", "with a budget_id"},
		{AccountExtras{ModelMaxBudget: json.RawMessage(`{"m": {"budget_limit": 1}}`)}, unlink, false, "", "an unlink links nothing"},
		{AccountExtras{BudgetResetAt: &at}, store.Values{}, true, "budget_reset_at", "without a budget_duration"},
		{AccountExtras{BudgetResetAt: &at}, store.Values{"budget_duration": "1h"}, true, "", "with one"},
	} {
		err := c.x.check(c.vals, c.create)
		var inv *Invalid
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.comment, err)
		case c.field != "" && (!errors.As(err, &inv) || inv.Field != c.field):
			t.Errorf("%s: %v, want Invalid naming %s", c.comment, err, c.field)
		}
	}
}
