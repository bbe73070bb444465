package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/catalogue"
	"lockstep/pkg/keys"
)

// Budgets as objects (LiteLLM's /budget/* routes; the use-cases are admin/budgets.go): decoding
// and answers. Errors use LiteLLM's {"detail": {"error": msg}} envelope. A budget row is
// answered as LiteLLM's LiteLLM_BudgetTable: budget_id, max_budget, soft_budget,
// max_parallel_requests, tpm_limit, rpm_limit, model_max_budget, budget_duration,
// budget_reset_at, created_at, created_by, updated_at, updated_by.

// budgetCols are the writable columns of a budget besides budget_id (LiteLLM's
// BudgetNewRequest; model_max_budget as keys.ParseModelBudgets reads it).
var budgetCols = fields{
	"max_budget": fNumber, "soft_budget": fNumber, "max_parallel_requests": fInt, "tpm_limit": fInt,
	"rpm_limit": fInt, "budget_duration": fDuration, "budget_reset_at": fString, "model_max_budget": fObject,
}

func (s *Server) budgetRoutes() {
	s.detailRoute(http.MethodPost, "/budget/new", "budgets", s.budgetNew)
	s.detailRoute(http.MethodPost, "/budget/update", "budgets", s.budgetUpdate)
	s.detailRoute(http.MethodPost, "/budget/info", "budgets", s.budgetInfo)
	s.detailRoute(http.MethodGet, "/budget/list", "budgets", s.budgetList)
	s.detailRoute(http.MethodGet, "/budget/settings", "budgets", s.budgetSettings)
	s.detailRoute(http.MethodPost, "/budget/delete", "budgets", s.budgetDelete)
}

// decodeBudget decodes /budget/new and /budget/update: the body and the budget's column
// values. budget_reset_at is an ISO 8601 / RFC 3339 time (400 naming it otherwise).
func (s *Server) decodeBudget(c echo.Context) (map[string]json.RawMessage, mgmt.Values, error) {
	if err := s.requireDB(mgmt.TypeBudget, "budgets"); err != nil {
		return nil, nil, err
	}
	body, _, err := decodeFieldsModel(c, budgetCols.with(fields{"budget_id": fString}), catalogue.BudgetNew)
	if err != nil {
		return nil, nil, err
	}
	if _, err := keys.ParseModelBudgets(body["model_max_budget"]); err != nil {
		return nil, nil, badRequest("%v", err)
	}
	vals, err := columnValues(body, budgetCols)
	if err != nil {
		return nil, nil, err
	}
	if at, ok := vals["budget_reset_at"].(string); ok {
		t, err := parseISOTime(at)
		if err != nil {
			return nil, nil, badRequest("budget_reset_at must be an ISO 8601 date-time (2025-01-31T00:00:00Z), got %q", at)
		}
		vals["budget_reset_at"] = t
	}
	return body, vals, nil
}

// parseISOTime reads RFC 3339, or an ISO 8601 date-time without a zone (UTC), as Python's
// datetime.fromisoformat writes them.
func parseISOTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
}

// budgetJSON is a budget row as LiteLLM answers it (without the row version).
func budgetJSON(r mgmt.Row) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	return m, nil
}

func budgetsJSON(rows []mgmt.Row) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := budgetJSON(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func budgetOK(c echo.Context, r mgmt.Row) error {
	m, err := budgetJSON(r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// budgetNew: POST /budget/new {"budget_id"?, "max_budget"?, ...} → the new row (200). A
// duplicate id: 400 `Budget with id '<id>' already exists.`
func (s *Server) budgetNew(c echo.Context) error { return s.budgetWrite(c, s.mgmt.NewBudget) }

// budgetUpdate: POST /budget/update {"budget_id", ...} → the updated row. Unknown id: 404.
func (s *Server) budgetUpdate(c echo.Context) error { return s.budgetWrite(c, s.mgmt.UpdateBudget) }

// budgetWrite decodes a /budget/new or /budget/update body and answers the row write made of
// it (the use-case's errors as the error table maps them).
func (s *Server) budgetWrite(c echo.Context, write func(context.Context, mgmt.Caller, string, mgmt.Values) (mgmt.Row, error)) error {
	body, vals, err := s.decodeBudget(c)
	if err != nil {
		return err
	}
	row, err := write(c.Request().Context(), mgmtCaller(caller(c)), str(body, "budget_id"), vals)
	if err != nil {
		return err
	}
	return budgetOK(c, row)
}

// budgetInfo: POST /budget/info {"budgets": [ids]} → the rows found, a bare array (LiteLLM
// BudgetRequest, find_many).
func (s *Server) budgetInfo(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeBudget, "budgets"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"budgets": fStrings})
	if err != nil {
		return err
	}
	rows, err := s.mgmt.BudgetsByID(c.Request().Context(), strs(body, "budgets"))
	if err != nil {
		return err
	}
	out, err := budgetsJSON(rows)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// budgetList: GET /budget/list → every budget, oldest first, a bare array.
func (s *Server) budgetList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeBudget, "budgets"); err != nil {
		return err
	}
	rows, err := s.mgmt.Budgets(c.Request().Context())
	if err != nil {
		return err
	}
	out, err := budgetsJSON(rows)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// budgetSettingFields are LiteLLM's budget_settings allowed_args, in BudgetNewRequest's field
// order, with their field_type.
var budgetSettingFields = []struct{ name, typ string }{
	{"soft_budget", "Float"}, {"max_budget", "Float"}, {"max_parallel_requests", "Integer"},
	{"tpm_limit", "Integer"}, {"rpm_limit", "Integer"}, {"model_max_budget", "Object"}, {"budget_duration", "String"},
}

// budgetSettings: GET /budget/settings?budget_id= → LiteLLM's ConfigList rows, one per
// configurable field: {"field_name", "field_type", "field_description", "field_value" (the
// budget's, null when unset or the budget is unknown), "stored_in_db": true,
// "field_default_value": null}. 400 without budget_id.
func (s *Server) budgetSettings(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeBudget, "budgets"); err != nil {
		return err
	}
	id := c.QueryParam("budget_id")
	if id == "" {
		return detailErr(http.StatusBadRequest, "budget_id query parameter is required")
	}
	cur := map[string]any{}
	if row, err := s.mgmt.Budget(c.Request().Context(), id); err == nil {
		if cur, err = budgetJSON(row); err != nil {
			return err
		}
	} else if nf := (*mgmt.NotFound)(nil); !errors.As(err, &nf) {
		return err
	}
	out := make([]map[string]any, 0, len(budgetSettingFields))
	for _, f := range budgetSettingFields {
		out = append(out, map[string]any{"field_name": f.name, "field_type": f.typ, "field_description": "",
			"field_value": cur[f.name], "stored_in_db": true, "field_default_value": nil})
	}
	return c.JSON(http.StatusOK, out)
}

// budgetDelete: POST /budget/delete {"id"} → the deleted row. Unknown: 404; still linked
// from an object: 400 naming it.
func (s *Server) budgetDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeBudget, "budgets"); err != nil {
		return err
	}
	body, err := decodeFields(c, fields{"id": fString})
	if err != nil {
		return err
	}
	row, err := s.mgmt.DeleteBudget(c.Request().Context(), str(body, "id"))
	if err != nil {
		return err
	}
	return budgetOK(c, row)
}

// checkBudgetLink refuses a blank budget_id (in a request's LiteLLM fields lf) before any
// write: 400 `budget_id must be a non-blank string, got "<id>"`. Whether the budget exists is
// checked inside the write's transaction, under a lock (admin Writer.lockLinkedBudget).
func (s *Server) checkBudgetLink(_ context.Context, lf map[string]json.RawMessage) error {
	raw, ok := lf["budget_id"]
	if !ok || isNull(raw) {
		return nil
	}
	var id string
	_ = json.Unmarshal(raw, &id) // kind-checked by the catalogue (String)
	return mgmt.CheckBudgetID(id)
}

// linkedBudgetTable is the budget row an object's budget_id (as its answer carries it) names,
// as LiteLLM's litellm_budget_table; nil when the object links none (or the budget is gone).
func (s *Server) linkedBudgetTable(ctx context.Context, id any) (map[string]any, error) {
	bid, _ := id.(string)
	if bid == "" {
		return nil, nil
	}
	row, err := s.mgmt.Budget(ctx, bid)
	if nf := (*mgmt.NotFound)(nil); errors.As(err, &nf) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return budgetJSON(row)
}
