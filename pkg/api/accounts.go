package api

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// Teams, internal users, organizations and end users (LiteLLM's /team/*, /user/*,
// /organization/*, /customer/* and /end_user/* routes). Each is a registry on the change feed
// (sql/005_accounts.sql); writes go to Postgres, are applied to this replica's registry before
// answering (read-your-writes), and reach every other replica through the feed. Errors use
// LiteLLM's {"detail": {"error": msg}} envelope, as its HTTPExceptions do.

// limitFields are the budget and rate-limit columns every account kind carries.
var limitFields = fields{
	"max_budget": fNumber, "budget_duration": fDuration, "tpm_limit": fInt, "rpm_limit": fInt,
	"max_parallel_requests": fInt, "blocked": fBool, "metadata": fObject,
}

// accountKind describes one account registry's management routes.
type accountKind struct {
	typ     store.ObjectType
	what    string // "team": route and message noun
	idField string // "team_id"
	// infoParam is the /info query parameter naming the id (LiteLLM: team_id, user_id,
	// organization_id, end_user_id).
	infoParam string
	// cols are the writable columns (new and update) besides the id.
	cols fields
	// genID: an absent id is generated (uuid); false: the id is required.
	genID bool
}

var (
	teamKind = accountKind{typ: store.Team, what: "team", idField: "team_id", infoParam: "team_id", genID: true,
		cols: limitFields.with(fields{"team_alias": fString, "organization_id": fString, "models": fStrings, "members_with_roles": fMembers})}
	userKind = accountKind{typ: store.User, what: "user", idField: "user_id", infoParam: "user_id", genID: true,
		cols: limitFields.with(fields{"user_alias": fString, "user_email": fString, "user_role": fString, "organization_id": fString, "models": fStrings})}
	orgKind = accountKind{typ: store.Organization, what: "organization", idField: "organization_id", infoParam: "organization_id", genID: true,
		cols: limitFields.with(fields{"organization_alias": fString, "models": fStrings})}
	endUserKind = accountKind{typ: store.EndUser, what: "end user", idField: "user_id", infoParam: "end_user_id",
		cols: limitFields.with(fields{"alias": fString, "allowed_model_region": fString, "default_model": fString})}
)

// userRoles are LiteLLM's proxy-level user roles.
var userRoles = map[string]bool{"proxy_admin": true, "proxy_admin_viewer": true, "internal_user": true, "internal_user_viewer": true}

func (k accountKind) notFound(id string) *Error {
	return detailErr(http.StatusNotFound, "%s not found, passed %s=%s", capitalize(k.what), k.idField, id)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

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
	s.detailRoute(http.MethodGet, "/organization/list", "organizations", s.accountList(orgKind))
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

// applyAccount is the writer-local apply of account rows and deletions of kind typ (and of keys).
func (s *Server) applyAccount(typ store.ObjectType, rows []store.Row, absent map[string]int64) {
	var sink interface {
		Apply([]store.Row, map[string]int64) int
	}
	switch typ {
	case store.Team:
		sink = s.Teams
	case store.User:
		sink = s.Users
	case store.Organization:
		sink = s.Organizations
	case store.EndUser:
		sink = s.EndUsers
	case store.Key:
		sink = s.Keys
	}
	if isNil(sink.(registry.Info)) {
		return
	}
	sink.Apply(rows, absent)
}

// accountJSON is the answer for an account row: the row's columns (LiteLLM's names) plus its
// spend (0 until spend is tracked at that level).
// accountOK answers 200 with the account row as accountJSON renders it.
func (s *Server) accountOK(c echo.Context, row store.Row) error {
	out, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) accountJSON(r store.Row) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	delete(m, "team_member_budgets") // shown as team_memberships (teamMemberships)
	if _, ok := m["spend"]; !ok {
		m["spend"] = s.accountSpend(context.Background(), r.Type, r.ID)
	}
	return m, nil
}

func (s *Server) accountValues(ctx context.Context, k accountKind, body map[string]json.RawMessage) (store.Values, error) {
	vals, err := columnValues(body, k.cols)
	if err != nil {
		return nil, err
	}
	if r, ok := vals["user_role"].(string); ok && r != "" && !userRoles[r] {
		return nil, detailErr(http.StatusBadRequest, "user_role: %q is not a user role (want proxy_admin, proxy_admin_viewer, internal_user or internal_user_viewer)", r)
	}
	if r, ok := vals["allowed_model_region"].(string); ok && r != "" && r != "eu" && r != "us" {
		return nil, detailErr(http.StatusBadRequest, "allowed_model_region: %q (want eu or us)", r)
	}
	if org, ok := vals["organization_id"].(string); ok && org != "" {
		if _, err := s.Store.Get(ctx, store.Organization, org); errors.Is(err, store.ErrNotFound) {
			return nil, detailErr(http.StatusBadRequest, "Organization not found, passed organization_id=%s", org)
		} else if err != nil {
			return nil, err
		}
	}
	return vals, nil
}

// accountNew: POST /<kind>/new → the new row (200). A duplicate id is a 400.
func (s *Server) accountNew(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		row, _, err := s.insertAccount(c, k, nil, nil)
		if err != nil {
			return err
		}
		return s.accountOK(c, row)
	}
}

// insertAccount decodes and inserts one account of kind k; extra are route-only fields
// returned to the caller, inTx runs in the insert's transaction (e.g. /user/new's key).
func (s *Server) insertAccount(c echo.Context, k accountKind, extra fields, inTx func(ctx context.Context, tx *store.TxStore, row store.Row, body map[string]json.RawMessage) error) (store.Row, map[string]json.RawMessage, error) {
	if err := s.requireDB(k.typ, k.what+"s"); err != nil {
		return store.Row{}, nil, err
	}
	body, err := decodeFields(c, k.cols.with(fields{k.idField: fString}).with(extra))
	if err != nil {
		return store.Row{}, nil, err
	}
	ctx := c.Request().Context()
	vals, err := s.accountValues(ctx, k, body)
	if err != nil {
		return store.Row{}, nil, err
	}
	id := str(body, k.idField)
	if id == "" {
		if !k.genID {
			return store.Row{}, nil, detailErr(http.StatusBadRequest, "%s is required", k.idField)
		}
		id = uuid.NewString()
	}
	vals[k.idField] = id
	var row store.Row
	err = s.Store.Tx(ctx, func(tx *store.TxStore) error {
		var err error
		if row, err = tx.Insert(ctx, k.typ, vals); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return detailErr(http.StatusBadRequest, "%s already exists, passed %s=%s", capitalize(k.what), k.idField, id)
			}
			return err
		}
		if inTx != nil {
			return inTx(ctx, tx, row, body)
		}
		return nil
	})
	if err != nil {
		return store.Row{}, nil, err
	}
	s.applyAccount(k.typ, []store.Row{row}, nil)
	return row, body, nil
}

// accountUpdate: POST /<kind>/update {"<id>", ...fields} → the updated row (for a team also
// under "data", as LiteLLM's update_team answers). Unknown id: 404.
func (s *Server) accountUpdate(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(k.typ, k.what+"s"); err != nil {
			return err
		}
		body, err := decodeFields(c, k.cols.with(fields{k.idField: fString}))
		if err != nil {
			return err
		}
		id := str(body, k.idField)
		if id == "" {
			return detailErr(http.StatusBadRequest, "%s is required", k.idField)
		}
		ctx := c.Request().Context()
		vals, err := s.accountValues(ctx, k, body)
		if err != nil {
			return err
		}
		if len(vals) == 0 {
			return detailErr(http.StatusBadRequest, "nothing to update: give one of %v", k.cols.names())
		}
		row, err := s.Store.Update(ctx, k.typ, id, vals)
		if errors.Is(err, store.ErrNotFound) {
			return k.notFound(id)
		}
		if err != nil {
			return err
		}
		s.applyAccount(k.typ, []store.Row{row}, nil)
		out, err := s.accountJSON(row)
		if err != nil {
			return err
		}
		if k.typ == store.Team {
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
		if err := s.requireDB(k.typ, k.what+"s"); err != nil {
			return err
		}
		body, err := decodeFields(c, fields{k.idField: fString})
		if err != nil {
			return err
		}
		id := str(body, k.idField)
		if id == "" {
			return detailErr(http.StatusBadRequest, "%s is required", k.idField)
		}
		row, err := s.Store.Update(c.Request().Context(), k.typ, id, store.Values{"blocked": blocked})
		if errors.Is(err, store.ErrNotFound) {
			return k.notFound(id)
		}
		if err != nil {
			return err
		}
		s.applyAccount(k.typ, []store.Row{row}, nil)
		return s.accountOK(c, row)
	}
}

// endUserBlock: POST /customer/block|unblock {"user_ids": [...]} → {"blocked_users" |
// "unblocked_users": [...]}. All or nothing: an unknown id fails the call first.
func (s *Server) endUserBlock(blocked bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		k := endUserKind
		if err := s.requireDB(k.typ, "end users"); err != nil {
			return err
		}
		body, err := decodeFields(c, fields{"user_ids": fStrings})
		if err != nil {
			return err
		}
		ids := strs(body, "user_ids")
		if len(ids) == 0 {
			return detailErr(http.StatusBadRequest, "user_ids is required: a non-empty list of end user ids")
		}
		ctx := c.Request().Context()
		var rows []store.Row
		err = s.Store.Tx(ctx, func(tx *store.TxStore) error {
			for _, id := range ids {
				r, err := tx.Update(ctx, k.typ, id, store.Values{"blocked": blocked})
				if errors.Is(err, store.ErrNotFound) {
					return k.notFound(id)
				}
				if err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.applyAccount(k.typ, rows, nil)
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
		if err := s.requireDB(k.typ, k.what+"s"); err != nil {
			return err
		}
		body, err := decodeFields(c, fields{idsField: fStrings})
		if err != nil {
			return err
		}
		ids := strs(body, idsField)
		if len(ids) == 0 {
			return detailErr(http.StatusBadRequest, "%s is required: a non-empty list of %s ids", idsField, k.what)
		}
		ctx := c.Request().Context()
		gone := map[string]int64{}
		goneKeys := map[string]int64{}
		var teamRows []store.Row
		err = s.Store.Tx(ctx, func(tx *store.TxStore) error {
			for _, id := range ids {
				if _, ok := gone[id]; ok {
					continue
				}
				v, err := tx.Delete(ctx, k.typ, id)
				if errors.Is(err, store.ErrNotFound) {
					return k.notFound(id)
				}
				if err != nil {
					return err
				}
				gone[id] = v
				var owner string
				switch k.typ {
				case store.Team:
					owner = "team_id"
				case store.User:
					owner = "user_id"
				}
				if owner != "" {
					ks, err := tx.DeleteBy(ctx, store.Key, owner, id)
					if err != nil {
						return err
					}
					for t, v := range ks {
						goneKeys[t] = v
					}
				}
			}
			if k.typ == store.User {
				var err error
				teamRows, err = removeMembers(ctx, tx, gone)
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.applyAccount(k.typ, nil, gone)
		if len(goneKeys) > 0 {
			s.applyAccount(store.Key, nil, goneKeys)
		}
		if len(teamRows) > 0 {
			s.applyAccount(store.Team, teamRows, nil)
		}
		plural := k.what + "s"
		if k.typ == store.EndUser {
			plural = "customers"
		}
		return c.JSON(http.StatusOK, map[string]any{"deleted_" + plural: ids})
	}
}

// removeMembers takes the deleted users out of every team they were members of.
func removeMembers(ctx context.Context, tx *store.TxStore, users map[string]int64) ([]store.Row, error) {
	if err := tx.LockTable(ctx, store.Team); err != nil {
		return nil, err
	}
	teams, err := tx.List(ctx, store.Team)
	if err != nil {
		return nil, err
	}
	var out []store.Row
	for _, r := range teams {
		t, err := accounts.BuildTeamRow(r)
		if err != nil {
			continue
		}
		kept := make([]accounts.Member, 0, len(t.Members))
		for _, m := range t.Members {
			if _, ok := users[m.UserID]; !ok || m.UserID == "" {
				kept = append(kept, m)
			}
		}
		if len(kept) == len(t.Members) {
			continue
		}
		nr, err := tx.Update(ctx, store.Team, t.ID, memberValues(kept, t.MemberBudgets))
		if err != nil {
			return nil, err
		}
		out = append(out, nr)
	}
	return out, nil
}

// memberValues are the team columns for members and their budgets; a budget of a user who is
// no longer a member is dropped with the membership (LiteLLM deletes the membership row).
func memberValues(members []accounts.Member, budgets map[string]*accounts.MemberBudget) store.Values {
	kept := map[string]*accounts.MemberBudget{}
	for _, m := range members {
		if b, ok := budgets[m.UserID]; ok && m.UserID != "" && b != nil {
			kept[m.UserID] = b
		}
	}
	mb, _ := json.Marshal(members)
	bb, _ := json.Marshal(kept)
	return store.Values{"members_with_roles": mb, "team_member_budgets": bb}
}

// teamMemberships is LiteLLM's team_memberships of a team (LiteLLM_TeamMembership rows with
// their litellm_budget_table): one per member with a user_id — only userID's when userID is
// not "" — each {"team_id", "user_id", "budget_id", "spend", "litellm_budget_table"} where
// spend is the member's spend within the team (USD, current budget period) and
// litellm_budget_table its {"budget_id", "max_budget", "budget_duration", "tpm_limit",
// "rpm_limit", "max_parallel_requests"} (null: no budget in the team).
func (s *Server) teamMemberships(ctx context.Context, t *accounts.Team, userID string) []map[string]any {
	out := []map[string]any{}
	for _, m := range t.Members {
		if m.UserID == "" || (userID != "" && m.UserID != userID) {
			continue
		}
		ms := map[string]any{"team_id": t.ID, "user_id": m.UserID, "budget_id": nil, "litellm_budget_table": nil,
			"spend": s.ownerSpend(ctx, store.OwnerToken("team_member", store.TeamMemberID(t.ID, m.UserID)))}
		if b, ok := t.MemberBudget(m.UserID); ok {
			ms["budget_id"] = b.BudgetID
			ms["litellm_budget_table"] = map[string]any{"budget_id": b.BudgetID, "max_budget": b.MaxBudget,
				"budget_duration": b.BudgetDuration, "tpm_limit": b.TPMLimit, "rpm_limit": b.RPMLimit,
				"max_parallel_requests": b.MaxParallel}
		}
		out = append(out, ms)
	}
	return out
}

// accountList: GET /<kind>/list → every row, oldest first, as a bare array (LiteLLM's
// /organization/list and /customer/list).
func (s *Server) accountList(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(k.typ, k.what+"s"); err != nil {
			return err
		}
		rows, err := s.Store.List(c.Request().Context(), k.typ)
		if err != nil {
			return err
		}
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			m, err := s.accountJSON(r)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return c.JSON(http.StatusOK, out)
	}
}

// teamList: GET /team/list[?user_id=][&organization_id=] → every team, oldest first, as a bare
// array (LiteLLM list_team): with user_id only the teams the user is a member of, with
// organization_id only that organization's.
func (s *Server) teamList(c echo.Context) error {
	if err := s.requireDB(store.Team, "teams"); err != nil {
		return err
	}
	uid, org := c.QueryParam("user_id"), c.QueryParam("organization_id")
	teams, err := s.teamsWhere(c.Request().Context(), func(t *accounts.Team) bool {
		if uid != "" {
			if _, ok := t.Member(uid); !ok {
				return false
			}
		}
		return org == "" || (t.OrganizationID != nil && *t.OrganizationID == org)
	}, "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, teams)
}

// teamListV2: GET /v2/team/list → one page of teams, LiteLLM's paginated team list: {"teams",
// "total", "page", "page_size", "total_pages"}, newest first. Query parameters: page (from 1),
// page_size (1..100, default 10), user_id (teams the user is a member of), organization_id,
// team_id, team_alias (contains, case-insensitive). A bad page or page_size: 400.
func (s *Server) teamListV2(c echo.Context) error {
	if err := s.requireDB(store.Team, "teams"); err != nil {
		return err
	}
	page, err := intQuery(c, "page", 1, 1, math.MaxInt)
	if err != nil {
		return err
	}
	size, err := intQuery(c, "page_size", 10, 1, 100)
	if err != nil {
		return err
	}
	uid, org, tid := c.QueryParam("user_id"), c.QueryParam("organization_id"), c.QueryParam("team_id")
	alias := strings.ToLower(c.QueryParam("team_alias"))
	teams, err := s.teamsWhere(c.Request().Context(), func(t *accounts.Team) bool {
		if uid != "" {
			if _, ok := t.Member(uid); !ok {
				return false
			}
		}
		if alias != "" && (t.Alias == nil || !strings.Contains(strings.ToLower(*t.Alias), alias)) {
			return false
		}
		return (org == "" || (t.OrganizationID != nil && *t.OrganizationID == org)) && (tid == "" || t.ID == tid)
	}, "")
	if err != nil {
		return err
	}
	slices.Reverse(teams) // newest first
	total := len(teams)
	lo := min((page-1)*size, total)
	hi := min(lo+size, total)
	return c.JSON(http.StatusOK, map[string]any{"teams": teams[lo:hi], "total": total, "page": page, "page_size": size,
		"total_pages": (total + size - 1) / size})
}

// intQuery reads an integer query parameter in [lo, hi] (def when absent); otherwise 400
// naming it.
func intQuery(c echo.Context, name string, def, lo, hi int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		if hi == math.MaxInt {
			return 0, detailErr(http.StatusBadRequest, "%s must be an integer >= %d, got %q", name, lo, v)
		}
		return 0, detailErr(http.StatusBadRequest, "%s must be an integer from %d to %d, got %q", name, lo, hi, v)
	}
	return n, nil
}

// userList: GET /user/list → one page of users, LiteLLM's get_users: {"users", "total", "page",
// "page_size", "total_pages"}, each user with its "key_count". Query parameters: page (from 1,
// default 1), page_size (1..100, default 25), role, user_ids (comma-separated: one id matches
// ids containing it, case-insensitive; several match exactly), user_email (contains,
// case-insensitive), team (members of that team), sort_by (user_id, user_email, created_at,
// spend, user_alias, user_role; default created_at, newest first), sort_order (asc | desc,
// default asc). A bad parameter: 400 naming it.
func (s *Server) userList(c echo.Context) error {
	if err := s.requireDB(store.User, "users"); err != nil {
		return err
	}
	page, err := intQuery(c, "page", 1, 1, math.MaxInt)
	if err != nil {
		return err
	}
	size, err := intQuery(c, "page_size", 25, 1, 100)
	if err != nil {
		return err
	}
	f := store.UserFilter{Role: c.QueryParam("role"), Email: c.QueryParam("user_email"), Team: c.QueryParam("team")}
	for _, id := range strings.Split(c.QueryParam("user_ids"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			f.UserIDs = append(f.UserIDs, id)
		}
	}
	if sb := c.QueryParam("sort_by"); sb != "" {
		if !slicesContainsStr(store.UserSortColumns, sb) {
			return detailErr(http.StatusBadRequest, "Invalid sort column. Must be one of: %s", strings.Join(store.UserSortColumns, ", "))
		}
		f.SortBy = sb
		switch strings.ToLower(c.QueryParam("sort_order")) {
		case "", "asc":
		case "desc":
			f.Desc = true
		default:
			return detailErr(http.StatusBadRequest, "Invalid sort order. Must be 'asc' or 'desc'")
		}
	}
	rows, total, err := s.Store.ListUsers(c.Request().Context(), f, page, size)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := s.accountJSON(r)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, map[string]any{"users": out, "total": total, "page": page, "page_size": size,
		"total_pages": (total + size - 1) / size})
}

// getAccount reads one account row for an info route: 400 without the id, 404 when unknown.
func (s *Server) getAccount(c echo.Context, k accountKind) (store.Row, error) {
	if err := s.requireDB(k.typ, k.what+"s"); err != nil {
		return store.Row{}, err
	}
	id := c.QueryParam(k.infoParam)
	if id == "" {
		return store.Row{}, detailErr(http.StatusBadRequest, "%s query parameter is required", k.infoParam)
	}
	row, err := s.Store.Get(c.Request().Context(), k.typ, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, k.notFound(id)
	}
	return row, err
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
		return c.JSON(http.StatusOK, out)
	}
}

// keysOf lists the keys whose column (team_id, user_id) is id, never a raw key.
func (s *Server) keysOf(ctx context.Context, column, id string) ([]map[string]any, error) {
	rows, err := s.Store.ListBy(ctx, store.Key, column, id)
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
	row, err := s.getAccount(c, teamKind)
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
	row, err := s.getAccount(c, userKind)
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

// orgInfo: GET /organization/info?organization_id= → the row plus its "teams".
func (s *Server) orgInfo(c echo.Context) error {
	row, err := s.getAccount(c, orgKind)
	if err != nil {
		return err
	}
	out, err := s.accountJSON(row)
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
	rows, err := s.Store.List(ctx, store.Team)
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
	var resolved *store.Row
	row, _, err := s.insertAccount(c, teamKind, nil, func(ctx context.Context, tx *store.TxStore, row store.Row, body map[string]json.RawMessage) error {
		t, err := accounts.BuildTeamRow(row)
		if err != nil {
			return detailErr(http.StatusBadRequest, "%v", err)
		}
		members, users, err := ensureUsers(ctx, tx, t.Members)
		if err != nil {
			return err
		}
		s.afterCommit(c, store.User, users)
		if !slices.Equal(members, t.Members) { // members named by email got their user_id
			r, err := tx.Update(ctx, store.Team, t.ID, memberValues(members, t.MemberBudgets))
			if err != nil {
				return err
			}
			resolved = &r
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.flushAfterCommit(c)
	if resolved != nil {
		row = *resolved
		s.applyAccount(store.Team, []store.Row{row}, nil)
	}
	return s.accountOK(c, row)
}

const afterCommitKey = "lockstep.after_commit"

// afterCommit remembers rows written in a transaction, applied locally once it committed.
func (s *Server) afterCommit(c echo.Context, typ store.ObjectType, rows []store.Row) {
	if len(rows) == 0 {
		return
	}
	m, _ := c.Get(afterCommitKey).(map[store.ObjectType][]store.Row)
	if m == nil {
		m = map[store.ObjectType][]store.Row{}
		c.Set(afterCommitKey, m)
	}
	m[typ] = append(m[typ], rows...)
}

func (s *Server) flushAfterCommit(c echo.Context) {
	m, _ := c.Get(afterCommitKey).(map[store.ObjectType][]store.Row)
	for typ, rows := range m {
		s.applyAccount(typ, rows, nil)
	}
	c.Set(afterCommitKey, nil)
}

// ensureUsers makes every member a user, as LiteLLM's add_new_member does: a member named by
// user_id whose user does not exist is created (role internal_user, with its user_email); a
// member named only by user_email gets the user_id of the user with that email, or of a new
// user created with a generated id. Returns the members with their user_id filled in and the
// users created.
func ensureUsers(ctx context.Context, tx *store.TxStore, members []accounts.Member) ([]accounts.Member, []store.Row, error) {
	out := append([]accounts.Member(nil), members...)
	var created []store.Row
	for i, m := range out {
		if m.UserID == "" {
			if m.UserEmail == "" {
				continue
			}
			found, err := tx.ListBy(ctx, store.User, "user_email", m.UserEmail)
			if err != nil {
				return nil, nil, err
			}
			if len(found) > 0 {
				out[i].UserID = found[0].ID
				continue
			}
			out[i].UserID = uuid.NewString()
		} else if _, err := tx.Get(ctx, store.User, m.UserID); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		}
		vals := store.Values{"user_id": out[i].UserID, "user_role": "internal_user"}
		if m.UserEmail != "" {
			vals["user_email"] = m.UserEmail
		}
		r, err := tx.Insert(ctx, store.User, vals)
		if err != nil {
			return nil, nil, err
		}
		created = append(created, r)
	}
	return out, created, nil
}

// editMembers runs a read-modify-write of a team's members (and, through t.MemberBudgets,
// which edit may change, their budgets in the team) under the row's lock.
func (s *Server) editMembers(c echo.Context, teamID string, edit func(ctx context.Context, tx *store.TxStore, t *accounts.Team) ([]accounts.Member, error)) (store.Row, error) {
	if teamID == "" {
		return store.Row{}, detailErr(http.StatusBadRequest, "team_id is required")
	}
	ctx := c.Request().Context()
	var row store.Row
	err := s.Store.Tx(ctx, func(tx *store.TxStore) error {
		cur, err := tx.GetForUpdate(ctx, store.Team, teamID)
		if errors.Is(err, store.ErrNotFound) {
			return teamKind.notFound(teamID)
		}
		if err != nil {
			return err
		}
		t, err := accounts.BuildTeamRow(cur)
		if err != nil {
			return detailErr(http.StatusBadRequest, "%v", err)
		}
		if t.MemberBudgets == nil {
			t.MemberBudgets = map[string]*accounts.MemberBudget{}
		}
		members, err := edit(ctx, tx, t)
		if err != nil {
			return err
		}
		row, err = tx.Update(ctx, store.Team, teamID, memberValues(members, t.MemberBudgets))
		return err
	})
	if err != nil {
		return store.Row{}, err
	}
	s.flushAfterCommit(c)
	s.applyAccount(store.Team, []store.Row{row}, nil)
	return row, nil
}

func sameMember(a, b accounts.Member) bool {
	return (a.UserID != "" && a.UserID == b.UserID) || (a.UserID == "" && b.UserID == "" && a.UserEmail == b.UserEmail) ||
		(a.UserEmail != "" && a.UserEmail == b.UserEmail && (a.UserID == "" || b.UserID == ""))
}

// teamMemberAdd: POST /team/member_add {"team_id", "member": {...} | [...],
// "max_budget_in_team"?} → the team row plus "updated_users" (the users created for members
// that did not exist). max_budget_in_team (USD) is each added member's budget within the team
// (LiteLLM creates a team membership with that budget; members named only by user_email get
// none). A member already in the team: 400.
func (s *Server) teamMemberAdd(c echo.Context) error {
	if err := s.requireDB(store.Team, "teams"); err != nil {
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
	var created []store.Row
	row, err := s.editMembers(c, str(body, "team_id"), func(ctx context.Context, tx *store.TxStore, t *accounts.Team) ([]accounts.Member, error) {
		out := append([]accounts.Member{}, t.Members...)
		// the named users, found or created (a member named by email gets its user's id)
		resolved, users, err := ensureUsers(ctx, tx, add)
		if err != nil {
			return nil, err
		}
		created = users
		s.afterCommit(c, store.User, created)
		add = resolved
		for _, m := range add {
			for _, have := range out {
				if sameMember(have, m) {
					return nil, detailErr(http.StatusBadRequest, "User already in team - %s", firstNonEmpty(m.UserID, m.UserEmail))
				}
			}
			out = append(out, m)
			if hasBudget && m.UserID != "" {
				setMemberBudget(t, m.UserID, func(b *accounts.MemberBudget) { b.MaxBudget = &inTeam })
			}
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	out, err := s.accountJSON(row)
	if err != nil {
		return err
	}
	users := make([]map[string]any, 0, len(created))
	for _, r := range created {
		m, err := s.accountJSON(r)
		if err != nil {
			return err
		}
		users = append(users, m)
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
	if err := s.requireDB(store.Team, "teams"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"team_id": fString, "user_id": fString, "user_email": fString})
	if err != nil {
		return err
	}
	who := accounts.Member{UserID: str(body, "user_id"), UserEmail: str(body, "user_email")}
	if who.UserID == "" && who.UserEmail == "" {
		return detailErr(http.StatusBadRequest, "user_id or user_email is required")
	}
	row, err := s.editMembers(c, str(body, "team_id"), func(_ context.Context, _ *store.TxStore, t *accounts.Team) ([]accounts.Member, error) {
		out := make([]accounts.Member, 0, len(t.Members))
		for _, m := range t.Members {
			if !sameMember(m, who) {
				out = append(out, m)
			}
		}
		if len(out) == len(t.Members) {
			return nil, detailErr(http.StatusBadRequest, "User is not a member of team %s - %s", t.ID, firstNonEmpty(who.UserID, who.UserEmail))
		}
		return out, nil
	})
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
	if err := s.requireDB(store.Team, "teams"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"team_id": fString, "user_id": fString, "user_email": fString, "role": fString,
		"max_budget_in_team": fNumber, "tpm_limit": fInt, "rpm_limit": fInt})
	if err != nil {
		return err
	}
	who := accounts.Member{UserID: str(body, "user_id"), UserEmail: str(body, "user_email")}
	if who.UserID == "" && who.UserEmail == "" {
		return detailErr(http.StatusBadRequest, "user_id or user_email is required")
	}
	role := str(body, "role")
	if role != "" && role != accounts.RoleAdmin && role != accounts.RoleUser {
		return detailErr(http.StatusBadRequest, "role: %q is not a team role (want admin or user)", role)
	}
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
	var got accounts.Member
	var budget *accounts.MemberBudget
	_, err = s.editMembers(c, str(body, "team_id"), func(_ context.Context, _ *store.TxStore, t *accounts.Team) ([]accounts.Member, error) {
		out := append([]accounts.Member{}, t.Members...)
		found := false
		for i := range out {
			if sameMember(out[i], who) {
				if role != "" {
					out[i].Role = role
				}
				got, found = out[i], true
			}
		}
		if !found {
			return nil, detailErr(http.StatusBadRequest, "User is not a member of team %s - %s", t.ID, firstNonEmpty(who.UserID, who.UserEmail))
		}
		if len(edits) > 0 {
			if got.UserID == "" {
				return nil, detailErr(http.StatusBadRequest, "member %s has no user_id: a budget in the team needs one", got.UserEmail)
			}
			setMemberBudget(t, got.UserID, edits...)
		}
		budget, _ = t.MemberBudget(got.UserID)
		return out, nil
	})
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

// setMemberBudget applies edits to userID's budget in team t (created with a new budget_id
// when absent); a budget left with nothing set is removed.
func setMemberBudget(t *accounts.Team, userID string, edits ...func(*accounts.MemberBudget)) {
	if t.MemberBudgets == nil {
		t.MemberBudgets = map[string]*accounts.MemberBudget{}
	}
	b := &accounts.MemberBudget{BudgetID: uuid.NewString()}
	if cur, ok := t.MemberBudgets[userID]; ok && cur != nil {
		cp := *cur
		b = &cp
	}
	for _, e := range edits {
		e(b)
	}
	if b.MaxBudget == nil && b.TPMLimit == nil && b.RPMLimit == nil && b.MaxParallel == nil {
		delete(t.MemberBudgets, userID)
		return
	}
	t.MemberBudgets[userID] = b
}

// optNumber reads an optional number field: (value, true) when set, (0, false) when absent or
// null. Kinds were checked by decodeFields.
func optNumber(body map[string]json.RawMessage, name string) (float64, bool, error) {
	raw, ok := body[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	var v float64
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

// userNewFields are /user/new's fields besides the user's columns.
var userNewFields = fields{"teams": fStrings, "team_id": fString, "auto_create_key": fBool, "key_alias": fString, "duration": fString}

// userNewTeams are the teams /user/new joins: "teams" plus "team_id" (LiteLLM's key-level
// team_id, which also adds the user to that team).
func userNewTeams(body map[string]json.RawMessage) []string {
	out := strs(body, "teams")
	if tid := str(body, "team_id"); tid != "" && !slicesContainsStr(out, tid) {
		out = append(out, tid)
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
// models). "teams" adds the user to those teams with the role user (each must exist: 400);
// "team_id" also does, and makes the new key a key of that team (LiteLLM).
func (s *Server) userNew(c echo.Context) error {
	var key string
	var keyRow store.Row
	var teamRows []store.Row
	row, body, err := s.insertAccount(c, userKind, userNewFields, func(ctx context.Context, tx *store.TxStore, row store.Row, body map[string]json.RawMessage) error {
		for _, tid := range userNewTeams(body) {
			cur, err := tx.GetForUpdate(ctx, store.Team, tid)
			if errors.Is(err, store.ErrNotFound) {
				return teamKind.notFound(tid)
			}
			if err != nil {
				return err
			}
			t, err := accounts.BuildTeamRow(cur)
			if err != nil {
				return detailErr(http.StatusBadRequest, "%v", err)
			}
			if _, ok := t.Member(row.ID); ok {
				continue
			}
			b, _ := json.Marshal(append(append([]accounts.Member{}, t.Members...), accounts.Member{UserID: row.ID, Role: accounts.RoleUser}))
			nr, err := tx.Update(ctx, store.Team, tid, store.Values{"members_with_roles": b})
			if err != nil {
				return err
			}
			teamRows = append(teamRows, nr)
		}
		if raw, ok := body["auto_create_key"]; ok && string(raw) == "false" {
			return nil
		}
		key = keys.Generate()
		models := strs(body, "models")
		if models == nil {
			models = []string{}
		}
		vals := store.Values{"token": keys.Hash(key), "user_id": row.ID, "models": models}
		if tid := str(body, "team_id"); tid != "" {
			vals["team_id"] = tid
		}
		if a := str(body, "key_alias"); a != "" {
			vals["key_alias"] = a
		}
		if d := str(body, "duration"); d != "" {
			dur, err := keys.ParseDuration(d)
			if err != nil {
				return detailErr(http.StatusBadRequest, "duration: %v", err)
			}
			vals["expires"] = time.Now().Add(dur)
		}
		var err error
		keyRow, err = tx.Insert(ctx, store.Key, vals)
		return err
	})
	if err != nil {
		return err
	}
	s.applyAccount(store.Team, teamRows, nil)
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
		s.applyAccount(store.Key, []store.Row{keyRow}, nil)
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

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
