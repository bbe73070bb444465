package a2a

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"

	"lockstep/pkg/store"
)

// BuildRow builds an agent from a gateway.agents row (row_to_json: agent_id, agent_name,
// agent_card_params, litellm_params); the registry's row builder. Errors: NewAgent's.
func BuildRow(r store.Row) (*Agent, error) {
	var row struct {
		ID     string          `json:"agent_id"`
		Name   string          `json:"agent_name"`
		Card   json.RawMessage `json:"agent_card_params"`
		Params json.RawMessage `json:"litellm_params"`
	}
	if err := json.Unmarshal(r.Data, &row); err != nil {
		return nil, fmt.Errorf("agent row: %w", err)
	}
	a, err := NewAgent(row.ID, row.Name, row.Card, row.Params)
	if err != nil {
		return nil, err
	}
	a.Row = r.Data
	return a, nil
}

// OwnUpstream reports whether the agent's litellm_params name an upstream of its own
// (api_base, api_key, custom_llm_provider or mock_response, non-null; a remote A2A agent,
// [Agent.Remote]), served by an ad-hoc deployment (DeploymentID, built from UpstreamParams)
// rather than a model group of the router.
func (a *Agent) OwnUpstream() bool {
	if a.Remote() {
		return true
	}
	p := gjson.ParseBytes(a.LitellmParams)
	for _, k := range []string{"api_base", "api_key", "custom_llm_provider", "mock_response"} {
		if v := p.Get(k); v.Exists() && v.Type != gjson.Null {
			return true
		}
	}
	return false
}

// DeploymentID names the ad-hoc deployment of an agent with its own upstream.
func (a *Agent) DeploymentID() string { return "agent:" + a.ID }
