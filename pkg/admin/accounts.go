package admin

// Teams, internal users, organizations and end users (LiteLLM's /team/*, /user/*,
// /organization/*, /customer/* and /end_user/* routes). Each is a registry on the change feed
// (sql/005_accounts.sql); a write goes to Postgres and, through the write path, is applied to
// this replica's registries before the answer (read-your-writes), reaching every other replica
// through the feed. The request's fields are decoded and kind-checked by pkg/api (column
// values, store.Values); the rules here are those that need the stored state or cross fields.

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/uuid"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

// AccountKind names one account registry: its object type, the noun of its routes and
// messages, its id column, and whether an absent id is generated (uuid).
type AccountKind struct {
	Type    store.ObjectType
	What    string // "team": route and message noun
	IDField string // "team_id"
	GenID   bool
}

// The account kinds.
var (
	TeamKind    = AccountKind{Type: store.Team, What: "team", IDField: "team_id", GenID: true}
	UserKind    = AccountKind{Type: store.User, What: "user", IDField: "user_id", GenID: true}
	OrgKind     = AccountKind{Type: store.Organization, What: "organization", IDField: "organization_id", GenID: true}
	EndUserKind = AccountKind{Type: store.EndUser, What: "end user", IDField: "user_id"}
)

// NotFound is the NotFound of an unknown id: "<Kind> not found, passed <id field>=<id>".
func (k AccountKind) NotFound(id string) error {
	return notFound("%s not found, passed %s=%s", capitalize(k.What), k.IDField, id)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// userRoles are LiteLLM's proxy-level user roles.
var userRoles = map[string]bool{"proxy_admin": true, "proxy_admin_viewer": true, "internal_user": true, "internal_user_viewer": true}

// checkAccountValues checks the decoded column values of an account write: user_role one of
// LiteLLM's roles, allowed_model_region eu or us, organization_id an organization that exists.
func (a *Admin) checkAccountValues(ctx context.Context, vals store.Values) error {
	if r, ok := vals["user_role"].(string); ok && r != "" && !userRoles[r] {
		return invalid("user_role", "user_role: %q is not a user role (want proxy_admin, proxy_admin_viewer, internal_user or internal_user_viewer)", r)
	}
	if r, ok := vals["allowed_model_region"].(string); ok && r != "" && r != "eu" && r != "us" {
		return invalid("allowed_model_region", "allowed_model_region: %q (want eu or us)", r)
	}
	if org, ok := vals["organization_id"].(string); ok && org != "" {
		if _, err := a.st.Get(ctx, store.Organization, org); errors.Is(err, store.ErrNotFound) {
			return invalid("organization_id", "Organization not found, passed organization_id=%s", org)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// CreateAccount is /<kind>/new: inserts one account of kind k (id "" generates one when the
// kind allows, else Invalid "<id field> is required"); then, in the same transaction, runs
// then (nil: nothing), e.g. /user/new's teams and key. Errors: Invalid (checkAccountValues,
// "<Kind> already exists, passed <id field>=<id>"), then's, the store's.
func (a *Admin) CreateAccount(ctx context.Context, k AccountKind, id string, vals store.Values, then func(ctx context.Context, w *Writer, row store.Row) error) (store.Row, error) {
	if err := a.checkAccountValues(ctx, vals); err != nil {
		return store.Row{}, err
	}
	if id == "" {
		if !k.GenID {
			return store.Row{}, invalid(k.IDField, "%s is required", k.IDField)
		}
		id = uuid.NewString()
	}
	vals[k.IDField] = id
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		if row, err = w.Insert(ctx, k.Type, vals); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return invalid(k.IDField, "%s already exists, passed %s=%s", capitalize(k.What), k.IDField, id)
			}
			return err
		}
		if then != nil {
			return then(ctx, w, row)
		}
		return nil
	})
	return row, err
}

// UpdateAccount is /<kind>/update: the given columns of account id change. fields names the
// writable fields for the "nothing to update" message. Errors: Invalid ("<id field> is
// required", checkAccountValues, "nothing to update: give one of [...]"), NotFound.
func (a *Admin) UpdateAccount(ctx context.Context, k AccountKind, id string, vals store.Values, fields []string) (store.Row, error) {
	if id == "" {
		return store.Row{}, invalid(k.IDField, "%s is required", k.IDField)
	}
	if err := a.checkAccountValues(ctx, vals); err != nil {
		return store.Row{}, err
	}
	if len(vals) == 0 {
		return store.Row{}, invalidf("nothing to update: give one of %v", fields)
	}
	return a.updateAccount(ctx, k, id, vals)
}

// ownerKinds are the key_spend owner kinds of the account registries (store.OwnerToken).
var ownerKinds = map[store.ObjectType]string{store.User: "user", store.Team: "team", store.Organization: "organization", store.EndUser: "end_user"}

func (a *Admin) updateAccount(ctx context.Context, k AccountKind, id string, vals store.Values) (store.Row, error) {
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		row, err = w.Update(ctx, k.Type, id, vals)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, k.NotFound(id)
	}
	return row, err
}

// BlockAccount is /team/block and /team/unblock. Errors: Invalid "<id field> is required",
// NotFound.
func (a *Admin) BlockAccount(ctx context.Context, k AccountKind, id string, blocked bool) (store.Row, error) {
	if id == "" {
		return store.Row{}, invalid(k.IDField, "%s is required", k.IDField)
	}
	return a.updateAccount(ctx, k, id, store.Values{"blocked": blocked})
}

// BlockEndUsers is /customer/block and /customer/unblock: all or nothing, an unknown id
// (NotFound) fails the call and nothing is changed. Invalid when ids is empty.
func (a *Admin) BlockEndUsers(ctx context.Context, ids []string, blocked bool) error {
	if len(ids) == 0 {
		return invalid("user_ids", "user_ids is required: a non-empty list of end user ids")
	}
	return a.Write(ctx, func(w *Writer) error {
		for _, id := range ids {
			_, err := w.Update(ctx, store.EndUser, id, store.Values{"blocked": blocked})
			if errors.Is(err, store.ErrNotFound) {
				return EndUserKind.NotFound(id)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteAccounts is /<kind>/delete: all or nothing, an unknown id (NotFound) fails the call
// before anything is deleted. A team's or user's keys are deleted with it (LiteLLM), and a
// deleted user leaves every team and organization it was a member of. idsField names the list in the message
// of an empty one (Invalid "<idsField> is required: a non-empty list of <kind> ids").
func (a *Admin) DeleteAccounts(ctx context.Context, k AccountKind, idsField string, ids []string) error {
	if len(ids) == 0 {
		return invalid(idsField, "%s is required: a non-empty list of %s ids", idsField, k.What)
	}
	return a.Write(ctx, func(w *Writer) error {
		gone := map[string]bool{}
		for _, id := range ids {
			if gone[id] {
				continue
			}
			_, err := w.Delete(ctx, k.Type, id)
			if errors.Is(err, store.ErrNotFound) {
				return k.NotFound(id)
			}
			if err != nil {
				return err
			}
			gone[id] = true
			var owner string
			switch k.Type {
			case store.Team:
				owner = "team_id"
			case store.User:
				owner = "user_id"
			}
			if owner != "" {
				if _, err := w.DeleteBy(ctx, store.Key, owner, id); err != nil {
					return err
				}
			}
		}
		if k.Type == store.User {
			// organizations before teams, the order /user/new locks them in (CreateUser), so
			// a delete and a create never wait on each other's table
			if err := removeOrgMembers(ctx, w, gone); err != nil {
				return err
			}
			return removeMembers(ctx, w, gone)
		}
		return nil
	})
}

// removeOrgMembers takes the deleted users out of every organization they were members of,
// as LiteLLM's delete_user deletes their LiteLLM_OrganizationMembership rows (so a new user of
// the same id is no member, and joins afresh). A membership budget row is left as
// /organization/member_delete leaves it.
func removeOrgMembers(ctx context.Context, w *Writer, users map[string]bool) error {
	if err := w.LockTable(ctx, store.Organization); err != nil {
		return err
	}
	orgs, err := w.List(ctx, store.Organization)
	if err != nil {
		return err
	}
	for _, r := range orgs {
		cur, err := OrgMembersOf(r)
		if err != nil {
			continue // a row the registry refuses lists no one (as removeMembers' teams)
		}
		kept := make([]OrgMember, 0, len(cur))
		for _, m := range cur {
			if !users[m.UserID] {
				kept = append(kept, m)
			}
		}
		if len(kept) == len(cur) {
			continue
		}
		b, err := json.Marshal(kept)
		if err != nil {
			return err
		}
		if _, err := w.Update(ctx, store.Organization, r.ID, store.Values{"members": b}); err != nil {
			return err
		}
	}
	return nil
}

// removeMembers takes the deleted users out of every team they were members of, and deletes
// their membership budgets with the memberships (syncMemberBudgets, as /team/member_delete).
func removeMembers(ctx context.Context, w *Writer, users map[string]bool) error {
	if err := w.LockTable(ctx, store.Team); err != nil {
		return err
	}
	teams, err := w.List(ctx, store.Team)
	if err != nil {
		return err
	}
	for _, r := range teams {
		t, err := accounts.BuildTeamRow(r)
		if err != nil {
			continue
		}
		kept := make([]accounts.Member, 0, len(t.Members))
		for _, m := range t.Members {
			if !users[m.UserID] || m.UserID == "" {
				kept = append(kept, m)
			}
		}
		if len(kept) == len(t.Members) {
			continue
		}
		before := memberBudgetsCopy(t)
		if err := syncMemberBudgets(ctx, w, before, kept, t.MemberBudgets); err != nil {
			return err
		}
		if _, err := w.Update(ctx, store.Team, t.ID, memberValues(kept, t.MemberBudgets)); err != nil {
			return err
		}
	}
	return nil
}

// Account reads one account row. NotFound when unknown.
func (a *Admin) Account(ctx context.Context, k AccountKind, id string) (store.Row, error) {
	row, err := a.st.Get(ctx, k.Type, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, k.NotFound(id)
	}
	return row, err
}

// Accounts reads every account of kind k, oldest first.
func (a *Admin) Accounts(ctx context.Context, k AccountKind) ([]store.Row, error) {
	return a.st.List(ctx, k.Type)
}

// Users reads one page of users as the filter selects (store.ListUsers), with the total.
func (a *Admin) Users(ctx context.Context, f store.UserFilter, page, size int) ([]store.Row, int, error) {
	return a.st.ListUsers(ctx, f, page, size)
}

// KeysOf reads the keys whose column (team_id, user_id) is id.
func (a *Admin) KeysOf(ctx context.Context, column, id string) ([]store.Row, error) {
	return a.st.ListBy(ctx, store.Key, column, id)
}
