package api

// Access groups (LiteLLM proxy "model access groups",
// litellm/proxy/management_endpoints/model_access_group_management_endpoints.py).
//
// A group has no table of its own: it is a name in model_info.access_groups of one or more
// gateway.models rows, and it exists exactly while some DB row carries it. Keys name groups in
// their models list; the LLM routes and /v1/models resolve them through the models registry.
//
// Writes read and rewrite the rows in one transaction that first locks gateway.models in
// SHARE ROW EXCLUSIVE mode (self-conflicting), so concurrent access-group writers on any replica
// run one after the other and none loses another's tags. A write is all-or-nothing; after commit
// the written rows are applied to the local registry (version-guarded, read-your-writes) and
// reach the other replicas through the change feed. Nothing is reloaded, so a concurrent reload
// can neither fail the write nor stop a model serving.
//
// Config-file models are never written; groups are read from and judged on DB rows only, as
// LiteLLM does (get_all_access_groups_from_db).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

func (s *Server) accessGroupRoutes() {
	s.detailRoute(http.MethodPost, "/access_group/new", "access groups", s.accessGroupNew)
	s.detailRoute(http.MethodGet, "/access_group/list", "access groups", s.accessGroupList)
	s.detailRoute(http.MethodGet, "/access_group/:group/info", "access groups", s.accessGroupInfo)
	s.detailRoute(http.MethodPut, "/access_group/:group/update", "access groups", s.accessGroupUpdate)
	s.detailRoute(http.MethodDelete, "/access_group/:group/delete", "access groups", s.accessGroupDelete)
}

type accessGroupRequest struct {
	AccessGroup string   `json:"access_group"`
	ModelNames  []string `json:"model_names"`
	ModelIDs    []string `json:"model_ids"`
}

// agOp is the kind of membership write.
type agOp int

const (
	agCreate  agOp = iota // the group must not exist yet (409)
	agReplace             // the group must exist (404); membership becomes exactly the selection
	agDelete              // the group must exist (404); no deployment keeps it
)

func (o agOp) String() string {
	switch o {
	case agCreate:
		return "create"
	case agReplace:
		return "update"
	}
	return "delete"
}

// agModel is one gateway.models row as the access-group writer sees it.
type agModel struct {
	row    store.Row
	id     string
	name   string
	info   map[string]json.RawMessage // model_info; nil when it is JSON null
	groups []string                   // model_info.access_groups
	bad    error                      // model_info is not an object, or access_groups not a list of strings
}

func parseModelRow(r store.Row) (agModel, error) {
	var m struct {
		ModelID   string          `json:"model_id"`
		ModelName string          `json:"model_name"`
		ModelInfo json.RawMessage `json:"model_info"`
	}
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return agModel{}, fmt.Errorf("decode model row %q: %w", r.ID, err)
	}
	out := agModel{row: r, id: m.ModelID, name: m.ModelName}
	if isNull(m.ModelInfo) {
		return out, nil
	}
	if err := json.Unmarshal(m.ModelInfo, &out.info); err != nil {
		out.bad = fmt.Errorf("model_info is not a JSON object")
		return out, nil
	}
	if raw, ok := out.info["access_groups"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &out.groups); err != nil {
			out.bad = fmt.Errorf("model_info.access_groups is not a list of strings")
		}
	}
	return out, nil
}

func parseModelRows(rows []store.Row) ([]agModel, error) {
	out := make([]agModel, 0, len(rows))
	for _, r := range rows {
		m, err := parseModelRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// carries reports whether the row is (as far as it can be read) tagged with group.
func (m agModel) carries(group string) bool { return m.bad == nil && slices.Contains(m.groups, group) }

// agSelection is what a new/update request puts in the group: model group names (every DB
// deployment of each) or exactly the listed model ids. LiteLLM: model_ids win when both are given.
type agSelection struct {
	names []string
	ids   []string
}

func selectionOf(req accessGroupRequest) (agSelection, error) {
	dedupe := func(in []string, what string) ([]string, error) {
		var out []string
		for _, v := range in {
			if strings.TrimSpace(v) == "" {
				return nil, detailErr(http.StatusBadRequest, "%s must not contain empty values", what)
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out, nil
	}
	if len(req.ModelIDs) > 0 {
		ids, err := dedupe(req.ModelIDs, "model_ids")
		return agSelection{ids: ids}, err
	}
	if len(req.ModelNames) > 0 {
		names, err := dedupe(req.ModelNames, "model_names")
		return agSelection{names: names}, err
	}
	return agSelection{}, detailErr(http.StatusBadRequest, "Either model_names or model_ids must be provided and non-empty")
}

// readThrough loads the selected models this replica does not hold yet (bounded read-through,
// as an LLM request naming them would), so a model another tool wrote a moment ago is found
// and the writer's registry serves it. The transaction's own read of the table is the final
// word on what exists: a read-through refused by its budget cannot fail the write.
func (s *Server) readThrough(ctx context.Context, sel agSelection) {
	models := s.Router.Models()
	for _, n := range sel.names {
		if len(models.Load().ByName(n)) == 0 {
			_, _ = s.Router.Group(ctx, n)
		}
	}
	for _, id := range sel.ids {
		if _, ok := models.Load().ByID(id); !ok {
			_ = models.Resolve(ctx, id)
		}
	}
}

// targets returns the ids of the DB rows the selection puts in the group, or the 400 that
// refuses it: unknown names/ids first ("Model(s) not found: a, b"), then models that exist only
// in the config file (LiteLLM's messages).
func (s *Server) targets(sel agSelection, models []agModel) (map[string]bool, error) {
	snap := s.Router.Models().Load()
	out := map[string]bool{}
	var notFound []string
	var notInDB error
	for _, n := range sel.names {
		found := false
		for _, m := range models {
			if m.name == n {
				out[m.id], found = true, true
			}
		}
		if found {
			continue
		}
		if len(snap.ByName(n)) == 0 {
			notFound = append(notFound, n)
		} else if notInDB == nil {
			notInDB = detailErr(http.StatusBadRequest, "Can't find model '%s' in Database. Access group management is only supported for database models.", n)
		}
	}
	for _, id := range sel.ids {
		i := slices.IndexFunc(models, func(m agModel) bool { return m.id == id })
		if i >= 0 {
			out[id] = true
			continue
		}
		if e, ok := snap.ByID(id); ok && e.Config {
			if notInDB == nil {
				notInDB = detailErr(http.StatusBadRequest, "Deployment with model_id '%s' is defined in the config file. Access group management is only supported for database models.", id)
			}
			continue
		}
		notFound = append(notFound, id)
	}
	if len(notFound) > 0 {
		return nil, detailErr(http.StatusBadRequest, "Model(s) not found: %s", strings.Join(notFound, ", "))
	}
	if notInDB != nil {
		return nil, notInDB
	}
	return out, nil
}

func withGroup(groups []string, group string, want bool) []string {
	out := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		if g != group {
			out = append(out, g)
		}
	}
	if want {
		out = append(out, group)
	}
	return out
}

// agResult is the outcome of a committed membership write.
type agResult struct {
	names   []string // model group names of the deployments now in the group, sorted
	ids     []string // their model ids, sorted
	updated int      // rows written
}

// writeAccessGroup runs one membership write (see the file comment) and applies the written
// rows locally after commit.
func (s *Server) writeAccessGroup(ctx context.Context, op agOp, group string, sel agSelection) (agResult, error) {
	if op != agDelete {
		s.readThrough(ctx, sel)
	}
	var res agResult
	var written []store.Row
	err := s.Store.Tx(ctx, func(tx *store.TxStore) error {
		if err := tx.LockTable(ctx, store.Model); err != nil {
			return err
		}
		rows, err := tx.List(ctx, store.Model)
		if err != nil {
			return err
		}
		models, err := parseModelRows(rows)
		if err != nil {
			return err
		}
		exists := slices.ContainsFunc(models, func(m agModel) bool { return m.carries(group) })
		if op != agCreate && !exists {
			return groupNotFound(group)
		}
		want := map[string]bool{}
		if op != agDelete {
			if want, err = s.targets(sel, models); err != nil {
				return err
			}
		}
		if op == agCreate && exists {
			return detailErr(http.StatusConflict, "Access group '%s' already exists. Use PUT /access_group/%s/update to modify it.", group, group)
		}
		names := map[string]bool{}
		for _, m := range models {
			if want[m.id] {
				names[m.name] = true
				res.ids = append(res.ids, m.id)
			}
			if want[m.id] == m.carries(group) {
				continue
			}
			if m.bad != nil {
				return detailErr(http.StatusBadRequest, "Can't change the access groups of model %s: %v; fix the row first", m.id, m.bad)
			}
			info := copyInfo(m.info)
			gj, _ := json.Marshal(withGroup(m.groups, group, want[m.id]))
			info["access_groups"] = gj
			ij, err := json.Marshal(info)
			if err != nil {
				return err
			}
			nr, err := tx.Update(ctx, store.Model, m.id, store.Values{"model_info": ij})
			if err != nil {
				return err
			}
			// An invalid new version never replaces a serving one: refuse a tag that would
			// make a buildable deployment unbuildable (nothing is written).
			if _, oldErr := (router.Builder{Deployments: s.Deployments}).BuildRow(m.row); oldErr == nil {
				if _, newErr := (router.Builder{Deployments: s.Deployments}).BuildRow(nr); newErr != nil {
					return detailErr(http.StatusBadRequest, "Can't change the access groups of model %s: the result is not a valid model: %v", m.id, newErr)
				}
			}
			written = append(written, nr)
		}
		for n := range names {
			res.names = append(res.names, n)
		}
		sort.Strings(res.names)
		sort.Strings(res.ids)
		res.updated = len(written)
		return nil
	})
	if err != nil {
		return agResult{}, err
	}
	if len(written) > 0 {
		s.Router.Models().Apply(written, nil) // writer-local apply: read-your-writes
	}
	zerolog.Ctx(ctx).Info().Str("access_group", group).Str("op", op.String()).Int("models_updated", res.updated).Msg("access group written")
	return res, nil
}

// copyInfo copies a model_info object (nil for JSON null).
func copyInfo(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func groupNotFound(group string) *Error {
	return detailErr(http.StatusNotFound, "Access group '%s' not found", group)
}

// groupParam is the {group} path segment, percent-decoded (unescapeParams).
func groupParam(c echo.Context) (string, error) {
	g := c.Param("group")
	if strings.TrimSpace(g) == "" {
		return "", detailErr(http.StatusBadRequest, "access_group is required and cannot be empty")
	}
	return g, nil
}

func membershipResponse(group string, r agResult) map[string]any {
	return map[string]any{"access_group": group, "model_names": nonNil(r.names), "model_ids": nonNil(r.ids), "models_updated": r.updated}
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
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	var req accessGroupRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.AccessGroup) == "" {
		return detailErr(http.StatusBadRequest, "access_group is required and cannot be empty")
	}
	sel, err := selectionOf(req)
	if err != nil {
		return err
	}
	res, err := s.writeAccessGroup(c.Request().Context(), agCreate, req.AccessGroup, sel)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, membershipResponse(req.AccessGroup, res))
}

// accessGroupUpdate: PUT /access_group/{g}/update {"model_names"? | "model_ids"?} — the
// group's membership becomes exactly the selection (deployments no longer selected are untagged).
// Same answer and 400s as /access_group/new; 404 when the group does not exist.
func (s *Server) accessGroupUpdate(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	group, err := groupParam(c)
	if err != nil {
		return err
	}
	var req accessGroupRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	sel, err := selectionOf(req)
	if err != nil {
		return err
	}
	res, err := s.writeAccessGroup(c.Request().Context(), agReplace, group, sel)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, membershipResponse(group, res))
}

// accessGroupDelete: DELETE /access_group/{g}/delete — untags every DB deployment →
// {"access_group", "models_updated", "message"}; 404 when the group does not exist.
func (s *Server) accessGroupDelete(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	group, err := groupParam(c)
	if err != nil {
		return err
	}
	res, err := s.writeAccessGroup(c.Request().Context(), agDelete, group, agSelection{})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{
		"access_group": group, "models_updated": res.updated,
		"message": fmt.Sprintf("Access group '%s' deleted successfully", group),
	})
}

// agInfo is one group as /access_group/list and /info show it.
type agInfo struct {
	AccessGroup     string   `json:"access_group"`
	ModelNames      []string `json:"model_names"` // model group names, sorted
	ModelIDs        []string `json:"model_ids"`   // deployments, sorted
	DeploymentCount int      `json:"deployment_count"`
}

// groupsFromDB reads every group from gateway.models (the source of truth, the same answer on
// every replica).
func (s *Server) groupsFromDB(ctx context.Context) (map[string]*agInfo, error) {
	rows, err := s.Store.List(ctx, store.Model)
	if err != nil {
		return nil, err
	}
	models, err := parseModelRows(rows)
	if err != nil {
		return nil, err
	}
	out := map[string]*agInfo{}
	for _, m := range models {
		if m.bad != nil {
			continue
		}
		for _, g := range m.groups {
			gi := out[g]
			if gi == nil {
				gi = &agInfo{AccessGroup: g, ModelNames: []string{}, ModelIDs: []string{}}
				out[g] = gi
			}
			if slices.Contains(gi.ModelIDs, m.id) {
				continue // listed twice in one row
			}
			gi.ModelIDs = append(gi.ModelIDs, m.id)
			if !slices.Contains(gi.ModelNames, m.name) {
				gi.ModelNames = append(gi.ModelNames, m.name)
			}
		}
	}
	for _, gi := range out {
		sort.Strings(gi.ModelNames)
		sort.Strings(gi.ModelIDs)
		gi.DeploymentCount = len(gi.ModelIDs)
	}
	return out, nil
}

// accessGroupList: GET /access_group/list → {"access_groups": [{"access_group", "model_names",
// "model_ids", "deployment_count"}]} sorted by name (LiteLLM's ListAccessGroupsResponse, plus ids).
func (s *Server) accessGroupList(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	groups, err := s.groupsFromDB(c.Request().Context())
	if err != nil {
		return err
	}
	list := make([]*agInfo, 0, len(groups))
	for _, gi := range groups {
		list = append(list, gi)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].AccessGroup < list[j].AccessGroup })
	return c.JSON(http.StatusOK, map[string]any{"access_groups": list})
}

// accessGroupInfo: GET /access_group/{g}/info → {"access_group", "model_names", "model_ids",
// "deployment_count"}; 404 when no DB deployment carries the group.
func (s *Server) accessGroupInfo(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	group, err := groupParam(c)
	if err != nil {
		return err
	}
	groups, err := s.groupsFromDB(c.Request().Context())
	if err != nil {
		return err
	}
	gi, ok := groups[group]
	if !ok {
		return groupNotFound(group)
	}
	return c.JSON(http.StatusOK, gi)
}
