package admin

// Team members (LiteLLM /team/member_add, member_delete, member_update), the users a team or
// a member write creates, and /user/new's teams and key.

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

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

// CreateTeam is /team/new: the team row. members_with_roles may name users that do not exist
// yet; they are created (LiteLLM creates the users it is given), and a member named by email
// gets its user's id. Errors: CreateAccount's, Invalid (a team row the registry would refuse).
func (a *Admin) CreateTeam(ctx context.Context, id string, vals store.Values) (store.Row, error) {
	return a.createTeam(ctx, id, vals, TeamMemberBudget{})
}

func (a *Admin) createTeam(ctx context.Context, id string, vals store.Values, tmb TeamMemberBudget) (store.Row, error) {
	var resolved *store.Row
	row, err := a.CreateAccount(ctx, TeamKind, id, vals, func(ctx context.Context, w *Writer, row store.Row) error {
		t, err := accounts.BuildTeamRow(row)
		if err != nil {
			return invalidf("%v", err)
		}
		members, _, err := ensureUsers(ctx, w, t.Members)
		if err != nil {
			return err
		}
		if !slices.Equal(members, t.Members) { // members named by email got their user_id
			r, err := w.Update(ctx, store.Team, t.ID, memberValues(members, t.MemberBudgets))
			if err != nil {
				return err
			}
			resolved = &r
			row = r
		}
		if tmb.Given() {
			r, err := setTeamMemberBudget(ctx, w, row, tmb, proxyAdminName)
			if err != nil {
				return err
			}
			resolved = &r
		}
		return nil
	})
	if err != nil {
		return store.Row{}, err
	}
	if resolved != nil {
		row = *resolved
	}
	return row, nil
}

// memberUsersLock is the advisory lock under which ensureUsers creates users.
const memberUsersLock = "gateway.users: members created"

// ensureUsers makes every member a user, as LiteLLM's add_new_member does: a member named by
// user_id whose user does not exist is created (role internal_user, with its user_email); a
// member named only by user_email gets the user_id of the user with that email, or of a new
// user created with a generated id. Returns the members with their user_id filled in and the
// users created.
//
// Concurrent writes naming the same new member (fifty /team/new at once) must not both create
// it (a 409 on the user_id, or two users for one email): before the first user it creates,
// the transaction takes the advisory lock memberUsersLock (held to commit) and looks again, so
// the second writer waits and then finds the first one's user (Postgres "Explicit Locking":
// under READ COMMITTED each statement sees what committed before it began). The lock is taken
// after any team row lock the write holds and no row lock is taken under it but the write's
// own team's, so it cannot deadlock with another member write.
func ensureUsers(ctx context.Context, w *Writer, members []accounts.Member) ([]accounts.Member, []store.Row, error) {
	out := append([]accounts.Member(nil), members...)
	var created []store.Row
	locked := false
	for i := 0; i < len(out); i++ {
		m := out[i]
		if m.UserID == "" {
			if m.UserEmail == "" {
				continue
			}
			found, err := w.ListBy(ctx, store.User, "user_email", m.UserEmail)
			if err != nil {
				return nil, nil, err
			}
			if len(found) > 0 {
				out[i].UserID = found[0].ID
				continue
			}
			if !locked {
				if err := w.LockName(ctx, memberUsersLock); err != nil {
					return nil, nil, err
				}
				locked = true
				i-- // look again under the lock
				continue
			}
			out[i].UserID = uuid.NewString()
		} else if _, err := w.Get(ctx, store.User, m.UserID); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, nil, err
		} else if !locked {
			if err := w.LockName(ctx, memberUsersLock); err != nil {
				return nil, nil, err
			}
			locked = true
			i-- // look again under the lock
			continue
		}
		vals := store.Values{"user_id": out[i].UserID, "user_role": "internal_user"}
		if m.UserEmail != "" {
			vals["user_email"] = m.UserEmail
		}
		r, err := w.Insert(ctx, store.User, vals)
		if err != nil {
			return nil, nil, err
		}
		created = append(created, r)
	}
	return out, created, nil
}

// editMembers runs a read-modify-write of a team's members (and, through t.MemberBudgets,
// which edit may change, their budgets in the team) under the row's lock. Errors: Invalid
// "team_id is required", NotFound, edit's.
func (a *Admin) editMembers(ctx context.Context, teamID string, edit func(ctx context.Context, w *Writer, t *accounts.Team) ([]accounts.Member, error)) (store.Row, error) {
	if teamID == "" {
		return store.Row{}, invalid("team_id", "team_id is required")
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		cur, err := w.GetForUpdate(ctx, store.Team, teamID)
		if errors.Is(err, store.ErrNotFound) {
			return TeamKind.NotFound(teamID)
		}
		if err != nil {
			return err
		}
		t, err := accounts.BuildTeamRow(cur)
		if err != nil {
			return invalidf("%v", err)
		}
		if t.MemberBudgets == nil {
			t.MemberBudgets = map[string]*accounts.MemberBudget{}
		}
		before := memberBudgetsCopy(t)
		members, err := edit(ctx, w, t)
		if err != nil {
			return err
		}
		vals := memberValues(members, t.MemberBudgets)
		if err := syncMemberBudgets(ctx, w, before, members, t.MemberBudgets); err != nil {
			return err
		}
		row, err = w.Update(ctx, store.Team, teamID, vals)
		return err
	})
	if err != nil {
		return store.Row{}, err
	}
	return row, nil
}

func sameMember(a, b accounts.Member) bool {
	return (a.UserID != "" && a.UserID == b.UserID) || (a.UserID == "" && b.UserID == "" && a.UserEmail == b.UserEmail) ||
		(a.UserEmail != "" && a.UserEmail == b.UserEmail && (a.UserID == "" || b.UserID == ""))
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// MembersAdded is the outcome of AddTeamMembers: the team row, the users created for members
// that did not exist, and the added members with their user_id filled in.
type MembersAdded struct {
	Team    store.Row
	Created []store.Row
	Added   []accounts.Member
}

// AddTeamMembers is /team/member_add: add join team teamID, the users they name found or
// created; budget (non-nil, USD) is each added member's max_budget within the team (LiteLLM
// creates a team membership with that budget; members named only by user_email get none).
// Errors: Invalid ("team_id is required", "User already in team - <id>"), NotFound.
func (a *Admin) AddTeamMembers(ctx context.Context, teamID string, add []accounts.Member, budget *float64) (MembersAdded, error) {
	var res MembersAdded
	row, err := a.editMembers(ctx, teamID, func(ctx context.Context, w *Writer, t *accounts.Team) ([]accounts.Member, error) {
		out := append([]accounts.Member{}, t.Members...)
		// the named users, found or created (a member named by email gets its user's id)
		resolved, users, err := ensureUsers(ctx, w, add)
		if err != nil {
			return nil, err
		}
		res.Created, res.Added = users, resolved
		for _, m := range resolved {
			for _, have := range out {
				if sameMember(have, m) {
					return nil, invalidf("User already in team - %s", firstNonEmpty(m.UserID, m.UserEmail))
				}
			}
			out = append(out, m)
			if budget != nil && m.UserID != "" {
				v := *budget
				setMemberBudget(t, m.UserID, func(b *accounts.MemberBudget) { b.MaxBudget = &v })
			}
		}
		return out, nil
	})
	if err != nil {
		return MembersAdded{}, err
	}
	res.Team = row
	return res, nil
}

// DeleteTeamMember is /team/member_delete: who (by user_id or user_email) leaves team
// teamID. Errors: Invalid ("user_id or user_email is required", "team_id is required", "User
// is not a member of team <team> - <who>"), NotFound.
func (a *Admin) DeleteTeamMember(ctx context.Context, teamID string, who accounts.Member) (store.Row, error) {
	if who.UserID == "" && who.UserEmail == "" {
		return store.Row{}, invalidf("user_id or user_email is required")
	}
	return a.editMembers(ctx, teamID, func(_ context.Context, _ *Writer, t *accounts.Team) ([]accounts.Member, error) {
		out := make([]accounts.Member, 0, len(t.Members))
		for _, m := range t.Members {
			if !sameMember(m, who) {
				out = append(out, m)
			}
		}
		if len(out) == len(t.Members) {
			return nil, invalidf("User is not a member of team %s - %s", t.ID, firstNonEmpty(who.UserID, who.UserEmail))
		}
		return out, nil
	})
}

// UpdateTeamMember is /team/member_update: who's role in team teamID (role "" keeps it) and
// its budget within the team: each of budget's edits is applied to the member's budget
// (created when absent; removed when nothing is left set). Returns the member and its budget
// in the team (nil: none). Errors: Invalid ("user_id or user_email is required", a role other
// than admin or user, "team_id is required", not a member, a budget for a member known only by
// user_email), NotFound.
func (a *Admin) UpdateTeamMember(ctx context.Context, teamID string, who accounts.Member, role string, budget []func(*accounts.MemberBudget)) (accounts.Member, *accounts.MemberBudget, error) {
	if who.UserID == "" && who.UserEmail == "" {
		return accounts.Member{}, nil, invalidf("user_id or user_email is required")
	}
	if role != "" && role != accounts.RoleAdmin && role != accounts.RoleUser {
		return accounts.Member{}, nil, invalid("role", "role: %q is not a team role (want admin or user)", role)
	}
	var got accounts.Member
	var mb *accounts.MemberBudget
	_, err := a.editMembers(ctx, teamID, func(_ context.Context, _ *Writer, t *accounts.Team) ([]accounts.Member, error) {
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
			return nil, invalidf("User is not a member of team %s - %s", t.ID, firstNonEmpty(who.UserID, who.UserEmail))
		}
		if len(budget) > 0 {
			if got.UserID == "" {
				return nil, invalidf("member %s has no user_id: a budget in the team needs one", got.UserEmail)
			}
			setMemberBudget(t, got.UserID, budget...)
		}
		mb, _ = t.MemberBudget(got.UserID)
		return out, nil
	})
	if err != nil {
		return accounts.Member{}, nil, err
	}
	return got, mb, nil
}

// memberBudgetsCopy is a copy of team t's member budgets (the before of syncMemberBudgets).
func memberBudgetsCopy(t *accounts.Team) map[string]accounts.MemberBudget {
	out := map[string]accounts.MemberBudget{}
	for u, b := range t.MemberBudgets {
		if b != nil {
			out[u] = *b
		}
	}
	return out
}

// syncMemberBudgets makes each team membership budget a gateway.budgets row in w's
// transaction, as LiteLLM's LiteLLM_BudgetTable row its LiteLLM_TeamMembership links by
// budget_id (/team/member_add, member_update max_budget_in_team, ...), so /budget/info
// finds it: a budget made or changed by the edit is written (updated, or inserted when it has
// no row yet), one the edit removed (or whose member left) is deleted. before is the team's
// member budgets before the edit; members and after are the edit's result.
func syncMemberBudgets(ctx context.Context, w *Writer, before map[string]accounts.MemberBudget, members []accounts.Member, after map[string]*accounts.MemberBudget) error {
	kept := map[string]bool{}
	for _, m := range members {
		if b, ok := after[m.UserID]; ok && m.UserID != "" && b != nil {
			kept[b.BudgetID] = true
			if old, ok := before[m.UserID]; ok && reflect.DeepEqual(old, *b) {
				continue
			}
			vals := store.Values{"max_budget": b.MaxBudget, "tpm_limit": b.TPMLimit, "rpm_limit": b.RPMLimit,
				"max_parallel_requests": b.MaxParallel, "budget_duration": b.BudgetDuration, "updated_by": proxyAdminName}
			if _, err := w.Update(ctx, store.Budget, b.BudgetID, vals); !errors.Is(err, store.ErrNotFound) {
				if err != nil {
					return err
				}
				continue
			}
			vals["budget_id"], vals["created_by"] = b.BudgetID, proxyAdminName
			if _, err := w.Insert(ctx, store.Budget, vals); err != nil {
				return err
			}
		}
	}
	for _, old := range before {
		if kept[old.BudgetID] || old.BudgetID == "" {
			continue
		}
		if _, err := w.Delete(ctx, store.Budget, old.BudgetID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
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

// NewUser is /user/new beyond the user's columns.
type NewUser struct {
	ID   string
	Vals store.Values // the user's columns
	// Teams are the teams the user joins with the role user (each must exist): "teams" plus
	// "team_id" (LiteLLM's key-level team_id, which also adds the user to that team).
	Teams []string
	// AutoKey makes a key for the user (LiteLLM auto_create_key, default true), carrying
	// Models, TeamID, KeyAlias and the expiry Duration ("": none).
	AutoKey  bool
	Models   []string
	TeamID   string
	KeyAlias string
	Duration string
	// KeyFields are the key's litellm_fields value (nil: none): the LiteLLM fields
	// generate_key_helper_fn gives a /user/new key (aliases, permissions, allowed_cache_controls,
	// model_rpm_limit, model_tpm_limit, guardrails, object_permission).
	KeyFields store.Values
	// Spend sets the user's spend total and its key's (USD >= 0; nil: 0), as LiteLLM's
	// generate_key_helper_fn writes "spend" to both rows.
	Spend *float64
	// Orgs are the organizations the user joins with the role internal_user (LiteLLM
	// new_user's "organizations": organization_member_add per organization; each must exist).
	Orgs []string
}

// UserCreated is the outcome of CreateUser: the user row and, with AutoKey, the key (shown
// once) and its row.
type UserCreated struct {
	User   store.Row
	Key    string
	KeyRow store.Row
}

// CreateUser is /user/new: the user, its team and organization memberships, its spend and its
// key in one transaction. Errors: CreateAccount's, NotFound (a team or organization that does
// not exist), Invalid (a team row the registry would refuse, "duration: ...", a negative
// spend), AddOrgMembers'.
func (a *Admin) CreateUser(ctx context.Context, u NewUser) (UserCreated, error) {
	if u.Spend != nil && *u.Spend < 0 {
		return UserCreated{}, invalid("spend", "spend must be a non-negative number (USD)")
	}
	var res UserCreated
	row, err := a.CreateAccount(ctx, UserKind, u.ID, u.Vals, func(ctx context.Context, w *Writer, row store.Row) error {
		res = UserCreated{}
		for _, oid := range u.Orgs {
			if _, err := addOrgMembers(ctx, w, oid, []OrgMember{{UserID: row.ID, UserRole: OrgRoleUser}}, nil); err != nil {
				return err
			}
		}
		if u.Spend != nil {
			if err := w.SetSpend(ctx, store.OwnerToken(ownerKinds[store.User], row.ID), *u.Spend); err != nil {
				return err
			}
		}
		for _, tid := range u.Teams {
			cur, err := w.GetForUpdate(ctx, store.Team, tid)
			if errors.Is(err, store.ErrNotFound) {
				return TeamKind.NotFound(tid)
			}
			if err != nil {
				return err
			}
			t, err := accounts.BuildTeamRow(cur)
			if err != nil {
				return invalidf("%v", err)
			}
			if _, ok := t.Member(row.ID); ok {
				continue
			}
			b, _ := json.Marshal(append(append([]accounts.Member{}, t.Members...), accounts.Member{UserID: row.ID, Role: accounts.RoleUser}))
			if _, err := w.Update(ctx, store.Team, tid, store.Values{"members_with_roles": b}); err != nil {
				return err
			}
		}
		if !u.AutoKey {
			return nil
		}
		key := keys.Generate()
		models := u.Models
		if models == nil {
			models = []string{}
		}
		vals := store.Values{"token": keys.Hash(key), "user_id": row.ID, "models": models}
		if u.TeamID != "" {
			vals["team_id"] = u.TeamID
		}
		if u.KeyAlias != "" {
			vals["key_alias"] = u.KeyAlias
		}
		if u.Duration != "" {
			dur, err := keys.ParseDuration(u.Duration)
			if err != nil {
				return invalid("duration", "%s", keys.DurationError("duration", err))
			}
			vals["expires"] = time.Now().Add(dur)
		}
		for c, v := range u.KeyFields {
			vals[c] = v
		}
		kr, err := w.Insert(ctx, store.Key, vals)
		if err != nil {
			return err
		}
		if u.Spend != nil {
			if err := w.SetSpend(ctx, kr.ID, *u.Spend); err != nil {
				return err
			}
		}
		res.Key, res.KeyRow = key, kr
		return nil
	})
	if err != nil {
		return UserCreated{}, err
	}
	res.User = row
	return res, nil
}
