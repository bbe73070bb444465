package call

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"lockstep/pkg/accounts"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// refresh re-reads the caller's key, team and user from the registries (newer versions may
// have been applied since the request was authenticated).
func (p *Pipeline) refresh(c Caller) Caller {
	if c.Key == nil {
		return c
	}
	if p.Keys != nil {
		if e, ok := p.Keys.Load().ByID(c.Key.Token); ok {
			c.Key = e.Value
		}
	}
	if c.Key.TeamID != "" && p.Teams != nil {
		if e, ok := p.Teams.Load().ByID(c.Key.TeamID); ok {
			c.Team = e.Value
		}
	}
	if c.Key.UserID != "" && p.Users != nil {
		if e, ok := p.Users.Load().ByID(c.Key.UserID); ok {
			c.User = e.Value
		}
	}
	return c
}

// teamsChanged is closed at the next change of the teams registry (never, without one).
func (p *Pipeline) teamsChanged() <-chan struct{} {
	if p.Teams == nil {
		return nil
	}
	return p.Teams.Changed()
}

// endUserHeaders are the request headers naming the end user, in LiteLLM's order.
var endUserHeaders = [...]string{"X-Litellm-Customer-Id", "X-Litellm-End-User-Id"}

// endUserFields are the request body fields naming the end user, in LiteLLM's order after the
// headers: the OpenAI "user" parameter, Anthropic-style litellm_metadata.user, the generic
// metadata.user_id (the Anthropic messages API's own field) and the responses API's
// safety_identifier. They are read in one pass with the other members the pipeline reads
// (Fields.endUser).
var endUserFields = [...]string{"user", "litellm_metadata.user", "metadata.user_id", "safety_identifier"}

// endUserID is the end user (LiteLLM's customer) a call is made for, first match wins (LiteLLM
// "Customers / End-Users"): the x-litellm-customer-id header, the x-litellm-end-user-id
// header, then the body fields endUserFields (string values only). "" when none names one.
func endUserID(h http.Header, rf *Fields) string {
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
// one is refused: *EndUserBlocked (403 `End user <id> is blocked.`).
func (p *Pipeline) endUser(h http.Header, rf *Fields) (string, *accounts.EndUser, error) {
	if p.EndUsers == nil {
		return "", nil, nil
	}
	id := endUserID(h, rf)
	if id == "" {
		return "", nil, nil
	}
	e, ok := p.EndUsers.Load().ByID(id)
	if !ok {
		return id, nil, nil
	}
	eu := e.Value
	if eu.Blocked {
		return "", nil, &EndUserBlocked{ID: id}
	}
	return id, eu, nil
}

// checkAccess is step 3: a virtual key may call model only if its models name it (or one of
// the group's access groups), and so must its team's or user's (Caller.CanUse). A denied
// key is re-checked once against newer versions of the key and team (and, for a model group,
// of its deployments; see recheckAccess). For a direct target (an agent with its own
// upstream) the same rule applies to model with no access groups.
func (p *Pipeline) checkAccess(ctx context.Context, who Caller, model string, t target) (target, error) {
	if who.CanUse(model, t.group) {
		return t, nil
	}
	group, err := p.recheckAccess(ctx, who, model, t.direct == nil)
	if err != nil {
		return target{}, err
	}
	if t.direct == nil {
		t.group = group
	}
	return t, nil
}

// recheckAccess runs when a virtual key is denied a model: this replica may hold an older
// version of the key (models just widened), of its team, of the group's deployments (access
// group just tagged) or of a unified access group the key or team names than the writer
// committed. It re-reads them once through the
// bounded read-throughs (same budgets, fail closed; the model group only when isGroup); if
// that does not settle it (budget exhausted), it waits up to accessRecheckWait for the change
// feed to publish newer versions, then the denial stands: *AccessDenied (401
// key_model_access_denied or team_model_access_denied); a key blocked or expired meanwhile
// is a *KeyUnusable.
func (p *Pipeline) recheckAccess(ctx context.Context, who Caller, model string, isGroup bool) ([]*registry.Entry[*router.Deployment], error) {
	check := func() ([]*registry.Entry[*router.Deployment], Caller, bool) {
		cur := p.refresh(who)
		if !isGroup {
			return nil, cur, cur.CanUse(model, nil)
		}
		group := p.Router.Lookup(model)
		return group, cur, len(group) > 0 && cur.CanUse(model, group)
	}
	_ = p.Keys.Resolve(ctx, who.Key.Token)
	if who.Key.TeamID != "" && p.Teams != nil {
		_ = p.Teams.Resolve(ctx, who.Key.TeamID)
	}
	var groupsChanged <-chan struct{}
	if who.Groups != nil {
		for _, id := range p.refresh(who).MissingGroups() { // access groups attached on another replica just now
			_ = who.Groups.Resolve(ctx, id)
		}
	}
	var modelsChanged <-chan struct{}
	if isGroup {
		_ = p.Router.Models().Resolve(ctx, model)
	}
	timer := time.NewTimer(accessRecheckWait)
	defer timer.Stop()
	for {
		keysChanged, teamsChanged := p.Keys.Changed(), p.teamsChanged()
		if who.Groups != nil {
			groupsChanged = who.Groups.Changed()
		}
		if isGroup {
			modelsChanged = p.Router.Models().Changed()
		}
		group, cur, ok := check()
		if why := cur.Key.Usable(time.Now()); why != "" {
			return nil, &KeyUnusable{Why: why}
		}
		if ok {
			return group, nil
		}
		select {
		case <-keysChanged:
		case <-modelsChanged:
		case <-teamsChanged:
		case <-groupsChanged:
		case <-timer.C:
			return nil, cur.accessDenied(model, group)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// accessRecheckWait bounds how long a denied key waits for newer key/model versions.
const accessRecheckWait = 100 * time.Millisecond
