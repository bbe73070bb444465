package api

// LiteLLM's unified access groups (LiteLLM_AccessGroupTable; management_endpoints/
// access_group_endpoints.py): the HTTP side of /v1/access_group and its alias
// /v1/unified_access_group; the use-cases are admin/unified_access_groups.go. Bodies are
// LiteLLM's AccessGroupCreateRequest / AccessGroupUpdateRequest (litellm/types/
// access_group.py), answers its AccessGroupResponse: access_group_id, access_group_name,
// description, access_model_names, access_mcp_server_ids, access_agent_ids,
// assigned_team_ids, assigned_key_ids, created_at, created_by, updated_at, updated_by. Errors
// use the {"detail": {"error": msg}} envelope of the admin routes.
//
// Not the older /access_group/* routes (access_groups.go): those tag deployments with a
// model-group name and keep no row.

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
)

// unifiedGroupFields are AccessGroupUpdateRequest's fields (every one optional);
// AccessGroupCreateRequest is the same with access_group_name required.
var unifiedGroupFields = fields{
	"access_group_name": fString, "description": fString, "access_model_names": fStrings,
	"access_mcp_server_ids": fStrings, "access_agent_ids": fStrings, "assigned_team_ids": fStrings,
	"assigned_key_ids": fStrings,
}

// maxGroupList bounds each list of a group write (a hostile body cannot make one write touch
// an unbounded number of rows).
const maxGroupList = 1000

func (s *Server) unifiedGroupRoutes() {
	for _, base := range []string{"/v1/access_group", "/v1/unified_access_group"} {
		s.detailRoute(http.MethodPost, base, "access groups", s.unifiedGroupNew)
		s.detailRoute(http.MethodGet, base, "access groups", s.unifiedGroupList)
		s.detailRoute(http.MethodGet, base+"/:id", "access groups", s.unifiedGroupGet)
		s.detailRoute(http.MethodPut, base+"/:id", "access groups", s.unifiedGroupUpdate)
		s.detailRoute(http.MethodDelete, base+"/:id", "access groups", s.unifiedGroupDelete)
	}
}

// decodeUnifiedGroup decodes a create (create: access_group_name required) or update body.
// Each list holds at most maxGroupList non-blank strings; a null list is [] (LiteLLM's update
// turns None into []); access_group_name, when given, is a non-blank string. Errors: 400
// naming the field.
func (s *Server) decodeUnifiedGroup(c echo.Context, create bool) (mgmt.AccessGroupWrite, error) {
	if err := s.requireDB(mgmt.TypeAccessGroup, "access groups"); err != nil {
		return mgmt.AccessGroupWrite{}, err
	}
	body, err := decodeFields(c, unifiedGroupFields)
	if err != nil {
		return mgmt.AccessGroupWrite{}, err
	}
	req := mgmt.AccessGroupWrite{Vals: mgmt.Values{}}
	if raw, ok := body["access_group_name"]; ok || create {
		name := str(body, "access_group_name")
		if !ok || isNull(raw) || strings.TrimSpace(name) == "" {
			return req, detailErr(http.StatusBadRequest, "access_group_name is required and must be a non-blank string")
		}
		req.Vals["access_group_name"] = name
	}
	if raw, ok := body["description"]; ok {
		if isNull(raw) {
			req.Vals["description"] = nil
		} else {
			req.Vals["description"] = str(body, "description")
		}
	}
	for _, name := range []string{"access_model_names", "access_mcp_server_ids", "access_agent_ids", "assigned_team_ids", "assigned_key_ids"} {
		if _, ok := body[name]; !ok {
			continue
		}
		l := strs(body, name)
		if l == nil {
			l = []string{}
		}
		if len(l) > maxGroupList {
			return req, detailErr(http.StatusBadRequest, "%s: at most %d entries, got %d", name, maxGroupList, len(l))
		}
		for i, v := range l {
			if strings.TrimSpace(v) == "" {
				return req, detailErr(http.StatusBadRequest, "%s[%d] must be a non-blank string", name, i)
			}
		}
		switch name {
		case "assigned_team_ids":
			req.Teams = &l
		case "assigned_key_ids":
			req.Keys = &l
		default:
			b, _ := json.Marshal(l)
			req.Vals[name] = b
		}
	}
	return req, nil
}

// unifiedGroupJSON is a group as LiteLLM's AccessGroupResponse.
func unifiedGroupJSON(v mgmt.AccessGroupView) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(v.Row.Data, &m); err != nil {
		return nil, err
	}
	delete(m, "version")
	m["assigned_key_ids"], m["assigned_team_ids"] = nonNil(v.Keys), nonNil(v.Teams)
	return m, nil
}

func unifiedGroupOK(c echo.Context, status int, v mgmt.AccessGroupView) error {
	m, err := unifiedGroupJSON(v)
	if err != nil {
		return err
	}
	return c.JSON(status, m)
}

// unifiedGroupNew: POST /v1/access_group → 201 with the new group. 409 for a name in use; 400
// for unknown assigned team or key ids.
func (s *Server) unifiedGroupNew(c echo.Context) error {
	req, err := s.decodeUnifiedGroup(c, true)
	if err != nil {
		return err
	}
	v, err := s.mgmt.NewUnifiedGroup(c.Request().Context(), mgmtCaller(caller(c)), req)
	if err != nil {
		return err
	}
	return unifiedGroupOK(c, http.StatusCreated, v)
}

// unifiedGroupUpdate: PUT /v1/access_group/{id} → 200 with the group. 404 unknown.
func (s *Server) unifiedGroupUpdate(c echo.Context) error {
	req, err := s.decodeUnifiedGroup(c, false)
	if err != nil {
		return err
	}
	v, err := s.mgmt.UpdateUnifiedGroup(c.Request().Context(), mgmtCaller(caller(c)), c.Param("id"), req)
	if err != nil {
		return err
	}
	return unifiedGroupOK(c, http.StatusOK, v)
}

// unifiedGroupGet: GET /v1/access_group/{id} → the group. 404 unknown.
func (s *Server) unifiedGroupGet(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAccessGroup, "access groups"); err != nil {
		return err
	}
	v, err := s.mgmt.UnifiedGroup(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return unifiedGroupOK(c, http.StatusOK, v)
}

// unifiedGroupList: GET /v1/access_group → every group, newest first, a bare array.
func (s *Server) unifiedGroupList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAccessGroup, "access groups"); err != nil {
		return err
	}
	vs, err := s.mgmt.UnifiedGroups(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(vs))
	for _, v := range vs {
		m, err := unifiedGroupJSON(v)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, out)
}

// unifiedGroupDelete: DELETE /v1/access_group/{id} → 204; the group leaves every key and team
// first. 404 unknown.
func (s *Server) unifiedGroupDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAccessGroup, "access groups"); err != nil {
		return err
	}
	if err := s.mgmt.DeleteUnifiedGroup(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
