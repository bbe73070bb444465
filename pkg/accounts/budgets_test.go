package accounts

import (
	"testing"
	"time"

	"lockstep/pkg/store"
)

// An object linked to a budget is held to the tighter of its own limits and the budget's, per
// limit; budget_duration goes with the max_budget that holds.
func TestWithBudget(t *testing.T) {
	b, err := BuildBudgetRow(store.Row{Data: []byte(`{"budget_id":"b","rpm_limit":5,"tpm_limit":1,"max_budget":2,"budget_duration":"1d"}`)})
	if err != nil {
		t.Fatal(err)
	}
	own, err := BuildEndUserRow(store.Row{Data: []byte(`{"user_id":"e","rpm_limit":3,"max_parallel_requests":4,"max_budget":9,"budget_duration":"1h"}`)})
	if err != nil {
		t.Fatal(err)
	}
	rate, bud := Effective(&own.Limits, b)
	if !rate.HasRPM || rate.RPM != 3 || !rate.HasTPM || rate.TPM != 1 || !rate.HasParallel || rate.Parallel != 4 {
		t.Fatalf("rate: %+v", rate)
	}
	if !bud.Has || bud.Max != 2 || bud.Every != 24*time.Hour {
		t.Fatalf("budget: %+v", bud)
	}
	if r, u := Effective(&own.Limits, nil); r != own.RateLimits() || u != own.Budget() {
		t.Fatal("no budget: the object's own")
	}
	if _, err := BuildBudgetRow(store.Row{Data: []byte(`{"budget_id":"b","rpm_limit":-1}`)}); err == nil {
		t.Fatal("a negative limit refuses the row")
	}
}
