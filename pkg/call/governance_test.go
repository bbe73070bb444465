package call_test

import (
	"context"
	"errors"
	"lockstep/pkg/format"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/accounts"
	"lockstep/pkg/call"
	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// leaseStore is an in-memory limits.Store: one window per token and kind, slots by token.
type leaseStore struct {
	mu    sync.Mutex
	used  map[string]int64
	slots map[string]int
	start time.Time
}

func newLeaseStore() *leaseStore {
	return &leaseStore{used: map[string]int64{}, slots: map[string]int{}, start: time.Now()}
}

func (s *leaseStore) LeaseWindow(_ context.Context, token, kind string, limit, want int64, _ time.Duration) (store.WindowGrant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := token + "/" + kind
	g := min(want, max(0, limit-s.used[k]))
	s.used[k] += g
	return store.WindowGrant{Granted: g, Used: s.used[k], WindowStart: s.start, DBNow: time.Now()}, nil
}

func (s *leaseStore) LeaseSlots(_ context.Context, token, _ string, want, maxSlots int, _ time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := min(want, max(0, maxSlots-s.slots[token]))
	s.slots[token] += g
	return g, nil
}

func (s *leaseStore) RenewSlots(context.Context, string, time.Duration) error { return nil }
func (s *leaseStore) PruneLimits(context.Context, time.Duration) error        { return nil }

// spendStore is an in-memory spend.Store: the cluster spend by token, the logs flushed; down
// fails every flush.
type spendStore struct {
	mu    sync.Mutex
	spent map[string]float64
	logs  []store.SpendLog
	down  bool
}

func (s *spendStore) FlushSpend(_ context.Context, logs []store.SpendLog, _ []store.BudgetReset, read []string) (map[string]store.KeySpend, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, time.Time{}, store.ErrUnavailable
	}
	s.logs = append(s.logs, logs...)
	out := map[string]store.KeySpend{}
	for _, t := range read {
		out[t] = store.KeySpend{Spend: s.spent[t]}
	}
	return out, time.Now(), nil
}

type fixture struct {
	g        *call.Governance
	spend    *spendStore
	tracker  *spend.Tracker
	rejected int
}

func newFixture(t *testing.T, withLimiter bool) *fixture {
	f := &fixture{spend: &spendStore{spent: map[string]float64{}}}
	f.tracker = spend.New(spend.Config{Store: f.spend, ReplicaID: "r1"})
	f.g = &call.Governance{Spend: f.tracker, MasterToken: "master-hash", ReplicaID: "r1",
		NewID: func() string { return "generated-id" }, Rejected: func() { f.rejected++ }}
	if withLimiter {
		f.g.Limiter = limits.New(limits.Config{Store: newLeaseStore(), ReplicaID: "r1", Window: time.Hour})
	}
	return f
}

func (f *fixture) logs(t *testing.T) []store.SpendLog {
	require.NoError(t, f.tracker.Flush(context.Background()))
	f.spend.mu.Lock()
	defer f.spend.mu.Unlock()
	return append([]store.SpendLog(nil), f.spend.logs...)
}

func team(t *testing.T, js string) *accounts.Team {
	tm, err := accounts.BuildTeamRow(store.Row{Data: []byte(js)})
	require.NoError(t, err)
	return tm
}

func user(t *testing.T, js string) *accounts.User {
	u, err := accounts.BuildUserRow(store.Row{Data: []byte(js)})
	require.NoError(t, err)
	return u
}

func TestAdmitUnlimitedRecordsSpend(t *testing.T) {
	f := newFixture(t, true)
	h := http.Header{}
	tk, err := f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok"}, Route: "chat", Model: "gpt", Header: h, CallID: "cid-1"})
	require.NoError(t, err)
	require.Empty(t, h, "an unlimited key gets no rate-limit headers")
	d, err := router.Build("m1", "gpt", []byte(`{"model":"openai/gpt-4o","api_key":"k"}`), []byte(`{"input_cost_per_token":0.5,"output_cost_per_token":1}`))
	require.NoError(t, err)
	tk.Done(call.Outcome{Deployment: d, Usage: format.Usage{PromptTokens: 2, CompletionTokens: 3}})
	tk.Done(call.Outcome{Err: errors.New("second Done is ignored")})
	logs := f.logs(t)
	require.Len(t, logs, 1)
	l := logs[0]
	require.Equal(t, "cid-1", l.RequestID)
	require.Equal(t, "tok", l.APIKey)
	require.Equal(t, "chat", l.CallType)
	require.Equal(t, "gpt", l.Model)
	require.Equal(t, "m1", l.ModelID)
	require.Equal(t, "gpt", l.ModelGroup)
	require.Equal(t, int64(5), l.TotalTokens)
	require.InDelta(t, 4.0, l.Spend, 1e-9)
	require.Equal(t, "success", l.Status)
	require.Equal(t, "r1", l.ReplicaID)
}

func TestAdmitMasterKeyFailureLog(t *testing.T) {
	f := newFixture(t, false)
	tk, err := f.g.Admit(context.Background(), call.CallInfo{Route: "messages", Model: "claude"})
	require.NoError(t, err)
	tk.Done(call.Outcome{Err: errors.New("upstream failed")})
	logs := f.logs(t)
	require.Len(t, logs, 1)
	require.Equal(t, "master-hash", logs[0].APIKey)
	require.Equal(t, "generated-id", logs[0].RequestID)
	require.Equal(t, "failure", logs[0].Status)
}

func TestAdmitKeyBudgetExceeded(t *testing.T) {
	f := newFixture(t, true)
	f.spend.spent["tok"] = 5
	_, err := f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok", Budget: spend.Budget{Has: true, Max: 1}}, Route: "chat"})
	var be *call.BudgetExceeded
	require.ErrorAs(t, err, &be)
	require.Equal(t, "Budget has been exceeded! Current cost: 5.0, Max budget: 1.0", err.Error())
	require.Equal(t, 1, f.rejected)
}

func TestAdmitKeyBudgetUnreadable(t *testing.T) {
	f := newFixture(t, true)
	f.spend.down = true
	_, err := f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok", Budget: spend.Budget{Has: true, Max: 1}}})
	var un *call.Unavailable
	require.ErrorAs(t, err, &un)
	var su *spend.UnavailableError
	require.ErrorAs(t, err, &su)
	require.Equal(t, "database unavailable: "+su.Error(), err.Error())
	require.Equal(t, 1, f.rejected)
}

func TestAdmitKeyRateLimited(t *testing.T) {
	f := newFixture(t, true)
	k := &keys.Key{Token: "tok", Limits: limits.Limits{RPM: 1, HasRPM: true}}
	h := http.Header{}
	tk, err := f.g.Admit(context.Background(), call.CallInfo{Key: k, Header: h})
	require.NoError(t, err)
	require.Equal(t, "1", h.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "0", h.Get("x-ratelimit-remaining-requests"))
	tk.Done(call.Outcome{})
	h = http.Header{}
	_, err = f.g.Admit(context.Background(), call.CallInfo{Key: k, Header: h})
	var rl *call.RateLimited
	require.ErrorAs(t, err, &rl)
	require.Equal(t, "api_key", rl.Subject)
	require.Equal(t, "tok", rl.ID)
	require.Equal(t, limits.KindRequests, rl.Kind)
	require.Regexp(t, `^Rate limit exceeded for api_key: tok\. Limit type: requests\. Current limit: 1, Remaining: 0\. Limit resets at: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, err.Error())
	require.NotEmpty(t, h.Get("Retry-After"))
	require.Equal(t, "1", h.Get("x-ratelimit-limit-requests"))
	require.Equal(t, 0, f.rejected, "a rate limit is no budget rejection")
}

func TestAdmitLimitedKeyWithoutDatabase(t *testing.T) {
	f := newFixture(t, false)
	_, err := f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok", Limits: limits.Limits{Parallel: 1, HasParallel: true}}})
	var un *call.Unavailable
	require.ErrorAs(t, err, &un)
	var lu *limits.UnavailableError
	require.ErrorAs(t, err, &lu)
	require.Contains(t, lu.Err.Error(), "no database configured")
	require.Equal(t, 0, f.rejected)
}

func TestAdmitOwnerBudgets(t *testing.T) {
	f := newFixture(t, true)
	tm := team(t, `{"team_id":"t1","max_budget":2,"team_member_budgets":{"u1":{"budget_id":"b","max_budget":1}}}`)
	u := user(t, `{"user_id":"u1","max_budget":0.5}`)
	k := &keys.Key{Token: "tok", TeamID: "t1", UserID: "u1"}
	f.spend.spent[store.OwnerToken("team_member", store.TeamMemberID("t1", "u1"))] = 1.5
	_, err := f.g.Admit(context.Background(), call.CallInfo{Key: k, Team: tm, User: u})
	var be *call.BudgetExceeded
	require.ErrorAs(t, err, &be)
	require.Equal(t, "Budget has been exceeded! User=u1 in Team=t1 Current cost: 1.5, Max budget: 1.0", err.Error(),
		"a team key: the member's budget applies, not the user's personal one")

	// a tracker reads an account's cluster spend once: a fresh one for each account below
	f2 := newFixture(t, true)
	f2.spend.spent[store.OwnerToken("team", "t1")] = 3
	_, err = f2.g.Admit(context.Background(), call.CallInfo{Key: k, Team: tm})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "Budget has been exceeded! Team=t1 Current cost: 3.0, Max budget: 2.0", err.Error())

	f3 := newFixture(t, true)
	f3.spend.spent[store.OwnerToken("user", "u1")] = 1
	_, err = f3.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok2", UserID: "u1"}, User: u})
	require.ErrorAs(t, err, &be)
	require.Equal(t, "Budget has been exceeded! User=u1 Current cost: 1.0, Max budget: 0.5", err.Error())
	require.Equal(t, 3, f.rejected+f2.rejected+f3.rejected)
}

func TestAdmitOwnerLimitsAndHeaders(t *testing.T) {
	f := newFixture(t, true)
	tm := team(t, `{"team_id":"t1","rpm_limit":2}`)
	org := &accounts.Organization{ID: "o1"}
	k := &keys.Key{Token: "tok", TeamID: "t1", Limits: limits.Limits{RPM: 10, HasRPM: true}}
	h := http.Header{}
	tk, err := f.g.Admit(context.Background(), call.CallInfo{Key: k, Team: tm, Organization: org, Header: h, Route: "chat"})
	require.NoError(t, err)
	require.Equal(t, "2", h.Get("x-ratelimit-limit-requests"), "the tightest limit is reported: the team's")
	require.Equal(t, "1", h.Get("x-ratelimit-remaining-requests"))
	tk.Done(call.Outcome{})
	tk, err = f.g.Admit(context.Background(), call.CallInfo{Key: k, Team: tm, Header: http.Header{}})
	require.NoError(t, err)
	tk.Done(call.Outcome{})
	h = http.Header{}
	_, err = f.g.Admit(context.Background(), call.CallInfo{Key: k, Team: tm, Header: h})
	var rl *call.RateLimited
	require.ErrorAs(t, err, &rl)
	require.Equal(t, "team", rl.Subject)
	require.Equal(t, "t1", rl.ID)
	require.NotEmpty(t, h.Get("Retry-After"))
	logs := f.logs(t)
	require.Len(t, logs, 2)
	require.Equal(t, "t1", logs[0].TeamID)
	require.Equal(t, "o1", logs[0].OrganizationID)
}

func TestAdmitEndUserOfMasterKey(t *testing.T) {
	f := newFixture(t, true)
	eu, err := accounts.BuildEndUserRow(store.Row{Data: []byte(`{"user_id":"e1","rpm_limit":1,"tpm_limit":100}`)})
	require.NoError(t, err)
	h := http.Header{}
	ci := call.CallInfo{EndUserID: "e1", EndUser: eu, Header: h}
	tk, err := f.g.Admit(context.Background(), ci)
	require.NoError(t, err)
	require.Equal(t, "1", h.Get("x-ratelimit-limit-requests"))
	require.Equal(t, "100", h.Get("x-ratelimit-limit-tokens"))
	tk.Done(call.Outcome{Usage: format.Usage{PromptTokens: 1}})
	_, err = f.g.Admit(context.Background(), call.CallInfo{EndUserID: "e1", EndUser: eu})
	var rl *call.RateLimited
	require.ErrorAs(t, err, &rl)
	require.Equal(t, "end_user", rl.Subject)
	logs := f.logs(t)
	require.Len(t, logs, 1)
	require.Equal(t, "e1", logs[0].EndUser)

	f.spend.spent[store.OwnerToken("end_user", "e2")] = 2
	eu2, err := accounts.BuildEndUserRow(store.Row{Data: []byte(`{"user_id":"e2","max_budget":1}`)})
	require.NoError(t, err)
	_, err = f.g.Admit(context.Background(), call.CallInfo{EndUserID: "e2", EndUser: eu2})
	require.EqualError(t, err, "Budget has been exceeded! End User=e2 Current cost: 2.0, Max budget: 1.0")
}

func TestAdmitOwnerLimitWithoutDatabaseGivesBack(t *testing.T) {
	f := newFixture(t, false)
	u := user(t, `{"user_id":"u1","rpm_limit":5}`)
	_, err := f.g.Admit(context.Background(), call.CallInfo{Key: &keys.Key{Token: "tok", UserID: "u1"}, User: u})
	var un *call.Unavailable
	require.ErrorAs(t, err, &un)
}

func TestAccessDeniedText(t *testing.T) {
	e := &call.AccessDenied{Scope: "key", Allowed: []string{"a", "b"}, Model: "gpt"}
	require.Equal(t, "key not allowed to access model. This key can only access models=['a', 'b']. Tried to access gpt", e.Error())
	require.Equal(t, "key_model_access_denied", e.Type())
	e = &call.AccessDenied{Scope: "team", Model: "gpt"}
	require.Equal(t, "team not allowed to access model. This team can only access models=[]. Tried to access gpt", e.Error())
	require.Equal(t, "team_model_access_denied", e.Type())
}
