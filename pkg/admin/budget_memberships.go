package admin

// Budgets that are team or organization membership budgets (a member's max_budget_in_team /
// tpm_limit / rpm_limit in a team, kept in the team row's team_member_budgets with its
// budget_id, sql/006; a member's max_budget_in_organization, a budget_id in the organization
// row's members, sql/011). /budget/update of such a budget changes the limits the member is
// held to, on every replica: a team membership's copy of them in the team row is rewritten in
// the same transaction (an organization membership reads its budget by id). /budget/delete
// unlinks the memberships, as LiteLLM's LiteLLM_TeamMembership and
// LiteLLM_OrganizationMembership budget_id foreign keys do (ON DELETE SET NULL, its migrations
// 20250625145206_cascade_budget_and_loosen_managed_file_json and 0_init): the member is then
// held to no budget of its own there (a team member falls back to the team's member budget).
//
// Lock order: the membership rows (teams, organizations) are locked before the budget row, as
// the member routes do (editMembers, editOrgMembers), so the two never deadlock.

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

// lockedMemberships are the rows holding the memberships linked to one budget, locked FOR
// UPDATE in the write's transaction, by object type and id.
type lockedMemberships map[store.ObjectType]map[string]store.Row

// lockMemberships locks the team and organization rows whose memberships link budget id
// (BudgetLinks), in id order. A row deleted meanwhile is skipped.
func lockMemberships(ctx context.Context, w *Writer, id string) (lockedMemberships, error) {
	links, err := w.tx.BudgetLinks(ctx, id)
	if err != nil {
		return nil, err
	}
	type key struct {
		typ store.ObjectType
		id  string
	}
	var keys []key
	seen := map[key]bool{}
	for _, l := range links {
		k := key{store.Team, l.ID}
		switch l.Kind {
		case "team_membership":
		case "organization_membership":
			k.typ = store.Organization
		default:
			continue
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].typ != keys[j].typ {
			return keys[i].typ < keys[j].typ
		}
		return keys[i].id < keys[j].id
	})
	out := lockedMemberships{}
	for _, k := range keys {
		row, err := w.GetForUpdate(ctx, k.typ, k.id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if out[k.typ] == nil {
			out[k.typ] = map[string]store.Row{}
		}
		out[k.typ][k.id] = row
	}
	return out, nil
}

// syncTeamMemberships rewrites, in each locked team, the limits of every membership whose
// budget is budget (its row as just written): max_budget, budget_duration, tpm_limit,
// rpm_limit, max_parallel_requests, the ones the limits step reads from the team row.
func (lm lockedMemberships) syncTeamMemberships(ctx context.Context, w *Writer, budget store.Row) error {
	b, err := accounts.BuildBudgetRow(budget)
	if err != nil {
		return invalidf("%v", err)
	}
	return lm.editTeams(ctx, w, budget.ID, func(mb *accounts.MemberBudget) *accounts.MemberBudget {
		out := &accounts.MemberBudget{BudgetID: mb.BudgetID}
		out.MaxBudget, out.BudgetDuration, out.TPMLimit, out.RPMLimit, out.MaxParallel =
			b.MaxBudget, b.BudgetDuration, b.TPMLimit, b.RPMLimit, b.MaxParallel
		return out
	})
}

// unlink takes budget id out of every locked membership (LiteLLM ON DELETE SET NULL).
func (lm lockedMemberships) unlink(ctx context.Context, w *Writer, id string) error {
	if err := lm.editTeams(ctx, w, id, func(*accounts.MemberBudget) *accounts.MemberBudget { return nil }); err != nil {
		return err
	}
	for oid, row := range lm[store.Organization] {
		members, err := OrgMembersOf(row)
		if err != nil {
			return invalidf("organization %q: members: %v", oid, err)
		}
		changed := false
		for i := range members {
			if members[i].BudgetID != nil && *members[i].BudgetID == id {
				members[i].BudgetID, changed = nil, true
			}
		}
		if !changed {
			continue
		}
		b, err := json.Marshal(members)
		if err != nil {
			return err
		}
		if _, err := w.Update(ctx, store.Organization, oid, store.Values{"members": b}); err != nil {
			return err
		}
	}
	return nil
}

// editTeams replaces, in each locked team, every membership budget whose budget_id is id by
// edit's result (nil: the member keeps no budget of its own in the team) and writes the team.
func (lm lockedMemberships) editTeams(ctx context.Context, w *Writer, id string, edit func(*accounts.MemberBudget) *accounts.MemberBudget) error {
	for tid, row := range lm[store.Team] {
		t, err := accounts.BuildTeamRow(row)
		if err != nil {
			return invalidf("%v", err)
		}
		changed := false
		for uid, mb := range t.MemberBudgets {
			if mb == nil || mb.BudgetID != id {
				continue
			}
			if nb := edit(mb); nb != nil {
				t.MemberBudgets[uid] = nb
			} else {
				delete(t.MemberBudgets, uid)
			}
			changed = true
		}
		if !changed {
			continue
		}
		if _, err := w.Update(ctx, store.Team, tid, memberValues(t.Members, t.MemberBudgets)); err != nil {
			return err
		}
	}
	return nil
}
