package admin

// A team's member budget (LiteLLM's TeamMemberBudgetHandler, team_endpoints.py): /team/new and
// /team/update take team_member_budget (USD), team_member_rpm_limit, team_member_tpm_limit and
// team_member_budget_duration; LiteLLM keeps them in a budget table row whose id the team
// carries (team_member_budget_id) and links every member's membership to it. Here the budget is
// a gateway.budgets row (sql/012) written in the team's transaction, its id in the team's
// litellm_fields; the limits step holds every member of the team without a budget of its own in
// the team (max_budget_in_team, /team/member_update limits) to it, each on its own spend and
// windows within the team (the "team_member:<team>:<user>" token), on every replica.

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/uuid"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

// TeamMemberBudget is a team's member budget fields as given (nil: not given).
type TeamMemberBudget struct {
	MaxBudget *float64 // team_member_budget, USD
	RPMLimit  *int64   // team_member_rpm_limit
	TPMLimit  *int64   // team_member_tpm_limit
	Duration  *string  // team_member_budget_duration ("30d", ...)
}

// Given reports whether any field was given.
func (m TeamMemberBudget) Given() bool {
	return m.MaxBudget != nil || m.RPMLimit != nil || m.TPMLimit != nil || m.Duration != nil
}

// values are the budget row's columns the given fields set.
func (m TeamMemberBudget) values() store.Values {
	v := store.Values{}
	if m.MaxBudget != nil {
		v["max_budget"] = *m.MaxBudget
	}
	if m.RPMLimit != nil {
		v["rpm_limit"] = *m.RPMLimit
	}
	if m.TPMLimit != nil {
		v["tpm_limit"] = *m.TPMLimit
	}
	if m.Duration != nil {
		v["budget_duration"] = *m.Duration
	}
	return v
}

// setTeamMemberBudget writes team row's member budget in w's transaction: the budget its
// team_member_budget_id names is updated with the given fields, or a new one is made (id
// "team-<team_id>-budget-<uuid>") and linked from the team. Returns the team row as it now is.
func setTeamMemberBudget(ctx context.Context, w *Writer, row store.Row, m TeamMemberBudget, by string) (store.Row, error) {
	t, err := accounts.BuildTeamRow(row)
	if err != nil {
		return store.Row{}, invalidf("%v", err)
	}
	vals := m.values()
	vals["updated_by"] = by
	if id := t.Fields.TeamMemberBudgetID; id != "" {
		if _, err := w.Update(ctx, store.Budget, id, vals); err == nil {
			return row, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return store.Row{}, err
		}
	}
	id := "team-" + t.ID + "-budget-" + uuid.NewString()
	vals["budget_id"], vals["created_by"] = id, by
	if _, err := w.Insert(ctx, store.Budget, vals); err != nil {
		return store.Row{}, err
	}
	link, _ := json.Marshal(map[string]string{"team_member_budget_id": id})
	return w.Update(ctx, store.Team, t.ID, store.Values{"litellm_fields": store.JSONMerge(link)})
}

// CreateTeamWith is CreateTeam with a member budget (m, when Given) made in the same
// transaction. Errors: CreateTeam's.
func (a *Admin) CreateTeamWith(ctx context.Context, id string, vals store.Values, m TeamMemberBudget) (store.Row, error) {
	return a.createTeam(ctx, id, vals, m)
}

// UpdateTeam is /team/update: UpdateAccount of the team's columns and, when m is Given, its
// member budget in the same transaction. Errors: UpdateAccount's ("nothing to update" only
// when neither vals nor m is given).
func (a *Admin) UpdateTeam(ctx context.Context, id string, vals store.Values, fields []string, m TeamMemberBudget) (store.Row, error) {
	if !m.Given() {
		return a.UpdateAccount(ctx, TeamKind, id, vals, fields)
	}
	if id == "" {
		return store.Row{}, invalid(TeamKind.IDField, "%s is required", TeamKind.IDField)
	}
	return a.updateAccountThen(ctx, TeamKind, id, vals, func(ctx context.Context, w *Writer, row store.Row) (store.Row, error) {
		return setTeamMemberBudget(ctx, w, row, m, proxyAdminName)
	})
}
