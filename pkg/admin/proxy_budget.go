package admin

import (
	"context"
	"errors"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

// EnsureProxyBudgetUser makes the user store.ProxyBudgetUser carry the proxy-wide budget
// (litellm_settings max_budget and budget_duration; duration "" for none), as LiteLLM's
// proxy start-up upserts its litellm_proxy_budget_name user: created (role internal_user)
// when absent, updated only when its max_budget or budget_duration differ, so replicas
// starting together write it once. Race-safe with member creation (memberUsersLock).
func (a *Admin) EnsureProxyBudgetUser(ctx context.Context, maxBudget float64, duration string) error {
	var dur any
	if duration != "" {
		dur = duration
	}
	vals := store.Values{"max_budget": maxBudget, "budget_duration": dur}
	return a.Write(ctx, func(w *Writer) error {
		if err := w.LockName(ctx, memberUsersLock); err != nil {
			return err
		}
		row, err := w.Get(ctx, store.User, store.ProxyBudgetUser)
		if errors.Is(err, store.ErrNotFound) {
			vals["user_id"], vals["user_role"] = store.ProxyBudgetUser, RoleInternalUser
			_, err = w.Insert(ctx, store.User, vals)
			return err
		}
		if err != nil {
			return err
		}
		u, err := accounts.BuildUserRow(row)
		if err != nil {
			return err
		}
		if u.MaxBudget != nil && *u.MaxBudget == maxBudget && ((u.BudgetDuration == nil && duration == "") || (u.BudgetDuration != nil && *u.BudgetDuration == duration)) {
			return nil
		}
		_, err = w.Update(ctx, store.User, store.ProxyBudgetUser, vals)
		return err
	})
}
