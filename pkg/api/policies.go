package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
)

// Guardrail policies as objects (LiteLLM's /policies routes, policy_engine/policy_endpoints.py;
// the use-cases are admin/policies.go): decoding and answers. Errors use LiteLLM's
// {"detail": {"error": msg}} envelope. A policy is answered as LiteLLM's PolicyDBResponse:
// policy_id, policy_name, inherit, description, guardrails_add, guardrails_remove, condition,
// pipeline (always null here), created_at, updated_at, created_by, updated_by.
//
//	POST   /policies                                   the new policy
//	GET    /policies/list                              {"policies": [policy...], "total_count": n}
//	GET    /policies/:policy_id                        the policy
//	PUT    /policies/:policy_id                        the updated policy
//	DELETE /policies/:policy_id                        {"message": "Policy <id> deleted successfully"}
//	GET    /policies/:policy_id/resolved-guardrails    {"policy_id", "policy_name", "resolved_guardrails": [...]}

// policyFields are the fields of LiteLLM's PolicyCreateRequest and PolicyUpdateRequest.
// condition is {"model": "<exact or regex>" | [...]} (checked by the use-case); pipeline (an
// ordered guardrail pipeline with on_pass/on_fail actions) is not supported yet: any value but
// null is a 400 naming it.
var policyFields = fields{
	"policy_name": fString, "inherit": fString, "description": fString,
	"guardrails_add": fStrings, "guardrails_remove": fStrings, "condition": fAny, "pipeline": fAny,
}

func (s *Server) policyRoutes() {
	s.detailRoute(http.MethodPost, "/policies", "policies", s.policyCreate)
	s.detailRoute(http.MethodGet, "/policies/list", "policies", s.policyList)
	s.detailRoute(http.MethodGet, "/policies/:policy_id", "policies", s.policyGet)
	s.detailRoute(http.MethodPut, "/policies/:policy_id", "policies", s.policyUpdate)
	s.detailRoute(http.MethodDelete, "/policies/:policy_id", "policies", s.policyDelete)
	s.detailRoute(http.MethodGet, "/policies/:policy_id/resolved-guardrails", "policies", s.policyResolved)
}

// decodePolicy decodes a /policies write: the fields given with a value (null is not given:
// LiteLLM's create leaves it unset, its update keeps it).
func (s *Server) decodePolicy(c echo.Context) (mgmt.PolicyInput, error) {
	var in mgmt.PolicyInput
	if err := s.requireDB(mgmt.TypePolicy, "policies"); err != nil {
		return in, err
	}
	body, err := decodeFields(c, policyFields)
	if err != nil {
		return in, err
	}
	if raw, ok := body["pipeline"]; ok && !isNull(raw) {
		return in, badRequest("pipeline is not supported yet: lockstep runs a policy's guardrails_add as independent guardrails; send pipeline: null")
	}
	given := func(n string) bool { raw, ok := body[n]; return ok && !isNull(raw) }
	for n, p := range map[string]**string{"policy_name": &in.Name, "inherit": &in.Inherit, "description": &in.Description} {
		if given(n) {
			v := str(body, n)
			*p = &v
		}
	}
	for n, p := range map[string]**[]string{"guardrails_add": &in.Add, "guardrails_remove": &in.Remove} {
		if given(n) {
			v := strs(body, n)
			if v == nil {
				v = []string{}
			}
			*p = &v
		}
	}
	if given("condition") {
		in.Condition = body["condition"]
	}
	return in, nil
}

// policyJSON is a policy row as LiteLLM answers it (without the row version).
func policyJSON(r mgmt.Row) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	m["pipeline"] = nil
	return m, nil
}

func policyOK(c echo.Context, r mgmt.Row) error {
	m, err := policyJSON(r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, m)
}

// policyCreate: POST /policies {"policy_name", "inherit"?, "description"?, "guardrails_add"?,
// "guardrails_remove"?, "condition"?} → the new policy (200). 400: a duplicate name, a
// guardrail or parent that does not exist, circular inheritance, a bad condition.
func (s *Server) policyCreate(c echo.Context) error {
	return s.policyWrite(c, s.mgmt.NewPolicy)
}

// policyUpdate: PUT /policies/:policy_id with the fields to change → the updated policy.
// Unknown id: 404; renaming a policy in use: 400 naming its users.
func (s *Server) policyUpdate(c echo.Context) error {
	return s.policyWrite(c, func(ctx context.Context, who mgmt.Caller, in mgmt.PolicyInput) (mgmt.Row, error) {
		return s.mgmt.UpdatePolicy(ctx, who, c.Param("policy_id"), in)
	})
}

// policyWrite decodes a /policies write and answers the row write made of it (the
// use-case's errors as the error table maps them).
func (s *Server) policyWrite(c echo.Context, write func(context.Context, mgmt.Caller, mgmt.PolicyInput) (mgmt.Row, error)) error {
	in, err := s.decodePolicy(c)
	if err != nil {
		return err
	}
	row, err := write(c.Request().Context(), mgmtCaller(caller(c)), in)
	if err != nil {
		return err
	}
	return policyOK(c, row)
}

// policyList: GET /policies/list → {"policies": [...], "total_count": n}, oldest first.
func (s *Server) policyList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypePolicy, "policies"); err != nil {
		return err
	}
	rows, err := s.mgmt.Policies(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		m, err := policyJSON(r)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, map[string]any{"policies": out, "total_count": len(out)})
}

// policyGet: GET /policies/:policy_id → the policy; unknown: 404 `Policy with ID <id> not
// found`.
func (s *Server) policyGet(c echo.Context) error {
	if err := s.requireDB(mgmt.TypePolicy, "policies"); err != nil {
		return err
	}
	row, err := s.mgmt.Policy(c.Request().Context(), c.Param("policy_id"))
	if err != nil {
		return err
	}
	return policyOK(c, row)
}

// policyDelete: DELETE /policies/:policy_id → {"message": "Policy <id> deleted successfully"}
// (LiteLLM's text). Unknown: 404; still attached to a key or team or inherited: 400 naming
// them.
func (s *Server) policyDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypePolicy, "policies"); err != nil {
		return err
	}
	id := c.Param("policy_id")
	if _, err := s.mgmt.DeletePolicy(c.Request().Context(), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"message": "Policy " + id + " deleted successfully"})
}

// policyResolved: GET /policies/:policy_id/resolved-guardrails → {"policy_id", "policy_name",
// "resolved_guardrails": [...]} (its inheritance chain's guardrails, conditions aside).
func (s *Server) policyResolved(c echo.Context) error {
	if err := s.requireDB(mgmt.TypePolicy, "policies"); err != nil {
		return err
	}
	id := c.Param("policy_id")
	name, gs, err := s.mgmt.ResolvedGuardrails(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if gs == nil {
		gs = []string{}
	}
	return c.JSON(http.StatusOK, map[string]any{"policy_id": id, "policy_name": name, "resolved_guardrails": gs})
}
