package admin

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"lockstep/pkg/provider"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// ModelInput is the decoded body of /model/new, /model/update and PATCH /model/{id}/update
// (pkg/api checks each field's JSON type).
type ModelInput struct {
	// ModelName is nil when absent or null.
	ModelName *string
	// LitellmParams is nil when absent or null, else a JSON object.
	LitellmParams json.RawMessage
	// ModelInfo is model_info (empty when absent or null).
	ModelInfo map[string]any
	// ID is model_info.id, "" when absent, null or "".
	ID string
}

// ModelRow is a gateway.models row (row_to_json).
type ModelRow struct {
	ModelID       string          `json:"model_id"`
	ModelName     string          `json:"model_name"`
	LitellmParams json.RawMessage `json:"litellm_params"`
	ModelInfo     json.RawMessage `json:"model_info"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

func isNull(b json.RawMessage) bool { return len(b) == 0 || string(b) == "null" }

// objectOf decodes a JSON object (an empty map for null); Invalid "<field> must be a JSON object".
func objectOf(b json.RawMessage, field string) (map[string]any, error) {
	m := map[string]any{}
	if isNull(b) {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, invalid(field, "%s must be a JSON object", field)
	}
	return m, nil
}

// validateModel builds the deployment exactly as the registry will, so an invalid model is
// refused (Invalid "Invalid model: <reason>") before anything is written.
func validateModel(b *provider.Builder, id, name string, params, info []byte) error {
	if _, err := (router.Builder{Deployments: b}).Build(id, name, params, info); err != nil {
		return invalid("litellm_params", "Invalid model: %v", err)
	}
	return nil
}

// configModel reports whether id is a config-file model (never written through the API).
func (a *Admin) configModel(id string) bool {
	e, ok := a.router.Models().Load().ByID(id)
	return ok && e.Config
}

// CreateModel is /model/new: a new gateway.models row (model_info.id, or a new uuid, is its
// id; litellm_params secrets sealed at rest), applied after commit. A model with
// model_info.team_id is its team's, stored as LiteLLM stores team models (teamModel: a unique
// model_name, the team's model_aliases and models updated in the same transaction). Errors: Invalid
// ("model_name is required", "litellm_params is required", "Invalid model: ...", an id of a
// config-file model), Conflict "model with id=<id> already exists".
func (a *Admin) CreateModel(ctx context.Context, req ModelInput) (store.Row, error) {
	if req.ModelName == nil || *req.ModelName == "" {
		return store.Row{}, invalid("model_name", "model_name is required")
	}
	if req.LitellmParams == nil {
		return store.Row{}, invalid("litellm_params", "litellm_params is required")
	}
	info, id := req.ModelInfo, req.ID
	if info == nil {
		info = map[string]any{}
	}
	if id == "" {
		id = uuid.NewString()
	}
	info["id"] = id
	delete(info, "db_model")
	name := *req.ModelName
	tm, isTeam := teamModelOf(info, name) // LiteLLM's team model: a unique name, the team's alias
	if isTeam {
		name = tm.unique
	}
	infoJSON, _ := json.Marshal(info)
	if err := validateModel(a.build, id, name, req.LitellmParams, infoJSON); err != nil {
		return store.Row{}, err
	}
	if a.configModel(id) {
		return store.Row{}, invalid("model_info.id", "model_info.id %q is already used by a config-file model", id)
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		row, err = w.Insert(ctx, store.Model, store.Values{
			"model_id": id, "model_name": name, "litellm_params": a.build.SealParams(req.LitellmParams), "model_info": infoJSON,
		})
		if err != nil || !isTeam {
			return err
		}
		return tm.addToTeam(ctx, w)
	})
	if errors.Is(err, store.ErrConflict) {
		return store.Row{}, conflict("model with id=%s already exists", id)
	}
	return row, err
}

const configModelErr = "Can't edit model. Model in config. Store model in db via `/model/new`. to edit."

func modelNotFound(id string) error { return notFound("Model with id=%s not found", id) }

// editableModel reads the current DB row of id inside the transaction.
func editableModel(ctx context.Context, w *Writer, id string) (ModelRow, error) {
	row, err := w.Get(ctx, store.Model, id)
	if errors.Is(err, store.ErrNotFound) {
		return ModelRow{}, modelNotFound(id)
	}
	if err != nil {
		return ModelRow{}, err
	}
	var m ModelRow
	if err := json.Unmarshal(row.Data, &m); err != nil {
		return ModelRow{}, err
	}
	return m, nil
}

func mergeObjects(base, patch map[string]any) map[string]any {
	for k, v := range patch {
		base[k] = v
	}
	return base
}

// updateModel validates and writes the edited model inside the transaction.
func updateModel(ctx context.Context, b *provider.Builder, w *Writer, id, name string, params, info map[string]any) (store.Row, error) {
	delete(info, "db_model")
	info["id"] = id
	pj, _ := json.Marshal(params)
	ij, _ := json.Marshal(info)
	if err := validateModel(b, id, name, pj, ij); err != nil {
		return store.Row{}, err
	}
	row, err := w.Update(ctx, store.Model, id, store.Values{"model_name": name, "litellm_params": b.SealParams(pj), "model_info": ij})
	if errors.Is(err, store.ErrNotFound) {
		return store.Row{}, modelNotFound(id)
	}
	return row, err
}

// EditModel is /model/update and PATCH /model/{id}/update: given top-level fields replace the
// stored ones, litellm_params and model_info keys are merged over the stored ones (LiteLLM
// keeps unspecified params, e.g. the api_key, on update). It reads, merges and writes in one
// transaction under the table lock access-group writers take, so a tag an access-group write
// adds between the read and the write is not lost.
//
// A litellm_params secret sent back in the masked form /model/info shows ("sk****3456",
// "http://u:****@host/v1") keeps the stored secret (provider.RestoreMaskedSecrets), as
// LiteLLM's /model/update does. A team model (model_info.team_id) keeps its stored unique
// model_name: a model_name sent is its new team_public_model_name, aliased for the team.
// Errors: Invalid (a config-file model, "model_name cannot be empty", "Invalid model: ..."),
// NotFound "Model with id=<id> not found".
func (a *Admin) EditModel(ctx context.Context, id string, req ModelInput) (store.Row, error) {
	if a.configModel(id) {
		return store.Row{}, invalid("model_info.id", configModelErr)
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		if err := w.LockTable(ctx, store.Model); err != nil {
			return err
		}
		cur, err := editableModel(ctx, w, id)
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
		curTeam, _ := curInfo["team_id"].(string)
		name := cur.ModelName
		var renamed *teamModel
		if req.ModelName != nil {
			if *req.ModelName == "" {
				return invalid("model_name", "model_name cannot be empty")
			}
			name = *req.ModelName
		}
		info := mergeObjects(curInfo, req.ModelInfo)
		if curTeam != "" && name != cur.ModelName {
			// a team model keeps its stored name; the name sent is its new public name, aliased
			// for the team (teamModel)
			renamed = &teamModel{teamID: curTeam, public: name, unique: cur.ModelName}
			info["team_public_model_name"], name = name, cur.ModelName
		}
		if row, err = updateModel(ctx, a.build, w, id, name, mergeObjects(params, patch), info); err != nil || renamed == nil {
			return err
		}
		return renamed.addToTeam(ctx, w)
	})
	return row, err
}

// DeleteModel is /model/delete: removes the DB model id; its tombstone is applied after
// commit. A team model (model_info.team_id) also leaves its team: its public name goes from
// the team's models and model_aliases in the same transaction (teamModel.removeFromTeam, as
// LiteLLM's delete_model). Errors: Invalid ("id is required", a config-file model), NotFound.
func (a *Admin) DeleteModel(ctx context.Context, id string) error {
	if id == "" {
		return invalid("id", "id is required")
	}
	if a.configModel(id) {
		return invalid("id", "Can't delete model. Model in config. Remove it from the config file instead.")
	}
	return a.Write(ctx, func(w *Writer) error {
		cur, err := editableModel(ctx, w, id)
		if err != nil {
			return err
		}
		if _, err := w.Delete(ctx, store.Model, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return modelNotFound(id)
			}
			return err
		}
		info, _ := objectOf(cur.ModelInfo, "model_info")
		tid, _ := info["team_id"].(string)
		pub, _ := info["team_public_model_name"].(string)
		if tid == "" || pub == "" {
			return nil
		}
		return teamModel{teamID: tid, public: pub, unique: cur.ModelName}.removeFromTeam(ctx, w)
	})
}
