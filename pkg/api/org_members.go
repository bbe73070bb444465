package api

// Organization members and answers (LiteLLM management_endpoints/organization_endpoints.py):
// /organization/member_add, PATCH /organization/member_update, DELETE
// /organization/member_delete; /organization/list and /organization/info rows carry
// "litellm_budget_table" and "members". The use-cases are admin/org_members.go.

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/catalogue"
)

func (s *Server) orgMemberRoutes() {
	s.detailRoute(http.MethodPost, "/organization/member_add", "organizations", s.orgMemberAdd)
	s.detailRoute(http.MethodPatch, "/organization/member_update", "organizations", s.orgMemberUpdate)
	s.detailRoute(http.MethodPost, "/organization/member_update", "organizations", s.orgMemberUpdate)
	s.detailRoute(http.MethodDelete, "/organization/member_delete", "organizations", s.orgMemberDelete)
	s.detailRoute(http.MethodPost, "/organization/member_delete", "organizations", s.orgMemberDelete)
}

// orgJSON renders an organization as LiteLLM's LiteLLM_OrganizationTableWithMembers: the row,
// its "members" (membership rows, [] when none) and its "litellm_budget_table" ({"max_budget",
// "budget_duration", "tpm_limit", "rpm_limit", "max_parallel_requests"}).
func (s *Server) orgJSON(r mgmt.Row) (map[string]any, error) {
	out, err := s.accountJSON(r)
	if err != nil {
		return nil, err
	}
	ms, err := mgmt.OrgMembersOf(r)
	if err != nil {
		return nil, err
	}
	out["members"] = ms
	bt := map[string]any{"max_budget": out["max_budget"], "budget_duration": out["budget_duration"],
		"tpm_limit": out["tpm_limit"], "rpm_limit": out["rpm_limit"], "max_parallel_requests": out["max_parallel_requests"],
		"model_max_budget": map[string]any{}}
	if id, _ := out["budget_id"].(string); id != "" {
		if b := s.budgetByID(id); b != nil && len(b.ModelMaxBudget) > 0 {
			bt["budget_id"], bt["model_max_budget"] = id, b.ModelMaxBudget // the linked budget's (LiteLLM)
		}
	}
	out["litellm_budget_table"] = bt
	return out, nil
}

// orgList: GET /organization/list → every organization, oldest first, as a bare array of
// orgJSON rows (LiteLLM list_organization includes members and the budget table).
func (s *Server) orgList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeOrganization, "organizations"); err != nil {
		return err
	}
	rows, err := s.mgmt.Accounts(c.Request().Context(), mgmt.OrgKind)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := s.orgJSON(r)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, out)
}

// parseOrgMembers reads an OrgMember or a list of them: {"user_id"?, "user_email"?, "role":
// "org_admin" | "internal_user" | "internal_user_viewer"}, user_id or user_email required.
func parseOrgMembers(raw json.RawMessage) ([]mgmt.OrgMember, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) || len(raw) == 0 {
		return nil, detailErr(http.StatusBadRequest, "member is required: {\"user_id\", \"role\": \"org_admin\" | \"internal_user\" | \"internal_user_viewer\"}")
	}
	if raw[0] == '{' {
		raw = append(append([]byte{'['}, raw...), ']')
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("member must be a member object or an array of them: {\"user_id\", \"user_email\"?, \"role\"}")
	}
	out := make([]mgmt.OrgMember, 0, len(list))
	for i, m := range list {
		var om mgmt.OrgMember
		for k, v := range m {
			var s string
			if !isNull(v) && json.Unmarshal(v, &s) != nil {
				return nil, badRequest("member[%d].%s must be a string", i, k)
			}
			switch k {
			case "user_id":
				om.UserID = s
			case "user_email":
				if s != "" {
					om.UserEmail = &s
				}
			case "role":
				om.UserRole = s
			default:
				return nil, badRequest("unknown field %q in member[%d]: a member has user_id, user_email, role", k, i)
			}
		}
		if om.UserID == "" && om.UserEmail == nil {
			return nil, badRequest("member[%d]: user_id or user_email is required", i)
		}
		if om.UserRole == "" {
			return nil, badRequest("member[%d].role is required: org_admin, internal_user or internal_user_viewer", i)
		}
		out = append(out, om)
	}
	return out, nil
}

// orgMemberAdd: POST /organization/member_add {"organization_id", "member": {...} | [...]} →
// {"organization_id", "updated_users": [user rows], "updated_organization_memberships":
// [membership rows]} (LiteLLM OrganizationAddMemberResponse). Unknown organization: 404; a
// member already in it: 400.
func (s *Server) orgMemberAdd(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeOrganization, "organizations"); err != nil {
		return err
	}
	body, _, err := decodeFieldsModel(c, fields{"organization_id": fString, "member": fAny, "max_budget_in_organization": fNumber}, catalogue.OrgMemberAdd)
	if err != nil {
		return err
	}
	add, err := parseOrgMembers(body["member"])
	if err != nil {
		return err
	}
	mb, err := orgMemberBudget(body)
	if err != nil {
		return err
	}
	res, err := s.mgmt.AddOrgMembers(c.Request().Context(), str(body, "organization_id"), add, mb)
	if err != nil {
		return err
	}
	users, err := s.accountsJSON(res.Users)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"organization_id": res.Org.ID, "updated_users": users,
		"updated_organization_memberships": res.Memberships})
}

// orgMemberUpdate: PATCH /organization/member_update {"organization_id", "user_id" |
// "user_email", "role"?} → the membership row (LiteLLM LiteLLM_OrganizationMembershipTable).
func (s *Server) orgMemberUpdate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeOrganization, "organizations"); err != nil {
		return err
	}
	body, _, err := decodeFieldsModel(c, fields{"organization_id": fString, "user_id": fString, "user_email": fString, "role": fString,
		"max_budget_in_organization": fNumber}, catalogue.OrgMemberUpdate)
	if err != nil {
		return err
	}
	mb, err := orgMemberBudget(body)
	if err != nil {
		return err
	}
	m, err := s.mgmt.UpdateOrgMember(c.Request().Context(), str(body, "organization_id"),
		accounts.Member{UserID: str(body, "user_id"), UserEmail: str(body, "user_email")}, str(body, "role"), mb)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// orgMemberDelete: DELETE /organization/member_delete {"organization_id", "user_id" |
// "user_email"} → the deleted membership row.
func (s *Server) orgMemberDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeOrganization, "organizations"); err != nil {
		return err
	}
	body, _, err := decodeFieldsModel(c, fields{"organization_id": fString, "user_id": fString, "user_email": fString}, catalogue.OrgMemberDelete)
	if err != nil {
		return err
	}
	m, err := s.mgmt.DeleteOrgMember(c.Request().Context(), str(body, "organization_id"),
		accounts.Member{UserID: str(body, "user_id"), UserEmail: str(body, "user_email")})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// orgMemberBudget reads max_budget_in_organization (USD; nil: not given, or null).
func orgMemberBudget(body map[string]json.RawMessage) (*float64, error) {
	v, ok, err := optNumber(body, "max_budget_in_organization")
	if err != nil || !ok {
		return nil, err
	}
	return &v, nil
}
