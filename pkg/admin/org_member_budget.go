package admin

// An organization member's budget (LiteLLM OrganizationMemberAddRequest /
// OrganizationMemberUpdateRequest max_budget_in_organization): LiteLLM keeps it in a budget
// table row its LiteLLM_OrganizationMembership links by budget_id. Here it is a gateway.budgets
// row (sql/012) written in the organization's transaction, its id in the membership
// (OrgMember.BudgetID); the limits step holds the member's calls through keys of that
// organization to it, on the member's own spend within the organization (the
// "org_member:<org>:<user>" token, counted from when the budget was set), on every replica.

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"lockstep/pkg/numbers"
	"lockstep/pkg/store"
)

// CheckOrgMemberBudget refuses a max_budget_in_organization that is negative or not finite
// (Invalid naming it).
func CheckOrgMemberBudget(v *float64) error {
	if v == nil {
		return nil
	}
	if err := numbers.Check("max_budget_in_organization", *v); err != nil {
		return invalid("max_budget_in_organization", "%v", err)
	}
	return nil
}

// setOrgMemberBudget sets m's budget within its organization to max USD in w's transaction:
// the budget m.BudgetID names is updated, or a new one is made (id
// "org-<org>-member-<user>-budget-<uuid>") and linked from m.
func setOrgMemberBudget(ctx context.Context, w *Writer, m *OrgMember, max float64) error {
	vals := store.Values{"max_budget": max, "updated_by": proxyAdminName}
	if m.BudgetID != nil && *m.BudgetID != "" {
		if _, err := w.Update(ctx, store.Budget, *m.BudgetID, vals); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	id := "org-" + m.OrganizationID + "-member-" + m.UserID + "-budget-" + uuid.NewString()
	vals["budget_id"], vals["created_by"] = id, proxyAdminName
	if _, err := w.Insert(ctx, store.Budget, vals); err != nil {
		return err
	}
	m.BudgetID = &id
	return nil
}
