package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"lockstep/pkg/accounts"
	"lockstep/pkg/store"
)

// teamModel is how a model created with model_info.team_id is stored, as LiteLLM's
// model_management_endpoints._add_team_model_to_db stores it: under a unique model_name
// "model_name_<team_id>_<uuid>", with model_info.team_public_model_name the name it was
// created with; the team gets model_aliases {<public name>: <unique name>} (so its keys call
// the model by its public name, and only they reach it: two teams can each have a model of
// the same public name) and the public name added to its models (LiteLLM team_model_add,
// which appends to the team's list even when it was empty).
type teamModel struct {
	teamID, public, unique string
}

// teamModelOf returns the team model a /model/new makes (ok false: model_info has no
// team_id), model_info updated with team_public_model_name.
func teamModelOf(info map[string]any, name string) (teamModel, bool) {
	tid, _ := info["team_id"].(string)
	if tid == "" {
		return teamModel{}, false
	}
	tm := teamModel{teamID: tid, public: name, unique: fmt.Sprintf("model_name_%s_%s", tid, uuid.NewString())}
	info["team_public_model_name"] = name
	return tm, true
}

// addToTeam writes the team's side of a team model in w: the alias and the models entry,
// under the team row's lock. Errors: Invalid "team_id: team <id> does not exist".
func (tm teamModel) addToTeam(ctx context.Context, w *Writer) error {
	cur, err := w.GetForUpdate(ctx, store.Team, tm.teamID)
	if errors.Is(err, store.ErrNotFound) {
		return invalid("model_info.team_id", "team_id: team %s does not exist; create it with /team/new", tm.teamID)
	}
	if err != nil {
		return err
	}
	t, err := accounts.BuildTeamRow(cur)
	if err != nil {
		return err
	}
	aliases := map[string]string{}
	for k, v := range t.Fields.ModelAliases {
		aliases[k] = v
	}
	aliases[tm.public] = tm.unique
	lf, _ := json.Marshal(map[string]any{"model_aliases": aliases})
	vals := store.Values{"litellm_fields": store.JSONMerge(lf)}
	if !contains(t.Models, tm.public) {
		vals["models"] = append(append([]string{}, t.Models...), tm.public)
	}
	_, err = w.Update(ctx, store.Team, tm.teamID, vals)
	return err
}

// removeFromTeam undoes addToTeam when the team model is deleted (/model/delete), as LiteLLM's
// delete_model drops a team model's public name from the team (PR #29820: team.models and
// the model_aliases entry), in w under the team row's lock. Only an alias still naming this
// model's unique name is removed (a later model of the same public name keeps it, and the
// models entry with it). A team that no longer exists is left alone.
func (tm teamModel) removeFromTeam(ctx context.Context, w *Writer) error {
	cur, err := w.GetForUpdate(ctx, store.Team, tm.teamID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	t, err := accounts.BuildTeamRow(cur)
	if err != nil {
		return err
	}
	if t.Fields.ModelAliases[tm.public] != tm.unique {
		return nil
	}
	aliases := map[string]string{}
	for k, v := range t.Fields.ModelAliases {
		if k != tm.public {
			aliases[k] = v
		}
	}
	lf, _ := json.Marshal(map[string]any{"model_aliases": aliases})
	vals := store.Values{"litellm_fields": store.JSONMerge(lf)}
	if contains(t.Models, tm.public) {
		models := make([]string, 0, len(t.Models))
		for _, m := range t.Models {
			if m != tm.public {
				models = append(models, m)
			}
		}
		vals["models"] = models
	}
	_, err = w.Update(ctx, store.Team, tm.teamID, vals)
	return err
}
