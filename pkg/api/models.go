package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	mgmt "lockstep/pkg/admin"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// decodeJSON reads the request body into v with a clear 400 on malformed JSON.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	if err := dec.Decode(v); err != nil {
		var he *echo.HTTPError
		var tooLarge *http.MaxBytesError
		if errors.As(err, &he) || errors.As(err, &tooLarge) {
			return err
		}
		return badRequest("malformed JSON body: %v", err)
	}
	return nil
}

// modelRequest is the body of /model/new, /model/update and PATCH /model/{id}/update, each
// field checked for its JSON type by decodeModelRequest (no silent coercion).
type modelRequest = mgmt.ModelInput

// decodeModelRequest reads a model write. A field of the wrong JSON type is a 400 naming it:
// "model_name must be a string", "litellm_params must be a JSON object", "model_info must be a
// JSON object", "model_info.id must be a string".
func decodeModelRequest(c echo.Context) (modelRequest, error) {
	var raw struct {
		ModelName     json.RawMessage `json:"model_name"`
		LitellmParams json.RawMessage `json:"litellm_params"`
		ModelInfo     json.RawMessage `json:"model_info"`
	}
	var req modelRequest
	if err := decodeStrict(c, &raw); err != nil {
		return req, err
	}
	if !isNull(raw.ModelName) {
		var name string
		if jsonKindOf(raw.ModelName) != '"' || json.Unmarshal(raw.ModelName, &name) != nil {
			return req, badRequest("model_name must be a string")
		}
		req.ModelName = &name
	}
	if !isNull(raw.LitellmParams) {
		if jsonKindOf(raw.LitellmParams) != '{' {
			return req, badRequest("litellm_params must be a JSON object")
		}
		req.LitellmParams = raw.LitellmParams
	}
	info, err := objectOf(raw.ModelInfo, "model_info")
	if err != nil {
		return req, err
	}
	if v, ok := info["id"]; ok && v != nil {
		id, ok := v.(string)
		if !ok {
			return req, badRequest("model_info.id must be a string")
		}
		req.ID = id
	}
	req.ModelInfo = info
	return req, nil
}

// modelRowJSON is a gateway.models row (row_to_json).
type modelRowJSON = mgmt.ModelRow

func isNull(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }

func objectOf(b json.RawMessage, field string) (map[string]any, error) {
	m := map[string]any{}
	if isNull(b) {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, badRequest("%s must be a JSON object", field)
	}
	return m, nil
}

// modelResponse renders a model row the way /model/new answers (secrets masked).
func modelResponse(r mgmt.Row) (map[string]any, error) {
	var m modelRowJSON
	if err := json.Unmarshal(r.Data, &m); err != nil {
		return nil, err
	}
	info, _ := objectOf(m.ModelInfo, "model_info")
	info["id"] = m.ModelID
	info["db_model"] = true
	return map[string]any{
		"model_id": m.ModelID, "model_name": m.ModelName,
		"litellm_params": json.RawMessage(provider.MaskParams(m.LitellmParams)),
		"model_info":     info, "created_at": m.CreatedAt, "updated_at": m.UpdatedAt,
	}, nil
}

// modelNew: POST /model/new (LiteLLM proxy).
func (s *Server) modelNew(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	req, err := decodeModelRequest(c)
	if err != nil {
		return err
	}
	row, err := s.mgmt.CreateModelAs(c.Request().Context(), mgmtCaller(caller(c)), req)
	if err != nil {
		return err
	}
	return modelOK(c, row)
}

// modelUpdate: POST /model/update — body carries model_info.id; given top-level fields
// replace the stored ones, litellm_params keys are merged over the stored ones (LiteLLM
// keeps unspecified params, e.g. the api_key, on update). See mgmt.EditModel.
func (s *Server) modelUpdate(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	req, err := decodeModelRequest(c)
	if err != nil {
		return err
	}
	if req.ID == "" {
		return badRequest("model_info.id is required")
	}
	return s.applyModelEdit(c, req.ID, req)
}

// applyModelEdit runs mgmt.EditModel and answers with the row.
func (s *Server) applyModelEdit(c echo.Context, id string, req modelRequest) error {
	row, err := s.mgmt.EditModelAs(c.Request().Context(), mgmtCaller(caller(c)), id, req)
	if err != nil {
		return err
	}
	return modelOK(c, row)
}

// modelPatch: PATCH /model/{id}/update — merge the given fields into the stored model.
func (s *Server) modelPatch(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	req, err := decodeModelRequest(c)
	if err != nil {
		return err
	}
	return s.applyModelEdit(c, c.Param("id"), req)
}

// modelDelete: POST /model/delete {"id"}.
func (s *Server) modelDelete(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeModel, "models"); err != nil {
		return err
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if err := s.mgmt.DeleteModelAs(c.Request().Context(), mgmtCaller(caller(c)), req.ID); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"message": "Model: " + req.ID + " deleted successfully"})
}

func (s *Server) modelInfoEntry(e *registry.Entry[*router.Deployment]) map[string]any {
	d := e.Value
	info, _ := objectOf(d.ModelInfo, "model_info")
	info["id"] = d.ModelID
	info["db_model"] = !e.Config
	// the router's cooldown of the deployment, as this replica holds it (shared by every
	// replica within a heartbeat tick): when it ends (RFC 3339) and why; null when none
	info["cooldown_until"], info["cooldown_reason"] = nil, nil
	if cd, ok := s.Router.CooldownOf(d.ModelID); ok {
		info["cooldown_until"], info["cooldown_reason"] = cd.Until.UTC().Format(time.RFC3339Nano), cd.Reason
	}
	if len(d.AccessGroups) > 0 {
		info["access_groups"] = d.AccessGroups
	}
	if d.TeamID != "" { // LiteLLM's team model: the name the team calls it by
		if _, ok := info["team_public_model_name"]; !ok {
			info["team_public_model_name"] = d.ModelName
		}
	}
	return map[string]any{
		"model_name":     d.ModelName,
		"litellm_params": json.RawMessage(provider.MaskParams(d.LitellmParams)),
		"model_info":     info,
	}
}

// modelInfo: GET /model/info[?litellm_model_id=][&model=] (also /v1/model/info,
// /v2/model/info) → {"data": [...]}, sorted by name then id: every deployment for the admin,
// only those of model groups it may use for a virtual key (LiteLLM filters /model/info by the
// key's models). ?model= keeps the deployments of that model group only (LiteLLM's
// /v2/model/info model parameter: model_name == model).
func (s *Server) modelInfo(c echo.Context) error {
	p := caller(c)
	snap := s.Router.Models().Load()
	var entries []*registry.Entry[*router.Deployment]
	if id := c.QueryParam("litellm_model_id"); id != "" {
		if e, ok := snap.ByID(id); ok {
			entries = append(entries, e)
		}
	} else if m := c.QueryParam("model"); m != "" {
		entries = append(entries, snap.ByName(m)...) // a wildcard pattern is a name too
	} else {
		snap.All(func(e *registry.Entry[*router.Deployment]) bool { entries = append(entries, e); return true })
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].Value, entries[j].Value
		if a.ModelName != b.ModelName {
			return a.ModelName < b.ModelName
		}
		return a.ModelID < b.ModelID
	})
	data := make([]map[string]any, 0, len(entries))
	m := c.QueryParam("model")
	for _, e := range entries {
		if (m != "" && e.Value.ModelName != m) || !p.CanUse(e.Value.ModelName, snap.ByName(e.Value.ModelName)) {
			continue
		}
		data = append(data, s.modelInfoEntry(e))
	}
	return c.JSON(http.StatusOK, map[string]any{"data": data})
}

// listModels: GET /v1/models → the OpenAI list of model group names the caller may use;
// with ?only_model_access_groups=True, the access group names instead (LiteLLM).
func (s *Server) listModels(c echo.Context) error {
	p := caller(c)
	snap := s.Router.Models().Load()
	if isTrue(c.QueryParam("only_model_access_groups")) {
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": s.accessGroupsFor(p, snap)})
	}
	names := snap.Names()
	sort.Strings(names)
	data := make([]map[string]any, 0, len(names))
	for _, n := range names {
		if !p.CanUse(n, snap.ByName(n)) {
			continue
		}
		data = append(data, map[string]any{"id": n, "object": "model", "created": 1677610602, "owned_by": "openai"})
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

// modelOK answers with a model row the use-case wrote (and applied), secrets masked.
func modelOK(c echo.Context, row mgmt.Row) error {
	out, err := modelResponse(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
