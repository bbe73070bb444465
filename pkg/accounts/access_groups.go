package accounts

import (
	"encoding/json"
	"fmt"

	"lockstep/pkg/store"
)

// AccessGroup is a gateway.access_groups row as served (LiteLLM's unified access group,
// LiteLLM_AccessGroupTable; sql/016): a named set of model names, MCP server ids and agent ids
// that keys and teams attach by id (their access_group_ids). Immutable.
//
// How a key or team uses it is LiteLLM's auth_checks.py (can_key_call_model,
// can_team_access_model, _get_models_from_access_groups) and AgentRequestHandler
// (agent_endpoints/auth): see pkg/call Caller.CanUse and pkg/api agentAllowed.
type AccessGroup struct {
	ID          string  `json:"access_group_id"`
	Name        string  `json:"access_group_name"`
	Description *string `json:"description"`
	// Models are access_model_names: model names (model groups, or a key-list entry such as a
	// wildcard "openai/*" or a model access group name, matched as a key's models are).
	Models []string `json:"access_model_names"`
	// MCPServers are access_mcp_server_ids: lockstep serves no MCP, so they grant nothing here
	// (stored and returned).
	MCPServers []string `json:"access_mcp_server_ids"`
	// Agents are access_agent_ids: the A2A agents (by agent_id) the group grants.
	Agents []string `json:"access_agent_ids"`
}

// BuildAccessGroupRow builds an AccessGroup from a gateway.access_groups row (row_to_json).
// An empty id or name refuses the row (the serving version, if any, stays).
func BuildAccessGroupRow(r store.Row) (*AccessGroup, error) {
	g := new(AccessGroup)
	if err := json.Unmarshal(r.Data, g); err != nil {
		return nil, fmt.Errorf("access group row: %w", err)
	}
	if g.ID == "" || g.Name == "" {
		return nil, fmt.Errorf("access group row: empty access_group_id or access_group_name")
	}
	return g, nil
}

// String names the group in logs.
func (g *AccessGroup) String() string { return fmt.Sprintf("access group %q", g.ID) }
