package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/catalogue"
	"lockstep/pkg/keys"
)

// Projects as objects (LiteLLM's /project/* routes, management_endpoints/project_endpoints.py;
// the use-cases are admin/projects.go): decoding and answers. Errors use LiteLLM's
// {"detail": {"error": msg}} envelope. A project is answered as LiteLLM's LiteLLM_ProjectTable
// with its budget included: project_id, project_alias, description, team_id, budget_id,
// metadata, models, model_rpm_limit, model_tpm_limit, blocked, spend (USD, the project's current
// budget period, every replica's calls), model_spend ({}: not kept per model), object_permission
// (null), created_at, created_by, updated_at, updated_by, litellm_budget_table (the linked
// budget row, /budget/info's shape; null when none).
//
//	POST   /project/new      the new project
//	POST   /project/update   the updated project
//	GET    /project/info     ?project_id= → the project
//	GET    /project/list     [project...], oldest first
//	DELETE /project/delete   {"project_ids": [...]} → [deleted project...]

// projectCols are the project's own writable columns (LiteLLM NewProjectRequest /
// UpdateProjectRequest less the budget fields); model_rpm_limit and model_tpm_limit are
// {"<model group>": n} objects (checked as the catalogue's IntMap).
var projectCols = fields{
	"project_alias": fString, "description": fString, "models": fStrings, "blocked": fBool,
	"metadata": fObject, "model_rpm_limit": fObject, "model_tpm_limit": fObject,
}

// projectBudgetCols are the budget fields a project write carries (LiteLLM moves them to the
// project's LiteLLM_BudgetTable row).
var projectBudgetCols = fields{
	"max_budget": fNumber, "soft_budget": fNumber, "max_parallel_requests": fInt, "tpm_limit": fInt,
	"rpm_limit": fInt, "budget_duration": fDuration, "model_max_budget": fObject,
}

// projectFields are every field of the two request models. tags go into metadata.tags
// (LiteLLM's _set_object_metadata_field); object_permission is not supported yet (any value
// but LiteLLM's default is a 400 naming it).
var projectFields = projectCols.with(projectBudgetCols).with(fields{
	"project_id": fString, "team_id": fString, "budget_id": fString, "tags": fStrings, "object_permission": fAny,
})

func (s *Server) projectRoutes() {
	s.detailRoute(http.MethodPost, "/project/new", "projects", s.projectNew)
	s.detailRoute(http.MethodPost, "/project/update", "projects", s.projectUpdate)
	s.detailRoute(http.MethodGet, "/project/info", "projects", s.projectInfo)
	s.detailRoute(http.MethodGet, "/project/list", "projects", s.projectList)
	s.detailRoute(http.MethodDelete, "/project/delete", "projects", s.projectDelete)
}

// decodeProject decodes a /project/new or /project/update body. Errors (400, naming the
// field): the strict decoder's, a bad model_rpm_limit / model_tpm_limit / model_max_budget, a
// non-default object_permission.
func (s *Server) decodeProject(c echo.Context) (mgmt.ProjectInput, error) {
	var in mgmt.ProjectInput
	if err := s.requireDB(mgmt.TypeProject, "projects"); err != nil {
		return in, err
	}
	body, err := decodeFields(c, projectFields)
	if err != nil {
		return in, err
	}
	if raw, ok := body["object_permission"]; ok && !isDefault(raw) {
		return in, notYetField("object_permission")
	}
	for _, n := range []string{"model_rpm_limit", "model_tpm_limit"} {
		if err := checkCatalogueKind(n, catalogue.IntMap, body[n]); body[n] != nil && err != nil {
			return in, err
		}
	}
	if _, err := keys.ParseModelBudgets(body["model_max_budget"]); err != nil {
		return in, badRequest("%v", err)
	}
	if in.Cols, err = columnValues(body, projectCols); err != nil {
		return in, err
	}
	if in.Budget, err = columnValues(body, projectBudgetCols); err != nil {
		return in, err
	}
	if raw, ok := body["tags"]; ok && !isNull(raw) {
		md := map[string]json.RawMessage{}
		if m, ok := body["metadata"]; ok && !isNull(m) {
			_ = json.Unmarshal(m, &md) // kind-checked: an object
		}
		md["tags"] = raw
		b, _ := json.Marshal(md)
		in.Cols["metadata"] = b
	}
	in.ID, in.TeamID, in.BudgetID = str(body, "project_id"), str(body, "team_id"), str(body, "budget_id")
	return in, nil
}

// projectJSON is a project row as LiteLLM answers it: the row (without its version) with its
// spend, model_spend, object_permission and litellm_budget_table.
func (s *Server) projectJSON(ctx context.Context, r mgmt.Row) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	m["spend"] = s.ownerSpend(ctx, mgmt.OwnerToken("project", r.ID))
	m["model_spend"] = map[string]any{}
	m["object_permission"] = nil
	bt, err := s.linkedBudgetTable(ctx, m["budget_id"])
	if err != nil {
		return nil, err
	}
	m["litellm_budget_table"] = bt
	return m, nil
}

// projectNew: POST /project/new {"team_id", "project_id"?, "project_alias"?, "description"?,
// "models"?, "budget_id"? | "max_budget"?, "soft_budget"?, "tpm_limit"?, "rpm_limit"?,
// "max_parallel_requests"?, "model_max_budget"?, "budget_duration"?, "model_rpm_limit"?,
// "model_tpm_limit"?, "metadata"?, "tags"?, "blocked"?} → the new project (200). 400 naming the
// field (team_id missing, a duplicate project_id, limits above the team's, a model outside the
// team's); 404 an unknown team; 403 a caller that is neither the proxy admin nor the team's
// admin.
func (s *Server) projectNew(c echo.Context) error {
	return s.projectWrite(c, s.mgmt.NewProject)
}

// projectUpdate: POST /project/update {"project_id", ...the fields to change} → the updated
// project. 404 an unknown project or team; 400 as /project/new.
func (s *Server) projectUpdate(c echo.Context) error {
	return s.projectWrite(c, s.mgmt.UpdateProject)
}

func (s *Server) projectWrite(c echo.Context, write func(context.Context, mgmt.Caller, mgmt.ProjectInput) (mgmt.Row, error)) error {
	in, err := s.decodeProject(c)
	if err != nil {
		return err
	}
	row, err := write(c.Request().Context(), mgmtCaller(caller(c)), in)
	if err != nil {
		return err
	}
	return s.projectOK(c, row)
}

// projectOK answers with one project.
func (s *Server) projectOK(c echo.Context, row mgmt.Row) error {
	m, err := s.projectJSON(c.Request().Context(), row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// projectInfo: GET /project/info?project_id= → the project. 400 without project_id; 404
// unknown (or another team's, for a non-admin).
func (s *Server) projectInfo(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeProject, "projects"); err != nil {
		return err
	}
	id := c.QueryParam("project_id")
	if id == "" {
		return detailErr(http.StatusBadRequest, "project_id query parameter is required")
	}
	row, err := s.mgmt.Project(c.Request().Context(), mgmtCaller(caller(c)), id)
	if err != nil {
		return err
	}
	return s.projectOK(c, row)
}

// projectList: GET /project/list → the projects the caller sees, a bare array, oldest first.
func (s *Server) projectList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeProject, "projects"); err != nil {
		return err
	}
	rows, err := s.mgmt.Projects(c.Request().Context(), mgmtCaller(caller(c)))
	if err != nil {
		return err
	}
	return s.projectsOK(c, rows)
}

func (s *Server) projectsOK(c echo.Context, rows []mgmt.Row) error {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := s.projectJSON(c.Request().Context(), r)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, out)
}

// projectDelete: DELETE /project/delete {"project_ids": [...]} → the deleted projects (every one
// or none). 404 an unknown id; 400 naming project_ids for a project that still has keys.
func (s *Server) projectDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeProject, "projects"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"project_ids": fStrings})
	if err != nil {
		return err
	}
	rows, err := s.mgmt.DeleteProjects(c.Request().Context(), strs(body, "project_ids"))
	if err != nil {
		return err
	}
	return s.projectsOK(c, rows)
}
