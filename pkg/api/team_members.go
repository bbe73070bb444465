package api

// Team members: /team/member_add, /team/member_delete, /team/member_update (decoding and
// answers; the use-cases are admin/members.go).

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/numbers"
)

// teamMemberAdd: POST /team/member_add {"team_id", "member": {...} | [...],
// "max_budget_in_team"?} → the team row plus "updated_users" (the users created for members
// that did not exist). max_budget_in_team (USD) is each added member's budget within the team
// (LiteLLM creates a team membership with that budget; members named only by user_email get
// none). A member already in the team: 400.
func (s *Server) teamMemberAdd(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeTeam, "teams"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"team_id": fString, "member": fMembers, "max_budget_in_team": fNumber})
	if err != nil {
		return err
	}
	inTeam, hasBudget, err := optNumber(body, "max_budget_in_team")
	if err != nil {
		return err
	}
	if isNull(body["member"]) {
		return detailErr(http.StatusBadRequest, "member is required: {\"user_id\", \"role\": \"admin\" | \"user\"}")
	}
	add, err := parseMembers("member", body["member"])
	if err != nil {
		return err
	}
	var budget *float64
	if hasBudget {
		budget = &inTeam
	}
	res, err := s.mgmt.AddTeamMembersAs(c.Request().Context(), mgmtCaller(caller(c)), str(body, "team_id"), add, budget)
	if err != nil {
		return err
	}
	row, created, add := res.Team, res.Created, res.Added
	out, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	users, err := s.accountsJSON(created)
	if err != nil {
		return err
	}
	out["updated_users"] = users
	// LiteLLM's updated_team_memberships: the added members' memberships that carry a budget
	ms := []map[string]any{}
	if t, err := accounts.BuildTeamRow(row); err == nil {
		for _, m := range add {
			if _, ok := t.MemberBudget(m.UserID); ok && m.UserID != "" {
				ms = append(ms, s.teamMemberships(c.Request().Context(), t, m.UserID)...)
			}
		}
	}
	out["updated_team_memberships"] = ms
	return c.JSON(http.StatusOK, out)
}

// teamMemberDelete: POST /team/member_delete {"team_id", "user_id" | "user_email"} → the team
// row. Not a member: 400.
func (s *Server) teamMemberDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeTeam, "teams"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"team_id": fString, "user_id": fString, "user_email": fString})
	if err != nil {
		return err
	}
	who := accounts.Member{UserID: str(body, "user_id"), UserEmail: str(body, "user_email")}
	row, err := s.mgmt.DeleteTeamMemberAs(c.Request().Context(), mgmtCaller(caller(c)), str(body, "team_id"), who)
	if err != nil {
		return err
	}
	return s.accountOK(c, row)
}

// teamMemberUpdate: POST /team/member_update {"team_id", "user_id" | "user_email", "role"?,
// "max_budget_in_team"?, "tpm_limit"?, "rpm_limit"?} → LiteLLM's TeamMemberUpdateResponse
// {"team_id", "user_id", "user_email", "role", "max_budget_in_team", "tpm_limit", "rpm_limit"}.
// The budget and limits are the member's within the team (its team membership); a given
// field replaces the old value, null clears it, an absent one keeps it. Not a member: 400; a
// budget for a member known only by user_email: 400.
func (s *Server) teamMemberUpdate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeTeam, "teams"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"team_id": fString, "user_id": fString, "user_email": fString, "role": fString,
		"max_budget_in_team": fNumber, "tpm_limit": fInt, "rpm_limit": fInt})
	if err != nil {
		return err
	}
	who := accounts.Member{UserID: str(body, "user_id"), UserEmail: str(body, "user_email")}
	role := str(body, "role")
	var edits []func(*accounts.MemberBudget)
	if _, ok := body["max_budget_in_team"]; ok {
		v, has, _ := optNumber(body, "max_budget_in_team")
		edits = append(edits, func(b *accounts.MemberBudget) {
			b.MaxBudget = nil
			if has {
				b.MaxBudget = &v
			}
		})
	}
	for _, f := range []string{"tpm_limit", "rpm_limit"} {
		if _, ok := body[f]; !ok {
			continue
		}
		v, has := optInt(body, f)
		edits = append(edits, func(b *accounts.MemberBudget) {
			p := &b.TPMLimit
			if f == "rpm_limit" {
				p = &b.RPMLimit
			}
			*p = nil
			if has {
				*p = &v
			}
		})
	}
	got, budget, err := s.mgmt.UpdateTeamMemberAs(c.Request().Context(), mgmtCaller(caller(c)), str(body, "team_id"), who, role, edits)
	if err != nil {
		return err
	}
	out := map[string]any{"team_id": str(body, "team_id"), "user_id": nilIfEmpty(got.UserID), "user_email": nilIfEmpty(got.UserEmail),
		"role": got.Role, "max_budget_in_team": nil, "tpm_limit": nil, "rpm_limit": nil}
	if budget != nil {
		out["max_budget_in_team"], out["tpm_limit"], out["rpm_limit"] = budget.MaxBudget, budget.TPMLimit, budget.RPMLimit
	}
	return c.JSON(http.StatusOK, out)
}

// optNumber reads an optional number field: (value, true) when set, (0, false) when absent or
// null. Kinds were checked by decodeFields.
func optNumber(body map[string]json.RawMessage, name string) (float64, bool, error) {
	raw, ok := body[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	var v float64
	if numbers.OutOfRange(raw) {
		return 0, false, badRequest("%s", numbers.RangeError(name, raw))
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false, badRequest("%s must be a number >= 0", name)
	}
	return v, true, nil
}

func optInt(body map[string]json.RawMessage, name string) (int64, bool) {
	raw, ok := body[name]
	if !ok || isNull(raw) {
		return 0, false
	}
	var v int64
	if json.Unmarshal(raw, &v) != nil {
		return 0, false
	}
	return v, true
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
