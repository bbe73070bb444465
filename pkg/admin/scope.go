package admin

// The use-cases as a caller with ScopeOwn may run them (authz.go): each loads the object,
// answers an object that is not the caller's exactly as an absent one (NotFound, same text),
// and refuses (Forbidden) a write that would raise the caller's own limits or act for someone
// else. With ScopeAll they are the plain use-cases. Source: API.md "Roles and self-service";
// LiteLLM key_management_endpoints.py _is_allowed_to_make_key_request (texts "User can only
// create keys for themselves. ..." and "User can only create keys for their own team. ...").

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// OwnsKey reports whether the key (its token, user and team) is the caller's under ScopeOwn:
// the caller's own key, a key of its user, or a key of the team it administers (or whose
// team_member_permissions give its members the route: TeamKeys).
func (c Caller) OwnsKey(token, userID, teamID string) bool {
	if c.Token != "" && token == c.Token {
		return true
	}
	if uid := c.UserID(); uid != "" && userID == uid {
		return true
	}
	return c.teamKeysOf(teamID)
}

// SeesTeam reports whether team t is the caller's under ScopeOwn: its key's team, or a team
// its user is a member of.
func (c Caller) SeesTeam(t *accounts.Team) bool {
	if c.Scope == ScopeAll {
		return true
	}
	if c.Team != nil && c.Team.ID == t.ID {
		return true
	}
	if uid := c.UserID(); uid != "" {
		_, ok := t.Member(uid)
		return ok
	}
	return false
}

func forbiddenf(format string, args ...any) error {
	return &Forbidden{Msg: fmt.Sprintf(format, args...)}
}

// ownKey loads key k and returns it when the caller may act on it; NotFound msg otherwise
// (absent or another's, the same answer).
func (a *Admin) ownKey(ctx context.Context, c Caller, k string, msg string) (*keys.Key, error) {
	row, err := a.st.Get(ctx, store.Key, tokenOf(k))
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("%s", msg)
	}
	if err != nil {
		return nil, err
	}
	key, err := keys.BuildRow(row)
	if err != nil {
		return nil, err
	}
	if c.Scope != ScopeAll && !c.OwnsKey(key.Token, key.UserID, key.TeamID) {
		return nil, notFound("%s", msg)
	}
	return key, nil
}

// KeyAs is Key for c: another's key is "Key not found".
func (a *Admin) KeyAs(ctx context.Context, c Caller, k string) (store.Row, *store.KeySpend, error) {
	if c.Scope != ScopeAll {
		if _, err := a.ownKey(ctx, c, k, keyNotFound); err != nil {
			return store.Row{}, nil, err
		}
	}
	return a.Key(ctx, k)
}

// KeysAs is Keys for c: under ScopeOwn the page is of the caller's keys only (its user's, its
// administered team's, its own), oldest first.
func (a *Admin) KeysAs(ctx context.Context, c Caller, page, size int) ([]store.Row, int, map[string]store.KeySpend, error) {
	if c.Scope == ScopeAll {
		return a.Keys(ctx, page, size)
	}
	seen := map[string]bool{}
	var rows []store.Row
	add := func(rs []store.Row) {
		for _, r := range rs {
			if !seen[r.ID] {
				seen[r.ID] = true
				rows = append(rows, r)
			}
		}
	}
	if uid := c.UserID(); uid != "" {
		rs, err := a.st.ListBy(ctx, store.Key, "user_id", uid)
		if err != nil {
			return nil, 0, nil, err
		}
		add(rs)
	}
	if c.TeamAdmin() || c.TeamKeys {
		rs, err := a.st.ListBy(ctx, store.Key, "team_id", c.Team.ID)
		if err != nil {
			return nil, 0, nil, err
		}
		add(rs)
	}
	if c.Token != "" && !seen[c.Token] {
		if r, err := a.st.Get(ctx, store.Key, c.Token); err == nil {
			add([]store.Row{r})
		}
	}
	total := len(rows)
	lo := min((page-1)*size, total)
	hi := min(lo+size, total)
	rows = rows[lo:hi]
	tokens := make([]string, len(rows))
	for i, r := range rows {
		tokens[i] = r.ID
	}
	spends, err := a.st.GetKeySpend(ctx, tokens)
	if err != nil {
		return nil, 0, nil, err
	}
	return rows, total, spends, nil
}

// keyWriteAllowed checks a ScopeOwn key write's owners and limits: user_id only the caller's
// own (a team admin: also a member of its team, for a key of that team); team_id only the
// team the caller administers; limits and budget no higher than the owner's (the team's for a
// team key, else the caller's user's); models within the user's list for a personal key; a
// blocked key is not unblocked. cur is the key updated (nil: generate).
func (c Caller) keyWriteAllowed(req *KeyRequest, cur *keys.Key) error {
	uid := c.UserID()
	teamID := ""
	if cur != nil {
		teamID = cur.TeamID
	}
	if req.TeamID != nil {
		teamID = *req.TeamID
	}
	// a key's team is set only by an admin of that team (an update leaving it as it is: anyone
	// who owns the key)
	if teamID != "" && (cur == nil || req.TeamID != nil) && !c.teamKeysOf(teamID) {
		return forbiddenf("User can only create keys for their own team. Got=%s, Your Team ID=%s", teamID, c.teamID())
	}
	if cur == nil && (req.UserID == nil || *req.UserID == "") && uid != "" {
		req.UserID = &uid // a key is bound to the user that makes it (a team key too)
	}
	if cur != nil && req.TeamID != nil && *req.TeamID != cur.TeamID && cur.TeamID != "" && !c.teamKeysOf(cur.TeamID) {
		// moving a key out of its team (out of the team's budget) is the team admin's
		return forbiddenf("User can only create keys for their own team. Got=%s, Your Team ID=%s", cur.TeamID, c.teamID())
	}
	if cur != nil && req.UserID != nil && *req.UserID == "" && cur.UserID != "" {
		// unbinding a key from its user (out of the user's budget) is the proxy admin's
		return forbiddenf("User can only create keys for themselves. Got user_id=, Your ID=%s", uid)
	}
	if req.UserID != nil && *req.UserID != "" && *req.UserID != uid {
		if _, member := c.teamMember(*req.UserID); teamID == "" || !member {
			return forbiddenf("User can only create keys for themselves. Got user_id=%s, Your ID=%s", *req.UserID, uid)
		}
	}
	if req.Blocked != nil && !*req.Blocked && cur != nil && cur.Blocked {
		return forbiddenf("only the proxy admin can unblock a key")
	}
	// a budget link and a temporary budget increase are the proxy admin's (unlinking a budget
	// or raising max_budget would lift the key's own limits)
	for _, f := range []string{"budget_id", "temp_budget_increase"} {
		raw, ok := req.Extra[f]
		unlink := ok && f == "budget_id" && cur != nil && cur.X().BudgetID != ""
		if ok && !isNull(raw) || unlink {
			return forbiddenf("only the proxy admin can set %s on a key", f)
		}
	}
	if cur != nil && !c.teamKeysOf(cur.TeamID) && (req.Spend.set && !req.Spend.null() || budgetChanged(req.MaxBudget, cur.Budget)) {
		// LiteLLM _validate_update_key_data (_is_budget_change): a key's max_budget and spend
		// are changed by the proxy admin or the key's team admin, not by the key's owner
		return forbiddenf("Only proxy admins, team admins, or org admins can call /key/update (max_budget/spend). user_role=%s, user_id=%s", c.Role(), uid)
	}
	if cur != nil && !c.teamKeysOf(cur.TeamID) {
		if f := raisedLimits(req, cur); f != "" {
			// the same rule for the key's rate limits: raised or removed by an admin only
			return forbiddenf("Only proxy admins, team admins, or org admins can call /key/update (%s). user_role=%s, user_id=%s", f, c.Role(), uid)
		}
	}
	if o, ok := req.Extra["organization_id"]; ok && string(o) != "null" && string(o) != `""` {
		// a key's organization replaces its user's as the one whose limits bind it
		return forbiddenf("only the proxy admin can set a key's organization_id")
	}
	if p, ok := req.Extra["permissions"]; ok && grantsSpendRoutes(p) {
		// get_spend_routes opens proxy-wide spend: no role grants it to itself
		return forbiddenf("only the proxy admin can set a key's permissions")
	}
	bound, who := c.User, "user"
	var lim *accounts.Limits
	if teamID != "" && c.Team != nil && c.Team.ID == teamID {
		lim, who = &c.Team.Limits, "team"
	} else if teamID == "" && bound != nil {
		lim = &bound.Limits
		if req.Models != nil && len(bound.Models) > 0 {
			for _, m := range *req.Models {
				if !contains(bound.Models, m) {
					return forbiddenf("key models %s not within the user's models %s", pyList(*req.Models), pyList(bound.Models))
				}
			}
		}
	}
	if lim == nil {
		return nil
	}
	if err := capFloat("max_budget", req.MaxBudget, lim.MaxBudget, who); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		o    optional
		max  *int64
	}{{"rpm_limit", req.RPMLimit, lim.RPMLimit}, {"tpm_limit", req.TPMLimit, lim.TPMLimit}, {"max_parallel_requests", req.MaxParallel, lim.MaxParallel}} {
		if err := capInt(f.name, f.o, f.max, who); err != nil {
			return err
		}
	}
	return nil
}

// teamID is the caller's key's team ("" none).
func (c Caller) teamID() string {
	if c.Team == nil {
		return ""
	}
	return c.Team.ID
}

// teamMember reports whether userID is a member of the caller's key's team.
func (c Caller) teamMember(userID string) (accounts.Member, bool) {
	if c.Team == nil {
		return accounts.Member{}, false
	}
	return c.Team.Member(userID)
}

// capFloat refuses a budget above max (nil: no cap), or clearing it (null) when there is one.
func capFloat(field string, o optional, max *float64, who string) error {
	if !o.set || max == nil {
		return nil
	}
	var v float64
	if o.null() || json.Unmarshal(o.raw, &v) != nil || v > *max {
		return forbiddenf("%s higher than %s %s. %s %s=%v. Key %s=%s", field, who, field, capitalize(who), field, *max, field, o.raw)
	}
	return nil
}

// budgetChanged reports whether an update's max_budget o changes the key's budget cur (a
// value other than the current one, or null on a key that has one).
func budgetChanged(o optional, cur spend.Budget) bool {
	if !o.set {
		return false
	}
	if o.null() {
		return cur.Has
	}
	var v float64
	return json.Unmarshal(o.raw, &v) != nil || !cur.Has || v != cur.Max
}

// capInt is capFloat for an integer limit.
func capInt(field string, o optional, max *int64, who string) error {
	if !o.set || max == nil {
		return nil
	}
	var v int64
	if o.null() || json.Unmarshal(o.raw, &v) != nil || v > *max {
		return forbiddenf("%s higher than %s %s. %s %s=%d. Key %s=%s", field, who, field, capitalize(who), field, *max, field, o.raw)
	}
	return nil
}

// GenerateKeyAs is GenerateKey for c (keyWriteAllowed under ScopeOwn).
func (a *Admin) GenerateKeyAs(ctx context.Context, c Caller, req KeyRequest) (KeyResult, error) {
	if c.Scope != ScopeAll {
		if err := c.keyWriteAllowed(&req, nil); err != nil {
			return KeyResult{}, err
		}
	}
	return a.GenerateKey(ctx, req)
}

// UpdateKeyAs is UpdateKey for c: another's key is "Key not found"; keyWriteAllowed.
func (a *Admin) UpdateKeyAs(ctx context.Context, c Caller, req KeyRequest) (KeyResult, error) {
	if c.Scope != ScopeAll && req.Key != "" {
		cur, err := a.ownKey(ctx, c, req.Key, keyNotFound)
		if err != nil {
			return KeyResult{}, err
		}
		if err := c.keyWriteAllowed(&req, cur); err != nil {
			return KeyResult{}, err
		}
	}
	return a.UpdateKey(ctx, req)
}

// RegenerateKeyAs is RegenerateKey for c: another's key is "Key not found".
func (a *Admin) RegenerateKeyAs(ctx context.Context, c Caller, key, newKey string) (KeyResult, error) {
	if c.Scope != ScopeAll && key != "" {
		if _, err := a.ownKey(ctx, c, key, keyNotFound); err != nil {
			return KeyResult{}, err
		}
	}
	return a.RegenerateKey(ctx, key, newKey)
}

// DeleteKeysAs is DeleteKeys for c: another's key fails the call as an unknown one ("Key not
// found: <redacted key>"), nothing deleted.
func (a *Admin) DeleteKeysAs(ctx context.Context, c Caller, list []string) error {
	if c.Scope != ScopeAll {
		for _, k := range list {
			if _, err := a.ownKey(ctx, c, k, "Key not found: "+redact(k)); err != nil {
				return err
			}
		}
	}
	return a.DeleteKeys(ctx, list)
}

// UserAs is /user/info's read for c: id "" is the caller's own user; under ScopeOwn another
// user is "User not found, passed user_id=<id>", as an absent one.
func (a *Admin) UserAs(ctx context.Context, c Caller, id string) (store.Row, error) {
	if id == "" {
		id = c.UserID()
	}
	if id == "" {
		return store.Row{}, invalid("user_id", "user_id query parameter is required")
	}
	if c.Scope != ScopeAll && id != c.UserID() {
		return store.Row{}, UserKind.NotFound(id)
	}
	return a.Account(ctx, UserKind, id)
}

// TeamAs is /team/info's read for c: id "" is the key's team; under ScopeOwn a team the
// caller does not see (SeesTeam) is "Team not found, passed team_id=<id>", as an absent one.
func (a *Admin) TeamAs(ctx context.Context, c Caller, id string) (store.Row, error) {
	if id == "" && c.Team != nil {
		id = c.Team.ID
	}
	if id == "" {
		return store.Row{}, invalid("team_id", "team_id query parameter is required")
	}
	row, err := a.Account(ctx, TeamKind, id)
	if err != nil || c.Scope == ScopeAll {
		return row, err
	}
	t, err := accounts.BuildTeamRow(row)
	if err != nil || !c.SeesTeam(t) {
		return store.Row{}, TeamKind.NotFound(id)
	}
	return row, nil
}

// ownTeam checks that c may manage team teamID's members: under ScopeOwn only the team it
// administers; another team is "Team not found", as an absent one.
func (c Caller) ownTeam(teamID string) error {
	if c.Scope == ScopeAll || teamID == "" {
		return nil
	}
	if !c.TeamAdmin() || c.Team.ID != teamID {
		return TeamKind.NotFound(teamID)
	}
	return nil
}

// AddTeamMembersAs is AddTeamMembers for c: a team admin adds to its own team only, each
// member's budget in the team no higher than the team's max_budget.
func (a *Admin) AddTeamMembersAs(ctx context.Context, c Caller, teamID string, add []accounts.Member, budget *float64) (MembersAdded, error) {
	if err := c.ownTeam(teamID); err != nil {
		return MembersAdded{}, err
	}
	if c.Scope != ScopeAll && budget != nil && c.Team.MaxBudget != nil && *budget > *c.Team.MaxBudget {
		return MembersAdded{}, forbiddenf("max_budget_in_team higher than team max_budget. Team max_budget=%v. max_budget_in_team=%v", *c.Team.MaxBudget, *budget)
	}
	return a.AddTeamMembers(ctx, teamID, add, budget)
}

// DeleteTeamMemberAs is DeleteTeamMember for c: a team admin removes from its own team only.
func (a *Admin) DeleteTeamMemberAs(ctx context.Context, c Caller, teamID string, who accounts.Member) (store.Row, error) {
	if err := c.ownTeam(teamID); err != nil {
		return store.Row{}, err
	}
	return a.DeleteTeamMember(ctx, teamID, who)
}

// UpdateTeamMemberAs is UpdateTeamMember for c: a team admin updates members of its own team
// only, never itself (no role raises its own role or budget), each budget and limit no higher
// than the team's.
func (a *Admin) UpdateTeamMemberAs(ctx context.Context, c Caller, teamID string, who accounts.Member, role string, budget []func(*accounts.MemberBudget)) (accounts.Member, *accounts.MemberBudget, error) {
	if err := c.ownTeam(teamID); err != nil {
		return accounts.Member{}, nil, err
	}
	if c.Scope != ScopeAll {
		self := c.User
		if (who.UserID != "" && who.UserID == self.ID) || (who.UserID == "" && self.Email != nil && who.UserEmail == *self.Email) {
			return accounts.Member{}, nil, forbiddenf("a team admin cannot change its own role, budget or limits in the team")
		}
		var b accounts.MemberBudget
		for _, e := range budget {
			e(&b)
		}
		t := c.Team
		if b.MaxBudget != nil && t.MaxBudget != nil && *b.MaxBudget > *t.MaxBudget {
			return accounts.Member{}, nil, forbiddenf("max_budget_in_team higher than team max_budget. Team max_budget=%v. max_budget_in_team=%v", *t.MaxBudget, *b.MaxBudget)
		}
		for _, l := range []struct {
			name     string
			v, limit *int64
		}{{"tpm_limit", b.TPMLimit, t.TPMLimit}, {"rpm_limit", b.RPMLimit, t.RPMLimit}} {
			if l.v != nil && l.limit != nil && *l.v > *l.limit {
				return accounts.Member{}, nil, forbiddenf("%s higher than team %s. Team %s=%d. Member %s=%d", l.name, l.name, l.name, *l.limit, l.name, *l.v)
			}
		}
	}
	return a.UpdateTeamMember(ctx, teamID, who, role, budget)
}

// modelTeam is a stored model's model_info.team_id ("" none); NotFound "Model with id=<id>
// not found" when there is no such DB model.
func (a *Admin) modelTeam(ctx context.Context, id string) (string, error) {
	row, err := a.st.Get(ctx, store.Model, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", modelNotFound(id)
	}
	if err != nil {
		return "", err
	}
	var m ModelRow
	if err := json.Unmarshal(row.Data, &m); err != nil {
		return "", err
	}
	var info struct {
		TeamID string `json:"team_id"`
	}
	_ = json.Unmarshal(m.ModelInfo, &info)
	return info.TeamID, nil
}

// ownModelTeam checks a ScopeOwn model write's model_info.team_id: absent, it becomes the
// team the caller administers; another team is refused.
func (c Caller) ownModelTeam(info map[string]any, absentOK bool) (map[string]any, error) {
	if info == nil {
		info = map[string]any{}
	}
	tid, set := info["team_id"]
	if !set && absentOK {
		return info, nil
	}
	if !set {
		info["team_id"] = c.Team.ID
		return info, nil
	}
	if s, ok := tid.(string); !ok || s != c.Team.ID {
		return nil, forbiddenf("a team admin adds models to its own team only: model_info.team_id must be %s", c.Team.ID)
	}
	return info, nil
}

// CreateModelAs is CreateModel for c: a team admin's model is its team's (model_info.team_id
// set to the team it administers; another team refused), under a model_name no model outside
// the team serves.
func (a *Admin) CreateModelAs(ctx context.Context, c Caller, req ModelInput) (store.Row, error) {
	if c.Scope != ScopeAll {
		info, err := c.ownModelTeam(req.ModelInfo, false)
		if err != nil {
			return store.Row{}, err
		}
		req.ModelInfo = info
		if req.ModelName != nil && a.groupOfOthers(*req.ModelName, c.Team.ID) {
			return store.Row{}, forbiddenf("model_name %s is served by models outside team %s: a team admin names its team's models apart", *req.ModelName, c.Team.ID)
		}
	}
	return a.CreateModel(ctx, req)
}

// EditModelAs is EditModel for c: under ScopeOwn only a model of the team the caller
// administers (another is "Model with id=<id> not found", as an absent one), kept in it.
func (a *Admin) EditModelAs(ctx context.Context, c Caller, id string, req ModelInput) (store.Row, error) {
	if c.Scope != ScopeAll {
		if tid, err := a.modelTeam(ctx, id); err != nil {
			return store.Row{}, err
		} else if !c.TeamAdmin() || tid != c.Team.ID {
			return store.Row{}, modelNotFound(id)
		}
		if _, err := c.ownModelTeam(req.ModelInfo, true); err != nil {
			return store.Row{}, err
		}
		if req.ModelName != nil && a.groupOfOthers(*req.ModelName, c.Team.ID) {
			return store.Row{}, forbiddenf("model_name %s is served by models outside team %s: a team admin names its team's models apart", *req.ModelName, c.Team.ID)
		}
	}
	return a.EditModel(ctx, id, req)
}

// DeleteModelAs is DeleteModel for c: under ScopeOwn only a model of the team the caller
// administers (another is "Model with id=<id> not found").
func (a *Admin) DeleteModelAs(ctx context.Context, c Caller, id string) error {
	if c.Scope != ScopeAll && id != "" {
		if tid, err := a.modelTeam(ctx, id); err != nil {
			return err
		} else if !c.TeamAdmin() || tid != c.Team.ID {
			return modelNotFound(id)
		}
	}
	return a.DeleteModel(ctx, id)
}

// groupOfOthers reports whether model group name has a deployment that is not team teamID's:
// a team admin may not add its own deployment to such a group (it would take a share of
// every caller's traffic to that name).
func (a *Admin) groupOfOthers(name, teamID string) bool {
	for _, e := range a.router.Models().Load().ByName(name) {
		var info struct {
			TeamID string `json:"team_id"`
		}
		_ = json.Unmarshal(e.Value.ModelInfo, &info)
		if info.TeamID != teamID {
			return true
		}
	}
	return false
}

// grantsSpendRoutes reports whether a permissions value grants get_spend_routes.
func grantsSpendRoutes(raw json.RawMessage) bool {
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m["get_spend_routes"] == true
}
