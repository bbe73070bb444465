package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"lockstep/pkg/accounts"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// canUse reports whether the caller may call model group name (whose deployments are group):
// the admin may use every model; a virtual key only what its own models list allows and, for
// a team key, what its team's list allows too (the intersection, LiteLLM can_key_call_model
// then can_team_access_model); a personal key (no team) of an internal user is also bound by
// the user's models list. A group holding a team-scoped deployment (model_info.team_id) is
// usable only by keys of that team and proxy_admin users (teamModelsOK).
func (p principal) canUse(name string, group []*registry.Entry[*router.Deployment]) bool {
	if p.key == nil {
		return true
	}
	if !p.teamModelsOK(group) {
		return false
	}
	ag := groupAccess(group)
	if !p.key.CanUse(name, ag) {
		return false
	}
	if p.team != nil {
		return p.team.CanUse(name, ag)
	}
	if p.user != nil {
		return p.user.CanUse(name, ag)
	}
	return true
}

// teamModelsOK reports whether every team-scoped deployment of group (router.Deployment.TeamID,
// LiteLLM's model_info.team_id) belongs to the caller's key's team, or the caller is a
// proxy_admin user (the master key never gets here). LiteLLM serves a team model only to its
// team's keys; others get the usual access denial. One string comparison per deployment when
// no team models exist.
func (p principal) teamModelsOK(group []*registry.Entry[*router.Deployment]) bool {
	for _, e := range group {
		if tid := e.Value.TeamID; tid != "" && tid != p.key.TeamID {
			return p.user != nil && p.user.Role != nil && *p.user.Role == roleProxyAdmin
		}
	}
	return true
}

// accessDenied is the refusal of a model the caller may not use, naming the list that refused
// it (pipeline.AccessDenied: LiteLLM's "key not allowed to access model. ..." with type
// key_model_access_denied, "team not allowed to access model. ..." with type
// team_model_access_denied; answered 401).
func (p principal) accessDenied(model string, group []*registry.Entry[*router.Deployment]) error {
	ag := groupAccess(group)
	if p.key != nil && p.teamModelsOK(group) && p.key.CanUse(model, ag) {
		if p.team != nil {
			return &pipeline.AccessDenied{Scope: "team", Allowed: p.team.Models, Model: model}
		}
		if p.user != nil {
			return &pipeline.AccessDenied{Scope: "user", Allowed: p.user.Models, Model: model}
		}
	}
	var models []string
	if p.key != nil {
		models = p.key.Models
	}
	return &pipeline.AccessDenied{Scope: "key", Allowed: models, Model: model}
}

// refresh re-reads the caller's key, team and user from the registries (newer versions may
// have been applied since the request was authenticated).
func (s *Server) refresh(p principal) principal {
	if p.key == nil {
		return p
	}
	if e, ok := s.Keys.Load().ByID(p.key.Token); ok {
		p.key = e.Value
	}
	if p.key.TeamID != "" && s.Teams != nil {
		if e, ok := s.Teams.Load().ByID(p.key.TeamID); ok {
			p.team = e.Value
		}
	}
	if p.key.UserID != "" && s.Users != nil {
		if e, ok := s.Users.Load().ByID(p.key.UserID); ok {
			p.user = e.Value
		}
	}
	return p
}

// teamsChanged is closed at the next change of the teams registry (never, without one).
func (s *Server) teamsChanged() <-chan struct{} {
	if s.Teams == nil {
		return nil
	}
	return s.Teams.Changed()
}

// lookupOwners loads the team and the user a virtual key belongs to (read-through on a miss)
// and refuses the key when its team does not exist or is blocked, or its user or the team's
// organization is blocked (LiteLLM refuses keys of deleted or blocked teams). The key's
// organization is its team's, else its own organization_id (refused when absent or blocked),
// else its user's.
func (s *Server) lookupOwners(ctx context.Context, p *principal) error {
	k := p.key
	if k.TeamID != "" {
		t, ok := lookupAccount(ctx, s.Teams, k.TeamID)
		if !ok {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, team %s of this key does not exist (deleted?).", k.TeamID))
		}
		if t.Blocked {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, team %s is blocked.", k.TeamID))
		}
		p.team = t
		if t.OrganizationID != nil && *t.OrganizationID != "" {
			if o, ok := lookupAccount(ctx, s.Organizations, *t.OrganizationID); ok {
				if o.Blocked {
					return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s is blocked.", o.ID))
				}
				p.org = o
			}
		}
	}
	if p.org == nil && k.OrganizationID != "" {
		// the key's own organization (LiteLLM key organization_id; a team key's is its team's)
		o, ok := lookupAccount(ctx, s.Organizations, k.OrganizationID)
		if !ok {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s of this key does not exist (deleted?).", k.OrganizationID))
		}
		if o.Blocked {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s is blocked.", o.ID))
		}
		p.org = o
	}
	if k.UserID != "" {
		if u, ok := lookupAccount(ctx, s.Users, k.UserID); ok {
			if u.Blocked {
				return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, user %s is blocked.", k.UserID))
			}
			p.user = u
			if p.org == nil && u.OrganizationID != nil && *u.OrganizationID != "" {
				if o, ok := lookupAccount(ctx, s.Organizations, *u.OrganizationID); ok {
					if o.Blocked {
						return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s is blocked.", o.ID))
					}
					p.org = o
				}
			}
		}
	}
	return nil
}

// lookupAccount finds id in reg, with a read-through on a miss.
func lookupAccount[T any](ctx context.Context, reg *registry.Registry[T], id string) (T, bool) {
	var zero T
	if reg == nil {
		return zero, false
	}
	if e, ok := reg.Load().ByID(id); ok {
		return e.Value, true
	}
	if reg.Resolve(ctx, id) != nil {
		return zero, false
	}
	if e, ok := reg.Load().ByID(id); ok {
		return e.Value, true
	}
	return zero, false
}

// endUserHeaders are the request headers naming the end user, in LiteLLM's order.
var endUserHeaders = [...]string{"X-Litellm-Customer-Id", "X-Litellm-End-User-Id"}

// endUserFields are the request body fields naming the end user, in LiteLLM's order after the
// headers: the OpenAI "user" parameter, Anthropic-style litellm_metadata.user, the generic
// metadata.user_id (the Anthropic messages API's own field) and the responses API's
// safety_identifier. They are read in one pass with the other members the pipeline reads
// (requestFields.endUser).
var endUserFields = [...]string{"user", "litellm_metadata.user", "metadata.user_id", "safety_identifier"}

// endUserID is the end user (LiteLLM's customer) a call is made for, first match wins (LiteLLM
// "Customers / End-Users"): the x-litellm-customer-id header, the x-litellm-end-user-id
// header, then the body fields endUserFields (string values only). "" when none names one.
func endUserID(h http.Header, rf *requestFields) string {
	for _, name := range endUserHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return v
		}
	}
	for _, u := range rf.endUser {
		if u.Type == gjson.String && u.Str != "" {
			return strings.Clone(u.Str) // u aliases the request body
		}
	}
	return ""
}

// endUser reads the end user a call is made for (endUserID: a header or a body field), looked
// up in the end users registry as this replica holds it. It never reads Postgres on the
// request path: clients send arbitrary "user" values (the OpenAI SDKs pass them through), and
// most name no end user, so a read-through or barrier per call would tax every such request;
// an end user written anywhere is applied here by the change feed within milliseconds. An end
// user that does not exist is not an error (LiteLLM tracks its spend all the same); a blocked
// one is refused: 403 `End user <id> is blocked.`.
func (s *Server) endUser(h http.Header, rf *requestFields) (string, *accounts.EndUser, error) {
	if s.EndUsers == nil {
		return "", nil, nil
	}
	id := endUserID(h, rf)
	if id == "" {
		return "", nil, nil
	}
	e, ok := s.EndUsers.Load().ByID(id)
	if !ok {
		return id, nil, nil
	}
	eu := e.Value
	if eu.Blocked {
		return "", nil, errf(http.StatusForbidden, "permission_error", "End user %s is blocked.", id)
	}
	return id, eu, nil
}

// checkAccess is step 3: a virtual key may call model only if its models name it (or one of
// the group's access groups), and so must its team's or user's (principal.canUse). A denied
// key is re-checked once against newer versions of the key and team (and, for a model group,
// of its deployments; see recheckAccess). For a direct target (an agent with its own
// upstream) the same rule applies to model with no access groups.
func (s *Server) checkAccess(ctx context.Context, who principal, model string, t target) (target, error) {
	if who.canUse(model, t.group) {
		return t, nil
	}
	group, err := s.recheckAccess(ctx, who, model, t.direct == nil)
	if err != nil {
		return target{}, err
	}
	if t.direct == nil {
		t.group = group
	}
	return t, nil
}

// recheckAccess runs when a virtual key is denied a model: this replica may hold an older
// version of the key (models just widened), of its team, or of the group's deployments
// (access group just tagged) than the writer committed. It re-reads them once through the
// bounded read-throughs (same budgets, fail closed; the model group only when isGroup); if
// that does not settle it (budget exhausted), it waits up to accessRecheckWait for the change
// feed to publish newer versions, then the denial stands: 401 key_model_access_denied (or
// team_model_access_denied).
func (s *Server) recheckAccess(ctx context.Context, p principal, model string, isGroup bool) ([]*registry.Entry[*router.Deployment], error) {
	check := func() ([]*registry.Entry[*router.Deployment], principal, bool) {
		cur := s.refresh(p)
		if !isGroup {
			return nil, cur, cur.canUse(model, nil)
		}
		group := s.Router.Lookup(model)
		return group, cur, len(group) > 0 && cur.canUse(model, group)
	}
	_ = s.Keys.Resolve(ctx, p.key.Token)
	if p.key.TeamID != "" && s.Teams != nil {
		_ = s.Teams.Resolve(ctx, p.key.TeamID)
	}
	var modelsChanged <-chan struct{}
	if isGroup {
		_ = s.Router.Models().Resolve(ctx, model)
	}
	timer := time.NewTimer(accessRecheckWait)
	defer timer.Stop()
	for {
		keysChanged, teamsChanged := s.Keys.Changed(), s.teamsChanged()
		if isGroup {
			modelsChanged = s.Router.Models().Changed()
		}
		group, cur, ok := check()
		if why := cur.key.Usable(time.Now()); why != "" {
			return nil, authErr(http.StatusUnauthorized, "Authentication Error, "+why+".")
		}
		if ok {
			return group, nil
		}
		select {
		case <-keysChanged:
		case <-modelsChanged:
		case <-teamsChanged:
		case <-timer.C:
			return nil, cur.accessDenied(model, group)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// accessRecheckWait bounds how long a denied key waits for newer key/model versions.
const accessRecheckWait = 100 * time.Millisecond
