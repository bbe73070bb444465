// Package accounts holds LiteLLM's account objects as served from their registries: teams,
// internal users, organizations and end users (LiteLLM's "customers"), built from their
// gateway.* rows (sql/005_accounts.sql), and the rules a call is checked against:
//
//   - a key's effective models are the intersection of its own list and its team's (LiteLLM
//     "can_key_call_model" then "can_team_access_model"); a personal key (no team) is also
//     bound by its user's list. An empty list, or one holding "all-proxy-models", allows every
//     model; a list may name model groups or access groups.
//   - a key of a team that does not exist or is blocked is refused (LiteLLM refuses a key whose
//     team was deleted or blocked).
//   - team members carry the role "admin" or "user" (LiteLLM members_with_roles).
package accounts

import (
	"encoding/json"
	"fmt"

	"lockstep/pkg/access"
	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/numbers"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// Limits are the budget and rate limits an account may carry (LiteLLM's budget table fields).
// nil: no limit at that level.
type Limits struct {
	MaxBudget      *float64 `json:"max_budget"`      // USD
	BudgetDuration *string  `json:"budget_duration"` // "30s", "1h", "30d", "1mo"; nil: never resets
	TPMLimit       *int64   `json:"tpm_limit"`       // tokens per minute
	RPMLimit       *int64   `json:"rpm_limit"`       // requests per minute
	MaxParallel    *int64   `json:"max_parallel_requests"`

	rate   limits.Limits // built by finish
	budget spend.Budget
}

// RateLimits are the rpm, tpm and parallel limits as the limiter takes them.
func (l *Limits) RateLimits() limits.Limits { return l.rate }

// Budget is max_budget and budget_duration as the spend tracker takes them.
func (l *Limits) Budget() spend.Budget { return l.budget }

// finish builds the limiter's and the spend tracker's views; a bad budget_duration, or a
// negative or non-finite budget or limit (numbers.Check: psql may write what the API refuses),
// refuses the row (the serving version, if any, stays).
func (l *Limits) finish() error {
	for _, err := range []error{numbers.CheckPtr("max_budget", l.MaxBudget), numbers.CheckPtr("tpm_limit", l.TPMLimit),
		numbers.CheckPtr("rpm_limit", l.RPMLimit), numbers.CheckPtr("max_parallel_requests", l.MaxParallel)} {
		if err != nil {
			return err
		}
	}
	set := func(p *int64) (int64, bool) {
		if p == nil {
			return 0, false
		}
		return *p, true
	}
	l.rate.RPM, l.rate.HasRPM = set(l.RPMLimit)
	l.rate.TPM, l.rate.HasTPM = set(l.TPMLimit)
	l.rate.Parallel, l.rate.HasParallel = set(l.MaxParallel)
	if l.MaxBudget != nil {
		l.budget.Max, l.budget.Has = *l.MaxBudget, true
	}
	if l.BudgetDuration != nil && *l.BudgetDuration != "" {
		d, err := keys.ParseDuration(*l.BudgetDuration)
		if err != nil {
			return fmt.Errorf("budget_duration: %w", err)
		}
		l.budget.Every = d
	}
	return nil
}

// Member is one team member (LiteLLM "Member").
type Member struct {
	UserID    string `json:"user_id,omitempty"`
	UserEmail string `json:"user_email,omitempty"`
	Role      string `json:"role"` // RoleAdmin or RoleUser
}

// Team member roles (LiteLLM).
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// Team is a gateway.teams row as served. Immutable.
type Team struct {
	ID             string   `json:"team_id"`
	Alias          *string  `json:"team_alias"`
	OrganizationID *string  `json:"organization_id"`
	Models         []string `json:"models"`
	Members        []Member `json:"members_with_roles"`
	Blocked        bool     `json:"blocked"`
	// MemberBudgets are the team memberships' budgets and rate limits, by user id (LiteLLM
	// LiteLLM_TeamMembership with its litellm_budget_table; sql/006). A member without an
	// entry has none.
	MemberBudgets map[string]*MemberBudget `json:"team_member_budgets"`
	// Fields are the LiteLLM fields without a column (sql/011); ModelAliases (LiteLLM's team
	// "model_aliases") map a model name a team key sends to the model group that serves it.
	Fields struct {
		ModelAliases map[string]string `json:"model_aliases"`
		// ModelRPM and ModelTPM are LiteLLM's team model_rpm_limit / model_tpm_limit (model
		// group → per minute), read by ModelLimits.
		ModelRPM map[string]int64 `json:"model_rpm_limit"`
		ModelTPM map[string]int64 `json:"model_tpm_limit"`
		// Guardrails run on every call of the team's keys (LiteLLM team "guardrails").
		Guardrails []string `json:"guardrails"`
		// Policies name the guardrail policies (sql/017) whose guardrails run on every call
		// of the team's keys (LiteLLM team "policies", kept in its metadata).
		Policies []string `json:"policies"`
		// TeamMemberBudgetID is the budget LiteLLM creates from the team's
		// team_member_budget / team_member_rpm_limit / team_member_tpm_limit /
		// team_member_budget_duration (sql/012): it holds for every member without a
		// budget of its own in the team ("" none).
		TeamMemberBudgetID string `json:"team_member_budget_id"`
		// ObjectPermission is LiteLLM's team object_permission: its agents bind every key of
		// the team (access.AgentAllowed; nil: none).
		ObjectPermission *access.ObjectPermission `json:"object_permission"`
		// MemberKeyDuration is LiteLLM's team_member_key_duration ("30d"; "" none): the
		// longest, and the default, duration of a key /key/generate makes for a member of
		// the team (admin.teamMemberKeyDuration).
		MemberKeyDuration string `json:"team_member_key_duration"`
		// MemberPermissions is LiteLLM's team_member_permissions: the key routes a member with
		// role user may call on the team's keys (nil: access.DefaultTeamMemberPermissions).
		MemberPermissions []string `json:"team_member_permissions"`
		// RouterSettings is LiteLLM's team router_settings, built into RouterSettings.
		RouterSettings json.RawMessage `json:"router_settings"`
		// AccessGroupIDs are LiteLLM's team access_group_ids: the unified access groups
		// (AccessGroup, sql/016) whose models and agents the team's keys may use (LiteLLM
		// can_team_access_model; nil: none).
		AccessGroupIDs []string `json:"access_group_ids"`
	} `json:"litellm_fields"`
	// RouterSettings are the team's per-call router settings (router.CallerSettings) for
	// its keys without router_settings of their own (nil: none).
	RouterSettings *router.CallerSettings `json:"-"`
	Limits
}

// MemberBudget is one team member's budget and rate limits within the team (LiteLLM's
// max_budget_in_team, and the tpm_limit / rpm_limit of /team/member_update). BudgetID names it
// as LiteLLM's budget table row would.
type MemberBudget struct {
	BudgetID string `json:"budget_id"`
	Limits
}

// MemberBudget returns the budget of member userID within the team, if any.
func (t *Team) MemberBudget(userID string) (*MemberBudget, bool) {
	b, ok := t.MemberBudgets[userID]
	return b, ok && b != nil
}

// User is a gateway.users row as served (LiteLLM "internal user"). Immutable.
type User struct {
	ID             string   `json:"user_id"`
	Email          *string  `json:"user_email"`
	Role           *string  `json:"user_role"`
	OrganizationID *string  `json:"organization_id"`
	Models         []string `json:"models"`
	Blocked        bool     `json:"blocked"`
	Fields         struct {
		// ModelMaxBudget is LiteLLM's user model_max_budget (keys.ParseModelBudgets), held
		// across all the user's keys; built into ModelBudgets.
		ModelMaxBudget json.RawMessage `json:"model_max_budget"`
	} `json:"litellm_fields"`
	// ModelBudgets are the user's per-model budgets (nil: none).
	ModelBudgets map[string]spend.Budget `json:"-"`
	Limits
}

// Organization is a gateway.organizations row as served. Immutable.
type Organization struct {
	ID      string   `json:"organization_id"`
	Alias   *string  `json:"organization_alias"`
	Models  []string `json:"models"`
	Blocked bool     `json:"blocked"`
	// Links are the organization's litellm_fields the call pipeline reads: its budget_id
	// (LiteLLM_OrganizationTable.budget_id; sql/012), model_rpm_limit / model_tpm_limit and
	// object_permission.
	Links OrgFields `json:"litellm_fields"`
	// Members are the organization's memberships; a budget_id is the member's
	// max_budget_in_organization budget (LiteLLM LiteLLM_OrganizationMembership.budget_id).
	Members []struct {
		UserID   string `json:"user_id"`
		BudgetID string `json:"budget_id"`
	} `json:"members"`
	Limits
}

// OrgFields are an organization's LiteLLM fields without a column (sql/011) that limit its
// keys' calls.
type OrgFields struct {
	Links
	// ModelRPM and ModelTPM are LiteLLM's organization model_rpm_limit / model_tpm_limit
	// (model group → per minute), held across all the organization's keys (LiteLLM's
	// parallel_request_limiter_v3 descriptor model_per_organization).
	ModelRPM map[string]int64 `json:"model_rpm_limit"`
	ModelTPM map[string]int64 `json:"model_tpm_limit"`
	// ObjectPermission is the organization's object_permission: its agents bind every key of
	// the organization (access.AgentAllowed; nil: none).
	ObjectPermission *access.ObjectPermission `json:"object_permission"`
}

// EndUserFields are an end user's LiteLLM fields without a column (sql/011) that limit the
// calls made for it.
type EndUserFields struct {
	Links
	// ObjectPermission is the end user's object_permission (LiteLLM NewCustomerRequest): its
	// agents bind the A2A calls made for the end user (access.AgentAllowed; nil: none).
	ObjectPermission *access.ObjectPermission `json:"object_permission"`
}

// MemberBudgetID is the budget of member userID within the organization ("" none).
func (o *Organization) MemberBudgetID(userID string) string {
	for i := range o.Members {
		if o.Members[i].UserID == userID {
			return o.Members[i].BudgetID
		}
	}
	return ""
}

// EndUser is a gateway.end_users row as served: the caller's customer, named by the request
// body's "user" field (LiteLLM end-user / customer). Immutable.
type EndUser struct {
	ID      string  `json:"user_id"`
	Alias   *string `json:"alias"`
	Blocked bool    `json:"blocked"`
	// AllowedModelRegion is "eu", "us" or "": the router considers only the deployments of
	// that region (router.InRegion; LiteLLM's customer region routing).
	AllowedModelRegion string `json:"allowed_model_region"`
	// Links are the end user's litellm_fields the call pipeline reads: its budget_id
	// (LiteLLM_EndUserTable.budget_id; sql/012) and object_permission.
	Links EndUserFields `json:"litellm_fields"`
	Limits
}

func build[T any](r store.Row, what string, id func(*T) string, lim func(*T) *Limits) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(r.Data, v); err != nil {
		return nil, fmt.Errorf("%s row: %w", what, err)
	}
	if id(v) == "" {
		return nil, fmt.Errorf("%s row: empty id", what)
	}
	if err := lim(v).finish(); err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, id(v), err)
	}
	return v, nil
}

// BuildTeamRow builds a Team from a gateway.teams row (row_to_json). A member whose role is
// not admin or user refuses the row (the serving version, if any, stays).
func BuildTeamRow(r store.Row) (*Team, error) {
	t, err := build(r, "team", func(t *Team) string { return t.ID }, func(t *Team) *Limits { return &t.Limits })
	if err != nil {
		return nil, err
	}
	for i, m := range t.Members {
		if m.Role != RoleAdmin && m.Role != RoleUser {
			return nil, fmt.Errorf("team %q: members_with_roles[%d].role: %q (want admin or user)", t.ID, i, m.Role)
		}
	}
	if t.RouterSettings, err = router.ParseCallerSettings(t.Fields.RouterSettings); err != nil {
		return nil, fmt.Errorf("team %q: %w", t.ID, err)
	}
	for uid, b := range t.MemberBudgets {
		if b == nil {
			continue
		}
		if err := b.finish(); err != nil {
			return nil, fmt.Errorf("team %q: team_member_budgets[%q]: %w", t.ID, uid, err)
		}
	}
	return t, nil
}

// BuildUserRow builds a User from a gateway.users row.
func BuildUserRow(r store.Row) (*User, error) {
	u, err := build(r, "user", func(u *User) string { return u.ID }, func(u *User) *Limits { return &u.Limits })
	if err != nil {
		return nil, err
	}
	if u.ModelBudgets, err = keys.ParseModelBudgets(u.Fields.ModelMaxBudget); err != nil {
		return nil, fmt.Errorf("user %q: %w", u.ID, err)
	}
	return u, nil
}

// BuildOrganizationRow builds an Organization from a gateway.organizations row.
func BuildOrganizationRow(r store.Row) (*Organization, error) {
	return build(r, "organization", func(o *Organization) string { return o.ID }, func(o *Organization) *Limits { return &o.Limits })
}

// BuildEndUserRow builds an EndUser from a gateway.end_users row.
func BuildEndUserRow(r store.Row) (*EndUser, error) {
	return build(r, "end user", func(e *EndUser) string { return e.ID }, func(e *EndUser) *Limits { return &e.Limits })
}

// CanUse reports whether the user's models list allows model group name.
func (u *User) CanUse(name string, accessGroups func(yield func(string) bool)) bool {
	return keys.ListAllows(u.Models, name, accessGroups)
}

// Member returns the member with userID, if any.
func (t *Team) Member(userID string) (Member, bool) {
	for _, m := range t.Members {
		if m.UserID == userID {
			return m, true
		}
	}
	return Member{}, false
}
