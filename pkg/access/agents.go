package access

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// ObjectPermission is LiteLLM's object_permission (LiteLLM_ObjectPermissionBase) on a key or
// team, as lockstep keeps it in litellm_fields: Agents is honoured (the A2A agents the key or
// the team's keys may call, by agent_id or agent_name; nil: no restriction); the members that
// gate features lockstep does not serve (MCP servers and tools, vector stores, search tools)
// are stored and returned, limiting nothing there is; the rest are refused until enforced
// (ObjectPermissionFields).
type ObjectPermission struct {
	Agents []string `json:"agents"`
}

// Treatment of each member of object_permission (LiteLLM_ObjectPermissionBase at commit
// 00145f91a8cbcac1f181228efe7acd0cfa71a731).
const (
	OPHonoured = "honoured"
	OPStored   = "stored"
	OPNotYet   = "not supported yet"
)

// ObjectPermissionFields are object_permission's members and their treatment: agents is
// enforced on /a2a/{agent}; mcp_* and vector_stores, search_tools gate MCP, vector-store and
// search routes lockstep does not serve (no call can reach what they guard), so they are
// stored; agent_access_groups (LiteLLM's agent access groups: lockstep's access groups hold
// models only), models and blocked_tools (they would limit the LLM routes) are refused until
// enforced.
var ObjectPermissionFields = map[string]string{
	"agents":                  OPHonoured,
	"mcp_servers":             OPStored,
	"mcp_access_groups":       OPStored,
	"mcp_tool_permissions":    OPStored,
	"mcp_toolsets":            OPStored,
	"mcp_tool_search_enabled": OPStored,
	"vector_stores":           OPStored,
	"search_tools":            OPStored,
	"agent_access_groups":     OPNotYet,
	"models":                  OPNotYet,
	"blocked_tools":           OPNotYet,
}

// NotYetError is a member of a LiteLLM object lockstep does not enforce yet, set to a value
// that would limit a caller (the api layer words it as its other not-supported-yet fields).
type NotYetError struct{ Field string }

func (e *NotYetError) Error() string { return fmt.Sprintf("field %q is not supported yet", e.Field) }

// CheckObjectPermission validates an object_permission value: null or an object whose
// members ObjectPermissionFields names, each of its LiteLLM type (checkOPType); a member not supported yet
// with a value other than null or [] is a *NotYetError naming it ("object_permission.models").
// Any other error names what is wrong.
func CheckObjectPermission(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return fmt.Errorf("object_permission must be an object ({\"agents\": [agent ids]})")
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := m[n]
		t, ok := ObjectPermissionFields[n]
		if !ok {
			return fmt.Errorf("unknown field %q in object_permission (LiteLLM's are %s)", n, PyList(opNames()))
		}
		switch t {
		case OPNotYet:
			if s := string(v); s != "null" && s != "[]" && s != "{}" {
				return &NotYetError{Field: "object_permission." + n}
			}
		default:
			if err := checkOPType(n, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOPType checks an honoured or stored object_permission member's value against its type
// in LiteLLM_ObjectPermissionBase (litellm/proxy/_types.py): mcp_tool_permissions an object of
// string lists (server → tools), mcp_tool_search_enabled a boolean, every other member a list
// of strings; null passes.
func checkOPType(name string, v json.RawMessage) error {
	if string(v) == "null" {
		return nil
	}
	switch name {
	case "mcp_tool_permissions":
		var m map[string][]string
		if json.Unmarshal(v, &m) != nil {
			return fmt.Errorf("object_permission.%s must be an object of lists of strings", name)
		}
	case "mcp_tool_search_enabled":
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return fmt.Errorf("object_permission.%s must be true or false", name)
		}
	default:
		var l []string
		if json.Unmarshal(v, &l) != nil {
			return fmt.Errorf("object_permission.%s must be a list of strings", name)
		}
	}
	return nil
}

func opNames() []string {
	out := make([]string, 0, len(ObjectPermissionFields))
	for n := range ObjectPermissionFields {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// AgentGrant is what one object (a key, or its team) lets a key call among the A2A agents:
// the agents of its object_permission.agents (by agent_id or agent_name) and those of its
// unified access groups (access_agent_ids, by agent_id; LiteLLM _get_agent_ids_from_access_groups
// matches agents by id). Restricted: the object names agents or access groups, so only those
// may be called, even when the names resolve to nothing (LiteLLM AgentRequestHandler: "a key
// that names agents or access groups is restricted even when those names resolve to nothing,
// so a group that is empty cannot hand the key every agent"). The zero AgentGrant restricts
// nothing.
type AgentGrant struct {
	Restricted bool
	Agents     []string // agent_id or agent_name
	GroupIDs   []string // agent_id only
}

func (g AgentGrant) allows(id, name string) bool {
	return !g.Restricted || slices.Contains(g.Agents, id) || (name != "" && slices.Contains(g.Agents, name)) ||
		slices.Contains(g.GroupIDs, id)
}

// AgentAllowed reports whether a key may call the agent (its agent_id and agent_name) under
// the key's and its team's grants, as LiteLLM's AgentRequestHandler decides: neither restricts
// → every agent; one restricts → its agents; both → the intersection.
func AgentAllowed(key, team AgentGrant, id, name string) bool {
	return key.allows(id, name) && team.allows(id, name)
}

// AgentRefusal is LiteLLM's 403 text for an agent the key may not call.
func AgentRefusal(agentID string) string { return "Access denied to agent: " + agentID }
