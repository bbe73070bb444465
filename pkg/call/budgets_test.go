package call_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/accounts"
	"lockstep/pkg/call"
	"lockstep/pkg/keys"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

func budgetObj(t testing.TB, js string) *accounts.Budget {
	b, err := accounts.BuildBudgetRow(store.Row{Data: []byte(js)})
	require.NoError(t, err)
	return b
}

// A key linked to a budget is held to the budget's max_budget on its own spend; an end user
// linked to one to its limits (the owner's token); an unknown budget adds nothing.
func TestAdmitLinkedBudget(t *testing.T) {
	f := newFixture(t, true)
	budgets := map[string]*accounts.Budget{"tier": budgetObj(t, `{"budget_id":"tier","max_budget":1,"rpm_limit":1}`)}
	f.g.Budgets = func(id string) *accounts.Budget { return budgets[id] }
	f.spend.spent["tok"] = 1.5
	_, err := f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok", Extra: &keys.Extra{BudgetID: "tier"}}, Route: "chat", Model: "m", Header: http.Header{}})
	var be *call.BudgetExceeded
	require.ErrorAs(t, err, &be)
	require.Equal(t, "Budget has been exceeded! Current cost: 1.5, Max budget: 1.0", be.Error())
	_, err = f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok", Extra: &keys.Extra{BudgetID: "gone"}}, Route: "chat", Model: "m", Header: http.Header{}})
	require.NoError(t, err, "a budget this replica does not hold adds nothing")

	eu, err := accounts.BuildEndUserRow(store.Row{Data: []byte(`{"user_id":"e1","litellm_fields":{"budget_id":"tier"}}`)})
	require.NoError(t, err)
	ci := call.CallInfo{Key: &keys.Key{Token: "tok2"}, Route: "chat", Model: "m", Header: http.Header{}, EndUserID: "e1", EndUser: eu}
	tk, err := f.g.Admit(context.Background(), ci)
	require.NoError(t, err)
	tk.Done(call.Outcome{})
	_, err = f.g.Admit(context.Background(), ci)
	var rl *call.RateLimited
	require.ErrorAs(t, err, &rl, "the budget's rpm_limit 1 holds for the end user")
	require.Equal(t, "end_user", rl.Subject)
}

// model_max_budget: the key's spend on one model group is checked against its budget for that
// group (LiteLLM's text), the spend log names the per-model token, and other groups pass.
func TestAdmitModelMaxBudget(t *testing.T) {
	f := newFixture(t, false)
	k := &keys.Key{Token: "tok", Extra: &keys.Extra{ModelBudgets: map[string]spend.Budget{"m": {Max: 1, Has: true, Every: 24 * time.Hour}}}}
	tk, err := f.g.Admit(context.Background(), call.CallInfo{Key: k, Route: "chat", Model: "m", Header: http.Header{}, CallID: "c1"})
	require.NoError(t, err)
	tk.Done(call.Outcome{})
	logs := f.logs(t)
	require.Equal(t, []string{"model_budget:key:tok:m"}, logs[0].ExtraTokens)
	require.Contains(t, logs[0].Tokens(), "model_budget:key:tok:m")

	f2 := newFixture(t, false)
	f2.spend.spent["model_budget:key:tok:m"] = 1
	_, err = f2.g.Admit(context.Background(), call.CallInfo{Key: k, Route: "chat", Model: "m", Header: http.Header{}})
	var be *call.BudgetExceeded
	require.ErrorAs(t, err, &be)
	require.Equal(t, "LiteLLM Virtual Key: tok, key_alias: None, exceeded budget for model=m", be.Error())
	tk, err = f2.g.Admit(context.Background(), call.CallInfo{Key: k, Route: "chat", Model: "other", Header: http.Header{}})
	require.NoError(t, err, "another model group is not held to m's budget")
	tk.Done(call.Outcome{})
}

// The limits step of an unlimited key without budgets (the common call): what budget links and
// per-model budgets cost it (compare with the parent commit: go test ./pkg/call -bench Admit
// -benchmem).
func BenchmarkAdmitUnlimitedKey(b *testing.B) {
	g := &call.Governance{}
	k := &keys.Key{Token: "tok"}
	ctx := context.Background()
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		tk, err := g.Admit(ctx, call.CallInfo{Key: k, Route: "chat", Model: "m", Header: h})
		if err != nil {
			b.Fatal(err)
		}
		tk.Done(call.Outcome{})
	}
}
