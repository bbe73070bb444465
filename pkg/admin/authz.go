package admin

// Authorisation of management calls: the one table (route × role → allowed, and how far the
// caller sees) that pkg/api consults for every management route before the use-case runs, and
// the Caller the use-cases take to apply the ownership rule to the objects they load
// (scope.go). Source: /work/shared/API.md "Roles and self-service", LiteLLM's
// litellm/proxy/auth/route_checks.py (non_proxy_admin_allowed_routes_check, its
// internal_user_routes, internal_user_view_only_routes and the proxy_admin_viewer check) and
// management_endpoints/key_management_endpoints.py (_is_allowed_to_make_key_request).

import (
	"fmt"
	"slices"
	"strings"

	"lockstep/pkg/access"
	"lockstep/pkg/accounts"
)

// LiteLLM's user roles (LitellmUserRoles), as stored in gateway.users.user_role.
const (
	RoleProxyAdmin         = "proxy_admin"
	RoleProxyAdminViewer   = "proxy_admin_viewer"
	RoleInternalUser       = "internal_user"
	RoleInternalUserViewer = "internal_user_viewer"
)

// Scope is how far a caller allowed on a route sees and acts.
type Scope uint8

const (
	// ScopeNone: not decided (a Caller nobody authorised acts on nothing of anyone's).
	ScopeNone Scope = iota
	// ScopeOwn: only the caller's own objects (Caller.OwnsKey, SeesTeam, ...); another's
	// object answers exactly as an absent one (NotFound), never revealing it exists.
	ScopeOwn
	// ScopeAll: every object (the master key, a proxy_admin user; a proxy_admin_viewer on reads).
	ScopeAll
)

// Caller is who makes a management call, passed to the use-cases as a value. The zero Caller
// is nobody (ScopeNone).
type Caller struct {
	// Master: the master key (or no master key configured: every caller is the admin).
	Master bool
	// Token is the sha256 of the caller's virtual key ("" for the master key).
	Token string
	// User is the key's internal user (nil: the key has none, or it does not exist).
	User *accounts.User
	// Team is the key's team (nil: none).
	Team *accounts.Team
	// Scope is the table's decision for the route being called (Authorize).
	Scope Scope
	// SpendRoutes: the caller's key has LiteLLM's permissions {"get_spend_routes": true}
	// (keys.Key.GetSpendRoutes): it may read the /global/spend routes (access.GlobalSpendRoutes).
	SpendRoutes bool
	// TeamKeys: the caller, a member with role user of its key's team, may act on the team's
	// keys on the route being called as the team's admin would, because the team's
	// team_member_permissions (LiteLLM's default: /key/info, /key/health) list the route
	// (TeamMemberMay; set with Scope).
	TeamKeys bool
}

// TeamMemberMay reports whether the caller, a member with role user of its key's team, may
// call route (the request's path) on the team's keys under the team's team_member_permissions
// (LiteLLM TeamMemberPermissionChecks.does_team_member_have_permissions_for_endpoint; a team
// admin needs none, anyone else gets none).
func (c Caller) TeamMemberMay(route string) bool {
	if c.TeamRole() != accounts.RoleUser {
		return false
	}
	perms := c.Team.Fields.MemberPermissions
	if len(perms) == 0 {
		perms = access.DefaultTeamMemberPermissions
	}
	return access.InRoutes(perms, route)
}

// teamKeysOf reports whether the caller acts on team teamID's keys: its admin, or a member
// whose team_member_permissions list the route (TeamKeys).
func (c Caller) teamKeysOf(teamID string) bool {
	return teamID != "" && c.Team != nil && c.Team.ID == teamID && (c.TeamAdmin() || c.TeamKeys)
}

// UserID is the caller's user id ("" without a user).
func (c Caller) UserID() string {
	if c.User == nil {
		return ""
	}
	return c.User.ID
}

// Role is the caller's LiteLLM role: proxy_admin for the master key; else its user's
// user_role, internal_user when the user has none; "" for a key without a user.
func (c Caller) Role() string {
	switch {
	case c.Master:
		return RoleProxyAdmin
	case c.User == nil:
		return ""
	case c.User.Role == nil || *c.User.Role == "":
		return RoleInternalUser
	}
	return *c.User.Role
}

// Admin reports whether the caller is a proxy admin (the master key or a proxy_admin user).
func (c Caller) Admin() bool { return c.Role() == RoleProxyAdmin }

// TeamRole is the caller's role in its key's team: "admin" or "user" when the key's user is
// a member, "" otherwise (a team key without a user reads its team but manages nothing).
func (c Caller) TeamRole() string {
	if c.Team == nil || c.User == nil {
		return ""
	}
	if m, ok := c.Team.Member(c.User.ID); ok {
		return m.Role
	}
	return ""
}

// TeamAdmin reports whether the caller is an admin of its key's team.
func (c Caller) TeamAdmin() bool { return c.TeamRole() == accounts.RoleAdmin }

// who is a set of callers besides the proxy admins that a route lets in, each to its own
// objects only (ScopeOwn).
type who uint8

const (
	whoUser       who = 1 << iota // internal_user: its own user, keys and teams
	whoUserViewer                 // internal_user_viewer: reads its own
	whoTeamAdmin                  // an admin of the key's team: that team, its members, keys and models
	whoTeamKey                    // any key of a team (member or not): reads that team
	whoAnyKey                     // any virtual key: reads itself (its own /key/info)
)

// Rule is one management route's row of the table.
type Rule struct {
	// Write: the route changes state; proxy_admin_viewer is refused (LiteLLM's
	// _check_proxy_admin_viewer_access).
	Write bool
	// Self: who else may call it, each on its own objects (ScopeOwn).
	Self who
	// Own words the ownership rule the use-case applies under ScopeOwn (docs, tests).
	Own string
}

const (
	ownKeys  = "keys of the caller's user (internal_user) or of the team it administers (team admin); its own key"
	ownUser  = "the caller's own user"
	ownTeams = "the key's team and the teams the caller's user is a member of"
	ownTeam  = "the team the caller administers (the key's team, where the key's user has the role admin)"
	ownModel = "models whose model_info.team_id is the team the caller administers"
	ownSpend = "the spend logs of the caller's user (LiteLLM's *_internal_user spend reports)"
	// LiteLLM project_endpoints.py: _check_user_permission_for_project (writes), project_info
	// and list_projects (reads: a member of the project's team)
	ownProjectWrite = "projects of the team the caller administers (the key's team, where the key's user has the role admin)"
	ownProjectRead  = "projects of the key's team, when the key's user is a member of it"
)

// Rules is the table: "METHOD pattern" (echo's route pattern) → rule. A management route not
// in it is the proxy admin's alone, readable by proxy_admin_viewer when its method is GET
// (RuleOf).
var Rules = map[string]Rule{
	"GET /key/info":             {Self: whoAnyKey | whoUser | whoUserViewer | whoTeamAdmin, Own: ownKeys},
	"GET /key/list":             {Self: whoUser | whoUserViewer | whoTeamAdmin, Own: ownKeys},
	"POST /key/generate":        {Write: true, Self: whoUser | whoTeamAdmin, Own: ownKeys},
	"POST /key/update":          {Write: true, Self: whoUser | whoTeamAdmin, Own: ownKeys},
	"POST /key/delete":          {Write: true, Self: whoUser | whoTeamAdmin, Own: ownKeys},
	"POST /key/regenerate":      {Write: true, Self: whoUser | whoTeamAdmin, Own: ownKeys},
	"POST /key/:key/regenerate": {Write: true, Self: whoUser | whoTeamAdmin, Own: ownKeys},
	"GET /user/info":            {Self: whoUser | whoUserViewer, Own: ownUser},
	"GET /team/info":            {Self: whoUser | whoUserViewer | whoTeamKey | whoTeamAdmin, Own: ownTeams},
	"GET /team/list":            {Self: whoUser | whoUserViewer | whoTeamKey | whoTeamAdmin, Own: ownTeams},
	"GET /v2/team/list":         {Self: whoUser | whoUserViewer | whoTeamKey | whoTeamAdmin, Own: ownTeams},
	"POST /team/member_add":     {Write: true, Self: whoTeamAdmin, Own: ownTeam},
	"POST /team/member_delete":  {Write: true, Self: whoTeamAdmin, Own: ownTeam},
	"POST /team/member_update":  {Write: true, Self: whoTeamAdmin, Own: ownTeam},
	"POST /model/new":           {Write: true, Self: whoTeamAdmin, Own: ownModel},
	"POST /model/update":        {Write: true, Self: whoTeamAdmin, Own: ownModel},
	"PATCH /model/:id/update":   {Write: true, Self: whoTeamAdmin, Own: ownModel},
	"POST /model/delete":        {Write: true, Self: whoTeamAdmin, Own: ownModel},
	// projects: a team admin creates and updates its team's; a team member reads them;
	// /project/delete is the proxy admin's alone (LiteLLM require_admin=True)
	"POST /project/new":    {Write: true, Self: whoTeamAdmin, Own: ownProjectWrite},
	"POST /project/update": {Write: true, Self: whoTeamAdmin, Own: ownProjectWrite},
	"GET /project/info":    {Self: whoUser | whoUserViewer | whoTeamAdmin, Own: ownProjectRead},
	"GET /project/list":    {Self: whoUser | whoUserViewer | whoTeamAdmin, Own: ownProjectRead},
	// budgets are admin objects; /budget/info is a read sent as POST (LiteLLM BudgetRequest)
	"POST /budget/info": {},
	// spend reads (LiteLLM's internal_user_routes: /global/spend/tags, keys, models,
	// provider, end_users, /global/activity(/model) and the spend_tracking_routes; its
	// internal_user_view_only_routes add /global/spend/logs), each answered for the caller's
	// own user; the proxy-wide ones (/global/spend, teams, report) stay the admin's, read by
	// proxy_admin_viewer (API.md: an internal_user_viewer reads its own)
	"GET /global/spend/logs":       {Self: whoUserViewer, Own: ownSpend},
	"GET /global/spend/keys":       {Self: whoUser | whoUserViewer, Own: ownSpend},
	"GET /global/spend/models":     {Self: whoUser | whoUserViewer, Own: ownSpend},
	"GET /global/spend/provider":   {Self: whoUser | whoUserViewer, Own: ownSpend},
	"GET /global/spend/tags":       {Self: whoUser | whoUserViewer, Own: ownSpend},
	"POST /global/spend/end_users": {Self: whoUser | whoUserViewer, Own: ownSpend}, // a read sent as POST
	"GET /global/activity":         {Self: whoUser | whoUserViewer, Own: ownSpend},
	"GET /global/activity/model":   {Self: whoUser | whoUserViewer, Own: ownSpend},
	"GET /spend/logs":              {Self: whoUser | whoUserViewer, Own: ownSpend},
	"GET /spend/tags":              {Self: whoUser | whoUserViewer, Own: ownSpend},
}

// RuleOf is the table's row for a route (method and echo route pattern): Rules' entry, or the
// default — the proxy admin's alone, a read (GET, HEAD) open to proxy_admin_viewer.
func RuleOf(method, route string) Rule {
	if r, ok := Rules[method+" "+route]; ok {
		return r
	}
	return Rule{Write: method != "GET" && method != "HEAD"}
}

// lets reports whether the set lets c in.
func (w who) lets(c Caller, write bool) bool {
	role := c.Role()
	switch {
	case w&whoUser != 0 && role == RoleInternalUser:
		return true
	case w&whoUserViewer != 0 && role == RoleInternalUserViewer && !write:
		return true
	case w&whoTeamAdmin != 0 && c.TeamAdmin() && role != RoleInternalUserViewer:
		return true
	case w&whoTeamKey != 0 && c.Team != nil:
		return true
	case w&whoAnyKey != 0 && c.Token != "":
		return true
	}
	return false
}

// Authorize is the table's decision for c calling route (method, echo route pattern; path is
// the request's path, quoted in refusals): the scope c acts in, or Forbidden in LiteLLM's
// words — a proxy_admin_viewer on a write: `user not allowed to access this route, role=
// proxy_admin_viewer. Trying to access: <path>`; anyone else not let in: `Only proxy admin can
// be used to generate, delete, update info for new keys/users/teams. Route=<path>. Your
// role=<role>. Your user_id=<masked id>` (role and id "unknown" for a key without a user;
// route_checks.py _raise_admin_only_route_exception). A key with the get_spend_routes
// permission is let in on the /global/spend routes with ScopeAll, whatever its role.
func Authorize(method, route, path string, c Caller) (Scope, error) {
	if c.Admin() {
		return ScopeAll, nil
	}
	if c.SpendRoutes && slices.Contains(access.GlobalSpendRoutes, route) {
		// route_checks.py: a key with the get_spend_routes permission reads proxy-wide spend
		return ScopeAll, nil
	}
	r := RuleOf(method, route)
	if c.Role() == RoleProxyAdminViewer {
		if !r.Write {
			return ScopeAll, nil
		}
		return ScopeNone, &Forbidden{Msg: fmt.Sprintf("user not allowed to access this route, role= %s. Trying to access: %s", RoleProxyAdminViewer, path)}
	}
	if r.Self.lets(c, r.Write) {
		return ScopeOwn, nil
	}
	role, uid := c.Role(), c.UserID()
	if role == "" {
		role = "unknown"
	}
	if uid == "" {
		uid = "unknown"
	}
	return ScopeNone, &Forbidden{Msg: fmt.Sprintf("Only proxy admin can be used to generate, delete, update info for new keys/users/teams. Route=%s. Your role=%s. Your user_id=%s", path, role, MaskUserID(uid))}
}

// MaskUserID masks a user id in a refusal as LiteLLM's RouteChecks._mask_user_id does: the
// first 6 and last 2 characters shown, the rest '*'; "***" for 4 characters or fewer ("unknown"
// is kept).
func MaskUserID(id string) string {
	if id == "unknown" {
		return id
	}
	if len(id) <= 4 {
		return "***"
	}
	if len(id) <= 8 {
		return id[:2] + strings.Repeat("*", len(id)-4) + id[len(id)-2:]
	}
	return id[:6] + strings.Repeat("*", len(id)-8) + id[len(id)-2:]
}
