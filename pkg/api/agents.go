package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"lockstep/pkg/format"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/sjson"

	"lockstep/pkg/a2a"
	mgmt "lockstep/pkg/admin"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// agentRoutes: the agents management API (admin) and the A2A endpoints (any key), API.md
// "Agents and A2A". The JSON-RPC and card handling is pkg/a2a's; this file supplies the
// agent lookup (agentResolver) and the completion bridge to the router (agentCompleter).
func (s *Server) agentRoutes() {
	e := s.e
	e.POST("/v1/agents", s.agentNew, s.auth(admin))
	e.GET("/v1/agents", s.agentList, s.auth(admin))
	e.GET("/v1/agents/:id", s.agentGet, s.auth(admin))
	e.PUT("/v1/agents/:id", s.agentPut, s.auth(admin))
	e.PATCH("/v1/agents/:id", s.agentPatch, s.auth(admin))
	e.DELETE("/v1/agents/:id", s.agentDelete, s.auth(admin))

	// A2A spec §5.3 well-known card path; agent.json is the pre-0.3 name, still fetched by
	// older clients.
	for _, card := range []string{"agent-card.json", "agent.json"} {
		e.GET("/a2a/:agent/.well-known/"+card, s.agentCard, s.auth(anyKey))
	}
	e.POST("/a2a/:agent", s.auth(anyKey)(s.agentRPC)) // auth applied once (see routes)
	s.markLongRunning("/a2a/:agent")
}

// AgentNames indexes an agent under its name.
func AgentNames(e *registry.Entry[*a2a.Agent]) []string { return []string{e.Value.Name} }

// --- management API ----------------------------------------------------------------------------

// agentRequest is the body of POST /v1/agents and PUT/PATCH /v1/agents/{id}.
type agentRequest = mgmt.AgentRequest

// agentRowJSON is a gateway.agents row (row_to_json).
type agentRowJSON = mgmt.AgentRow

// agentResponse renders an agent the way every /v1/agents route answers: the stored columns,
// litellm_params with secrets masked. Config-file agents have no timestamps (null).
func agentResponse(a agentRowJSON) map[string]any {
	params := a.LitellmParams
	if isNull(params) {
		params = json.RawMessage("{}")
	}
	return map[string]any{
		"agent_id":          a.AgentID,
		"agent_name":        a.AgentName,
		"agent_card_params": a.AgentCardParams,
		"litellm_params":    json.RawMessage(provider.MaskParams(params)),
		"created_at":        a.CreatedAt,
		"updated_at":        a.UpdatedAt,
	}
}

func agentRowResponse(data []byte) (map[string]any, error) {
	var a agentRowJSON
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("agent row: %w", err)
	}
	return agentResponse(a), nil
}

// agentEntryResponse renders a registry entry: its row when it came from Postgres, else the
// config-file definition.
func agentEntryResponse(e *registry.Entry[*a2a.Agent]) (map[string]any, error) {
	if len(e.Row) > 0 {
		return agentRowResponse(e.Row)
	}
	a := e.Value
	return agentResponse(agentRowJSON{AgentID: a.ID, AgentName: a.Name, AgentCardParams: a.Card, LitellmParams: a.LitellmParams}), nil
}

// agentNew: POST /v1/agents {"agent_name", "agent_card_params", "litellm_params"} → the stored
// agent with a new agent_id (uuid). Duplicate name or invalid definition: 400, nothing stored.
func (s *Server) agentNew(c echo.Context) error {
	if err := s.requireDB(store.Agent, "agents"); err != nil {
		return err
	}
	var req agentRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	row, err := s.mgmt.CreateAgent(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return agentRowOK(c, row.Data)
}

func agentRowOK(c echo.Context, data []byte) error {
	out, err := agentRowResponse(data)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// agentDB reports whether agents are read from Postgres here.
func (s *Server) agentDB() bool { return s.mgmt.Stored(store.Agent) }

// agentList: GET /v1/agents → bare JSON array: config-file agents (by name), then the rows of
// gateway.agents (by created_at). While Postgres is unreachable the DB agents this replica
// holds are listed instead (by name), so a read keeps working during an outage.
func (s *Server) agentList(c echo.Context) error {
	views, err := s.mgmt.ListAgents(c.Request().Context(), s.agentDB())
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(views))
	for _, v := range views {
		m, err := agentViewResponse(v)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	return c.JSON(http.StatusOK, out)
}

func agentViewResponse(v mgmt.AgentView) (map[string]any, error) {
	if v.Entry != nil {
		return agentEntryResponse(v.Entry)
	}
	return agentRowResponse(v.Row)
}

// agentGet: GET /v1/agents/{id} → the agent (404 when unknown). Read from Postgres; from this
// replica's registry for a config agent or while Postgres is unreachable.
func (s *Server) agentGet(c echo.Context) error {
	v, err := s.mgmt.GetAgent(c.Request().Context(), c.Param("id"), s.agentDB())
	if err != nil {
		return err
	}
	out, err := agentViewResponse(v)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// agentPut: PUT /v1/agents/{id} — replace the agent's name, card and litellm_params (all three
// required). A litellm_params secret sent back in the masked form the API shows
// ("sk****3456") keeps the stored secret (provider.RestoreMaskedSecrets).
func (s *Server) agentPut(c echo.Context) error {
	return s.agentEdit(c, s.mgmt.ReplaceAgent)
}

// agentPatch: PATCH /v1/agents/{id} — the given fields replace the stored ones, except
// litellm_params whose keys are merged over the stored ones (so an api_key is kept, as
// PATCH /model/{id}/update does; so is one sent back masked).
func (s *Server) agentPatch(c echo.Context) error {
	return s.agentEdit(c, s.mgmt.PatchAgent)
}

func (s *Server) agentEdit(c echo.Context, edit func(context.Context, string, mgmt.AgentRequest) (store.Row, error)) error {
	id := c.Param("id")
	var req agentRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if err := s.mgmt.EditableAgent(id); err != nil {
		return err
	}
	if err := s.requireDB(store.Agent, "agents"); err != nil {
		return err
	}
	row, err := edit(c.Request().Context(), id, req)
	if err != nil {
		return err
	}
	return agentRowOK(c, row.Data)
}

// agentDelete: DELETE /v1/agents/{id} → {"message": "Agent <id> deleted successfully"};
// 404 when unknown; 400 for a config-file agent.
func (s *Server) agentDelete(c echo.Context) error {
	id := c.Param("id")
	if err := s.mgmt.DeletableAgent(id); err != nil {
		return err
	}
	if err := s.requireDB(store.Agent, "agents"); err != nil {
		return err
	}
	if err := s.mgmt.DeleteAgent(c.Request().Context(), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"message": "Agent " + id + " deleted successfully"})
}

// --- A2A routes ----------------------------------------------------------------------------------

// agentCard: GET /a2a/{id_or_name}/.well-known/agent-card.json (and agent.json).
func (s *Server) agentCard(c echo.Context) error {
	if err := s.agentAllowed(c, caller(c)); err != nil { // object_permission.agents
		return err
	}
	s.a2a.Card(c.Response(), c.Request(), agentParam(c), requestBaseURL(c.Request()))
	return nil
}

// agentRPC: POST /a2a/{id_or_name}, one JSON-RPC 2.0 request (see a2a.Handler.RPC).
// The caller goes to the completer as the a2a.Call parameter (a2a.Call.Caller, a principal),
// which checks the key's model access on the agent's model, together with the request's
// header (the end user may be named there) and the response's.
//
// Rate-limit headers (API.md: every response to a limited key carries them): the response
// first gets x-ratelimit-limit-requests / -remaining-requests (and -tokens with a tpm_limit)
// as this replica holds the key's limits before the call; message/send then replaces them
// with the values after its admission, exactly as the LLM routes answer (and a refusal adds
// Retry-After). message/stream sends its header with the first event, before the call is
// admitted, so it carries the values from before the call.
func (s *Server) agentRPC(c echo.Context) error {
	req := c.Request()
	who := caller(c)
	if err := s.agentAllowed(c, who); err != nil { // object_permission.agents
		return err
	}
	h := c.Response().Header()
	if k := who.key; k != nil && k.Limits.Any() && s.Limiter != nil {
		pipeline.SetRateHeaders(h, s.Limiter.Status(k.Token, k.Limits))
	}
	ctx := a2a.WithOwner(req.Context(), taskOwner(who))
	s.a2a.RPC(c.Response(), req.WithContext(ctx), agentParam(c), a2a.Call{Caller: who, Header: req.Header, RespHeader: h})
	return nil
}

// taskOwner is who creates or asks for an A2A task (API.md: tasks answer only their
// creator's key, or team): the key's hash and team_id, or the master key (every task).
func taskOwner(who principal) a2a.Owner {
	o := a2a.Owner{Admin: who.admin}
	if who.key != nil {
		o.Key, o.Team = who.key.Token, who.key.TeamID
	}
	return o
}

// agentParam is the {id_or_name} path segment, percent-decoded (unescapeParams).
func agentParam(c echo.Context) string { return c.Param("agent") }

// requestBaseURL is the base URL the caller reached this gateway at, "scheme://host", for the
// url of a served agent card: X-Forwarded-Proto and X-Forwarded-Host (first value each, as set
// by a load balancer) win over the connection's TLS state and the Host header.
func requestBaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := strings.ToLower(firstHeaderValue(r, "X-Forwarded-Proto")); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if h := firstHeaderValue(r, "X-Forwarded-Host"); validHost(h) {
		host = h
	}
	return scheme + "://" + host
}

func firstHeaderValue(r *http.Request, name string) string {
	v, _, _ := strings.Cut(r.Header.Get(name), ",")
	return strings.TrimSpace(v)
}

// validHost accepts a bare host[:port]: nothing that would change the meaning of the URL it
// is put in.
func validHost(h string) bool {
	return h != "" && !strings.ContainsAny(h, "/\\@?# \t")
}

// agentResolver finds agents by agent_id, then agent_name, with a read-through (the AGENTS
// budget: store.LoadByName matches either column) on a miss. It never touches the models
// registry, so an unknown agent cannot spend a models read-through.
type agentResolver struct{ s *Server }

var _ a2a.Resolver = agentResolver{}

func (r agentResolver) ResolveAgent(ctx context.Context, idOrName string) (*a2a.Agent, error) {
	reg := r.s.Agents
	if reg == nil || idOrName == "" {
		return nil, a2a.ErrAgentNotFound
	}
	if a := lookupAgent(reg.Load(), idOrName); a != nil {
		return a, nil
	}
	// Resolve fails closed: an exhausted budget or a DB error leaves the miss standing.
	if reg.Resolve(ctx, idOrName) != nil {
		return nil, a2a.ErrAgentNotFound
	}
	if a := lookupAgent(reg.Load(), idOrName); a != nil {
		return a, nil
	}
	return nil, a2a.ErrAgentNotFound
}

func lookupAgent(snap *registry.Snapshot[*a2a.Agent], idOrName string) *a2a.Agent {
	if e, ok := snap.ByID(idOrName); ok {
		return e.Value
	}
	if es := snap.ByName(idOrName); len(es) > 0 {
		return es[0].Value
	}
	return nil
}

// --- completion bridge ---------------------------------------------------------------------------

// agentCompleter runs an agent's model through the call pipeline (pipeline.go), exactly as the
// LLM routes run a chat completion: the message's text becomes the user message of an OpenAI
// chat request to the agent's model.
//
// Access: the caller's key must be allowed the agent's model (litellm_params.model), with the
// LLM routes' rule, re-check and denial text — also when the agent has its own upstream. A
// denial is JSON-RPC a2a.CodeUnauthorized (-31403, a2a-go's a2a.ErrUnauthorized "permission
// denied"; the LLM routes answer HTTP 401) with the key_model_access_denied message and data
// {"type": "key_model_access_denied", "model"}; a key blocked or expired meanwhile gets
// a2a.CodeUnauthenticated (-31401).
//
// Guardrails: the agent's litellm_params.guardrails (by name, read-through on a miss) plus every
// default_on guardrail, each in the modes it is configured for, over every text of the chat
// request and answer (streamed: every frame). An input block (pre_call, during_call) is
// JSON-RPC -32602 (the message is the invalid parameter), a reply block -32603; both carry the
// content filter's message ("Content blocked: ...") and data {"guardrail": name}. An agent
// guardrail that does not exist fails the call (-32603): an agent never runs unguarded.
//
// Model: see agentTarget.
type agentCompleter struct{ s *Server }

var _ a2a.Completer = agentCompleter{}

func (c agentCompleter) Complete(ctx context.Context, ac a2a.Call, agent *a2a.Agent, text string) (string, error) {
	ctx, call, err := c.s.agentCall(ctx, ac, agent, text, false)
	if err != nil {
		return "", a2aError(err, agent)
	}
	res, err := call.do(ctx)
	if err != nil {
		return "", a2aError(err, agent)
	}
	return res.Text(), nil
}

func (c agentCompleter) Stream(ctx context.Context, ac a2a.Call, agent *a2a.Agent, text string, onDelta func(string) error) error {
	ctx, call, err := c.s.agentCall(ctx, ac, agent, text, true)
	if err != nil {
		return a2aError(err, agent)
	}
	st, err := call.stream(ctx)
	if err != nil {
		return a2aError(err, agent)
	}
	defer st.Close()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return a2aError(err, agent)
		}
		if ev.Text == "" {
			continue
		}
		if err := onDelta(ev.Text); err != nil {
			return err
		}
	}
}

// agentCall starts the pipeline for one agent message of the A2A request ac (its caller and
// headers).
func (s *Server) agentCall(ctx context.Context, ac a2a.Call, agent *a2a.Agent, text string, stream bool) (context.Context, *call, error) {
	who, ok := ac.Caller.(principal)
	if !ok {
		return ctx, nil, errors.New("agent call without a caller") // every A2A route sets one
	}
	body := format.ChatRequest(agent.Model, text)
	if stream {
		// the usage chunk tells the limits step what the call cost
		body, _ = sjson.SetRawBytes(body, "stream_options", []byte(`{"include_usage":true}`))
		body, _ = sjson.SetBytes(body, "stream", true)
	}
	// message/send answers after the call: the limits step sets the response's rate-limit
	// headers; a stream's header went out with its first event already
	respHeader := ac.RespHeader
	if stream {
		respHeader = nil
	}
	return s.startCall(ctx, callSpec{
		format: format.FormatChat, route: "a2a", who: who, model: agent.Model, body: body, stream: stream,
		header: respHeader, reqHeader: ac.Header,
		resolve: func(ctx context.Context) (target, error) { return s.agentTarget(ctx, agent) },
		guardrails: func(ctx context.Context, body []byte) ([]*guardrail.Guardrail, []byte, error) {
			gs, err := s.agentGuardrails(ctx, agent)
			return gs, body, err
		},
	})
}

// a2aError maps a pipeline error to what the A2A caller sees (see agentCompleter).
func a2aError(err error, agent *a2a.Agent) error {
	var ae *Error
	var ad *pipeline.AccessDenied
	var gb *guardrailBlock
	switch {
	case errors.As(err, &gb):
		code := a2a.CodeInvalidParams
		if !gb.Input {
			code = a2a.CodeInternalError
		}
		return &a2a.Error{Code: code, Message: gb.Message, Data: map[string]any{"guardrail": gb.Guardrail}}
	case errors.As(err, &ad):
		code := a2a.CodeUnauthorized
		if ad.Scope == "user" { // as before the typed error: only key and team denials are -31403
			code = a2a.CodeUnauthenticated
		}
		return &a2a.Error{Code: code, Message: ad.Error(), Data: map[string]any{"type": ad.Type(), "model": agent.Model}}
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized: // the key blocked or expired meanwhile
		return &a2a.Error{Code: a2a.CodeUnauthenticated, Message: ae.Message, Data: map[string]any{"type": ae.Type, "model": agent.Model}}
	case admitError(err) != nil:
		// the limits step refused the call: its message, and the status the LLM routes answer
		ae = admitError(err)
		return &a2a.Error{Code: a2a.CodeInternalError, Message: ae.Message, Data: map[string]any{"type": ae.Type, "status": ae.Status}}
	}
	return err
}

// agentTarget is the resolve step for an agent: where its model is served.
//   - an agent with its own upstream (litellm_params api_base, api_key, custom_llm_provider or
//     mock_response; see hasOwnUpstream) is called directly, as LiteLLM calls a model from its
//     litellm_params, without spending a models read-through;
//   - otherwise litellm_params.model is a model group of this gateway (read-through on a miss),
//     served by the router with its retries and cooldowns;
//   - failing that, a "provider/model" is called at the provider's default endpoint with its
//     environment key (OPENAI_API_KEY, ...), as LiteLLM would.
func (s *Server) agentTarget(ctx context.Context, agent *a2a.Agent) (target, error) {
	newDeployment := s.Deployments.NewDeployment // a database agent: the secrets policy applies
	if agent.FromConfig {
		newDeployment = s.Deployments.NewConfigDeployment
	}
	direct := func() (target, error) {
		d, err := newDeployment(agentDeploymentID(agent), agent.Name, agent.LitellmParams)
		if err != nil {
			return target{}, fmt.Errorf("agent %q: %w", agent.Name, err)
		}
		return target{direct: &router.Deployment{Deployment: d, LitellmParams: agent.LitellmParams, ModelInfo: json.RawMessage("{}")}}, nil
	}
	if hasOwnUpstream(agent) {
		return direct()
	}
	group, err := s.Router.Group(ctx, agent.Model)
	if err == nil {
		return target{group: group}, nil
	}
	if !errors.Is(err, router.ErrUnknownModel) {
		return target{}, err
	}
	if t, derr := direct(); derr == nil && t.direct.APIKey != "" {
		return t, nil
	}
	return target{}, fmt.Errorf("agent %q: model %q is not served by this gateway (not a model group; no api_base or api_key in the agent's litellm_params)", agent.Name, agent.Model)
}

// hasOwnUpstream reports whether the agent's litellm_params name an upstream of their own
// rather than a model group of the gateway.
func hasOwnUpstream(agent *a2a.Agent) bool { return agent.OwnUpstream() }

// agentDeploymentID names the ad-hoc deployment of an agent with its own upstream.
func agentDeploymentID(agent *a2a.Agent) string { return agent.DeploymentID() }

// agentGuardrails resolves the guardrails an agent call runs: default_on ones plus the agent's
// (namedGuardrails, the resolver of every call).
func (s *Server) agentGuardrails(ctx context.Context, agent *a2a.Agent) ([]*guardrail.Guardrail, error) {
	return s.namedGuardrails(ctx, agent.Guardrails)
}
