package api

import (
	"context"
	"encoding/json"

	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
)

// teamMemberBudgetFields are /team/new's and /team/update's member budget fields (LiteLLM
// NewTeamRequest / UpdateTeamRequest): the budget every member of the team is held to
// (admin.TeamMemberBudget).
var teamMemberBudgetFields = fields{"team_member_budget": fNumber, "team_member_rpm_limit": fInt,
	"team_member_tpm_limit": fInt, "team_member_budget_duration": fDuration}

// teamMemberBudget reads the checked member budget fields of body (null: not given).
func teamMemberBudget(body map[string]json.RawMessage) mgmt.TeamMemberBudget {
	var m mgmt.TeamMemberBudget
	get := func(name string, v any) bool {
		raw, ok := body[name]
		return ok && !isNull(raw) && json.Unmarshal(raw, v) == nil
	}
	var f float64
	if get("team_member_budget", &f) {
		m.MaxBudget = &f
	}
	var rpm, tpm int64
	if get("team_member_rpm_limit", &rpm) {
		m.RPMLimit = &rpm
	}
	if get("team_member_tpm_limit", &tpm) {
		m.TPMLimit = &tpm
	}
	var d string
	if get("team_member_budget_duration", &d) {
		m.Duration = &d
	}
	return m
}

// teamMemberships is LiteLLM's team_memberships of a team (LiteLLM_TeamMembership rows with
// their litellm_budget_table): one per member with a user_id — only userID's when userID is
// not "" — each {"team_id", "user_id", "budget_id", "spend", "litellm_budget_table"} where
// spend is the member's spend within the team (USD, current budget period) and
// litellm_budget_table its {"budget_id", "max_budget", "budget_duration", "tpm_limit",
// "rpm_limit", "max_parallel_requests"} (the team's member budget for a member without its
// own; null: no budget in the team).
func (s *Server) teamMemberships(ctx context.Context, t *accounts.Team, userID string) []map[string]any {
	out := []map[string]any{}
	for _, m := range t.Members {
		if m.UserID == "" || (userID != "" && m.UserID != userID) {
			continue
		}
		ms := map[string]any{"team_id": t.ID, "user_id": m.UserID, "budget_id": nil, "litellm_budget_table": nil,
			"spend": s.ownerSpend(ctx, mgmt.OwnerToken("team_member", mgmt.TeamMemberID(t.ID, m.UserID)))}
		if b, ok := t.MemberBudget(m.UserID); ok {
			ms["budget_id"] = b.BudgetID
			ms["litellm_budget_table"] = map[string]any{"budget_id": b.BudgetID, "max_budget": b.MaxBudget,
				"budget_duration": b.BudgetDuration, "tpm_limit": b.TPMLimit, "rpm_limit": b.RPMLimit,
				"max_parallel_requests": b.MaxParallel}
		} else if tb := s.budgetByID(t.Fields.TeamMemberBudgetID); tb != nil {
			// the team's member budget (team_member_budget, ...), as this replica holds it
			ms["budget_id"] = tb.ID
			ms["litellm_budget_table"] = map[string]any{"budget_id": tb.ID, "max_budget": tb.MaxBudget,
				"budget_duration": tb.BudgetDuration, "tpm_limit": tb.TPMLimit, "rpm_limit": tb.RPMLimit,
				"max_parallel_requests": tb.MaxParallel}
		}
		out = append(out, ms)
	}
	return out
}
