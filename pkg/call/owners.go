package call

import (
	"context"
	"errors"
	"net/http"

	"lockstep/pkg/accounts"
	"lockstep/pkg/limits"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// owner is one account a call counts toward besides its key: the key's internal user, team and
// organization, and the request's end user. Each may carry a budget and rate limits (sql/005),
// kept cluster-wide exactly as a key's: spend in gateway.key_spend and leases in
// gateway.rate_windows / slot_leases, under the token store.OwnerToken(kind, id).
type owner struct {
	kind  string // "user", "team", "project", "organization", "end_user"
	label string // in messages: "User", "Team", "Project", "Organization", "End User"
	id    string
	lim   limits.Limits
	bud   spend.Budget
	// user and team name a team membership (kind "team_member", id "<team>:<user>") or, in
	// team the organization: an organization membership (kind "org_member", "<org>:<user>").
	user, team string
}

func (o owner) token() string { return store.OwnerToken(o.kind, o.id) }

// callOwners lists a call's owners in the order LiteLLM checks them after the key (its
// common_checks: user, team, the user's membership of the team, organization, then the end
// user). An end user without a gateway.end_users row has no limits; its spend is tracked all
// the same. A team key is not held to its user's personal max_budget: only the team's and
// the team membership's budgets apply (LiteLLM "Budgets, Rate Limits": "If a key belongs to a
// team, only the team (and team-member) budgets are enforced"); the user's rate limits and
// spend tracking still apply. An owner linked to a budget (budget_id; a team member through
// its team's member budget) is held to that budget's limits too (accounts.Effective).
func (g *Governance) callOwners(ci CallInfo) []owner {
	var out []owner
	if u := ci.User; u != nil {
		uo := owner{kind: "user", label: "User", id: u.ID, lim: u.RateLimits(), bud: u.Budget()}
		if ci.Team != nil {
			uo.bud = spend.Budget{}
		}
		out = append(out, uo)
	}
	if t := ci.Team; t != nil {
		out = append(out, owner{kind: "team", label: "Team", id: t.ID, lim: t.RateLimits(), bud: t.Budget()})
		// the key's user within the team: its budget and limits from the team membership
		// (LiteLLM _check_team_member_budget); spend is tracked for every member
		if ci.User != nil {
			uid := ci.User.ID
			mo := owner{kind: "team_member", id: store.TeamMemberID(t.ID, uid), user: uid, team: t.ID}
			if b, ok := t.MemberBudget(uid); ok {
				mo.lim, mo.bud = b.RateLimits(), b.Budget()
			} else if mb := g.budget(t.Fields.TeamMemberBudgetID); mb != nil {
				// the team's member budget (team_member_budget, ...) for a member without
				// a budget of its own in the team (LiteLLM's team_member_budget_id)
				mo.lim, mo.bud = mb.RateLimits(), mb.Budget()
			}
			out = append(out, mo)
		}
	}
	if pr := ci.Project; pr != nil {
		// the key's project: the budget it links holds the project's own spend and windows
		// (LiteLLM _project_max_budget_check; its budget's tpm/rpm limits), and its spend is
		// tracked under "project:<id>" for /project/info
		po := owner{kind: "project", label: "Project", id: pr.ID}
		if b := g.budget(pr.Budget()); b != nil {
			po.lim, po.bud = b.RateLimits(), b.Budget()
		}
		out = append(out, po)
	}
	if o := ci.Organization; o != nil {
		oo := owner{kind: "organization", label: "Organization", id: o.ID}
		oo.lim, oo.bud = accounts.Effective(&o.Limits, g.budget(o.Links.BudgetID))
		out = append(out, oo)
		// the key's user within the organization: its max_budget_in_organization (a budget
		// row its membership links, LiteLLM LiteLLM_OrganizationMembership.budget_id), on
		// its own spend within the organization; only a member with such a budget is tracked
		if ci.User != nil {
			if mb := g.budget(o.MemberBudgetID(ci.User.ID)); mb != nil {
				mo := owner{kind: "org_member", id: store.TeamMemberID(o.ID, ci.User.ID), user: ci.User.ID, team: o.ID}
				mo.lim, mo.bud = mb.RateLimits(), mb.Budget()
				out = append(out, mo)
			}
		}
	}
	// per-model rate limits of the key, of its team and of its organization (LiteLLM
	// model_rpm_limit / model_tpm_limit; its v3 limiter's descriptors model_per_key,
	// model_per_team and model_per_organization: one window per model group shared by all
	// the team's or organization's keys)
	if k := ci.Key; k != nil {
		if l, ok := k.X().ModelLimits[ci.Model]; ok {
			out = append(out, owner{kind: "model_per_key", label: "Key", id: k.Token + ":" + ci.Model, lim: l})
		}
	}
	if pr := ci.Project; pr != nil {
		if l, ok := modelLimits(pr.ModelRPM, pr.ModelTPM, ci.Model); ok {
			out = append(out, owner{kind: "model_per_project", label: "Project", id: pr.ID + ":" + ci.Model, lim: l})
		}
	}
	if t := ci.Team; t != nil {
		if l, ok := modelLimits(t.Fields.ModelRPM, t.Fields.ModelTPM, ci.Model); ok {
			out = append(out, owner{kind: "model_per_team", label: "Team", id: t.ID + ":" + ci.Model, lim: l})
		}
	}
	if o := ci.Organization; o != nil {
		if l, ok := modelLimits(o.Links.ModelRPM, o.Links.ModelTPM, ci.Model); ok {
			out = append(out, owner{kind: "model_per_organization", label: "Organization", id: o.ID + ":" + ci.Model, lim: l})
		}
	}
	if ci.EndUserID != "" {
		eo := owner{kind: "end_user", label: "End User", id: ci.EndUserID}
		if e := ci.EndUser; e != nil {
			eo.lim, eo.bud = accounts.Effective(&e.Limits, g.budget(e.Links.BudgetID))
		}
		out = append(out, eo)
	}
	return out
}

// modelLimits are the per-minute limits model_rpm_limit / model_tpm_limit (model group → n)
// set for model; ok false when neither names it.
func modelLimits(rpm, tpm map[string]int64, model string) (limits.Limits, bool) {
	if len(rpm) == 0 && len(tpm) == 0 {
		return limits.Limits{}, false
	}
	r, hasRPM := rpm[model]
	n, hasTPM := tpm[model]
	return limits.Limits{RPM: r, HasRPM: hasRPM, TPM: n, HasTPM: hasTPM}, hasRPM || hasTPM
}

// ownerBudgets refuses the call when an owner's spend reached its max_budget: a *BudgetExceeded,
// 400 budget_exceeded `Budget has been exceeded! <Owner>=<id> Current cost: <spend>, Max budget: <max>`
// (LiteLLM's team text, for every level).
func (g *Governance) ownerBudgets(ctx context.Context, h http.Header, owners []owner) error {
	if g.Spend == nil {
		return nil
	}
	for _, o := range owners {
		if !o.bud.Has {
			continue
		}
		if err := g.Spend.Check(ctx, o.token(), o.bud); err != nil {
			return g.ownerError(h, o, err)
		}
	}
	return nil
}

// ownerLimits takes a rate-limit admission for every limited owner; on a refusal it gives back
// what it took and refuses with a *RateLimited, 429 (Retry-After) `Rate limit exceeded for <kind>: <id>. Limit type:
// <type>. Current limit: <n>, Remaining: 0. Limit resets at: <time>`.
func (g *Governance) ownerLimits(ctx context.Context, h http.Header, owners []owner) ([]limits.Ticket, error) {
	var taken []limits.Ticket
	for _, o := range owners {
		if !o.lim.Any() {
			continue
		}
		var err error
		if g.Limiter == nil {
			err = &limits.UnavailableError{Kind: limits.KindRequests, Err: errors.New("no database configured")}
		} else {
			var t limits.Ticket
			if t, err = g.Limiter.Admit(ctx, o.token(), o.lim); err == nil {
				taken = append(taken, t)
				continue
			}
		}
		for _, t := range taken {
			t.Done(0)
		}
		return nil, g.ownerError(h, o, err)
	}
	return taken, nil
}

// ownerError maps a refusal at an owner's level to its typed error (refusal's, naming the owner).
func (g *Governance) ownerError(h http.Header, o owner, err error) error {
	var le *limits.LimitError
	var be *spend.BudgetError
	switch {
	case errors.As(err, &le):
		return rateLimited(h, o.kind, o.id, le)
	case errors.As(err, &be):
		g.rejected()
		who := o.label + "=" + o.id
		switch o.kind {
		case "team_member": // LiteLLM _check_team_member_budget's text
			who = "User=" + o.user + " in Team=" + o.team
		case "org_member":
			who = "User=" + o.user + " in Organization=" + o.team
		}
		return &BudgetExceeded{Who: who, Spend: be.Spend, Max: be.Max}
	}
	return g.refusal(h, nil, err)
}
