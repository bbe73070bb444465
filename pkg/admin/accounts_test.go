package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

type accountRegs struct {
	teams *registry.Registry[*accounts.Team]
	users *registry.Registry[*accounts.User]
	orgs  *registry.Registry[*accounts.Organization]
	ends  *registry.Registry[*accounts.EndUser]
	keys  *registry.Registry[*keys.Key]
}

func newAccountAdmin(t *testing.T) (*Admin, *fakeStore, accountRegs) {
	t.Helper()
	r := accountRegs{
		teams: registry.New(registry.Options[*accounts.Team]{Type: store.Team, Build: accounts.BuildTeamRow}),
		users: registry.New(registry.Options[*accounts.User]{Type: store.User, Build: accounts.BuildUserRow}),
		orgs:  registry.New(registry.Options[*accounts.Organization]{Type: store.Organization, Build: accounts.BuildOrganizationRow}),
		ends:  registry.New(registry.Options[*accounts.EndUser]{Type: store.EndUser, Build: accounts.BuildEndUserRow}),
		keys:  registry.New(registry.Options[*keys.Key]{Type: store.Key, Build: keys.BuildRow}),
	}
	st := newFakeStore()
	return New(Deps{Store: st, Registries: []Sink{r.teams, r.users, r.orgs, r.ends, r.keys}}), st, r
}

func members(ms ...accounts.Member) []byte { b, _ := json.Marshal(ms); return b }

func TestAccountWrites(t *testing.T) {
	a, st, r := newAccountAdmin(t)
	ctx := context.Background()

	_, err := a.CreateAccount(ctx, UserKind, "", store.Values{"user_role": "boss"}, nil)
	asInvalid(t, err, `user_role: "boss" is not a user role (want proxy_admin, proxy_admin_viewer, internal_user or internal_user_viewer)`)
	_, err = a.CreateAccount(ctx, EndUserKind, "e", store.Values{"allowed_model_region": "mars"}, nil)
	asInvalid(t, err, `allowed_model_region: "mars" (want eu or us)`)
	_, err = a.CreateAccount(ctx, TeamKind, "", store.Values{"organization_id": "nope"}, nil)
	asInvalid(t, err, "Organization not found, passed organization_id=nope")
	_, err = a.CreateAccount(ctx, EndUserKind, "", store.Values{}, nil)
	asInvalid(t, err, "user_id is required")

	org, err := a.CreateAccount(ctx, OrgKind, "", store.Values{}, nil)
	if err != nil || len(org.ID) != 36 {
		t.Fatalf("%+v %v", org, err)
	}
	if _, ok := r.orgs.Load().ByID(org.ID); !ok {
		t.Fatal("the writer serves its organization at once")
	}
	_, err = a.CreateAccount(ctx, OrgKind, org.ID, store.Values{}, nil)
	asInvalid(t, err, "Organization already exists, passed organization_id="+org.ID)
	st.failOn["get organization"] = errDown
	if _, err = a.CreateAccount(ctx, TeamKind, "", store.Values{"organization_id": "x"}, nil); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	delete(st.failOn, "get organization")

	if _, err := a.CreateAccount(ctx, EndUserKind, "e1", store.Values{"alias": "x"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = a.UpdateAccount(ctx, EndUserKind, "", store.Values{}, nil)
	asInvalid(t, err, "user_id is required")
	_, err = a.UpdateAccount(ctx, EndUserKind, "e1", store.Values{}, []string{"alias", "blocked"})
	asInvalid(t, err, "nothing to update: give one of [alias blocked]")
	_, err = a.UpdateAccount(ctx, EndUserKind, "e2", store.Values{"alias": "y"}, nil)
	asNotFound(t, err, "End user not found, passed user_id=e2")
	row, err := a.UpdateAccount(ctx, EndUserKind, "e1", store.Values{"alias": "y"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := r.ends.Load().ByID("e1"); e.Version != row.Version {
		t.Fatal("update applied at once")
	}

	team, err := a.CreateAccount(ctx, TeamKind, "t1", store.Values{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.BlockAccount(ctx, TeamKind, "", true)
	asInvalid(t, err, "team_id is required")
	_, err = a.BlockAccount(ctx, TeamKind, "t2", true)
	asNotFound(t, err, "Team not found, passed team_id=t2")
	if _, err := a.BlockAccount(ctx, TeamKind, team.ID, true); err != nil {
		t.Fatal(err)
	}
	if e, _ := r.teams.Load().ByID("t1"); !e.Value.Blocked {
		t.Fatal("block applied at once")
	}

	asInvalid(t, a.BlockEndUsers(ctx, nil, true), "user_ids is required: a non-empty list of end user ids")
	asNotFound(t, a.BlockEndUsers(ctx, []string{"e1", "e9"}, true), "End user not found, passed user_id=e9")
	if e, _ := r.ends.Load().ByID("e1"); e.Value.Blocked {
		t.Fatal("all or nothing")
	}
	if err := a.BlockEndUsers(ctx, []string{"e1"}, true); err != nil {
		t.Fatal(err)
	}
	if e, _ := r.ends.Load().ByID("e1"); !e.Value.Blocked {
		t.Fatal("block applied at once")
	}

	// reads
	if _, err := a.Account(ctx, TeamKind, "t1"); err != nil {
		t.Fatal(err)
	}
	_, err = a.Account(ctx, TeamKind, "t9")
	asNotFound(t, err, "Team not found, passed team_id=t9")
	if rows, err := a.Accounts(ctx, EndUserKind); err != nil || len(rows) != 1 {
		t.Fatal(rows, err)
	}
	if _, n, err := a.Users(ctx, store.UserFilter{}, 1, 10); err != nil || n != 0 {
		t.Fatal(n, err)
	}
}

func TestCreateTeamUserAndDelete(t *testing.T) {
	a, st, r := newAccountAdmin(t)
	ctx := context.Background()
	st.put(store.User, store.Values{"user_id": "u-mail", "user_email": "m@x"})

	// a team naming users that do not exist creates them; a member by email gets its user's id
	team, err := a.CreateTeam(ctx, "t1", store.Values{"members_with_roles": members(
		accounts.Member{UserID: "u1", Role: "admin"}, accounts.Member{UserEmail: "m@x", Role: "user"},
		accounts.Member{UserEmail: "new@x", Role: "user"})})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.teams.Load().ByID("t1")
	if e.Version != team.Version || len(e.Value.Members) != 3 || e.Value.Members[1].UserID != "u-mail" || e.Value.Members[2].UserID == "" {
		t.Fatalf("the resolved team is served: %+v", e.Value.Members)
	}
	if _, ok := r.users.Load().ByID("u1"); !ok {
		t.Fatal("the created user is served at once")
	}
	_, err = a.CreateTeam(ctx, "t1", store.Values{})
	asInvalid(t, err, "Team already exists, passed team_id=t1")
	_, err = a.CreateTeam(ctx, "t2", store.Values{"members_with_roles": members(accounts.Member{UserID: "u1", Role: "owner"})})
	var in *Invalid
	if !errors.As(err, &in) || !strings.Contains(in.Msg, "role") {
		t.Fatalf("a team the registry would refuse: %v", err)
	}

	// /user/new: teams joined, a key of the user (and of team_id)
	_, err = a.CreateUser(ctx, NewUser{ID: "u2", Vals: store.Values{}, Teams: []string{"nope"}})
	asNotFound(t, err, "Team not found, passed team_id=nope")
	_, err = a.CreateUser(ctx, NewUser{ID: "u2", Vals: store.Values{}, AutoKey: true, Duration: "1x"})
	asInvalid(t, err, `duration: "1x" is not a duration like 30s, 30m, 1h, 30d, 2w or 1mo`)
	res, err := a.CreateUser(ctx, NewUser{ID: "u2", Vals: store.Values{}, Teams: []string{"t1", "t1"}, AutoKey: true, TeamID: "t1", KeyAlias: "k", Duration: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Key == "" || res.KeyRow.ID != keys.Hash(res.Key) {
		t.Fatalf("%+v", res)
	}
	k, ok := r.keys.Load().ByID(res.KeyRow.ID)
	if !ok || k.Value.UserID != "u2" || k.Value.TeamID != "t1" || k.Value.Alias != "k" {
		t.Fatalf("the key is served at once: %+v", k)
	}
	if e, _ := r.teams.Load().ByID("t1"); len(e.Value.Members) != 4 {
		t.Fatalf("the user joined its team once: %+v", e.Value.Members)
	}
	if res, err := a.CreateUser(ctx, NewUser{ID: "u3", Vals: store.Values{}}); err != nil || res.Key != "" {
		t.Fatalf("no key without AutoKey: %+v %v", res, err)
	}

	// delete: all or nothing; a user's keys go with it and it leaves its teams
	asInvalid(t, a.DeleteAccounts(ctx, UserKind, "user_ids", nil), "user_ids is required: a non-empty list of user ids")
	asNotFound(t, a.DeleteAccounts(ctx, UserKind, "user_ids", []string{"u2", "nope"}), "User not found, passed user_id=nope")
	if _, ok := r.users.Load().ByID("u2"); !ok {
		t.Fatal("all or nothing")
	}
	if err := a.DeleteAccounts(ctx, UserKind, "user_ids", []string{"u2", "u2"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.users.Load().ByID("u2"); ok {
		t.Fatal("the delete is applied at once")
	}
	if r.keys.Len() != 0 {
		t.Fatal("the user's key is gone at once")
	}
	if e, _ := r.teams.Load().ByID("t1"); len(e.Value.Members) != 3 {
		t.Fatalf("the user left its team: %+v", e.Value.Members)
	}
	// a team's keys go with it
	if _, err := a.CreateUser(ctx, NewUser{ID: "u4", Vals: store.Values{}, AutoKey: true, TeamID: "t1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteAccounts(ctx, TeamKind, "team_ids", []string{"t1"}); err != nil {
		t.Fatal(err)
	}
	if r.keys.Len() != 0 || r.teams.Len() != 0 {
		t.Fatal("the team and its keys are gone at once")
	}
	if ks, err := a.KeysOf(ctx, "user_id", "u4"); err != nil || len(ks) != 0 {
		t.Fatal(ks, err)
	}
	st.failOn["listby key"] = errDown
	if err := a.DeleteAccounts(ctx, UserKind, "user_ids", []string{"u4"}); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
}

func TestTeamMembers(t *testing.T) {
	a, st, r := newAccountAdmin(t)
	ctx := context.Background()
	if _, err := a.CreateTeam(ctx, "t1", store.Values{"members_with_roles": members(accounts.Member{UserID: "u1", Role: "admin"})}); err != nil {
		t.Fatal(err)
	}
	budget := 5.0
	_, err := a.AddTeamMembers(ctx, "", nil, nil)
	asInvalid(t, err, "team_id is required")
	_, err = a.AddTeamMembers(ctx, "t9", nil, nil)
	asNotFound(t, err, "Team not found, passed team_id=t9")
	_, err = a.AddTeamMembers(ctx, "t1", []accounts.Member{{UserID: "u1", Role: "user"}}, nil)
	asInvalid(t, err, "User already in team - u1")
	res, err := a.AddTeamMembers(ctx, "t1", []accounts.Member{{UserID: "u2", Role: "user"}, {UserEmail: "e@x", Role: "user"}}, &budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 2 || len(res.Added) != 2 || res.Added[1].UserID == "" {
		t.Fatalf("%+v", res)
	}
	e, _ := r.teams.Load().ByID("t1")
	if b, ok := e.Value.MemberBudget("u2"); !ok || *b.MaxBudget != 5 || e.Version != res.Team.Version {
		t.Fatalf("the member's budget is served at once: %+v", e.Value.MemberBudgets)
	}

	_, _, err = a.UpdateTeamMember(ctx, "t1", accounts.Member{}, "", nil)
	asInvalid(t, err, "user_id or user_email is required")
	_, _, err = a.UpdateTeamMember(ctx, "t1", accounts.Member{UserID: "u2"}, "owner", nil)
	asInvalid(t, err, `role: "owner" is not a team role (want admin or user)`)
	_, _, err = a.UpdateTeamMember(ctx, "t1", accounts.Member{UserID: "u9"}, "", nil)
	asInvalid(t, err, "User is not a member of team t1 - u9")
	rpm := int64(7)
	got, b, err := a.UpdateTeamMember(ctx, "t1", accounts.Member{UserID: "u2"}, "admin", []func(*accounts.MemberBudget){
		func(b *accounts.MemberBudget) { b.MaxBudget = nil }, func(b *accounts.MemberBudget) { b.RPMLimit = &rpm }})
	if err != nil || got.Role != "admin" || b == nil || b.MaxBudget != nil || *b.RPMLimit != 7 {
		t.Fatalf("%+v %+v %v", got, b, err)
	}
	got, b, err = a.UpdateTeamMember(ctx, "t1", accounts.Member{UserID: "u2"}, "", []func(*accounts.MemberBudget){func(b *accounts.MemberBudget) { b.RPMLimit = nil }})
	if err != nil || got.Role != "admin" || b != nil {
		t.Fatalf("a budget with nothing set is removed: %+v %v", b, err)
	}
	st.put(store.Team, store.Values{"team_id": "t2", "members_with_roles": members(accounts.Member{UserEmail: "only@x", Role: "user"})})
	_, _, err = a.UpdateTeamMember(ctx, "t2", accounts.Member{UserEmail: "only@x"}, "", []func(*accounts.MemberBudget){func(b *accounts.MemberBudget) {}})
	asInvalid(t, err, "member only@x has no user_id: a budget in the team needs one")

	_, err = a.DeleteTeamMember(ctx, "t1", accounts.Member{})
	asInvalid(t, err, "user_id or user_email is required")
	_, err = a.DeleteTeamMember(ctx, "t1", accounts.Member{UserEmail: "zz@x"})
	asInvalid(t, err, "User is not a member of team t1 - zz@x")
	row, err := a.DeleteTeamMember(ctx, "t1", accounts.Member{UserID: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	e, _ = r.teams.Load().ByID("t1")
	if e.Version != row.Version || len(e.Value.Members) != 2 {
		t.Fatalf("member removed at once: %+v", e.Value.Members)
	}
	st.failOn["update team"] = errDown
	if _, err := a.DeleteTeamMember(ctx, "t1", accounts.Member{UserID: "u1"}); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
}
