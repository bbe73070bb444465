package call

import (
	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// Caller is who makes a call, as authentication found it (pkg/api's auth): the master key
// (Admin, every other field nil) or a virtual key with its team, internal user and
// organization (nil: none, or not found for the user). It is a value: passed to Start in
// Spec.Caller and to the A2A completer in a2a.Call.Caller, never through a context.
type Caller struct {
	Admin bool
	Key   *keys.Key
	Team  *accounts.Team
	User  *accounts.User
	Org   *accounts.Organization
	// Project is the key's project (keys.Extra.ProjectID, sql/020; nil: none).
	Project *accounts.Project
	// Groups are LiteLLM's unified access groups as this replica holds them (sql/016), where
	// the key's and team's access_group_ids are resolved (nil: none resolve).
	Groups *registry.Registry[*accounts.AccessGroup]
}

// roleProxyAdmin is LiteLLM's user_role of an admin user (may use team-scoped models).
const roleProxyAdmin = "proxy_admin"

// Aliased maps the model name a call sends to the model group that serves it: the caller's
// team's model_aliases first, then its key's aliases, each applied once when the name is in
// it (LiteLLM litellm_pre_call_utils: _update_model_if_team_alias_exists, then
// _update_model_if_key_alias_exists, which rewrite data["model"] before routing, so access,
// limits, spend and the route all see the real group). The master key and a key without
// aliases keep the name; no allocation either way.
func (p Caller) Aliased(model string) string {
	if p.Key == nil {
		return model
	}
	if p.Team != nil {
		if m, ok := p.Team.Fields.ModelAliases[model]; ok && m != "" {
			model = m
		}
	}
	if m, ok := p.Key.X().Aliases[model]; ok && m != "" {
		model = m
	}
	if rs := p.RouterSettings(); rs != nil {
		if m, ok := rs.ModelGroupAlias[model]; ok && m != "" {
			model = m
		}
	}
	return model
}

// RouterSettings are the caller's per-call router settings: its key's router_settings when
// it has any, else its team's (LiteLLM _get_hierarchical_router_settings: key > team, never
// merged); nil for the master key and a caller with none.
func (p Caller) RouterSettings() *router.CallerSettings {
	if p.Key == nil {
		return nil
	}
	if p.Key.X().RouterSettings != nil {
		return p.Key.X().RouterSettings
	}
	if p.Team != nil {
		return p.Team.RouterSettings
	}
	return nil
}

// CanUse reports whether the caller may call model group name (whose deployments are group):
// the admin may use every model; a virtual key only what its own models list allows and, for
// a team key, what its team's list allows too (the intersection, LiteLLM can_key_call_model
// then can_team_access_model); a personal key (no team) of an internal user is also bound by
// the user's models list. A group holding a team-scoped deployment (model_info.team_id) is
// usable only by keys of that team and proxy_admin users (teamModelsOK).
func (p Caller) CanUse(name string, group []*registry.Entry[*router.Deployment]) bool {
	if p.Key == nil {
		return true
	}
	if !p.teamModelsOK(group) {
		return false
	}
	if pub := p.TeamPublicName(group); pub != "" {
		name = pub // a team model is checked under the name its team calls it by (LiteLLM checks before the alias)
	}
	return p.ListsAllow(name, GroupAccess(group))
}

// ListsAllow reports whether the caller's models lists (its key's, then its team's or, for a
// personal key, its user's), each with its unified access groups, allow model group name whose
// deployments are in the access groups ag (CanUse without the team-model rule).
func (p Caller) ListsAllow(name string, ag func(func(string) bool)) bool {
	if p.Key == nil {
		return true
	}
	if !p.listAllows(p.Key.Models, p.Key.X().AccessGroupIDs, name, ag) {
		return false
	}
	if p.Project != nil && !p.Project.CanUse(name, ag) {
		return false // LiteLLM can_project_access_model
	}
	if p.Team != nil {
		return p.listAllows(p.Team.Models, p.Team.Fields.AccessGroupIDs, name, ag)
	}
	if p.User != nil {
		return p.User.CanUse(name, ag)
	}
	return true
}

// listAllows is a key's or team's model check with its unified access groups groupIDs
// (LiteLLM auth_checks.py can_key_call_model / can_team_access_model): without groups, the
// models list alone (keys.ListAllows); with groups and no models of its own, only the groups'
// access_model_names (a key narrowed to its groups; no group resolving, or none naming a
// model, allows nothing); with both, the models list, else the groups' models (the groups
// widen it). A group id this replica does not hold grants nothing.
func (p Caller) listAllows(models, groupIDs []string, name string, ag func(func(string) bool)) bool {
	if len(groupIDs) == 0 {
		return keys.ListAllows(models, name, ag)
	}
	if len(models) > 0 && keys.ListAllows(models, name, ag) {
		return true
	}
	return p.groupsAllow(groupIDs, name, ag)
}

// groupsAllow reports whether one of the groups groupIDs lists model group name (or one of its
// access groups, or a wildcard matching it) in its access_model_names.
func (p Caller) groupsAllow(groupIDs []string, name string, ag func(func(string) bool)) bool {
	if p.Groups == nil {
		return false
	}
	snap := p.Groups.Load()
	for _, id := range groupIDs {
		if e, ok := snap.ByID(id); ok && len(e.Value.Models) > 0 && keys.ListAllows(e.Value.Models, name, ag) {
			return true
		}
	}
	return false
}

// GroupAgents are the agent ids of the unified access groups groupIDs as this replica holds
// them (LiteLLM _get_agent_ids_from_access_groups; nil: none).
func (p Caller) GroupAgents(groupIDs []string) []string {
	if p.Groups == nil || len(groupIDs) == 0 {
		return nil
	}
	snap := p.Groups.Load()
	var out []string
	for _, id := range groupIDs {
		if e, ok := snap.ByID(id); ok {
			out = append(out, e.Value.Agents...)
		}
	}
	return out
}

// MissingGroups lists the ids among the key's and its team's access_group_ids this replica
// does not hold (for a read-through before a denial stands).
func (p Caller) MissingGroups() []string {
	if p.Key == nil || p.Groups == nil {
		return nil
	}
	ids := p.Key.X().AccessGroupIDs
	if p.Team != nil {
		ids = append(ids[:len(ids):len(ids)], p.Team.Fields.AccessGroupIDs...)
	}
	snap := p.Groups.Load()
	var out []string
	for _, id := range ids {
		if _, ok := snap.ByID(id); !ok {
			out = append(out, id)
		}
	}
	return out
}

// teamModelsOK reports whether every team-scoped deployment of group (router.Deployment.TeamID,
// LiteLLM's model_info.team_id) belongs to the caller's key's team, or the caller is a
// proxy_admin user (the master key never gets here). LiteLLM serves a team model only to its
// team's keys; others get the usual access denial. One string comparison per deployment when
// no team models exist.
func (p Caller) teamModelsOK(group []*registry.Entry[*router.Deployment]) bool {
	for _, e := range group {
		if tid := e.Value.TeamID; tid != "" && tid != p.Key.TeamID {
			return p.User != nil && p.User.Role != nil && *p.User.Role == roleProxyAdmin
		}
	}
	return true
}

// TeamPublicName is the name the caller's team calls group by when group is one of the team's
// own models (router.Deployment.TeamPublicName, LiteLLM's team_public_model_name); "" else.
func (p Caller) TeamPublicName(group []*registry.Entry[*router.Deployment]) string {
	if p.Key == nil || p.Key.TeamID == "" || len(group) == 0 {
		return ""
	}
	if d := group[0].Value; d.TeamID == p.Key.TeamID {
		return d.TeamPublicName
	}
	return ""
}

// accessDenied is the refusal of a model the caller may not use, naming the list that refused
// it (AccessDenied: LiteLLM's "key not allowed to access model. ..." with type
// key_model_access_denied, "team not allowed to access model. ..." with type
// team_model_access_denied; answered 401).
func (p Caller) accessDenied(model string, group []*registry.Entry[*router.Deployment]) error {
	ag := GroupAccess(group)
	if p.Key != nil && p.teamModelsOK(group) && p.listAllows(p.Key.Models, p.Key.X().AccessGroupIDs, model, ag) {
		if p.Project != nil && !p.Project.CanUse(model, ag) {
			return &AccessDenied{Scope: "project", Allowed: p.Project.Models, Model: model}
		}
		if p.Team != nil {
			return &AccessDenied{Scope: "team", Allowed: p.Team.Models, Model: model}
		}
		if p.User != nil {
			return &AccessDenied{Scope: "user", Allowed: p.User.Models, Model: model}
		}
	}
	var models []string
	if p.Key != nil {
		models = p.Key.Models
	}
	return &AccessDenied{Scope: "key", Allowed: models, Model: model}
}

// GroupAccess iterates the access groups of a model group's deployments.
func GroupAccess(group []*registry.Entry[*router.Deployment]) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, e := range group {
			for _, g := range e.Value.AccessGroups {
				if !yield(g) {
					return
				}
			}
		}
	}
}
