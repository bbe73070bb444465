package guardrail

import (
	"encoding/json"
	"fmt"

	"lockstep/pkg/store"
)

// BuildRow compiles a gateway.guardrails row (row_to_json: guardrail_name, litellm_params);
// the registry's row builder. Errors: Compile's.
func BuildRow(r store.Row) (*Guardrail, error) {
	var row struct {
		Name   string          `json:"guardrail_name"`
		Params json.RawMessage `json:"litellm_params"`
	}
	if err := json.Unmarshal(r.Data, &row); err != nil {
		return nil, fmt.Errorf("guardrail row: %w", err)
	}
	return Compile(row.Name, row.Params)
}
