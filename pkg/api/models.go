package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
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
type modelRequest struct {
	// ModelName is nil when absent or null.
	ModelName *string
	// LitellmParams is nil when absent or null, else a JSON object.
	LitellmParams json.RawMessage
	// ModelInfo is model_info (empty when absent or null).
	ModelInfo map[string]any
	// ID is model_info.id, "" when absent, null or "".
	ID string
}

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
type modelRowJSON struct {
	ModelID       string          `json:"model_id"`
	ModelName     string          `json:"model_name"`
	LitellmParams json.RawMessage `json:"litellm_params"`
	ModelInfo     json.RawMessage `json:"model_info"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

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
func modelResponse(r store.Row) (map[string]any, error) {
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

// validateModel builds the deployment exactly as the registry will, so an invalid model is
// refused with a 400 before anything is written.
func validateModel(b *provider.Builder, id, name string, params, info []byte) error {
	if _, err := (router.Builder{Deployments: b}).Build(id, name, params, info); err != nil {
		return badRequest("Invalid model: %v", err)
	}
	return nil
}

// modelNew: POST /model/new (LiteLLM proxy).
func (s *Server) modelNew(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	req, err := decodeModelRequest(c)
	if err != nil {
		return err
	}
	if req.ModelName == nil || *req.ModelName == "" {
		return badRequest("model_name is required")
	}
	if req.LitellmParams == nil {
		return badRequest("litellm_params is required")
	}
	info, id := req.ModelInfo, req.ID
	if id == "" {
		id = uuid.NewString()
	}
	info["id"] = id
	delete(info, "db_model")
	infoJSON, _ := json.Marshal(info)
	if err := validateModel(s.Deployments, id, *req.ModelName, req.LitellmParams, infoJSON); err != nil {
		return err
	}
	if e, ok := s.Router.Models().Load().ByID(id); ok && e.Config {
		return badRequest("model_info.id %q is already used by a config-file model", id)
	}
	row, err := s.Store.Insert(c.Request().Context(), store.Model, store.Values{
		"model_id": id, "model_name": *req.ModelName, "litellm_params": s.Deployments.SealParams(req.LitellmParams), "model_info": infoJSON,
	})
	if errors.Is(err, store.ErrConflict) {
		return errf(http.StatusConflict, "conflict_error", "model with id=%s already exists", id)
	}
	if err != nil {
		return err
	}
	return s.appliedModel(c, row)
}

const configModelErr = "Can't edit model. Model in config. Store model in db via `/model/new`. to edit."

// editableModel reads the current DB row of id inside tx.
func editableModel(ctx context.Context, tx *store.TxStore, id string) (modelRowJSON, error) {
	row, err := tx.Get(ctx, store.Model, id)
	if errors.Is(err, store.ErrNotFound) {
		return modelRowJSON{}, errf(http.StatusNotFound, "not_found_error", "Model with id=%s not found", id)
	}
	if err != nil {
		return modelRowJSON{}, err
	}
	var m modelRowJSON
	if err := json.Unmarshal(row.Data, &m); err != nil {
		return modelRowJSON{}, err
	}
	return m, nil
}

func mergeObjects(base, patch map[string]any) map[string]any {
	for k, v := range patch {
		base[k] = v
	}
	return base
}

// updateModel validates and writes the edited model inside tx.
func updateModel(ctx context.Context, b *provider.Builder, tx *store.TxStore, id, name string, params, info map[string]any) (store.Row, error) {
	delete(info, "db_model")
	info["id"] = id
	pj, _ := json.Marshal(params)
	ij, _ := json.Marshal(info)
	if err := validateModel(b, id, name, pj, ij); err != nil {
		return store.Row{}, err
	}
	row, err := tx.Update(ctx, store.Model, id, store.Values{"model_name": name, "litellm_params": b.SealParams(pj), "model_info": ij})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, errf(http.StatusNotFound, "not_found_error", "Model with id=%s not found", id)
	}
	return row, err
}

// modelUpdate: POST /model/update — body carries model_info.id; given top-level fields
// replace the stored ones, litellm_params keys are merged over the stored ones (LiteLLM
// keeps unspecified params, e.g. the api_key, on update).
func (s *Server) modelUpdate(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
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

// applyModelEdit reads, merges and writes the model in one transaction under the table lock
// access-group writers take (store.TxStore.LockTable), so a tag an access-group write adds
// between the read and the write is not lost; then applies the row locally.
//
// A litellm_params secret sent back in the masked form /model/info shows ("sk****3456",
// "http://u:****@host/v1") keeps the stored secret (provider.RestoreMaskedSecrets), as
// LiteLLM's /model/update does.
func (s *Server) applyModelEdit(c echo.Context, id string, req modelRequest) error {
	if e, ok := s.Router.Models().Load().ByID(id); ok && e.Config {
		return badRequest(configModelErr)
	}
	ctx := c.Request().Context()
	var row store.Row
	err := s.Store.Tx(ctx, func(tx *store.TxStore) error {
		if err := tx.LockTable(ctx, store.Model); err != nil {
			return err
		}
		cur, err := editableModel(ctx, tx, id)
		if err != nil {
			return err
		}
		params, err := objectOf(cur.LitellmParams, "litellm_params")
		if err != nil {
			return err
		}
		patch, err := objectOf(provider.RestoreMaskedSecrets(req.LitellmParams, cur.LitellmParams), "litellm_params")
		if err != nil {
			return err
		}
		curInfo, _ := objectOf(cur.ModelInfo, "model_info")
		name := cur.ModelName
		if req.ModelName != nil {
			if *req.ModelName == "" {
				return badRequest("model_name cannot be empty")
			}
			name = *req.ModelName
		}
		row, err = updateModel(ctx, s.Deployments, tx, id, name, mergeObjects(params, patch), mergeObjects(curInfo, req.ModelInfo))
		return err
	})
	if err != nil {
		return err
	}
	return s.appliedModel(c, row)
}

// modelPatch: PATCH /model/{id}/update — merge the given fields into the stored model.
func (s *Server) modelPatch(c echo.Context) error {
	if err := s.requireDB(store.Model, "models"); err != nil {
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
	if err := s.requireDB(store.Model, "models"); err != nil {
		return err
	}
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if req.ID == "" {
		return badRequest("id is required")
	}
	if e, ok := s.Router.Models().Load().ByID(req.ID); ok && e.Config {
		return badRequest("Can't delete model. Model in config. Remove it from the config file instead.")
	}
	v, err := s.Store.Delete(c.Request().Context(), store.Model, req.ID)
	if errors.Is(err, store.ErrNotFound) {
		return errf(http.StatusNotFound, "not_found_error", "Model with id=%s not found", req.ID)
	}
	if err != nil {
		return err
	}
	s.Router.Models().Apply(nil, map[string]int64{req.ID: v})
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
	return map[string]any{
		"model_name":     d.ModelName,
		"litellm_params": json.RawMessage(provider.MaskParams(d.LitellmParams)),
		"model_info":     info,
	}
}

// modelInfo: GET /model/info[?litellm_model_id=] (also /v1/model/info, /v2/model/info) →
// {"data": [...]}, sorted by name then id: every deployment for the admin, only those of model
// groups it may use for a virtual key (LiteLLM filters /model/info by the key's models).
func (s *Server) modelInfo(c echo.Context) error {
	p := caller(c)
	snap := s.Router.Models().Load()
	var entries []*registry.Entry[*router.Deployment]
	if id := c.QueryParam("litellm_model_id"); id != "" {
		if e, ok := snap.ByID(id); ok {
			entries = append(entries, e)
		}
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
	for _, e := range entries {
		if !p.canUse(e.Value.ModelName, snap.ByName(e.Value.ModelName)) {
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
		if !p.canUse(n, snap.ByName(n)) {
			continue
		}
		data = append(data, map[string]any{"id": n, "object": "model", "created": 1677610602, "owned_by": "openai"})
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": data})
}

// groupAccess iterates the access groups of a model group's deployments.
func groupAccess(group []*registry.Entry[*router.Deployment]) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, e := range group {
			for _, g := range e.Value.AccessGroups {
				if !yield(g) {
					return
				}
			}
		}
	}
}

// appliedModel applies a model row this replica just wrote to its own registry (writer-local
// apply: read-your-writes) and answers with the row, secrets masked.
func (s *Server) appliedModel(c echo.Context, row store.Row) error {
	s.Router.Models().Apply([]store.Row{row}, nil)
	out, err := modelResponse(row)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
