package admin

// Budgets as objects (LiteLLM's /budget/* routes, management_endpoints/
// budget_management_endpoints.py; issue 19 item 9): gateway.budgets rows (sql/012), a registry
// on the change feed like every other. A budget is a named set of limits that end users, keys
// and organizations link to by budget_id (kept in each object's litellm_fields), and that a
// team's member budget is (team_member_budget, ...): every linked object is held to the
// budget's limits on its own spend and windows, on every replica (pkg/call Governance).
// Budgets are admin objects: the proxy admin writes them, proxy_admin_viewer reads them
// (Rules).

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

// proxyAdminName is LiteLLM's litellm_proxy_admin_name: created_by / updated_by of a write
// made with the master key.
const proxyAdminName = "default_user_id"

// budgetBy is the created_by / updated_by of a write by c (its user id, else LiteLLM's admin
// name).
func budgetBy(c Caller) string {
	if id := c.UserID(); id != "" {
		return id
	}
	return proxyAdminName
}

// budgetNotFound is the NotFound of an unknown budget id.
func budgetNotFound(id string) error {
	return notFound("Budget not found, passed budget_id=%s", id)
}

// budgetResetAt is LiteLLM's initial budget_reset_at of a budget with budget_duration d and
// no budget_reset_at given: one duration from now.
func budgetResetAt(vals store.Values) error {
	if _, ok := vals["budget_reset_at"]; ok {
		return nil
	}
	d, ok := vals["budget_duration"].(string)
	if !ok || d == "" {
		return nil
	}
	every, err := keys.ParseDuration(d)
	if err != nil {
		return invalid("budget_duration", "budget_duration: %v", err)
	}
	vals["budget_reset_at"] = time.Now().UTC().Add(every)
	return nil
}

// NewBudget is /budget/new: inserts a budget with the decoded column values vals (budget_id
// "" generates a uuid, as LiteLLM). Errors: Invalid `Budget with id '<id>' already exists.`
// (LiteLLM's text), Invalid for a bad budget_duration or a blank budget_id (CheckBudgetID), the
// store's.
func (a *Admin) NewBudget(ctx context.Context, c Caller, id string, vals store.Values) (store.Row, error) {
	if err := CheckBudgetID(id); err != nil {
		return store.Row{}, err
	}
	if id == "" {
		id = uuid.NewString()
	}
	vals["budget_id"] = id
	if err := budgetResetAt(vals); err != nil {
		return store.Row{}, err
	}
	vals["created_by"], vals["updated_by"] = budgetBy(c), budgetBy(c)
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		row, err = w.Insert(ctx, store.Budget, vals)
		if errors.Is(err, store.ErrConflict) {
			return invalid("budget_id", "Budget with id '%s' already exists.", id)
		}
		return err
	})
	return row, err
}

// UpdateBudget is /budget/update: the given columns of budget id change (LiteLLM
// exclude_unset: a field not sent keeps its value, null clears it), and so do the limits of
// the team memberships whose budget it is (budget_memberships.go). Errors: Invalid
// "budget_id is required" (LiteLLM's text), NotFound `Budget not found, passed budget_id=<id>`.
func (a *Admin) UpdateBudget(ctx context.Context, c Caller, id string, vals store.Values) (store.Row, error) {
	if id == "" {
		return store.Row{}, invalid("budget_id", "budget_id is required")
	}
	vals["updated_by"] = budgetBy(c)
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		lm, err := lockMemberships(ctx, w, id)
		if err != nil {
			return err
		}
		if row, err = w.Update(ctx, store.Budget, id, vals); err != nil {
			return err
		}
		return lm.syncTeamMemberships(ctx, w, row) // budget_memberships.go
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, budgetNotFound(id)
	}
	return row, err
}

// BudgetsByID is /budget/info {"budgets": [ids]}: the budgets found among ids, in store order
// (an unknown id is left out, as LiteLLM's find_many). Errors: Invalid `Specify list of budget
// id's to query. Passed in=[]` for an empty list (LiteLLM's text).
func (a *Admin) BudgetsByID(ctx context.Context, ids []string) ([]store.Row, error) {
	if len(ids) == 0 {
		return nil, invalid("budgets", "Specify list of budget id's to query. Passed in=[]")
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	rows, err := a.st.List(ctx, store.Budget)
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	for _, r := range rows {
		if want[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}

// Budget reads one budget. NotFound when unknown.
func (a *Admin) Budget(ctx context.Context, id string) (store.Row, error) {
	row, err := a.st.Get(ctx, store.Budget, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, budgetNotFound(id)
	}
	return row, err
}

// Budgets reads every budget, oldest first (/budget/list).
func (a *Admin) Budgets(ctx context.Context) ([]store.Row, error) {
	return a.st.List(ctx, store.Budget)
}

// DeleteBudget is /budget/delete {"id"}: the deleted row. A budget still linked from an object
// is not deleted (its limits would silently stop holding there): Invalid `Budget <id> is still
// linked from <kind> <id>[, ...]: unlink it first (budget_id: null)`. The team and
// organization memberships whose budget it is are unlinked in the same transaction, as
// LiteLLM's membership foreign keys do (budget_memberships.go). Errors: NotFound, the store's.
func (a *Admin) DeleteBudget(ctx context.Context, id string) (store.Row, error) {
	if id == "" {
		return store.Row{}, invalid("id", "id is required")
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		lm, err := lockMemberships(ctx, w, id)
		if err != nil {
			return err
		}
		if row, err = w.GetForUpdate(ctx, store.Budget, id); err != nil {
			return err
		}
		links, err := w.tx.BudgetLinks(ctx, id)
		if err != nil {
			return err
		}
		var objects []string
		for _, l := range links {
			if !l.Membership() {
				objects = append(objects, l.String())
			}
		}
		if len(objects) > 0 {
			return invalid("id", "Budget %s is still linked from %s: unlink it first (budget_id: null)", id, strings.Join(objects, ", "))
		}
		if err := lm.unlink(ctx, w, id); err != nil {
			return err
		}
		_, err = w.Delete(ctx, store.Budget, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, budgetNotFound(id)
	}
	return row, err
}

// budgetLinkers are the object types whose litellm_fields.budget_id links a budget (the ones
// DeleteBudget's BudgetLinks looks at; a team links its member budget by a budget it writes
// in the same transaction).
var budgetLinkers = map[store.ObjectType]bool{store.Key: true, store.EndUser: true, store.Organization: true}

// lockLinkedBudget runs before every insert or update of typ with vals: when vals link a
// budget (litellm_fields.budget_id, a non-empty string), the budget row is read FOR SHARE in
// the write's own transaction, so a concurrent DeleteBudget (FOR UPDATE, then BudgetLinks)
// either waits for this write and sees the link, or deletes first and this write sees the
// budget gone: a link to a missing budget can never commit. Errors: Invalid
// `Budget not found, passed budget_id=<id>`, CheckBudgetID's, the store's.
func (w *Writer) lockLinkedBudget(ctx context.Context, typ store.ObjectType, vals store.Values) error {
	if !budgetLinkers[typ] {
		return nil
	}
	id := linkedBudgetID(vals)
	if id == "" {
		return nil // no link, an unlink (null), or not an object: the store refuses the latter
	}
	if err := CheckBudgetID(id); err != nil {
		return err
	}
	if _, err := w.tx.GetForShare(ctx, store.Budget, id); errors.Is(err, store.ErrNotFound) {
		return invalid("budget_id", "Budget not found, passed budget_id=%s", id)
	} else if err != nil {
		return err
	}
	return nil
}

// linkedBudgetID is the budget a write's values link (their litellm_fields' budget_id, a
// non-empty string); "" when they link none or unlink (null).
func linkedBudgetID(vals store.Values) string {
	raw := litellmFieldsRaw(vals)
	if raw == nil {
		return ""
	}
	var lf struct {
		BudgetID *string `json:"budget_id"`
	}
	if json.Unmarshal(raw, &lf) != nil || lf.BudgetID == nil {
		return ""
	}
	return *lf.BudgetID
}

// CheckBudgetID refuses a budget_id that is blank (whitespace only; LiteLLM would store it and
// link nothing): Invalid "budget_id must be a non-blank string, got <json>". "" passes (as
// unset). Source: none in LiteLLM (which accepts it); the project's "bad input gets a 400".
func CheckBudgetID(id string) error {
	if id != "" && strings.TrimSpace(id) == "" {
		b, _ := json.Marshal(id)
		return invalid("budget_id", "budget_id must be a non-blank string, got %s", b)
	}
	return nil
}
