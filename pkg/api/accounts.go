package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/catalogue"
)

// Teams, internal users, organizations and end users (LiteLLM's /team/*, /user/*,
// /organization/*, /customer/* and /end_user/* routes): decoding and answers; the use-cases
// are admin/accounts.go and admin/members.go. Errors use LiteLLM's {"detail": {"error": msg}}
// envelope, as its HTTPExceptions do.

// limitFields are the budget and rate-limit columns every account kind carries.
var limitFields = fields{
	"max_budget": fNumber, "budget_duration": fDuration, "tpm_limit": fInt, "rpm_limit": fInt,
	"max_parallel_requests": fInt, "blocked": fBool, "metadata": fObject,
}

// accountKind describes one account registry's management routes.
type accountKind struct {
	mgmt.AccountKind
	// infoParam is the /info query parameter naming the id (LiteLLM: team_id, user_id,
	// organization_id, end_user_id).
	infoParam string
	// cols are the writable columns (new and update) besides the id.
	cols fields
	// newModel and updateModel are the LiteLLM request models of /new and /update, whose
	// other fields the catalogue treats (pkg/catalogue).
	newModel, updateModel catalogue.Model
	// updateExtra are /update's fields besides the columns (spend, model_max_budget:
	// accountExtras).
	updateExtra fields
	// newExtra are /new's fields besides the columns (spend, model_max_budget,
	// budget_reset_at: accountExtras).
	newExtra fields
}

var (
	teamKind = accountKind{updateExtra: teamMemberBudgetFields, newModel: catalogue.NewTeam, updateModel: catalogue.UpdateTeam, AccountKind: mgmt.TeamKind, infoParam: "team_id",
		cols: limitFields.with(fields{"team_alias": fString, "organization_id": fString, "models": fStrings, "members_with_roles": fMembers})}
	userKind = accountKind{updateExtra: fields{"spend": fNumber}, newModel: catalogue.NewUser, updateModel: catalogue.UpdateUser, AccountKind: mgmt.UserKind, infoParam: "user_id",
		cols: limitFields.with(fields{"user_alias": fString, "user_email": fString, "user_role": fString, "organization_id": fString, "models": fStrings})}
	orgKind = accountKind{newExtra: budgetLinkedFields, updateExtra: budgetLinkedFields.with(fields{"spend": fNumber}), newModel: catalogue.NewOrganization, updateModel: catalogue.UpdateOrg, AccountKind: mgmt.OrgKind, infoParam: "organization_id",
		cols: limitFields.with(fields{"organization_alias": fString, "models": fStrings})}
	endUserKind = accountKind{newExtra: budgetLinkedFields.with(fields{"spend": fNumber, "budget_reset_at": fString}), newModel: catalogue.NewCustomer, updateModel: catalogue.UpdateCustomer, AccountKind: mgmt.EndUserKind, infoParam: "end_user_id",
		cols: limitFields.with(fields{"alias": fString, "allowed_model_region": fString, "default_model": fString})}
)

func (s *Server) accountRoutes() {
	// teams
	s.detailRoute(http.MethodPost, "/team/new", "teams", s.teamNew)
	s.detailRoute(http.MethodPost, "/team/update", "teams", s.accountUpdate(teamKind))
	s.detailRoute(http.MethodGet, "/team/info", "teams", s.teamInfo)
	s.detailRoute(http.MethodPost, "/team/delete", "teams", s.accountDelete(teamKind, "team_ids"))
	s.detailRoute(http.MethodGet, "/team/list", "teams", s.teamList)
	s.detailRoute(http.MethodGet, "/v2/team/list", "teams", s.teamListV2)
	s.detailRoute(http.MethodPost, "/team/block", "teams", s.accountBlock(teamKind, true))
	s.detailRoute(http.MethodPost, "/team/unblock", "teams", s.accountBlock(teamKind, false))
	s.detailRoute(http.MethodPost, "/team/member_add", "teams", s.teamMemberAdd)
	s.detailRoute(http.MethodPost, "/team/member_delete", "teams", s.teamMemberDelete)
	s.detailRoute(http.MethodPost, "/team/member_update", "teams", s.teamMemberUpdate)
	// internal users
	s.detailRoute(http.MethodPost, "/user/new", "users", s.userNew)
	s.detailRoute(http.MethodPost, "/user/update", "users", s.accountUpdate(userKind))
	s.detailRoute(http.MethodGet, "/user/info", "users", s.userInfo)
	s.detailRoute(http.MethodPost, "/user/delete", "users", s.accountDelete(userKind, "user_ids"))
	s.detailRoute(http.MethodGet, "/user/list", "users", s.userList)
	// organizations
	s.detailRoute(http.MethodPost, "/organization/new", "organizations", s.accountNew(orgKind))
	s.detailRoute(http.MethodPatch, "/organization/update", "organizations", s.accountUpdate(orgKind))
	s.detailRoute(http.MethodPost, "/organization/update", "organizations", s.accountUpdate(orgKind))
	s.detailRoute(http.MethodGet, "/organization/info", "organizations", s.orgInfo)
	s.detailRoute(http.MethodDelete, "/organization/delete", "organizations", s.accountDelete(orgKind, "organization_ids"))
	s.detailRoute(http.MethodPost, "/organization/delete", "organizations", s.accountDelete(orgKind, "organization_ids"))
	s.detailRoute(http.MethodGet, "/organization/list", "organizations", s.orgList)
	s.orgMemberRoutes()
	// end users: /customer/* and the older /end_user/* names (LiteLLM keeps both)
	for _, p := range []string{"/customer", "/end_user"} {
		s.detailRoute(http.MethodPost, p+"/new", "end users", s.accountNew(endUserKind))
		s.detailRoute(http.MethodPost, p+"/update", "end users", s.accountUpdate(endUserKind))
		s.detailRoute(http.MethodGet, p+"/info", "end users", s.accountInfo(endUserKind))
		s.detailRoute(http.MethodPost, p+"/delete", "end users", s.accountDelete(endUserKind, "user_ids"))
		s.detailRoute(http.MethodGet, p+"/list", "end users", s.accountList(endUserKind))
		s.detailRoute(http.MethodPost, p+"/block", "end users", s.endUserBlock(true))
		s.detailRoute(http.MethodPost, p+"/unblock", "end users", s.endUserBlock(false))
	}
}

// accountJSON is the answer for an account row: the row's columns (LiteLLM's names) plus its
// spend (0 until spend is tracked at that level).
// accountOK answers 200 with the account row as accountJSON renders it.
func (s *Server) accountOK(c echo.Context, row mgmt.Row) error {
	out, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// accountsJSON is accountJSON of every row, in order (never nil: an empty list answers []).
func (s *Server) accountsJSON(rows []mgmt.Row) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := s.accountJSON(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (s *Server) accountJSON(r mgmt.Row) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	delete(m, "team_member_budgets") // shown as team_memberships (teamMemberships)
	dropPassword(m)                  // a user's password hash is never returned
	withLiteLLMFields(m)             // tags, user_name, model_aliases, ... (sql/011)
	memberNulls(m)
	if _, ok := m["spend"]; !ok {
		m["spend"] = s.accountSpend(context.Background(), r.Type, r.ID)
	}
	return m, nil
}

// accountNew: POST /<kind>/new → the new row (200). A duplicate id is a 400.
func (s *Server) accountNew(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, vals, err := s.decodeAccountNew(c, k, k.newExtra)
		if err != nil {
			return err
		}
		x, err := accountExtras(body)
		if err != nil {
			return err
		}
		row, err := s.mgmt.CreateAccountWith(c.Request().Context(), k.AccountKind, str(body, k.IDField), vals, x)
		if err != nil {
			return err
		}
		return s.accountOK(c, row)
	}
}

// decodeAccountNew decodes /<kind>/new: the body (with extra, route-only fields) and the
// account's column values.
func (s *Server) decodeAccountNew(c echo.Context, k accountKind, extra fields) (map[string]json.RawMessage, mgmt.Values, error) {
	if err := s.requireDB(k.Type, k.What+"s"); err != nil {
		return nil, nil, err
	}
	body, lf, err := decodeFieldsModel(c, k.cols.with(fields{k.IDField: fString}).with(extra), k.newModel)
	if err != nil {
		return nil, nil, err
	}
	vals, err := columnValues(body, k.cols)
	if err != nil {
		return nil, nil, err
	}
	if k.Type == mgmt.TypeUser {
		// the fields LiteLLM's generate_key_helper_fn gives a new user's auto-created key:
		// userNew takes them from the body (newUserKeyFields)
		for name, alsoUser := range newUserKeyFields {
			if v, ok := lf[name]; ok {
				body[name] = v
				if !alsoUser {
					delete(lf, name)
				}
			}
		}
	}
	if err := s.checkBudgetLink(c.Request().Context(), lf); err != nil {
		return nil, nil, err
	}
	if a, ok := body["agent_id"]; ok && k.Type == mgmt.TypeUser {
		// the auto-created key's agent, checked as /key/generate checks a key's
		if err := s.checkKeyLinks(c.Request().Context(), map[string]json.RawMessage{"agent_id": a}); err != nil {
			return nil, nil, err
		}
	}
	if err := hashPassword(lf); err != nil {
		return nil, nil, err
	}
	for c, v := range litellmFieldsValue(lf) {
		vals[c] = v
	}
	return body, vals, nil
}

// accountUpdate: POST /<kind>/update {"<id>", ...fields} → the updated row (for a team also
// under "data", as LiteLLM's update_team answers). Unknown id: 404.
func (s *Server) accountUpdate(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(k.Type, k.What+"s"); err != nil {
			return err
		}
		body, lf, err := decodeFieldsModel(c, k.cols.with(fields{k.IDField: fString}).with(k.updateExtra), k.updateModel)
		if err != nil {
			return err
		}
		vals, err := columnValues(body, k.cols)
		if err != nil {
			return err
		}
		if err := s.checkBudgetLink(c.Request().Context(), lf); err != nil {
			return err
		}
		if err := hashPassword(lf); err != nil {
			return err
		}
		for c, v := range litellmFieldsValue(lf) {
			vals[c] = v
		}
		var row mgmt.Row
		if k.Type == mgmt.TypeTeam {
			row, err = s.mgmt.UpdateTeam(c.Request().Context(), str(body, k.IDField), vals, k.cols.names(), teamMemberBudget(body))
		} else {
			x, xerr := accountExtras(body)
			if xerr != nil {
				return xerr
			}
			row, err = s.mgmt.UpdateAccountWith(c.Request().Context(), k.AccountKind, str(body, k.IDField), vals, k.cols.names(), x)
		}
		if err != nil {
			return err
		}
		out, err := s.accountJSON(row)
		if err != nil {
			return err
		}
		if k.Type == mgmt.TypeTeam {
			// LiteLLM's update_team answers {"team_id", "data": <the team>}; the team's own
			// fields stay at the top level too
			data, err := s.accountJSON(row)
			if err != nil {
				return err
			}
			out["data"] = data
		}
		return c.JSON(http.StatusOK, out)
	}
}

// accountBlock: POST /team/block|unblock {"team_id"} → the updated row.
func (s *Server) accountBlock(k accountKind, blocked bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(k.Type, k.What+"s"); err != nil {
			return err
		}
		body, err := decodeFields(c, fields{k.IDField: fString})
		if err != nil {
			return err
		}
		row, err := s.mgmt.BlockAccount(c.Request().Context(), k.AccountKind, str(body, k.IDField), blocked)
		if err != nil {
			return err
		}
		return s.accountOK(c, row)
	}
}

// endUserBlock: POST /customer/block|unblock {"user_ids": [...]} → {"blocked_users" |
// "unblocked_users": [...]}. All or nothing: an unknown id fails the call first.
func (s *Server) endUserBlock(blocked bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(mgmt.TypeEndUser, "end users"); err != nil {
			return err
		}
		body, err := decodeFields(c, fields{"user_ids": fStrings})
		if err != nil {
			return err
		}
		ids := strs(body, "user_ids")
		if err := s.mgmt.BlockEndUsers(c.Request().Context(), ids, blocked); err != nil {
			return err
		}
		field := "blocked_users"
		if !blocked {
			field = "unblocked_users"
		}
		return c.JSON(http.StatusOK, map[string]any{field: ids})
	}
}

// accountDelete: POST /<kind>/delete {"<ids field>": [...]} → {"deleted_<kind>s": [...]}. All or
// nothing: an unknown id fails the call before anything is deleted. A team's or user's keys
// are deleted with it (LiteLLM), and a deleted user leaves every team it was a member of.
func (s *Server) accountDelete(k accountKind, idsField string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(k.Type, k.What+"s"); err != nil {
			return err
		}
		body, err := decodeFields(c, fields{idsField: fStrings})
		if err != nil {
			return err
		}
		ids := strs(body, idsField)
		if err := s.mgmt.DeleteAccounts(c.Request().Context(), k.AccountKind, idsField, ids); err != nil {
			return err
		}
		plural := k.What + "s"
		if k.Type == mgmt.TypeEndUser {
			plural = "customers"
		}
		return c.JSON(http.StatusOK, map[string]any{"deleted_" + plural: ids})
	}
}

// getAccount reads one account row for an info route: 400 without the id, 404 when unknown.
func (s *Server) getAccount(c echo.Context, k accountKind) (mgmt.Row, error) {
	if err := s.requireDB(k.Type, k.What+"s"); err != nil {
		return mgmt.Row{}, err
	}
	id := c.QueryParam(k.infoParam)
	if id == "" {
		return mgmt.Row{}, detailErr(http.StatusBadRequest, "%s query parameter is required", k.infoParam)
	}
	return s.mgmt.Account(c.Request().Context(), k.AccountKind, id)
}

// accountInfo: GET /customer/info?end_user_id= → the row, plus LiteLLM's litellm_budget_table.
func (s *Server) accountInfo(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		row, err := s.getAccount(c, k)
		if err != nil {
			return err
		}
		out, err := s.accountJSON(row)
		if err != nil {
			return err
		}
		out["litellm_budget_table"] = map[string]any{"max_budget": out["max_budget"], "budget_duration": out["budget_duration"],
			"tpm_limit": out["tpm_limit"], "rpm_limit": out["rpm_limit"], "max_parallel_requests": out["max_parallel_requests"]}
		if bt, err := s.linkedBudgetTable(c.Request().Context(), out["budget_id"]); err != nil {
			return err
		} else if bt != nil {
			out["litellm_budget_table"] = bt // LiteLLM: the linked budget's row
		}
		return c.JSON(http.StatusOK, out)
	}
}

// keysOf lists the keys whose column (team_id, user_id) is id, never a raw key.
func (s *Server) keysOf(ctx context.Context, column, id string) ([]map[string]any, error) {
	rows, err := s.mgmt.KeysOf(ctx, column, id)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := s.keyResponse(r, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// teamInfo: GET /team/info?team_id= → {"team_id", "team_info", "keys", "team_memberships"
// (teamMemberships)}.
func (s *Server) teamInfo(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeTeam, "teams"); err != nil {
		return err
	}
	row, err := s.mgmt.TeamAs(c.Request().Context(), mgmtCaller(caller(c)), c.QueryParam("team_id"))
	if err != nil {
		return err
	}
	info, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ks, err := s.keysOf(ctx, "team_id", row.ID)
	if err != nil {
		return err
	}
	t, err := accounts.BuildTeamRow(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"team_id": row.ID, "team_info": info, "keys": ks, "team_memberships": s.teamMemberships(ctx, t, "")})
}

// userInfo: GET /user/info?user_id= → {"user_id", "user_info", "keys", "teams"} (the teams
// the user is a member of, each with the user's "team_memberships" in it, as LiteLLM answers).
func (s *Server) userInfo(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeUser, "users"); err != nil {
		return err
	}
	row, err := s.mgmt.UserAs(c.Request().Context(), mgmtCaller(caller(c)), c.QueryParam("user_id"))
	if err != nil {
		return err
	}
	info, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	ks, err := s.keysOf(ctx, "user_id", row.ID)
	if err != nil {
		return err
	}
	teams, err := s.teamsWhere(ctx, func(t *accounts.Team) bool { _, ok := t.Member(row.ID); return ok }, row.ID)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(teams))
	for _, t := range teams {
		ids = append(ids, t["team_id"].(string))
	}
	info["teams"] = ids
	return c.JSON(http.StatusOK, map[string]any{"user_id": row.ID, "user_info": info, "keys": ks, "teams": teams})
}

// orgInfo: GET /organization/info?organization_id= → the row (orgJSON) plus its "teams".
func (s *Server) orgInfo(c echo.Context) error {
	row, err := s.getAccount(c, orgKind)
	if err != nil {
		return err
	}
	out, err := s.orgJSON(row)
	if err != nil {
		return err
	}
	teams, err := s.teamsWhere(c.Request().Context(), func(t *accounts.Team) bool {
		return t.OrganizationID != nil && *t.OrganizationID == row.ID
	}, "")
	if err != nil {
		return err
	}
	out["teams"] = teams
	return c.JSON(http.StatusOK, out)
}

// teamsWhere lists the teams keep selects; with member set, each carries member's
// "team_memberships".
func (s *Server) teamsWhere(ctx context.Context, keep func(*accounts.Team) bool, member string) ([]map[string]any, error) {
	rows, err := s.mgmt.Accounts(ctx, mgmt.TeamKind)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, r := range rows {
		t, err := accounts.BuildTeamRow(r)
		if err != nil || !keep(t) {
			continue
		}
		m, err := s.accountJSON(r)
		if err != nil {
			return nil, err
		}
		if member != "" {
			m["team_memberships"] = s.teamMemberships(ctx, t, member)
		}
		out = append(out, m)
	}
	return out, nil
}

// teamNew: POST /team/new → the team row. members_with_roles may name users that do not exist
// yet; they are created (LiteLLM creates the users it is given).
func (s *Server) teamNew(c echo.Context) error {
	body, vals, err := s.decodeAccountNew(c, teamKind, teamMemberBudgetFields)
	if err != nil {
		return err
	}
	row, err := s.mgmt.CreateTeamWith(c.Request().Context(), str(body, teamKind.IDField), vals, teamMemberBudget(body))
	if err != nil {
		return err
	}
	return s.accountOK(c, row)
}

// userNewFields are /user/new's fields besides the user's columns.
var userNewFields = fields{"teams": fStrings, "team_id": fString, "auto_create_key": fBool, "key_alias": fString, "duration": fString,
	"spend": fNumber, "organizations": fStrings}

// newUserKeyFields are the /user/new fields (catalogue: honoured) that LiteLLM's
// generate_key_helper_fn (request_type "user", key_management_endpoints.py) writes to the
// auto-created key, where lockstep's key enforcement applies them on every replica. The value
// is whether the user keeps them too (returned by /user/info and /user/list), as LiteLLM's
// user_data does: allowed_cache_controls is a column of both rows; model_rpm_limit,
// model_tpm_limit, guardrails and policies go into the metadata both rows share (policies:
// the key's are checked and locked like /key/generate's, admin lockLinkedPolicies); object_permission is
// new_user's object_permission_id, linked from both rows; aliases and permissions are the
// key's only. None of them is enforced per user by LiteLLM (get_key_model_rpm_limit reads the
// key's and team's metadata, _add_guardrails_from_key_or_team_metadata the key's and team's,
// _PROXY_CacheControlCheck and the permissions switches the key's, AgentRequestHandler the
// key's and team's object_permission), so a user's own copy limits nothing. agent_id
// (GenerateRequestBase's, which generate_key_helper_fn passes to the key) makes the auto-created
// key the agent's key, checked like /key/generate's (checkKeyLinks: the agent must exist) and
// enforced on its calls (the agent's require_trace_id_on_calls_by_agent); a user is no agent,
// so the user does not keep it.
var newUserKeyFields = map[string]bool{
	"aliases": false, "permissions": false, "allowed_cache_controls": true, "model_rpm_limit": true,
	"model_tpm_limit": true, "guardrails": true, "object_permission": true, "policies": true,
	"agent_id": false,
}

// userNewTeams are the teams /user/new joins: "teams" plus "team_id" (LiteLLM's key-level
// team_id, which also adds the user to that team).
// Each once (a body of many repeats is one row lock per team, not one per repeat).
func userNewTeams(body map[string]json.RawMessage) []string {
	l := strs(body, "teams")
	if tid := str(body, "team_id"); tid != "" {
		l = append(l, tid)
	}
	return uniqueStrings(l)
}

// newUserKeyValue is the litellm_fields value of /user/new's auto-created key: the body's
// newUserKeyFields (nil: none given).
func newUserKeyValue(body map[string]json.RawMessage) mgmt.Values {
	lf := map[string]json.RawMessage{}
	for name := range newUserKeyFields {
		if v, ok := body[name]; ok && !isNull(v) {
			lf[name] = v
		}
	}
	return litellmFieldsValue(lf)
}

// userNewOrgs are /user/new's "organizations", each once; an empty id is a 400 naming its
// index ("organizations[1] must be a non-empty organization id").
func userNewOrgs(body map[string]json.RawMessage) ([]string, error) {
	l := strs(body, "organizations")
	for i, o := range l {
		if o == "" {
			return nil, badRequest("organizations[%d] must be a non-empty organization id", i)
		}
	}
	return uniqueStrings(l), nil
}

// uniqueStrings is l without repeats, in first-seen order (linear: a body's list may hold
// millions of entries).
func uniqueStrings(l []string) []string {
	seen := make(map[string]struct{}, len(l))
	out := l[:0:0]
	for _, v := range l {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}

func slicesContainsStr(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// userNew: POST /user/new → the user row plus, unless auto_create_key is false, a new key for
// the user (LiteLLM answers with "key", the raw key, shown once; the key carries the user's
// models and newUserKeyFields). "teams" adds the user to those teams with the role user (each
// must exist: 400); "team_id" also does, and makes the new key a key of that team (LiteLLM).
// "organizations" adds the user to those organizations with the role internal_user, as
// LiteLLM's _add_user_to_organizations calls organization_member_add (each must exist; LiteLLM
// ignores a failure, lockstep refuses the call and writes nothing). "spend" is the user's and
// the key's spend total. All of it is one transaction.
func (s *Server) userNew(c echo.Context) error {
	body, vals, err := s.decodeAccountNew(c, userKind, userNewFields)
	if err != nil {
		return err
	}
	raw, ok := body["auto_create_key"]
	var spend *float64
	if v, set, err := optNumber(body, "spend"); err != nil {
		return err
	} else if set {
		spend = &v
	}
	orgs, err := userNewOrgs(body)
	if err != nil {
		return err
	}
	res, err := s.mgmt.CreateUser(c.Request().Context(), mgmt.NewUser{
		ID: str(body, userKind.IDField), Vals: vals, Teams: userNewTeams(body),
		AutoKey: !ok || string(raw) != "false", Models: strs(body, "models"),
		TeamID: str(body, "team_id"), KeyAlias: str(body, "key_alias"), Duration: str(body, "duration"),
		KeyFields: newUserKeyValue(body), Spend: spend, Orgs: orgs,
	})
	if err != nil {
		return err
	}
	row, key, keyRow := res.User, res.Key, res.KeyRow
	out, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	out["teams"] = userNewTeams(body)
	if out["teams"] == nil {
		out["teams"] = []string{}
	}
	out["team_id"] = nilIfEmpty(str(body, "team_id"))
	if key != "" {
		k, err := s.keyResponse(keyRow, nil)
		if err != nil {
			return err
		}
		out["key"] = key
		out["token"] = k["token"]
		out["key_alias"] = k["key_alias"]
		out["expires"] = k["expires"]
	}
	return c.JSON(http.StatusOK, out)
}
