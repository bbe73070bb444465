package admin

import (
	"encoding/json"
	"testing"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
)

func strp(s string) *string { return &s }

// the callers of the roles test, by name
func callers() map[string]Caller {
	team := &accounts.Team{ID: "t1", Members: []accounts.Member{{UserID: "u-admin", Role: accounts.RoleAdmin}, {UserID: "u-member", Role: accounts.RoleUser}}}
	user := func(id, role string) *accounts.User { return &accounts.User{ID: id, Role: strp(role)} }
	return map[string]Caller{
		"master":             {Master: true},
		"proxy_admin":        {Token: "k1", User: user("u-pa", RoleProxyAdmin)},
		"proxy_admin_viewer": {Token: "k2", User: user("u-pav", RoleProxyAdminViewer)},
		"internal_user":      {Token: "k3", User: user("u-iu", RoleInternalUser)},
		"internal_viewer":    {Token: "k4", User: user("u-iuv", RoleInternalUserViewer)},
		"team_admin":         {Token: "k5", User: user("u-admin", RoleInternalUserViewer), Team: team},
		"team_admin_iu":      {Token: "k5b", User: user("u-admin", RoleInternalUser), Team: team},
		"team_member":        {Token: "k6", User: user("u-member", RoleInternalUserViewer), Team: team},
		"team_key":           {Token: "k7", Team: team},
		"plain":              {Token: "k8"},
	}
}

// TestAuthorizeTable pins the decision of the roles table for each caller on representative
// routes: A = ScopeAll, O = ScopeOwn, - = refused (Forbidden).
func TestAuthorizeTable(t *testing.T) {
	order := []string{"master", "proxy_admin", "proxy_admin_viewer", "internal_user", "internal_viewer", "team_admin", "team_admin_iu", "team_member", "team_key", "plain"}
	cases := []struct {
		method, route, want string
	}{
		{"POST", "/model/new", "AA----O---"},
		{"POST", "/model/delete", "AA----O---"},
		{"GET", "/model/info_admin_only_read", "AAA-------"},
		{"POST", "/team/new", "AA--------"},
		{"POST", "/user/new", "AA--------"},
		{"POST", "/user/update", "AA--------"},
		{"POST", "/team/update", "AA--------"},
		{"GET", "/user/list", "AAA-------"},
		{"GET", "/key/info", "AAAOOOOOOO"},
		{"GET", "/key/list", "AAAOOOOO--"},
		{"POST", "/key/generate", "AA-O--O---"},
		{"POST", "/key/update", "AA-O--O---"},
		{"POST", "/key/delete", "AA-O--O---"},
		{"POST", "/key/block", "AA--------"},
		{"GET", "/user/info", "AAAOOOOO--"},
		{"GET", "/team/info", "AAAOOOOOO-"},
		{"GET", "/team/list", "AAAOOOOOO-"},
		{"POST", "/team/member_add", "AA----O---"},
		{"POST", "/team/member_update", "AA----O---"},
		{"POST", "/team/member_delete", "AA----O---"},
		{"DELETE", "/guardrails/:id", "AA--------"},
		{"GET", "/guardrails/list", "AAA-------"},
	}
	cs := callers()
	for _, tc := range cases {
		got := ""
		for _, name := range order {
			sc, err := Authorize(tc.method, tc.route, tc.route, cs[name])
			switch {
			case err != nil:
				if _, ok := err.(*Forbidden); !ok || sc != ScopeNone {
					t.Fatalf("%s %s as %s: %v (scope %d), want Forbidden", tc.method, tc.route, name, err, sc)
				}
				got += "-"
			case sc == ScopeAll:
				got += "A"
			case sc == ScopeOwn:
				got += "O"
			default:
				t.Fatalf("%s %s as %s: scope %d without error", tc.method, tc.route, name, sc)
			}
		}
		if got != tc.want {
			t.Errorf("%s %s: got %s, want %s (%v)", tc.method, tc.route, got, tc.want, order)
		}
	}
}

// TestAuthorizeTexts pins LiteLLM's refusal texts (route_checks.py).
func TestAuthorizeTexts(t *testing.T) {
	cs := callers()
	_, err := Authorize("POST", "/key/generate", "/key/generate", cs["proxy_admin_viewer"])
	if want := "user not allowed to access this route, role= proxy_admin_viewer. Trying to access: /key/generate"; err == nil || err.Error() != want {
		t.Errorf("viewer: %v, want %q", err, want)
	}
	_, err = Authorize("POST", "/team/new", "/team/new", cs["internal_user"])
	if want := "Only proxy admin can be used to generate, delete, update info for new keys/users/teams. Route=/team/new. Your role=internal_user. Your user_id=***"; err == nil || err.Error() != want {
		t.Errorf("internal_user: %v, want %q", err, want)
	}
	_, err = Authorize("POST", "/team/new", "/team/new", cs["plain"])
	if want := "Only proxy admin can be used to generate, delete, update info for new keys/users/teams. Route=/team/new. Your role=unknown. Your user_id=unknown"; err == nil || err.Error() != want {
		t.Errorf("plain: %v, want %q", err, want)
	}
	for id, want := range map[string]string{"abc": "***", "abcdefgh": "ab****gh", "user-123456789": "user-1******89"} {
		if got := MaskUserID(id); got != want {
			t.Errorf("MaskUserID(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestOwnership pins the ownership rule the ScopeOwn use-cases apply.
func TestOwnership(t *testing.T) {
	cs := callers()
	iu, ta, tm := cs["internal_user"], cs["team_admin_iu"], cs["team_member"]
	for _, c := range []*Caller{&iu, &ta, &tm} {
		c.Scope = ScopeOwn
	}
	if !iu.OwnsKey("x", "u-iu", "") || iu.OwnsKey("x", "u-other", "") || !iu.OwnsKey("k3", "", "") {
		t.Error("internal_user owns its user's keys and its own key only")
	}
	if !ta.OwnsKey("x", "u-other", "t1") || ta.OwnsKey("x", "u-other", "t2") {
		t.Error("a team admin owns its team's keys only")
	}
	if tm.OwnsKey("x", "u-admin", "t1") {
		t.Error("a team member does not own the team's other keys")
	}
	t1, t2 := &accounts.Team{ID: "t1"}, &accounts.Team{ID: "t2", Members: []accounts.Member{{UserID: "u-iu"}}}
	if !tm.SeesTeam(t1) || tm.SeesTeam(t2) || !iu.SeesTeam(t2) || iu.SeesTeam(t1) {
		t.Error("a caller sees its key's team and the teams its user is a member of")
	}
	// a personal key is bound to the caller's user; another user or team, or higher limits: refused
	req := KeyRequest{}
	if err := iu.keyWriteAllowed(&req, nil); err != nil || req.UserID == nil || *req.UserID != "u-iu" {
		t.Errorf("generate binds user_id: %v %v", err, req.UserID)
	}
	other := "u-other"
	if err := iu.keyWriteAllowed(&KeyRequest{UserID: &other}, nil); err == nil || err.Error() != "User can only create keys for themselves. Got user_id=u-other, Your ID=u-iu" {
		t.Errorf("another user: %v", err)
	}
	tid := "t1"
	if err := iu.keyWriteAllowed(&KeyRequest{TeamID: &tid}, nil); err == nil || err.Error() != "User can only create keys for their own team. Got=t1, Your Team ID=" {
		t.Errorf("a team not administered: %v", err)
	}
	capped := iu
	u := *capped.User
	mb := 10.0
	u.MaxBudget = &mb
	capped.User = &u
	if err := capped.keyWriteAllowed(&KeyRequest{MaxBudget: optional{set: true, raw: []byte("11")}}, nil); err == nil {
		t.Error("a key budget above the user's is refused")
	}
	if err := capped.keyWriteAllowed(&KeyRequest{MaxBudget: optional{set: true, raw: []byte("5")}}, nil); err != nil {
		t.Errorf("a key budget within the user's: %v", err)
	}
}

// TestKeyUpdateCannotEscapeOwners: an owner's update may not unbind its key from its user nor
// move a team key out of its team (out of their budgets); leaving them as they are is fine.
func TestKeyUpdateCannotEscapeOwners(t *testing.T) {
	cs := callers()
	tm, iu := cs["team_member"], cs["internal_user"]
	r := *tm.User
	r.Role = strp(RoleInternalUser)
	tm.User = &r
	tm.Scope, iu.Scope = ScopeOwn, ScopeOwn
	teamKey := &keys.Key{Token: "x", UserID: "u-member", TeamID: "t1"}
	empty := ""
	if err := tm.keyWriteAllowed(&KeyRequest{TeamID: &empty}, teamKey); err == nil {
		t.Error("a team member moved its key out of the team")
	}
	if err := tm.keyWriteAllowed(&KeyRequest{UserID: &empty}, teamKey); err == nil {
		t.Error("a team member unbound its key from its user")
	}
	alias := "a"
	if err := tm.keyWriteAllowed(&KeyRequest{KeyAlias: &alias}, teamKey); err != nil {
		t.Errorf("a team member renames its team key: %v", err)
	}
	if err := iu.keyWriteAllowed(&KeyRequest{UserID: &empty}, &keys.Key{Token: "y", UserID: "u-iu"}); err == nil {
		t.Error("an internal user unbound its key")
	}
}

// LiteLLM's get_spend_routes permission (route_checks.py): a key holding it reads the
// /global/spend routes whatever its role (ScopeAll); without it, they stay the admin's; it
// opens no other route.
func TestAuthorizeSpendRoutesPermission(t *testing.T) {
	for name, c := range callers() {
		if c.Admin() || c.Role() == RoleProxyAdminViewer {
			continue
		}
		c.SpendRoutes = true
		for _, route := range []string{"/global/spend/logs", "/global/spend/report", "/global/spend/keys"} {
			if s, err := Authorize("GET", route, route, c); err != nil || s != ScopeAll {
				t.Errorf("%s with get_spend_routes on %s: %v %v, want ScopeAll", name, route, s, err)
			}
		}
		if _, err := Authorize("POST", "/user/new", "/user/new", c); err == nil {
			t.Errorf("%s: get_spend_routes opened /user/new", name)
		}
		c.SpendRoutes = false
		if _, err := Authorize("GET", "/global/spend/logs", "/global/spend/logs", c); err == nil {
			t.Errorf("%s without get_spend_routes reads /global/spend/logs", name)
		}
	}
}

// A key's permissions are the proxy admin's to grant: a self-service write setting
// get_spend_routes is refused; {} or false passes.
func TestKeyWriteCannotGrantSpendRoutes(t *testing.T) {
	c := callers()["internal_user"]
	req := KeyRequest{Extra: map[string]json.RawMessage{"permissions": json.RawMessage(`{"get_spend_routes": true}`)}}
	if err := c.keyWriteAllowed(&req, nil); err == nil {
		t.Fatal("an internal user granted its key get_spend_routes")
	}
	for _, ok := range []string{`{}`, `{"get_spend_routes": false}`} {
		req := KeyRequest{Extra: map[string]json.RawMessage{"permissions": json.RawMessage(ok)}}
		if err := c.keyWriteAllowed(&req, nil); err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
	}
}

// team_member_permissions (LiteLLM TeamMemberPermissionChecks): a member with role user acts
// on its team's keys on the routes the team lists (default /key/info, /key/health); the team
// admin needs none; another team's keys stay another's.
func TestTeamMemberPermissions(t *testing.T) {
	cs := callers()
	member := cs["team_member"]
	if !member.TeamMemberMay("/key/info") || member.TeamMemberMay("/key/generate") {
		t.Fatal("default team member permissions: want /key/info only")
	}
	if cs["team_admin"].TeamMemberMay("/key/info") || cs["team_key"].TeamMemberMay("/key/info") {
		t.Fatal("team_member_permissions apply to members with role user only")
	}
	team := *member.Team
	team.Fields.MemberPermissions = []string{"/key/generate", "/key/update"}
	member.Team = &team
	if !member.TeamMemberMay("/key/generate") || member.TeamMemberMay("/key/info") {
		t.Fatal("the team's list replaces the default")
	}
	if member.OwnsKey("other", "u-x", "t1") {
		t.Fatal("without TeamKeys a member does not own the team's keys")
	}
	member.TeamKeys = true
	if !member.OwnsKey("other", "u-x", "t1") || member.OwnsKey("other", "u-x", "t2") {
		t.Fatal("TeamKeys: the team's keys, not another team's")
	}
	tid := "t1"
	if err := member.keyWriteAllowed(&KeyRequest{TeamID: &tid}, nil); err != nil {
		t.Fatalf("a member with /key/generate makes a team key: %v", err)
	}
	member.TeamKeys = false
	if err := member.keyWriteAllowed(&KeyRequest{TeamID: &tid}, nil); err == nil {
		t.Fatal("a member without the permission made a team key")
	}
}

// A key's organization_id replaces its user's organization as the one whose limits bind it:
// only the proxy admin sets it.
func TestKeyWriteCannotSetOrganization(t *testing.T) {
	c := callers()["internal_user"]
	req := KeyRequest{Extra: map[string]json.RawMessage{"organization_id": json.RawMessage(`"o-free"`)}}
	if err := c.keyWriteAllowed(&req, nil); err == nil {
		t.Fatal("an internal user set its key's organization_id")
	}
	req = KeyRequest{Extra: map[string]json.RawMessage{"organization_id": json.RawMessage(`null`)}}
	if err := c.keyWriteAllowed(&req, nil); err != nil {
		t.Fatal(err)
	}
}
