package api

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
)

// accountList: GET /<kind>/list → every row, oldest first, as a bare array (LiteLLM's
// /organization/list and /customer/list).
func (s *Server) accountList(k accountKind) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.requireDB(k.Type, k.What+"s"); err != nil {
			return err
		}
		rows, err := s.mgmt.Accounts(c.Request().Context(), k.AccountKind)
		if err != nil {
			return err
		}
		out, err := s.accountsJSON(rows)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// teamList: GET /team/list[?user_id=][&organization_id=] → every team, oldest first, as a bare
// array (LiteLLM list_team): with user_id only the teams the user is a member of, with
// organization_id only that organization's.
func (s *Server) teamList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeTeam, "teams"); err != nil {
		return err
	}
	teams, err := s.teamsWhere(c.Request().Context(),
		teamQuery(c, c.QueryParam("user_id"), c.QueryParam("organization_id"), "", ""), "")
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
	if err := s.requireDB(mgmt.TypeTeam, "teams"); err != nil {
		return err
	}
	page, size, err := pageQuery(c, 10)
	if err != nil {
		return err
	}
	teams, err := s.teamsWhere(c.Request().Context(), teamQuery(c, c.QueryParam("user_id"), c.QueryParam("organization_id"),
		c.QueryParam("team_id"), c.QueryParam("team_alias")), "")
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
// pageQuery reads LiteLLM's page (from 1, default 1) and page_size (1..100, default defSize)
// query parameters; a bad one is intQuery's 400 naming it.
func pageQuery(c echo.Context, defSize int) (page, size int, err error) {
	if page, err = intQuery(c, "page", 1, 1, math.MaxInt); err != nil {
		return 0, 0, err
	}
	size, err = intQuery(c, "page_size", defSize, 1, 100)
	return page, size, err
}

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
	if err := s.requireDB(mgmt.TypeUser, "users"); err != nil {
		return err
	}
	page, size, err := pageQuery(c, 25)
	if err != nil {
		return err
	}
	f := mgmt.UserFilter{Role: c.QueryParam("role"), Email: c.QueryParam("user_email"), Team: c.QueryParam("team")}
	for _, id := range strings.Split(c.QueryParam("user_ids"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			f.UserIDs = append(f.UserIDs, id)
		}
	}
	if sb := c.QueryParam("sort_by"); sb != "" {
		if !slicesContainsStr(mgmt.UserSortColumns, sb) {
			return detailErr(http.StatusBadRequest, "Invalid sort column. Must be one of: %s", strings.Join(mgmt.UserSortColumns, ", "))
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
	rows, total, err := s.mgmt.Users(c.Request().Context(), f, page, size)
	if err != nil {
		return err
	}
	out, err := s.accountsJSON(rows)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"users": out, "total": total, "page": page, "page_size": size,
		"total_pages": (total + size - 1) / size})
}

// teamQuery is the team lists' filter: the teams the caller sees (ScopeOwn: its own teams
// only), and of those, when given ("" matches all), the ones user uid is a member of, in
// organization org, with id tid, whose alias contains alias (case-insensitive).
func teamQuery(c echo.Context, uid, org, tid, alias string) func(*accounts.Team) bool {
	who := mgmtCaller(caller(c))
	alias = strings.ToLower(alias)
	return func(t *accounts.Team) bool {
		if !who.SeesTeam(t) {
			return false
		}
		if uid != "" {
			if _, ok := t.Member(uid); !ok {
				return false
			}
		}
		if alias != "" && (t.Alias == nil || !strings.Contains(strings.ToLower(*t.Alias), alias)) {
			return false
		}
		return (org == "" || (t.OrganizationID != nil && *t.OrganizationID == org)) && (tid == "" || t.ID == tid)
	}
}
