package api

import (
	"encoding/json"
	"fmt"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/store"
)

func (s *Server) guardrailRoutes() {}

// BuildGuardrailRow compiles a gateway.guardrails row.
func BuildGuardrailRow(r store.Row) (*guardrail.Guardrail, error) {
	var row struct {
		Name   string          `json:"guardrail_name"`
		Params json.RawMessage `json:"litellm_params"`
	}
	if err := json.Unmarshal(r.Data, &row); err != nil {
		return nil, fmt.Errorf("guardrail row: %w", err)
	}
	return guardrail.Compile(row.Name, row.Params)
}
