package admin

// Projects as objects (LiteLLM's /project/* routes, management_endpoints/project_endpoints.py,
// and LiteLLM_ProjectTable, read at BerriAI/litellm commit 0c755a805b27f977913bbcc6c93b82a77cbf7889):
// gateway.projects rows (sql/020), a registry on the change feed like every other. A project
// belongs to a team and sits between it and the keys that link it by project_id (kept in the
// key's litellm_fields); its limits live in a budget row (gateway.budgets) it links by budget_id,
// which /project/new creates from max_budget, soft_budget, tpm_limit, rpm_limit,
// max_parallel_requests, model_max_budget and budget_duration when no budget_id is given, and
// /project/update changes (LiteLLM _create_budget_for_project, update_project). The call
// pipeline holds a project's keys to the project's models, blocked flag, budget and limits
// (pkg/api lookupOwners, pkg/call Caller.CanUse and Governance).
//
// Who may call (LiteLLM _check_user_permission_for_project): the proxy admin, or an admin of
// the project's team for /project/new and /project/update; /project/delete is the proxy
// admin's alone; /project/info and /project/list are the proxy admin's (and
// proxy_admin_viewer's) or, for a member of the key's team, that team's projects.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"lockstep/pkg/accounts"
	"lockstep/pkg/keys"
	"lockstep/pkg/store"
)

// ProjectInput is a /project/new or /project/update body as decoded (LiteLLM NewProjectRequest,
// UpdateProjectRequest).
type ProjectInput struct {
	// ID is project_id ("" on /project/new: a uuid is made, as LiteLLM does).
	ID string
	// TeamID is team_id ("" not given; required on /project/new).
	TeamID string
	// BudgetID links an existing budget instead of making one ("" not given).
	BudgetID string
	// Cols are the project's own column values: project_alias, description, models, blocked,
	// metadata, model_rpm_limit, model_tpm_limit (team_id and budget_id are set from the
	// fields above).
	Cols store.Values
	// Budget are the budget column values given (max_budget, soft_budget, tpm_limit,
	// rpm_limit, max_parallel_requests, model_max_budget, budget_duration).
	Budget store.Values
}

// MaxProjectDeletes bounds /project/delete's project_ids (each is locked and its keys scanned
// in the one transaction). Source: none in LiteLLM (unbounded there); "bounded loops".
const MaxProjectDeletes = 100

func projectNotFound(id string) error {
	return notFound("Project not found, project_id=%s", id)
}

// NewProject is /project/new: in one transaction the project's team is read FOR SHARE (404
// `Team not found, team_id=<id>`), the caller's permission and the project's limits against the
// team's are checked (checkProjectTeam), the budget is made (or the budget_id given is locked)
// and the project inserted. Errors: Invalid naming the field (team_id missing, a duplicate
// project_id `Project id = <id> already exists. Please use a different project id.`, an unknown
// budget_id, budget fields sent with a budget_id), Forbidden, NotFound, the store's.
func (a *Admin) NewProject(ctx context.Context, c Caller, in ProjectInput) (store.Row, error) {
	if in.TeamID == "" {
		return store.Row{}, invalid("team_id", "team_id is required")
	}
	if err := checkProjectID("project_id", in.ID); err != nil {
		return store.Row{}, err
	}
	if err := CheckBudgetID(in.BudgetID); err != nil {
		return store.Row{}, err
	}
	if in.BudgetID != "" && len(in.Budget) > 0 {
		return store.Row{}, invalid(firstKey(in.Budget), "%s cannot be sent with budget_id: the project's limits are that budget's (change them with /budget/update)", firstKey(in.Budget))
	}
	id := in.ID
	if id == "" {
		id = uuid.NewString()
	}
	vals := store.Values{}
	for k, v := range in.Cols {
		vals[k] = v
	}
	vals["project_id"], vals["team_id"] = id, in.TeamID
	vals["created_by"], vals["updated_by"] = budgetBy(c), budgetBy(c)
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		if err := checkProjectTeam(ctx, w, c, in.TeamID, in, "create"); err != nil {
			return err
		}
		if _, err := w.tx.GetForShare(ctx, store.Project, id); err == nil {
			return invalid("project_id", "Project id = %s already exists. Please use a different project id.", id)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		budgetID, err := projectBudget(ctx, w, c, in)
		if err != nil {
			return err
		}
		vals["budget_id"] = budgetID
		row, err = w.Insert(ctx, store.Project, vals)
		if errors.Is(err, store.ErrConflict) {
			return invalid("project_id", "Project id = %s already exists. Please use a different project id.", id)
		}
		return err
	})
	return row, err
}

// projectBudget is the budget_id of a new project: the one given, read FOR SHARE (Invalid
// `Budget not found, passed budget_id=<id>`), else a new budget row made of in.Budget in the
// same transaction (LiteLLM _create_budget_for_project, which makes one even with no limits).
func projectBudget(ctx context.Context, w *Writer, c Caller, in ProjectInput) (string, error) {
	if in.BudgetID != "" {
		if _, err := w.tx.GetForShare(ctx, store.Budget, in.BudgetID); errors.Is(err, store.ErrNotFound) {
			return "", invalid("budget_id", "Budget not found, passed budget_id=%s", in.BudgetID)
		} else if err != nil {
			return "", err
		}
		return in.BudgetID, nil
	}
	b := store.Values{}
	for k, v := range in.Budget {
		b[k] = v
	}
	b["budget_id"] = uuid.NewString()
	if err := budgetResetAt(b); err != nil {
		return "", err
	}
	b["created_by"], b["updated_by"] = budgetBy(c), budgetBy(c)
	if _, err := w.Insert(ctx, store.Budget, b); err != nil {
		return "", err
	}
	return b["budget_id"].(string), nil
}

// UpdateProject is /project/update: the given fields change, in one transaction with the
// project row locked. Budget fields change the project's budget row (one is made and linked
// when the project has none); team_id moves the project to that team, checked as on create
// against the team the project ends up in. Errors: Invalid "project_id is required", NotFound
// `Project not found, project_id=<id>` or the team's, Forbidden `Only admins or team admins can
// update projects`, checkProjectTeam's, the store's.
func (a *Admin) UpdateProject(ctx context.Context, c Caller, in ProjectInput) (store.Row, error) {
	if in.ID == "" {
		return store.Row{}, invalid("project_id", "project_id is required")
	}
	if in.BudgetID != "" {
		return store.Row{}, invalid("budget_id", "budget_id cannot be changed by /project/update: send the limits (max_budget, tpm_limit, ...) to change the project's budget")
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		cur, err := w.GetForUpdate(ctx, store.Project, in.ID)
		if errors.Is(err, store.ErrNotFound) {
			return projectNotFound(in.ID)
		} else if err != nil {
			return err
		}
		p, err := accounts.BuildProjectRow(cur)
		if err != nil {
			return err
		}
		oldTeam := ""
		if p.TeamID != nil {
			oldTeam = *p.TeamID
		}
		if !c.Admin() && !c.adminOfTeam(oldTeam) {
			return &Forbidden{Msg: "Only admins or team admins can update projects"}
		}
		team := oldTeam
		if in.TeamID != "" {
			team = in.TeamID
		}
		if team != "" {
			if err := checkProjectTeam(ctx, w, c, team, in, "update"); err != nil {
				return err
			}
		}
		vals := store.Values{}
		for k, v := range in.Cols {
			vals[k] = v
		}
		if in.TeamID != "" {
			vals["team_id"] = in.TeamID
		}
		vals["updated_by"] = budgetBy(c)
		if len(in.Budget) > 0 {
			if bid := p.Budget(); bid != "" {
				b := store.Values{"updated_by": budgetBy(c)}
				for k, v := range in.Budget {
					b[k] = v
				}
				if _, err := w.Update(ctx, store.Budget, bid, b); errors.Is(err, store.ErrNotFound) {
					return invalid("budget_id", "Budget not found, passed budget_id=%s", bid)
				} else if err != nil {
					return err
				}
			} else {
				if vals["budget_id"], err = projectBudget(ctx, w, c, ProjectInput{Budget: in.Budget}); err != nil {
					return err
				}
			}
		}
		row, err = w.Update(ctx, store.Project, in.ID, vals)
		return err
	})
	return row, err
}

// DeleteProjects is /project/delete {"project_ids": [...]}: the deleted rows, in the order
// given, all in one transaction (every id deleted or none). Each project is locked FOR UPDATE
// before its keys are looked for, so a key generated for it concurrently (which reads the
// project FOR SHARE) either commits first and is found, or finds the project gone. Errors:
// Invalid "project_ids is required", NotFound `Project not found, project_id=<id>`, Invalid
// `Cannot delete project <id>: key(s) are associated with it (<key> ...). Please delete or
// reassign the keys first.` (LiteLLM's rule), the store's.
func (a *Admin) DeleteProjects(ctx context.Context, ids []string) ([]store.Row, error) {
	if len(ids) == 0 {
		return nil, invalid("project_ids", "project_ids is required: a list of project ids")
	}
	if len(ids) > MaxProjectDeletes {
		return nil, invalid("project_ids", "project_ids lists at most %d projects, got %d", MaxProjectDeletes, len(ids))
	}
	var out []store.Row
	err := a.Write(ctx, func(w *Writer) error {
		out = out[:0]
		for _, id := range ids {
			row, err := w.GetForUpdate(ctx, store.Project, id)
			if errors.Is(err, store.ErrNotFound) {
				return projectNotFound(id)
			} else if err != nil {
				return err
			}
			links, err := w.tx.ProjectKeys(ctx, id)
			if err != nil {
				return err
			}
			if len(links) > 0 {
				return invalid("project_ids", "Cannot delete project %s: key(s) are associated with it (%s). Please delete or reassign the keys first.", id, strings.Join(links, ", "))
			}
			if _, err := w.Delete(ctx, store.Project, id); err != nil {
				return err
			}
			out = append(out, row)
		}
		return nil
	})
	return out, err
}

// Project reads one project for c: the proxy admin (or proxy_admin_viewer) reads every
// project, anyone else only a project of its key's team that its user is a member of (LiteLLM
// project_info; another team's project answers 404 as an absent one). NotFound
// `Project not found, project_id=<id>`.
func (a *Admin) Project(ctx context.Context, c Caller, id string) (store.Row, error) {
	row, err := a.st.Get(ctx, store.Project, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, projectNotFound(id)
	} else if err != nil {
		return store.Row{}, err
	}
	if c.Scope != ScopeAll && !c.seesProject(row) {
		return store.Row{}, projectNotFound(id)
	}
	return row, nil
}

// Projects reads the projects c sees (Project's rule), oldest first (/project/list).
func (a *Admin) Projects(ctx context.Context, c Caller) ([]store.Row, error) {
	rows, err := a.st.List(ctx, store.Project)
	if err != nil || c.Scope == ScopeAll {
		return rows, err
	}
	out := rows[:0]
	for _, r := range rows {
		if c.seesProject(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// seesProject reports whether c, not an admin, sees project row: its team is the caller's key's
// team and the caller's user is a member of it.
func (c Caller) seesProject(row store.Row) bool {
	p, err := accounts.BuildProjectRow(row)
	if err != nil || p.TeamID == nil {
		return false
	}
	return c.Team != nil && c.Team.ID == *p.TeamID && c.TeamRole() != ""
}

// adminOfTeam reports whether c is an admin of team id (the key's team, its user's role admin).
func (c Caller) adminOfTeam(id string) bool {
	return id != "" && c.Team != nil && c.Team.ID == id && c.TeamAdmin()
}

// checkProjectTeam reads team id FOR SHARE in w (so it cannot be deleted before the project
// commits; NotFound `Team not found, team_id=<id>`), checks that c may act on its projects (the
// proxy admin or the team's admin; Forbidden `Only admins or team admins can <what> projects.
// Your role is <role>`), and holds in's limits to the team's (LiteLLM _check_team_project_limits):
// max_budget and soft_budget non-negative, soft_budget below max_budget, every model in the
// team's models (unless the team's list is empty or has all-proxy-models), max_budget, tpm_limit
// and rpm_limit at most the team's. Errors name the field.
func checkProjectTeam(ctx context.Context, w *Writer, c Caller, id string, in ProjectInput, what string) error {
	row, err := w.tx.GetForShare(ctx, store.Team, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("Team not found, team_id=%s", id)
	} else if err != nil {
		return err
	}
	if !c.Admin() && !c.adminOfTeam(id) {
		return &Forbidden{Msg: fmt.Sprintf("Only admins or team admins can %s projects. Your role is %s", what, c.Role())}
	}
	t, err := accounts.BuildTeamRow(row)
	if err != nil {
		return err
	}
	num := func(n string) (float64, bool) {
		switch v := in.Budget[n].(type) {
		case float64:
			return v, true
		case int64:
			return float64(v), true
		}
		return 0, false
	}
	maxB, hasMax := num("max_budget")
	soft, hasSoft := num("soft_budget")
	if hasMax && maxB < 0 {
		return invalid("max_budget", "max_budget cannot be negative. Received: %v", maxB)
	}
	if hasSoft && soft < 0 {
		return invalid("soft_budget", "soft_budget cannot be negative. Received: %v", soft)
	}
	if hasMax && hasSoft && soft >= maxB {
		return invalid("soft_budget", "soft_budget (%v) must be strictly lower than max_budget (%v)", soft, maxB)
	}
	if models, ok := in.Cols["models"].([]string); ok && len(t.Models) > 0 && !slices.Contains(t.Models, keys.AllProxyModels) {
		for _, m := range models {
			if !slices.Contains(t.Models, m) {
				return invalid("models", "Model '%s' not in team's allowed models. Team allowed models=%s. Team: %s", m, pyStrings(t.Models), t.ID)
			}
		}
	}
	if hasMax && t.MaxBudget != nil && maxB > *t.MaxBudget {
		return invalid("max_budget", "Project max_budget (%v) exceeds team's max_budget (%v). Team: %s", maxB, *t.MaxBudget, t.ID)
	}
	for n, lim := range map[string]*int64{"tpm_limit": t.TPMLimit, "rpm_limit": t.RPMLimit} {
		if v, ok := num(n); ok && lim != nil && v > float64(*lim) {
			return invalid(n, "Project %s (%v) exceeds team's %s (%d). Team: %s", n, v, n, *lim, t.ID)
		}
	}
	return nil
}

// pyStrings is a list as Python prints it (['a', 'b']), as LiteLLM's messages show lists.
func pyStrings(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = "'" + s + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// firstKey is the name of vals' first column in name order ("" for none).
func firstKey(vals store.Values) string {
	first := ""
	for k := range vals {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}

// checkProjectID refuses a project_id that is blank (whitespace only) or has control
// characters; "" passes (as unset). Source: none in LiteLLM (which stores any string); the
// project's "bad input gets a 400".
func checkProjectID(what, id string) error {
	if id == "" {
		return nil
	}
	if strings.TrimSpace(id) == "" {
		b, _ := json.Marshal(id)
		return invalid(what, "%s must be a non-blank string, got %s", what, b)
	}
	return checkPolicyName(what, id)
}

// lockLinkedProject runs before every insert or update of a key with vals: when vals link a
// project (litellm_fields.project_id, a non-empty string), the project row is read FOR SHARE
// in the write's own transaction, so a concurrent DeleteProjects (FOR UPDATE, then
// ProjectKeys) either waits for this write and sees the key, or deletes first and this write
// sees the project gone: a key of a missing project can never commit. Errors: Invalid
// `Project not found, project_id=<id>` naming project_id, the store's.
func (w *Writer) lockLinkedProject(ctx context.Context, typ store.ObjectType, vals store.Values) error {
	if typ != store.Key {
		return nil
	}
	raw := litellmFieldsRaw(vals)
	if raw == nil {
		return nil
	}
	var lf struct {
		ProjectID *string `json:"project_id"`
	}
	if json.Unmarshal(raw, &lf) != nil || lf.ProjectID == nil || *lf.ProjectID == "" {
		return nil
	}
	if err := checkProjectID("project_id", *lf.ProjectID); err != nil {
		return err
	}
	if _, err := w.tx.GetForShare(ctx, store.Project, *lf.ProjectID); errors.Is(err, store.ErrNotFound) {
		return invalid("project_id", "Project not found, project_id=%s", *lf.ProjectID)
	} else if err != nil {
		return fmt.Errorf("project %q: %w", *lf.ProjectID, err)
	}
	return nil
}
