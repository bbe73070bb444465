package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

func budgetAdmin(t *testing.T) (*Admin, *fakeStore, *fakeSink) {
	t.Helper()
	st := newFakeStore()
	sink := &fakeSink{typ: store.Budget}
	return New(Deps{Store: st, Registries: []Sink{sink}, Supported: map[store.ObjectType]bool{store.Budget: true}}), st, sink
}

func rowMap(t *testing.T, r store.Row) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// /budget/new and /budget/update (LiteLLM budget_management_endpoints.py): a generated id,
// created_by/updated_by, LiteLLM's duplicate text, the first budget_reset_at, applied to the
// budgets registry after the commit.
func TestBudgetNewAndUpdate(t *testing.T) {
	a, _, sink := budgetAdmin(t)
	ctx := context.Background()
	row, err := a.NewBudget(ctx, Caller{Master: true}, "", store.Values{"rpm_limit": int64(2), "budget_duration": "1d"})
	if err != nil {
		t.Fatal(err)
	}
	m := rowMap(t, row)
	if id, _ := m["budget_id"].(string); len(id) != 36 || m["created_by"] != "default_user_id" || m["updated_by"] != "default_user_id" {
		t.Fatalf("a uuid and LiteLLM's admin name: %v", m)
	}
	if m["budget_reset_at"] == nil {
		t.Fatalf("budget_duration sets the first reset: %v", m)
	}
	if len(sink.applies) != 1 || sink.applies[0].rows[0].ID != row.ID {
		t.Fatalf("applied once: %+v", sink.applies)
	}
	_, err = a.NewBudget(ctx, Caller{Master: true}, row.ID, store.Values{})
	var inv *Invalid
	if !errors.As(err, &inv) || inv.Msg != "Budget with id '"+row.ID+"' already exists." {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := a.NewBudget(ctx, Caller{}, "b", store.Values{"budget_duration": "soon"}); !errors.As(err, &inv) || inv.Field != "budget_duration" {
		t.Fatalf("bad duration: %v", err)
	}

	by := Caller{User: budgetUser("u-admin", RoleProxyAdmin)}
	up, err := a.UpdateBudget(ctx, by, row.ID, store.Values{"tpm_limit": int64(9)})
	if err != nil {
		t.Fatal(err)
	}
	if m := rowMap(t, up); m["updated_by"] != "u-admin" || m["rpm_limit"] != 2.0 || m["tpm_limit"] != 9.0 {
		t.Fatalf("update keeps what is not sent: %v", m)
	}
	if _, err := a.UpdateBudget(ctx, by, "", store.Values{}); !errors.As(err, &inv) || inv.Msg != "budget_id is required" {
		t.Fatalf("no id: %v", err)
	}
	var nf *NotFound
	if _, err := a.UpdateBudget(ctx, by, "nope", store.Values{"tpm_limit": int64(1)}); !errors.As(err, &nf) || nf.Msg != "Budget not found, passed budget_id=nope" {
		t.Fatalf("unknown: %v", err)
	}
}

// /budget/info filters by id and refuses an empty list with LiteLLM's text; CheckBudgetRef
// refuses a link to an unknown budget.
func TestBudgetInfoAndLinks(t *testing.T) {
	a, st, _ := budgetAdmin(t)
	ctx := context.Background()
	st.put(store.Budget, store.Values{"budget_id": "b1"})
	st.put(store.Budget, store.Values{"budget_id": "b2"})
	rows, err := a.BudgetsByID(ctx, []string{"b2", "nope"})
	if err != nil || len(rows) != 1 || rows[0].ID != "b2" {
		t.Fatalf("info: %v %+v", err, rows)
	}
	var inv *Invalid
	if _, err := a.BudgetsByID(ctx, nil); !errors.As(err, &inv) || !strings.HasPrefix(inv.Msg, "Specify list of budget id's to query.") {
		t.Fatalf("empty: %v", err)
	}
}

// Linking a key, end user or organization to a budget (litellm_fields.budget_id) locks the
// budget row FOR SHARE inside the linking write's own transaction (so a concurrent
// /budget/delete cannot commit between the check and the link); an unknown budget refuses the
// write with nothing written; an unlink (null) and other types lock nothing; a blank id is
// refused.
func TestBudgetLinkLocksInTx(t *testing.T) {
	a, st, _ := budgetAdmin(t)
	ctx := context.Background()
	st.put(store.Budget, store.Values{"budget_id": "b1"})
	for _, c := range []struct {
		typ  store.ObjectType
		vals store.Values
	}{
		{store.Key, store.Values{"token": "k1", "litellm_fields": store.JSONMerge(`{"budget_id":"b1"}`)}},
		{store.EndUser, store.Values{"user_id": "eu", "litellm_fields": store.JSONMerge(`{"budget_id":"b1"}`)}},
		{store.Organization, store.Values{"organization_id": "o", "litellm_fields": []byte(`{"budget_id":"b1"}`)}},
	} {
		st.shareLocks = nil
		txs := st.txs
		if err := a.Write(ctx, func(w *Writer) error { _, err := w.Insert(ctx, c.typ, c.vals); return err }); err != nil {
			t.Fatal(c.typ, err)
		}
		if len(st.shareLocks) != 1 || st.shareLocks[0] != "budget b1" || st.txs != txs+1 {
			t.Fatalf("%s: locks %v in %d txs", c.typ, st.shareLocks, st.txs-txs)
		}
		id := c.vals[pkOf(c.typ)].(string)
		st.shareLocks = nil
		var inv *Invalid
		err := a.Write(ctx, func(w *Writer) error {
			_, err := w.Update(ctx, c.typ, id, store.Values{"litellm_fields": store.JSONMerge(`{"budget_id":"nope"}`)})
			return err
		})
		if !errors.As(err, &inv) || inv.Field != "budget_id" || inv.Msg != "Budget not found, passed budget_id=nope" {
			t.Fatalf("%s unknown: %v", c.typ, err)
		}
		if r, _ := st.Get(ctx, c.typ, id); !strings.Contains(string(r.Data), `"b1"`) {
			t.Fatalf("%s: a refused link writes nothing: %s", c.typ, r.Data)
		}
		if err := a.Write(ctx, func(w *Writer) error {
			_, err := w.Update(ctx, c.typ, id, store.Values{"litellm_fields": store.JSONMerge(`{"budget_id":null}`)})
			return err
		}); err != nil || len(st.shareLocks) != 1 {
			t.Fatalf("%s unlink: %v, locks %v", c.typ, err, st.shareLocks)
		}
		err = a.Write(ctx, func(w *Writer) error {
			_, err := w.Update(ctx, c.typ, id, store.Values{"litellm_fields": store.JSONMerge(`{"budget_id":"   "}`)})
			return err
		})
		if !errors.As(err, &inv) || inv.Msg != `budget_id must be a non-blank string, got "   "` {
			t.Fatalf("%s blank: %v", c.typ, err)
		}
	}
	st.shareLocks = nil
	if err := a.Write(ctx, func(w *Writer) error {
		_, err := w.Insert(ctx, store.Team, store.Values{"team_id": "t", "litellm_fields": []byte(`{"budget_id":"nope"}`)})
		return err
	}); err != nil || len(st.shareLocks) != 0 {
		t.Fatalf("team: %v %v", err, st.shareLocks)
	}
	var inv *Invalid
	if _, err := a.NewBudget(ctx, Caller{}, "  ", store.Values{}); !errors.As(err, &inv) || inv.Field != "budget_id" {
		t.Fatalf("blank new budget id: %v", err)
	}
}

// /budget/delete: a budget still linked from an object is kept (its limits would silently stop
// holding there); an unlinked one is deleted and its tombstone applied; unknown is NotFound.
func TestBudgetDelete(t *testing.T) {
	a, st, sink := budgetAdmin(t)
	ctx := context.Background()
	st.put(store.Budget, store.Values{"budget_id": "b1"})
	st.put(store.EndUser, store.Values{"user_id": "eu", "litellm_fields": store.JSONMerge(`{"budget_id":"b1"}`)})
	st.put(store.Team, store.Values{"team_id": "t", "litellm_fields": []byte(`{"team_member_budget_id":"b1"}`)})
	_, err := a.DeleteBudget(ctx, "b1")
	var inv *Invalid
	if !errors.As(err, &inv) || inv.Msg != "Budget b1 is still linked from end_user eu, team t: unlink it first (budget_id: null)" {
		t.Fatalf("linked: %v", err)
	}
	if len(sink.applies) != 0 {
		t.Fatal("a refused delete applies nothing")
	}
	st.put(store.Budget, store.Values{"budget_id": "b2"})
	row, err := a.DeleteBudget(ctx, "b2")
	if err != nil || row.ID != "b2" {
		t.Fatalf("delete: %v %+v", err, row)
	}
	if len(sink.applies) != 1 || sink.applies[0].absent["b2"] == 0 {
		t.Fatalf("tombstone applied: %+v", sink.applies)
	}
	var nf *NotFound
	if _, err := a.DeleteBudget(ctx, "b2"); !errors.As(err, &nf) {
		t.Fatalf("gone: %v", err)
	}
}

// Budgets are admin objects: proxy_admin_viewer reads them (/budget/info is a read sent as
// POST) and writes none; an internal user does neither.
func TestAuthorizeBudgets(t *testing.T) {
	viewer := Caller{Token: "k", User: budgetUser("u-v", RoleProxyAdminViewer)}
	iu := Caller{Token: "k", User: budgetUser("u-i", RoleInternalUser)}
	for _, r := range []struct {
		method, route string
		viewerOK      bool
	}{{"POST", "/budget/new", false}, {"POST", "/budget/update", false}, {"POST", "/budget/delete", false},
		{"POST", "/budget/info", true}, {"GET", "/budget/list", true}, {"GET", "/budget/settings", true}} {
		if _, err := Authorize(r.method, r.route, r.route, viewer); (err == nil) != r.viewerOK {
			t.Errorf("%s %s as proxy_admin_viewer: %v", r.method, r.route, err)
		}
		if _, err := Authorize(r.method, r.route, r.route, iu); err == nil {
			t.Errorf("%s %s as internal_user: allowed", r.method, r.route)
		}
		if s, err := Authorize(r.method, r.route, r.route, Caller{Master: true}); err != nil || s != ScopeAll {
			t.Errorf("%s %s as master: %v", r.method, r.route, err)
		}
	}
}

func budgetUser(id, role string) *accounts.User { return &accounts.User{ID: id, Role: strp(role)} }

// A team's member budget: /team/new makes a budget and links it from the team in the same
// transaction; /team/update changes that same budget.
func TestTeamMemberBudget(t *testing.T) {
	st := newFakeStore()
	budgets, teams := &fakeSink{typ: store.Budget}, &fakeSink{typ: store.Team}
	a := New(Deps{Store: st, Registries: []Sink{budgets, teams}, Supported: map[store.ObjectType]bool{store.Team: true, store.Budget: true}})
	ctx := context.Background()
	rpm := int64(2)
	row, err := a.CreateTeamWith(ctx, "t1", store.Values{}, TeamMemberBudget{RPMLimit: &rpm})
	if err != nil {
		t.Fatal(err)
	}
	var lf map[string]any
	if err := json.Unmarshal(st.tables[store.Team]["t1"]["litellm_fields"].(store.JSONMerge), &lf); err != nil {
		t.Fatal(err)
	}
	bid, _ := lf["team_member_budget_id"].(string)
	if !strings.HasPrefix(bid, "team-t1-budget-") || row.ID != "t1" {
		t.Fatalf("linked budget: %v %+v", lf, row)
	}
	if b := st.tables[store.Budget][bid]; b == nil || b["rpm_limit"] != int64(2) {
		t.Fatalf("budget row: %v", b)
	}
	if len(budgets.applies) != 1 || len(teams.applies) != 1 {
		t.Fatalf("one write, applied once per registry: %d %d", len(budgets.applies), len(teams.applies))
	}
	tpm := int64(7)
	if _, err := a.UpdateTeam(ctx, "t1", store.Values{}, nil, TeamMemberBudget{TPMLimit: &tpm}); err != nil {
		t.Fatal(err)
	}
	if b := st.tables[store.Budget][bid]; b["tpm_limit"] != int64(7) || b["rpm_limit"] != int64(2) || len(st.tables[store.Budget]) != 1 {
		t.Fatalf("the same budget updated: %v", st.tables[store.Budget])
	}
	var nf *NotFound
	if _, err := a.UpdateTeam(ctx, "nope", store.Values{}, nil, TeamMemberBudget{TPMLimit: &tpm}); !errors.As(err, &nf) {
		t.Fatalf("unknown team: %v", err)
	}
}

// temp_budget_increase and temp_budget_expiry go together, the expiry ahead.
func TestCheckTempBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, c := range []struct {
		extra map[string]json.RawMessage
		want  string
	}{
		{map[string]json.RawMessage{}, ""},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`1`)}, "temp_budget_increase and temp_budget_expiry must be set together"},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`1`), "temp_budget_expiry": raw(`"2025-01-01T00:00:00Z"`)}, "temp_budget_expiry must be in the future, got \"2025-01-01T00:00:00Z\""},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`1`), "temp_budget_expiry": raw(`"2025-12-31"`)}, "temp_budget_expiry must be in the future"},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`1`), "temp_budget_expiry": raw(`"tomorrow"`)}, "temp_budget_expiry must be an ISO 8601 date or date-time, got \"tomorrow\""},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`1`), "temp_budget_expiry": raw(`"2030-01-01"`)}, ""},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`-1`), "temp_budget_expiry": raw(`"2027-01-01T00:00:00"`)}, "temp_budget_increase"},
		{map[string]json.RawMessage{"temp_budget_increase": raw(`1`), "temp_budget_expiry": raw(`"2027-01-01T00:00:00"`)}, ""},
	} {
		err := CheckTempBudget(c.extra, now)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.extra, err, c.want)
		}
	}
	date := map[string]json.RawMessage{"temp_budget_increase": raw(`1`), "temp_budget_expiry": raw(`"2030-01-01"`)}
	if err := CheckTempBudget(date, now); err != nil || string(date["temp_budget_expiry"]) != `"2030-01-01T00:00:00Z"` {
		t.Fatalf("a date is its midnight UTC: %v %s", err, date["temp_budget_expiry"])
	}
}
