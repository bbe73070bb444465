package accounts

import (
	"encoding/json"
	"fmt"
	"time"

	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// Budget is a gateway.budgets row as served (LiteLLM's LiteLLM_BudgetTable, sql/012): a named
// set of limits that end users, keys and organizations link to by budget_id. It is not a
// shared purse: each linked object is held to the budget's max_budget on its own spend, and to
// its rpm_limit, tpm_limit and max_parallel_requests in its own windows (LiteLLM checks an end
// user's own spend against its litellm_budget_table). Immutable.
type Budget struct {
	ID         string   `json:"budget_id"`
	SoftBudget *float64 `json:"soft_budget"` // USD; LiteLLM only alerts on it (stored, returned)
	// BudgetResetAt is LiteLLM's budget_reset_at as given (informational: each linked object's
	// spend resets on its own schedule, every budget_duration from its first budgeted call).
	BudgetResetAt *time.Time `json:"budget_reset_at"`
	// ModelMaxBudget is LiteLLM's model_max_budget (keys.ParseModelBudgets); ModelBudgets its
	// built form: each linked object's per-model budgets (nil: none).
	ModelMaxBudget json.RawMessage         `json:"model_max_budget"`
	ModelBudgets   map[string]spend.Budget `json:"-"`
	Limits
}

// BuildBudgetRow builds a Budget from a gateway.budgets row (row_to_json). A negative or
// non-finite limit or a bad budget_duration refuses the row (the serving version, if any,
// stays).
func BuildBudgetRow(r store.Row) (*Budget, error) {
	b, err := build(r, "budget", func(b *Budget) string { return b.ID }, func(b *Budget) *Limits { return &b.Limits })
	if err != nil {
		return nil, err
	}
	if b.ModelBudgets, err = keys.ParseModelBudgets(b.ModelMaxBudget); err != nil {
		return nil, fmt.Errorf("budget %q: %w", b.ID, err)
	}
	return b, nil
}

// Links are the budget links of an object, kept in its litellm_fields (sql/011, sql/012).
type Links struct {
	// BudgetID names the Budget whose limits hold for the object as well as its own
	// (LiteLLM budget_id); "" none.
	BudgetID string `json:"budget_id"`
}

// Effective is the rate limits and budget of an object with its own limits l and its linked
// budget b together (WithBudget). b nil: l's own.
func Effective(l *Limits, b *Budget) (limits.Limits, spend.Budget) {
	return WithBudget(l.rate, l.budget, b)
}

// WithBudget is rate limits rate and budget bud held together with budget b's: per limit the
// smaller of the two when both set one (an object is held to its own limits and to its
// budget's), the one set otherwise; budget_duration is that of the max_budget that holds (the
// object's own when its budget has none). b nil: rate and bud unchanged.
func WithBudget(rate limits.Limits, bud spend.Budget, b *Budget) (limits.Limits, spend.Budget) {
	if b == nil {
		return rate, bud
	}
	o := b.rate
	if o.HasRPM && (!rate.HasRPM || o.RPM < rate.RPM) {
		rate.RPM, rate.HasRPM = o.RPM, true
	}
	if o.HasTPM && (!rate.HasTPM || o.TPM < rate.TPM) {
		rate.TPM, rate.HasTPM = o.TPM, true
	}
	if o.HasParallel && (!rate.HasParallel || o.Parallel < rate.Parallel) {
		rate.Parallel, rate.HasParallel = o.Parallel, true
	}
	if bb := b.budget; bb.Has && (!bud.Has || bb.Max < bud.Max) {
		every := bud.Every
		bud = bb
		if bud.Every == 0 {
			bud.Every = every
		}
	}
	return rate, bud
}

// String names the budget in logs.
func (b *Budget) String() string { return fmt.Sprintf("budget %q", b.ID) }
