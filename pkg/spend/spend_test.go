package spend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPyFloat(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", 2.5: "2.5", 0.1: "0.1", 0.0001: "0.0001", 0.00001: "1e-05",
		0.000147: "0.000147", 1.5e-05: "1.5e-05", 123456789: "123456789.0", 1e16: "1e+16",
		0.30000000000000004: "0.30000000000000004", 1e15: "1000000000000000.0",
	} {
		require.Equal(t, want, spend.PyFloat(f), "%v", f)
	}
	require.Equal(t, "Budget has been exceeded! Current cost: 0.00015, Max budget: 0.0001",
		(&spend.BudgetError{Spend: 0.00015, Max: 0.0001}).Error())
}

func TestCost(t *testing.T) {
	t.Parallel()
	mi := json.RawMessage(`{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}`)
	require.InDelta(t, 10*0.001+20*0.002, spend.Cost(mi, 10, 20), 1e-12)
	require.Zero(t, spend.Cost(json.RawMessage(`{}`), 10, 20))
	require.Zero(t, spend.Cost(nil, 10, 20))
	require.InDelta(t, 0.01, spend.Cost(json.RawMessage(`{"input_cost_per_token": 0.001}`), 10, 20), 1e-12)
}

func setup(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.NewDB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx))
	return st
}

func logOf(token string, usd float64, i int) store.SpendLog {
	now := time.Now()
	return store.SpendLog{RequestID: fmt.Sprintf("%s-%d", token, i), APIKey: token, CallType: "/chat/completions", Model: "m",
		Spend: usd, PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, StartTime: now, EndTime: now}
}

// Two replicas share one key's budget: each sees the other's flushed spend plus its own
// unflushed spend; a flush retried after it committed counts nothing twice.
func TestBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	a := spend.New(spend.Config{Store: st, ReplicaID: "a"})
	b := spend.New(spend.Config{Store: st, ReplicaID: "b"})
	budget := spend.Budget{Has: true, Max: 1.0}
	require.NoError(t, a.Check(ctx, "tok", budget))
	require.NoError(t, b.Check(ctx, "tok", budget))
	for i := range 6 {
		a.Record(logOf("tok", 0.1, i))
	}
	require.NoError(t, b.Check(ctx, "tok", budget)) // a has not flushed
	require.InDelta(t, 0.6, a.Unflushed("tok"), 1e-9)
	require.NoError(t, a.Flush(ctx))
	require.Zero(t, a.Unflushed("tok"))
	for i := range 4 {
		b.Record(logOf("tok", 0.1, 100+i))
	}
	// b: its own 0.4 unflushed + the cluster's 0.6 once it reads it
	require.NoError(t, b.Flush(ctx))
	err := b.Check(ctx, "tok", budget)
	var be *spend.BudgetError
	require.ErrorAs(t, err, &be)
	require.InDelta(t, 1.0, be.Spend, 1e-9)
	require.NoError(t, a.Flush(ctx)) // reads the cluster total
	require.ErrorAs(t, a.Check(ctx, "tok", budget), &be)

	// idempotent: the same logs again add nothing
	_, _, err = st.FlushSpend(ctx, []store.SpendLog{logOf("tok", 0.1, 0)}, nil, nil)
	require.NoError(t, err)
	got, err := st.GetKeySpend(ctx, []string{"tok"})
	require.NoError(t, err)
	require.InDelta(t, 1.0, got["tok"].Spend, 1e-9)
	logs, err := st.SpendLogs(ctx, "tok", time.Time{}, time.Time{}, 100)
	require.NoError(t, err)
	require.Len(t, logs, 10)
}

func TestBudgetDurationResets(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	a := spend.New(spend.Config{Store: st, ReplicaID: "a"})
	budget := spend.Budget{Has: true, Max: 0.5, Every: time.Second}
	require.NoError(t, a.Check(ctx, "tok-r", budget))
	a.Record(logOf("tok-r", 0.6, 1))
	require.NoError(t, a.Flush(ctx))
	var be *spend.BudgetError
	require.ErrorAs(t, a.Check(ctx, "tok-r", budget), &be)
	require.Eventually(t, func() bool {
		_ = a.Flush(ctx)
		return a.Check(ctx, "tok-r", budget) == nil
	}, 10*time.Second, 50*time.Millisecond)
	got, err := st.GetKeySpend(ctx, []string{"tok-r"})
	require.NoError(t, err)
	require.Zero(t, got["tok-r"].Spend)
	require.NotNil(t, got["tok-r"].BudgetResetAt)
}

type downStore struct{}

func (downStore) FlushSpend(context.Context, []store.SpendLog, []store.BudgetReset, []string) (map[string]store.KeySpend, time.Time, error) {
	return nil, time.Time{}, store.ErrUnavailable
}

func TestUnknownSpendWithDatabaseDown(t *testing.T) {
	t.Parallel()
	tr := spend.New(spend.Config{Store: downStore{}})
	var ue *spend.UnavailableError
	require.ErrorAs(t, tr.Check(context.Background(), "tok", spend.Budget{Has: true, Max: 1}), &ue)
	require.NoError(t, tr.Check(context.Background(), "tok", spend.Budget{}))
	tr.Record(logOf("tok", 0.5, 1))
	require.Error(t, tr.Flush(context.Background()))
	require.Equal(t, int64(1), tr.Stats().Logged)
	require.InDelta(t, 0.5, tr.Unflushed("tok"), 1e-9) // kept for the next flush
}

// Spend logs keep every text and time exactly through the flush: quotes, backslashes,
// commas, braces, "NULL", spaces and non-ASCII in the text columns; timestamps to the
// microsecond (truncated) whatever their location, the zero time included.
func TestFlushSpendRoundTrip(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	odd := []string{`a"b`, `c\d`, `e,f`, `{g}`, `NULL`, ` h i `, `ünï ☃`, ``, `"\"`, `j\"k`}
	base := time.Date(2026, 12, 1, 2, 3, 4, 123456789, time.FixedZone("X", -7*3600-1800))
	var logs []store.SpendLog
	for i, s := range odd {
		logs = append(logs, store.SpendLog{RequestID: fmt.Sprintf("rt-%d", i), APIKey: "tok-rt", CallType: s, Model: s + "m", ModelID: "id" + s,
			Spend: 0.25, PromptTokens: int64(i), CompletionTokens: 2, TotalTokens: int64(i) + 2,
			StartTime: base.Add(time.Duration(i) * time.Microsecond), EndTime: base.Add(time.Duration(i) * time.Second),
			ReplicaID: "r" + s, User: s, TeamID: s, OrganizationID: s, EndUser: s})
	}
	logs = append(logs, store.SpendLog{RequestID: "rt-zero", APIKey: "tok-rt"}) // zero times
	_, _, err := st.FlushSpend(ctx, logs, nil, nil)
	require.NoError(t, err)
	got, err := st.SpendLogs(ctx, "tok-rt", time.Time{}, time.Time{}, 100)
	require.NoError(t, err)
	require.Len(t, got, len(logs))
	byID := map[string]store.SpendLog{}
	for _, l := range got {
		byID[l.RequestID] = l
	}
	for _, want := range logs {
		l, ok := byID[want.RequestID]
		require.True(t, ok, want.RequestID)
		require.Equal(t, []string{want.CallType, want.Model, want.ModelID, want.ReplicaID, want.User, want.TeamID, want.OrganizationID, want.EndUser},
			[]string{l.CallType, l.Model, l.ModelID, l.ReplicaID, l.User, l.TeamID, l.OrganizationID, l.EndUser}, want.RequestID)
		require.Equal(t, []int64{want.PromptTokens, want.CompletionTokens, want.TotalTokens}, []int64{l.PromptTokens, l.CompletionTokens, l.TotalTokens})
		require.InDelta(t, want.Spend, l.Spend, 1e-12)
		require.True(t, want.StartTime.Truncate(time.Microsecond).Equal(l.StartTime), "%s start %v != %v", want.RequestID, want.StartTime, l.StartTime)
		require.True(t, want.EndTime.Truncate(time.Microsecond).Equal(l.EndTime), "%s end %v != %v", want.RequestID, want.EndTime, l.EndTime)
	}
	tot, err := st.GetKeySpend(ctx, []string{"tok-rt", "user:" + odd[0], "team:" + odd[1]})
	require.NoError(t, err)
	require.InDelta(t, 0.25*float64(len(odd)), tot["tok-rt"].Spend, 1e-9)
	require.InDelta(t, 0.25, tot["user:"+odd[0]].Spend, 1e-9)
	require.InDelta(t, 0.25, tot["team:"+odd[1]].Spend, 1e-9)
}
