package api

// Access groups (LiteLLM proxy "model access groups",
// litellm/proxy/management_endpoints/model_access_group_management_endpoints.py): the HTTP
// side; the use-cases and how a write works are admin/access_groups.go.

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
)

func (s *Server) accessGroupRoutes() {
	s.detailRoute(http.MethodPost, "/access_group/new", "access groups", s.accessGroupNew)
	s.detailRoute(http.MethodGet, "/access_group/list", "access groups", s.accessGroupList)
	s.detailRoute(http.MethodGet, "/access_group/:group/info", "access groups", s.accessGroupInfo)
	s.detailRoute(http.MethodPut, "/access_group/:group/update", "access groups", s.accessGroupUpdate)
	s.detailRoute(http.MethodDelete, "/access_group/:group/delete", "access groups", s.accessGroupDelete)
}

// groupParam is the {group} path segment, percent-decoded (unescapeParams).
func groupParam(c echo.Context) (string, error) {
	g := c.Param("group")
	if strings.TrimSpace(g) == "" {
		return "", detailErr(http.StatusBadRequest, "access_group is required and cannot be empty")
	}
	return g, nil
}

func membershipResponse(group string, r mgmt.AccessGroupResult) map[string]any {
	return map[string]any{"access_group": group, "model_names": nonNil(r.Names), "model_ids": nonNil(r.IDs), "models_updated": r.Updated}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// accessGroupNew: POST /access_group/new {"access_group", "model_names"? | "model_ids"?} →
// {"access_group", "model_names", "model_ids", "models_updated"} where model_names/model_ids
// describe the group's deployments and models_updated counts the rows written.
// 400 empty name or selection, unknown models ("Model(s) not found: a, b", after a
// read-through), config-only models; 409 when the group exists.
func (s *Server) accessGroupNew(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	var req mgmt.AccessGroupRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	res, err := s.mgmt.CreateAccessGroup(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, membershipResponse(req.AccessGroup, res))
}

// accessGroupUpdate: PUT /access_group/{g}/update {"model_names"? | "model_ids"?} — the
// group's membership becomes exactly the selection (deployments no longer selected are untagged).
// Same answer and 400s as /access_group/new; 404 when the group does not exist.
func (s *Server) accessGroupUpdate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	group, err := groupParam(c)
	if err != nil {
		return err
	}
	var req mgmt.AccessGroupRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	res, err := s.mgmt.ReplaceAccessGroup(c.Request().Context(), group, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, membershipResponse(group, res))
}

// accessGroupDelete: DELETE /access_group/{g}/delete — untags every DB deployment →
// {"access_group", "models_updated", "message"}; 404 when the group does not exist.
func (s *Server) accessGroupDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	group, err := groupParam(c)
	if err != nil {
		return err
	}
	res, err := s.mgmt.DeleteAccessGroup(c.Request().Context(), group)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"access_group": group, "models_updated": res.Updated,
		"message": fmt.Sprintf("Access group '%s' deleted successfully", group),
	})
}

// accessGroupList: GET /access_group/list → {"access_groups": [{"access_group", "model_names",
// "model_ids", "deployment_count"}]} sorted by name (LiteLLM's ListAccessGroupsResponse, plus ids).
func (s *Server) accessGroupList(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	groups, err := s.mgmt.AccessGroups(c.Request().Context())
	if err != nil {
		return err
	}
	list := make([]*mgmt.AccessGroupInfo, 0, len(groups))
	for _, gi := range groups {
		list = append(list, gi)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].AccessGroup < list[j].AccessGroup })
	return c.JSON(http.StatusOK, map[string]any{"access_groups": list})
}

// accessGroupInfo: GET /access_group/{g}/info → {"access_group", "model_names", "model_ids",
// "deployment_count"}; 404 when no DB deployment carries the group.
func (s *Server) accessGroupInfo(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	group, err := groupParam(c)
	if err != nil {
		return err
	}
	gi, err := s.mgmt.AccessGroup(c.Request().Context(), group)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, gi)
}
