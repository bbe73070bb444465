package api

import (
	"context"
	"encoding/json"
	"fmt"

	"lockstep/pkg/a2a"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func (s *Server) agentRoutes() {}

// BuildAgentRow builds an agent from a gateway.agents row.
func BuildAgentRow(r store.Row) (*a2a.Agent, error) {
	var row struct {
		ID     string          `json:"agent_id"`
		Name   string          `json:"agent_name"`
		Card   json.RawMessage `json:"agent_card_params"`
		Params json.RawMessage `json:"litellm_params"`
	}
	if err := json.Unmarshal(r.Data, &row); err != nil {
		return nil, fmt.Errorf("agent row: %w", err)
	}
	return a2a.NewAgent(row.ID, row.Name, row.Card, row.Params)
}

// AgentNames indexes an agent under its name.
func AgentNames(e *registry.Entry[*a2a.Agent]) []string { return []string{e.Value.Name} }

type agentResolver struct{ s *Server }

func (r agentResolver) ResolveAgent(ctx context.Context, idOrName string) (*a2a.Agent, error) {
	return nil, a2a.ErrAgentNotFound
}

type agentCompleter struct{ s *Server }

func (agentCompleter) Complete(ctx context.Context, agent *a2a.Agent, text string) (string, error) {
	return "", nil
}
func (agentCompleter) Stream(ctx context.Context, agent *a2a.Agent, text string, onDelta func(string) error) error {
	return nil
}
