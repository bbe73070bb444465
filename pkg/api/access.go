package api

import (
	"context"
	"fmt"
	"net/http"

	"lockstep/pkg/registry"
)

// lookupOwners loads the team, project and user a virtual key belongs to (read-through on a
// miss) and refuses the key when its team or project does not exist or is blocked, or its user
// or the team's organization is blocked (LiteLLM refuses keys of deleted or blocked teams, and
// of blocked projects: `Project=<id> is blocked. ...`). The key's
// organization is its team's, else its own organization_id (refused when absent or blocked),
// else its user's.
func (s *Server) lookupOwners(ctx context.Context, p *principal) error {
	k := p.Key
	if k.TeamID != "" {
		t, ok := lookupAccount(ctx, s.Teams, k.TeamID)
		if !ok {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, team %s of this key does not exist (deleted?).", k.TeamID))
		}
		if t.Blocked {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, team %s is blocked.", k.TeamID))
		}
		p.Team = t
		if t.OrganizationID != nil && *t.OrganizationID != "" {
			if o, ok := lookupAccount(ctx, s.Organizations, *t.OrganizationID); ok {
				if o.Blocked {
					return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s is blocked.", o.ID))
				}
				p.Org = o
			}
		}
	}
	if p.Org == nil && k.X().OrganizationID != "" {
		// the key's own organization (LiteLLM key organization_id; a team key's is its team's)
		o, ok := lookupAccount(ctx, s.Organizations, k.X().OrganizationID)
		if !ok {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s of this key does not exist (deleted?).", k.X().OrganizationID))
		}
		if o.Blocked {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s is blocked.", o.ID))
		}
		p.Org = o
	}
	if pid := k.X().ProjectID; pid != "" {
		// the key's project (LiteLLM key project_id; auth_checks.py _run_project_checks): a
		// project that does not exist fails closed, a blocked one refuses every call
		pr, ok := lookupAccount(ctx, s.Projects, pid)
		if !ok {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, project %s of this key does not exist (deleted?).", pid))
		}
		if pr.Blocked {
			return authErr(http.StatusUnauthorized, fmt.Sprintf("Project=%s is blocked. Update via `/project/update` if you're an admin.", pid))
		}
		// its limits are its budget's: read through too, so a project (and its budget) just
		// made on another replica holds at once; a budget gone (psql) fails closed
		if bid := pr.Budget(); bid != "" && s.Budgets != nil {
			if _, ok := lookupAccount(ctx, s.Budgets, bid); !ok {
				return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, budget %s of project %s does not exist (deleted?).", bid, pid))
			}
		}
		p.Project = pr
	}
	if k.UserID != "" {
		if u, ok := lookupAccount(ctx, s.Users, k.UserID); ok {
			if u.Blocked {
				return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, user %s is blocked.", k.UserID))
			}
			p.User = u
			if p.Org == nil && u.OrganizationID != nil && *u.OrganizationID != "" {
				if o, ok := lookupAccount(ctx, s.Organizations, *u.OrganizationID); ok {
					if o.Blocked {
						return authErr(http.StatusUnauthorized, fmt.Sprintf("Authentication Error, organization %s is blocked.", o.ID))
					}
					p.Org = o
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
