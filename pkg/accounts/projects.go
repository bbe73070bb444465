package accounts

import (
	"encoding/json"
	"fmt"

	"lockstep/pkg/keys"
	"lockstep/pkg/numbers"
	"lockstep/pkg/store"
)

// Project is a gateway.projects row as served (LiteLLM's LiteLLM_ProjectTable, sql/020): it sits
// between a team and the keys linking it by project_id, and gates their calls (LiteLLM
// auth_checks.py _run_project_checks): a blocked project refuses every call, a non-empty models
// list bounds the models its keys may call, and the budget it links (BudgetID, a gateway.budgets
// row) holds the project's own spend to its max_budget and the project's own windows to its
// rpm/tpm/parallel limits; ModelRPM / ModelTPM are per-model-group limits of the project.
// Immutable.
type Project struct {
	ID       string   `json:"project_id"`
	Alias    *string  `json:"project_alias"`
	TeamID   *string  `json:"team_id"`
	BudgetID *string  `json:"budget_id"`
	Models   []string `json:"models"`
	Blocked  bool     `json:"blocked"`
	// ModelRPM and ModelTPM are LiteLLM's project model_rpm_limit / model_tpm_limit: requests
	// and tokens per minute by model group (nil: none).
	ModelRPM map[string]int64 `json:"model_rpm_limit"`
	ModelTPM map[string]int64 `json:"model_tpm_limit"`
}

// BuildProjectRow builds a Project from a gateway.projects row (row_to_json). A negative
// per-model limit refuses the row (the serving version, if any, stays).
func BuildProjectRow(r store.Row) (*Project, error) {
	var p Project
	if err := json.Unmarshal(r.Data, &p); err != nil {
		return nil, fmt.Errorf("project %q: %w", r.ID, err)
	}
	if p.ID == "" {
		p.ID = r.ID
	}
	for what, m := range map[string]map[string]int64{"model_rpm_limit": p.ModelRPM, "model_tpm_limit": p.ModelTPM} {
		for g, n := range m {
			if err := numbers.CheckPtr(what+"["+g+"]", &n); err != nil {
				return nil, fmt.Errorf("project %q: %w", p.ID, err)
			}
		}
	}
	return &p, nil
}

// CanUse reports whether the project's models list allows model group name (whose deployments
// are in accessGroups), with the key list's rules (an empty list allows every model: LiteLLM
// checks a project's models only when it has some).
func (p *Project) CanUse(name string, accessGroups func(yield func(string) bool)) bool {
	return keys.ListAllows(p.Models, name, accessGroups)
}

// Budget is the budget the project links ("" none).
func (p *Project) Budget() string {
	if p.BudgetID == nil {
		return ""
	}
	return *p.BudgetID
}
