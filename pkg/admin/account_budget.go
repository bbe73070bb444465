package admin

// The fields of an account write besides its columns: spend (LiteLLM NewCustomerRequest,
// /user/update, /organization/update "spend"), and the budget-table fields LiteLLM keeps in the
// budget row an organization or a customer links: model_max_budget (organization_endpoints.py
// new_organization creates the organization's budget from its budget fields and
// update_organization passes them to update_budget of its budget_id; customer_endpoints.py
// new_end_user creates the customer's budget from them) and budget_reset_at (the customer's;
// LiteLLM's reset job resets the spend of the customers linked to a budget once its
// budget_reset_at passed, then moves it one budget_duration on). Here an organization's and an
// end user's own max_budget, rpm/tpm limits and budget_duration stay columns of their own; only
// model_max_budget goes to the linked budget (gateway.budgets, sql/012), so every replica holds
// the object to it through its budget_id (pkg/call model_budgets.go), and budget_reset_at is
// the next reset of the end user's own spend total (gateway.key_spend).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"lockstep/pkg/store"
)

// AccountExtras are an account write's fields besides its columns (nil: not given).
type AccountExtras struct {
	// Spend sets the account's spend total (USD, its current budget period).
	Spend *float64
	// ModelMaxBudget is LiteLLM's model_max_budget as checked by keys.ParseModelBudgets
	// (organizations and end users; null or {} clears it): written to the budget the account
	// links, or to a new budget (id a uuid, as LiteLLM's) the account is then linked to.
	ModelMaxBudget json.RawMessage
	// BudgetResetAt is when the end user's spend is next reset to 0 (LiteLLM
	// NewCustomerRequest budget_reset_at); it needs a budget_duration, every which the resets
	// then follow.
	BudgetResetAt *time.Time
}

func (x AccountExtras) given() bool {
	return x.Spend != nil || x.ModelMaxBudget != nil || x.BudgetResetAt != nil
}

// check refuses what needs no stored state: a negative spend, model_max_budget together with
// a budget_id (LiteLLM would ignore the former: the budget it names holds, so set the model
// budgets on it with /budget/update), budget_reset_at without a budget_duration (LiteLLM's
// reset job moves budget_reset_at on by budget_duration, and fails without one).
func (x AccountExtras) check(vals store.Values, creating bool) error {
	if x.Spend != nil && *x.Spend < 0 {
		return invalid("spend", "spend must be a non-negative number (USD)")
	}
	if id := linkedBudgetID(vals); x.ModelMaxBudget != nil && id != "" {
		return invalid("model_max_budget", "model_max_budget cannot be given with budget_id: the budget %s holds; set its model_max_budget with /budget/update", id)
	}
	if x.BudgetResetAt != nil && creating {
		if d, _ := vals["budget_duration"].(string); d == "" {
			return invalid("budget_reset_at", "budget_reset_at needs a budget_duration: the spend resets at budget_reset_at, then every budget_duration")
		}
	}
	return nil
}

// apply writes x for account row (of kind k) in w's transaction; returns the row as it now is.
func (x AccountExtras) apply(ctx context.Context, w *Writer, k AccountKind, row store.Row) (store.Row, error) {
	token := store.OwnerToken(ownerKinds[k.Type], row.ID)
	if x.Spend != nil {
		if err := w.SetSpend(ctx, token, *x.Spend); err != nil {
			return store.Row{}, err
		}
	}
	if x.BudgetResetAt != nil {
		if err := w.SetBudgetResetAt(ctx, token, *x.BudgetResetAt); err != nil {
			return store.Row{}, err
		}
	}
	if x.ModelMaxBudget != nil {
		return setLinkedModelBudget(ctx, w, k, row, x.ModelMaxBudget)
	}
	return row, nil
}

// setLinkedModelBudget writes model_max_budget mmb to the budget account row links (LiteLLM
// update_budget of its budget_id), or, when it links none and mmb sets any, to a new budget
// linked from the row.
func setLinkedModelBudget(ctx context.Context, w *Writer, k AccountKind, row store.Row, mmb json.RawMessage) (store.Row, error) {
	if t := bytes.TrimSpace(mmb); len(t) == 0 || string(t) == "null" {
		mmb = json.RawMessage("{}")
	}
	var cur struct {
		LF struct {
			BudgetID string `json:"budget_id"`
		} `json:"litellm_fields"`
	}
	if err := json.Unmarshal(row.Data, &cur); err != nil {
		return store.Row{}, err
	}
	vals := store.Values{"model_max_budget": []byte(mmb), "updated_by": proxyAdminName}
	if id := cur.LF.BudgetID; id != "" {
		if _, err := w.Update(ctx, store.Budget, id, vals); !errors.Is(err, store.ErrNotFound) {
			return row, err
		}
	}
	if string(bytes.TrimSpace(mmb)) == "{}" {
		return row, nil // nothing to hold: no budget is made
	}
	id := uuid.NewString()
	vals["budget_id"], vals["created_by"] = id, proxyAdminName
	if _, err := w.Insert(ctx, store.Budget, vals); err != nil {
		return store.Row{}, err
	}
	link, _ := json.Marshal(map[string]string{"budget_id": id})
	return w.Update(ctx, k.Type, row.ID, store.Values{"litellm_fields": store.JSONMerge(link)})
}

// CreateAccountWith is CreateAccount with x written in the same transaction. Errors:
// CreateAccount's, Invalid (AccountExtras.check).
func (a *Admin) CreateAccountWith(ctx context.Context, k AccountKind, id string, vals store.Values, x AccountExtras) (store.Row, error) {
	if !x.given() {
		return a.CreateAccount(ctx, k, id, vals, nil)
	}
	if err := x.check(vals, true); err != nil {
		return store.Row{}, err
	}
	var out store.Row
	row, err := a.CreateAccount(ctx, k, id, vals, func(ctx context.Context, w *Writer, row store.Row) error {
		var err error
		out, err = x.apply(ctx, w, k, row)
		return err
	})
	if err != nil {
		return store.Row{}, err
	}
	if out.ID == "" {
		out = row
	}
	return out, nil
}

// UpdateAccountWith is UpdateAccount with x written in the same transaction: every replica's
// budget check reads a new spend total at its next spend flush, and a model budget through the
// budgets registry. Errors: UpdateAccount's ("nothing to update" only when neither vals nor x
// is given), Invalid (AccountExtras.check).
func (a *Admin) UpdateAccountWith(ctx context.Context, k AccountKind, id string, vals store.Values, fields []string, x AccountExtras) (store.Row, error) {
	if !x.given() {
		return a.UpdateAccount(ctx, k, id, vals, fields)
	}
	if id == "" {
		return store.Row{}, invalid(k.IDField, "%s is required", k.IDField)
	}
	if err := x.check(vals, false); err != nil {
		return store.Row{}, err
	}
	return a.updateAccountThen(ctx, k, id, vals, func(ctx context.Context, w *Writer, row store.Row) (store.Row, error) {
		return x.apply(ctx, w, k, row)
	})
}

// updateAccountThen updates account id's columns vals (none: the row is only locked) and runs
// then on the row in the same transaction; returns then's row. Errors: Invalid
// (checkAccountValues), NotFound, then's, the store's.
func (a *Admin) updateAccountThen(ctx context.Context, k AccountKind, id string, vals store.Values, then func(context.Context, *Writer, store.Row) (store.Row, error)) (store.Row, error) {
	if err := a.checkAccountValues(ctx, vals); err != nil {
		return store.Row{}, err
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		if len(vals) == 0 {
			row, err = w.GetForUpdate(ctx, k.Type, id)
		} else {
			row, err = w.Update(ctx, k.Type, id, vals)
		}
		if err != nil {
			return err
		}
		row, err = then(ctx, w, row)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, k.NotFound(id)
	}
	return row, err
}
