package call

import (
	"fmt"
	"time"

	"lockstep/pkg/spend"
)

// RateLimited is a call refused because a rate or parallel-request limit is reached (HTTP 429
// rate_limit_error; Admit has set Retry-After, in whole seconds, at least 1). Error is
// LiteLLM's parallel_request_limiter_v3 text: `Rate limit exceeded for <Subject>: <ID>. Limit
// type: <Kind>. Current limit: <Limit>, Remaining: 0. Limit resets at: <ResetAt UTC>`.
type RateLimited struct {
	// Subject is who is limited: api_key, user, team, team_member, organization or end_user.
	Subject string
	// ID is the subject's id (a key's token hash).
	ID string
	// Kind is limits.KindRequests, KindTokens or KindParallel.
	Kind    string
	Limit   int64
	ResetAt time.Time
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("Rate limit exceeded for %s: %s. Limit type: %s. Current limit: %d, Remaining: 0. Limit resets at: %s",
		e.Subject, e.ID, e.Kind, e.Limit, e.ResetAt.UTC().Format("2006-01-02 15:04:05 UTC"))
}

// BudgetExceeded is a call refused because a spend reached its max_budget (HTTP 400
// budget_exceeded). Error is LiteLLM's text: for the key `Budget has been exceeded! Current
// cost: <spend>, Max budget: <max>`; for an owner `Budget has been exceeded! <Who> Current
// cost: <spend>, Max budget: <max>` (numbers as Python prints floats, spend.PyFloat).
type BudgetExceeded struct {
	// Who names the owner ("Team=<id>", "User=<u> in Team=<t>", ...); "" for the key itself.
	Who        string
	Spend, Max float64
}

func (e *BudgetExceeded) Error() string {
	if e.Who == "" {
		return (&spend.BudgetError{Spend: e.Spend, Max: e.Max}).Error()
	}
	return fmt.Sprintf("Budget has been exceeded! %s Current cost: %s, Max budget: %s", e.Who, spend.PyFloat(e.Spend), spend.PyFloat(e.Max))
}

// Unavailable is a call refused because a limited or budgeted caller's leases or spend cannot
// be read from Postgres (HTTP 503 service_unavailable); Err is the *limits.UnavailableError or
// *spend.UnavailableError. Error is `database unavailable: <Err>`.
type Unavailable struct{ Err error }

func (e *Unavailable) Error() string { return "database unavailable: " + e.Err.Error() }

func (e *Unavailable) Unwrap() error { return e.Err }
