package admin

// Organization members (LiteLLM /organization/member_add, PATCH /organization/member_update,
// DELETE /organization/member_delete; management_endpoints/organization_endpoints.py): the
// memberships are the organization row's "members" (sql/011), so the change feed carries
// them to every replica with the row.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

// Organization roles (LiteLLM OrgMember.role: LitellmUserRoles ORG_ADMIN, INTERNAL_USER,
// INTERNAL_USER_VIEW_ONLY).
const (
	OrgRoleAdmin      = "org_admin"
	OrgRoleUser       = "internal_user"
	OrgRoleUserViewer = "internal_user_viewer"
)

// OrgMember is one organization membership, LiteLLM's LiteLLM_OrganizationMembershipTable:
// {"user_id", "user_email", "organization_id", "user_role", "budget_id" (always null: member
// budgets in an organization are not supported yet), "spend" (0), "created_at", "updated_at"}.
type OrgMember struct {
	UserID         string    `json:"user_id"`
	UserEmail      *string   `json:"user_email"`
	OrganizationID string    `json:"organization_id"`
	UserRole       string    `json:"user_role"`
	BudgetID       *string   `json:"budget_id"`
	Spend          float64   `json:"spend"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// CheckOrgRole refuses a role an organization member cannot have (Invalid naming it).
func CheckOrgRole(field, role string) error {
	switch role {
	case OrgRoleAdmin, OrgRoleUser, OrgRoleUserViewer:
		return nil
	}
	return invalid(field, "%s: %q is not an organization role (want %s, %s or %s)", field, role, OrgRoleAdmin, OrgRoleUser, OrgRoleUserViewer)
}

// OrgMembersAdded is AddOrgMembers' outcome, LiteLLM's OrganizationAddMemberResponse: the
// organization, the members' user rows (found or created) and the new memberships.
type OrgMembersAdded struct {
	Org         store.Row
	Users       []store.Row
	Memberships []OrgMember
}

// AddOrgMembers is /organization/member_add: each member (user_id or user_email, and a role
// from CheckOrgRole) joins organization orgID; a user that does not exist is created as
// LiteLLM's add_member_to_organization does (role internal_user). Errors: Invalid
// ("organization_id is required", a role, "User already in organization - <who>"), NotFound
// (the organization).
func (a *Admin) AddOrgMembers(ctx context.Context, orgID string, add []OrgMember, maxBudget *float64) (OrgMembersAdded, error) {
	if err := CheckOrgMemberBudget(maxBudget); err != nil {
		return OrgMembersAdded{}, err
	}
	var res OrgMembersAdded
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		res, err = addOrgMembers(ctx, w, orgID, add, maxBudget)
		return err
	})
	if err != nil {
		return OrgMembersAdded{}, err
	}
	return res, nil
}

// addOrgMembers is AddOrgMembers inside w's transaction (also /user/new's "organizations",
// CreateUser): the same checks and errors, nothing written when one fails.
func addOrgMembers(ctx context.Context, w *Writer, orgID string, add []OrgMember, maxBudget *float64) (OrgMembersAdded, error) {
	var res OrgMembersAdded
	row, err := editOrgMembersIn(ctx, w, orgID, func(ctx context.Context, w *Writer, cur []OrgMember) ([]OrgMember, error) {
		req := make([]accounts.Member, len(add))
		for i, m := range add {
			if err := CheckOrgRole("member.role", m.UserRole); err != nil {
				return nil, err
			}
			req[i] = accounts.Member{UserID: m.UserID}
			if m.UserEmail != nil {
				req[i].UserEmail = *m.UserEmail
			}
		}
		resolved, _, err := ensureUsers(ctx, w, req)
		if err != nil {
			return nil, err
		}
		now := time.Now().UTC()
		for i, m := range resolved {
			for _, have := range cur {
				if have.UserID == m.UserID {
					return nil, invalidf("User already in organization - %s", m.UserID)
				}
			}
			u, err := w.Get(ctx, store.User, m.UserID)
			if err != nil {
				return nil, err
			}
			res.Users = append(res.Users, u)
			om := OrgMember{UserID: m.UserID, OrganizationID: orgID, UserRole: add[i].UserRole, CreatedAt: now, UpdatedAt: now}
			if m.UserEmail != "" {
				e := m.UserEmail
				om.UserEmail = &e
			}
			if maxBudget != nil { // max_budget_in_organization (org_member_budget.go)
				if err := setOrgMemberBudget(ctx, w, &om, *maxBudget); err != nil {
					return nil, err
				}
			}
			cur = append(cur, om)
			res.Memberships = append(res.Memberships, om)
		}
		return cur, nil
	})
	if err != nil {
		return OrgMembersAdded{}, err
	}
	res.Org = row
	return res, nil
}

// UpdateOrgMember is PATCH /organization/member_update: who's (user_id or user_email) role in
// organization orgID (role "" keeps it). Returns the membership. Errors: Invalid (no user_id
// or user_email, a role, not a member), NotFound.
func (a *Admin) UpdateOrgMember(ctx context.Context, orgID string, who accounts.Member, role string, maxBudget *float64) (OrgMember, error) {
	if err := CheckOrgMemberBudget(maxBudget); err != nil {
		return OrgMember{}, err
	}
	if role != "" {
		if err := CheckOrgRole("role", role); err != nil {
			return OrgMember{}, err
		}
	}
	var out OrgMember
	_, err := a.editOrgMembers(ctx, orgID, func(ctx context.Context, w *Writer, cur []OrgMember) ([]OrgMember, error) {
		i, err := findOrgMember(orgID, cur, who)
		if err != nil {
			return nil, err
		}
		if role != "" {
			cur[i].UserRole = role
		}
		if maxBudget != nil { // max_budget_in_organization (org_member_budget.go)
			if err := setOrgMemberBudget(ctx, w, &cur[i], *maxBudget); err != nil {
				return nil, err
			}
		}
		cur[i].UpdatedAt = time.Now().UTC()
		out = cur[i]
		return cur, nil
	})
	return out, err
}

// DeleteOrgMember is DELETE /organization/member_delete: who leaves organization orgID.
// Returns the deleted membership. Errors: as UpdateOrgMember.
func (a *Admin) DeleteOrgMember(ctx context.Context, orgID string, who accounts.Member) (OrgMember, error) {
	var out OrgMember
	_, err := a.editOrgMembers(ctx, orgID, func(_ context.Context, _ *Writer, cur []OrgMember) ([]OrgMember, error) {
		i, err := findOrgMember(orgID, cur, who)
		if err != nil {
			return nil, err
		}
		out = cur[i]
		return append(cur[:i:i], cur[i+1:]...), nil
	})
	return out, err
}

func findOrgMember(orgID string, cur []OrgMember, who accounts.Member) (int, error) {
	if who.UserID == "" && who.UserEmail == "" {
		return 0, invalidf("user_id or user_email is required")
	}
	for i, m := range cur {
		if (who.UserID != "" && m.UserID == who.UserID) || (who.UserID == "" && m.UserEmail != nil && *m.UserEmail == who.UserEmail) {
			return i, nil
		}
	}
	return 0, invalidf("User is not a member of organization %s - %s", orgID, firstNonEmpty(who.UserID, who.UserEmail))
}

// OrgMembersOf reads an organization row's members (none: an empty list).
func OrgMembersOf(r store.Row) ([]OrgMember, error) {
	var row struct {
		Members []OrgMember `json:"members"`
	}
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &row); err != nil {
			return nil, err
		}
	}
	if row.Members == nil {
		row.Members = []OrgMember{}
	}
	return row.Members, nil
}

// editOrgMembers runs a read-modify-write of an organization's members under the row's lock.
func (a *Admin) editOrgMembers(ctx context.Context, orgID string, edit func(ctx context.Context, w *Writer, cur []OrgMember) ([]OrgMember, error)) (store.Row, error) {
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		row, err = editOrgMembersIn(ctx, w, orgID, edit)
		return err
	})
	return row, err
}

// editOrgMembersIn is editOrgMembers inside w's transaction.
func editOrgMembersIn(ctx context.Context, w *Writer, orgID string, edit func(ctx context.Context, w *Writer, cur []OrgMember) ([]OrgMember, error)) (store.Row, error) {
	if orgID == "" {
		return store.Row{}, invalid("organization_id", "organization_id is required")
	}
	cur, err := w.GetForUpdate(ctx, store.Organization, orgID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, OrgKind.NotFound(orgID)
	}
	if err != nil {
		return store.Row{}, err
	}
	members, err := OrgMembersOf(cur)
	if err != nil {
		return store.Row{}, invalidf("organization %q: members: %v", orgID, err)
	}
	if members, err = edit(ctx, w, members); err != nil {
		return store.Row{}, err
	}
	b, err := json.Marshal(members)
	if err != nil {
		return store.Row{}, err
	}
	return w.Update(ctx, store.Organization, orgID, store.Values{"members": b})
}
