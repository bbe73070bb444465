package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/access"
	"lockstep/pkg/accounts"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/catalogue"
	"lockstep/pkg/keys"
)

// A virtual key's access fields (LiteLLM's allowed_routes, key_type, object_permission,
// allowed_cache_controls, permissions, rpm_limit_type / tpm_limit_type; the team's
// object_permission and team_member_key_duration), checked when written and enforced here on
// every replica from the key and team as the registries hold them (pkg/access).

// checkAccessKind validates the value of a catalogue field of an access kind (see
// catalogue.Kind) before anything is stored: a 400 naming the field and what is wrong.
func checkAccessKind(name string, k catalogue.Kind, raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	switch k {
	case catalogue.ObjectPermission:
		err := access.CheckObjectPermission(raw)
		if ny := (*access.NotYetError)(nil); errors.As(err, &ny) {
			return notYetField(ny.Field)
		}
		if err != nil {
			return badRequest("%v", err)
		}
	case catalogue.KeyType:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return badRequest("%s must be one of 'llm_api', 'management', 'read_only', 'default'", name)
		}
		if _, ok := access.KeyTypeRoutes(s); !ok {
			return badRequest("%s must be one of 'llm_api', 'management', 'read_only', 'default', got %q", name, s)
		}
	case catalogue.LimitType:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return badRequest("%s must be one of 'guaranteed_throughput', 'best_effort_throughput', 'dynamic'", name)
		}
		switch s {
		case "best_effort_throughput":
		case "guaranteed_throughput", "dynamic":
			// LiteLLM reserves (guaranteed) or lends (dynamic) a model's capacity across keys
			// (parallel_request_limiter_v3); lockstep's limiter does neither yet
			return notYetField(name)
		default:
			return badRequest("%s must be one of 'guaranteed_throughput', 'best_effort_throughput', 'dynamic', got %q", name, s)
		}
	case catalogue.Duration:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return badRequest("%s must be a duration string (\"30s\", \"1h\", \"30d\", \"1mo\")", name)
		}
		if s == "" {
			return nil
		}
		if _, err := keys.ParseDuration(s); err != nil {
			return badRequest("%s", keys.DurationError(name, err))
		}
	case catalogue.KeyRoutes:
		var l []string
		if json.Unmarshal(raw, &l) != nil {
			return badRequest("%s must be a list of key management routes ([\"/key/generate\", \"/key/update\"])", name)
		}
		for _, r := range l {
			if !access.IsKeyManagementRoute(r) {
				return badRequest("%s: %q is not one of LiteLLM's key management routes", name, r)
			}
		}
	case catalogue.Permissions:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return badRequest("%s must be an object ({\"get_spend_routes\": true})", name)
		}
		// LiteLLM's hooks read other members as per-key switches (a guardrail's name: false
		// turns it off; pii, output_parse_pii, enable_llm_guard_check, allow_pii_decode, ...):
		// lockstep enforces none of them yet, so each is refused rather than kept and ignored
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v := m[n]
			if n != "get_spend_routes" {
				if !isNull(v) {
					return notYetField(name + "." + n)
				}
				continue
			}
			if string(v) != "true" && string(v) != "false" && !isNull(v) {
				return badRequest("%s.get_spend_routes must be true or false, got %s", name, v)
			}
		}
	}
	return nil
}

// applyKeyType turns a /key/generate's key_type into the key's allowed_routes, as LiteLLM's
// handle_key_type: llm_api → ["llm_api_routes"], management → ["management_routes"],
// read_only → ["info_routes"] (each replacing any allowed_routes given); default leaves
// allowed_routes as given. key_type itself is not kept (LiteLLM pops it).
func applyKeyType(extra map[string]json.RawMessage) {
	raw, ok := extra["key_type"]
	if !ok {
		return
	}
	delete(extra, "key_type")
	var s string
	_ = json.Unmarshal(raw, &s) // checked by checkAccessKind
	if routes, _ := access.KeyTypeRoutes(s); routes != nil {
		b, _ := json.Marshal(routes)
		extra["allowed_routes"] = b
	}
}

// routeAllowed refuses a virtual key calling a route its allowed_routes does not allow, with
// LiteLLM's 403 (route_checks.py is_virtual_key_allowed_to_call_route; path is the request's
// path, as LiteLLM quotes it).
func routeAllowed(k *keys.Key, path string) error {
	if k == nil || len(k.X().AllowedRoutes) == 0 || access.RouteAllowed(k.X().AllowedRoutes, path) {
		return nil
	}
	return authErr(http.StatusForbidden, access.RouteRefusal(k.X().AllowedRoutes, path))
}

// agentAllowed refuses an A2A call (or card) of an agent outside what the key, its team, its
// organization and the end user the request names (the x-litellm-customer-id /
// x-litellm-end-user-id header) grant, with LiteLLM's 403 `Access denied to agent:
// <agent_id>`: each grant that restricts must allow the agent. The key and the team grant the
// agents of their object_permission.agents and of their unified access groups
// (access_group_ids → access_agent_ids), and one naming either is restricted to them
// (access.AgentGrant; LiteLLM AgentRequestHandler reads the key's and the team's); the
// organization's and the customer's object_permission.agents (organization_endpoints.py,
// customer_endpoints.py) hold here too, as a field that limits a caller is never accepted and
// ignored. Only a restricted key resolves the agent here; an agent that does not resolve is
// left to the A2A handler's own not-found answer.
func (s *Server) agentAllowed(c echo.Context, who principal) error {
	if who.Key == nil {
		return nil
	}
	agents := func(op *access.ObjectPermission) []string {
		if op == nil {
			return nil
		}
		return op.Agents
	}
	key := agentGrant(who.Caller, who.Key.X().Agents, who.Key.X().AccessGroupIDs)
	var team, org, endUser access.AgentGrant
	if who.Team != nil {
		team = agentGrant(who.Caller, agents(who.Team.Fields.ObjectPermission), who.Team.Fields.AccessGroupIDs)
	}
	if who.Org != nil {
		org = agentGrant(who.Caller, agents(who.Org.Links.ObjectPermission), nil)
	}
	if e := s.headerEndUser(c.Request().Header); e != nil {
		endUser = agentGrant(who.Caller, agents(e.Links.ObjectPermission), nil)
	}
	if !key.Restricted && !team.Restricted && !org.Restricted && !endUser.Restricted {
		return nil
	}
	ag, err := s.pipe.ResolveAgent(c.Request().Context(), agentParam(c))
	if err != nil || ag == nil {
		return nil
	}
	if access.AgentAllowed(key, team, ag.ID, ag.Name) && access.AgentAllowed(org, endUser, ag.ID, ag.Name) {
		return nil
	}
	return authErr(http.StatusForbidden, access.AgentRefusal(ag.ID))
}

// agentGrant is the agent grant of an object with object_permission.agents agents and
// access_group_ids groupIDs (their agents as this replica's registry holds the groups).
func agentGrant(who pipeline.Caller, agents, groupIDs []string) access.AgentGrant {
	return access.AgentGrant{Restricted: len(agents) > 0 || len(groupIDs) > 0, Agents: agents, GroupIDs: who.GroupAgents(groupIDs)}
}

// traceHeaders carry a call's trace id, in LiteLLM's order (get_chain_id_from_headers:
// x-litellm-trace-id, else x-litellm-session-id).
var traceHeaders = [...]string{"X-Litellm-Trace-Id", "X-Litellm-Session-Id"}

// agentKeyTrace refuses a call made with a key an agent owns (its agent_id) when that agent's
// litellm_params.require_trace_id_on_calls_by_agent is true and the request carries no trace
// id: 400 `Requests made with this agent's key must include the x-litellm-trace-id header.`
// (LiteLLM common_checks, type bad_request_error). An agent that does not resolve (deleted)
// requires nothing, as LiteLLM's registry lookup.
func (s *Server) agentKeyTrace(c echo.Context, k *keys.Key) error {
	id := k.X().AgentID
	if id == "" {
		return nil
	}
	ag, err := s.pipe.ResolveAgent(c.Request().Context(), id)
	if err != nil || ag == nil || ag.ID != id || !ag.RequireTraceIDByAgent {
		return nil
	}
	for _, h := range traceHeaders {
		if strings.TrimSpace(c.Request().Header.Get(h)) != "" {
			return nil
		}
	}
	return errf(http.StatusBadRequest, "bad_request_error", "Requests made with this agent's key must include the x-litellm-trace-id header.")
}

// checkKeyLinks checks what a key write links before anything is written: its budget_id
// (checkBudgetLink) and its agent_id, which must name an existing agent by agent_id (400
// `agent_id: agent '<id>' not found`; LiteLLM looks the key's agent up by id). Whether the
// key's access groups exist is checked inside the write's transaction.
func (s *Server) checkKeyLinks(ctx context.Context, lf map[string]json.RawMessage) error {
	if err := s.checkBudgetLink(ctx, lf); err != nil {
		return err
	}
	raw, ok := lf["agent_id"]
	if !ok || isNull(raw) {
		return nil
	}
	var id string
	_ = json.Unmarshal(raw, &id) // kind-checked by the catalogue (String)
	if id == "" {
		return nil
	}
	if ag, err := s.pipe.ResolveAgent(ctx, id); err != nil || ag == nil || ag.ID != id {
		return badRequest("agent_id: agent '%s' not found", id)
	}
	return nil
}

// headerEndUser is the end user an A2A request names by the x-litellm-customer-id or
// x-litellm-end-user-id header (LiteLLM's order), as this replica's end users registry holds
// it; nil when none is named or known.
func (s *Server) headerEndUser(h http.Header) *accounts.EndUser {
	if s.EndUsers == nil {
		return nil
	}
	for _, name := range [...]string{"X-Litellm-Customer-Id", "X-Litellm-End-User-Id"} {
		if id := strings.TrimSpace(h.Get(name)); id != "" {
			if e, ok := s.EndUsers.Load().ByID(id); ok {
				return e.Value
			}
			return nil
		}
	}
	return nil
}
