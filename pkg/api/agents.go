package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"lockstep/pkg/a2a"
	mgmt "lockstep/pkg/admin"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/format"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
)

// agentRoutes: the agents management API (admin) and the A2A endpoints (any key), API.md
// "Agents and A2A". The JSON-RPC and card handling is pkg/a2a's; the agent lookup is
// pkg/call's (pipeline.Pipeline.ResolveAgent); this file supplies the completion bridge
// (agentCompleter): the A2A call → the pipeline → the answer, its errors in JSON-RPC codes.
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
	if len(e.Value.Row) > 0 {
		return agentRowResponse(e.Value.Row)
	}
	a := e.Value
	return agentResponse(agentRowJSON{AgentID: a.ID, AgentName: a.Name, AgentCardParams: a.Card, LitellmParams: a.LitellmParams}), nil
}

// agentNew: POST /v1/agents {"agent_name", "agent_card_params", "litellm_params"} → the stored
// agent with a new agent_id (uuid). Duplicate name or invalid definition: 400, nothing stored.
func (s *Server) agentNew(c echo.Context) error {
	if err := s.requireDB(mgmt.TypeAgent, "agents"); err != nil {
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
func (s *Server) agentDB() bool { return s.mgmt.Stored(mgmt.TypeAgent) }

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

func (s *Server) agentEdit(c echo.Context, edit func(context.Context, string, mgmt.AgentRequest) (mgmt.Row, error)) error {
	id := c.Param("id")
	var req agentRequest
	if err := decodeStrict(c, &req); err != nil {
		return err
	}
	if err := s.mgmt.EditableAgent(id); err != nil {
		return err
	}
	if err := s.requireDB(mgmt.TypeAgent, "agents"); err != nil {
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
	if err := s.requireDB(mgmt.TypeAgent, "agents"); err != nil {
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
	if k := who.Key; k != nil && k.Limits.Any() && s.Limiter != nil {
		pipeline.SetRateHeaders(h, s.Limiter.Status(k.Token, k.Limits))
	}
	hops, ok := provider.ParseA2AHops(req.Header.Get(provider.A2AHopsHeader))
	if !ok {
		return badRequest("%s: must be a non-negative integer, got %q", provider.A2AHopsHeader, req.Header.Get(provider.A2AHopsHeader))
	}
	if hops >= provider.MaxA2AHops {
		return badRequest("a2a agent: this request already passed through %d remote A2A agent calls (%s); an agent's URL points back at a gateway", hops, provider.A2AHopsHeader)
	}
	ctx := a2a.WithOwner(provider.WithA2AHops(req.Context(), hops), taskOwner(who))
	s.a2a.RPC(c.Response(), req.WithContext(ctx), agentParam(c), a2a.Call{Caller: who.Caller, Header: req.Header, RespHeader: h})
	return nil
}

// taskOwner is who creates or asks for an A2A task (API.md: tasks answer only their
// creator's key, or team): the key's hash and team_id, or the master key (every task).
func taskOwner(who principal) a2a.Owner {
	o := a2a.Owner{Admin: who.Admin}
	if who.Key != nil {
		o.Key, o.Team = who.Key.Token, who.Key.TeamID
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

// --- completion bridge ---------------------------------------------------------------------------

// agentCompleter runs an agent's model through the call pipeline (pipeline.Pipeline.StartAgent), exactly as the
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
	ctx, call, err := c.start(ctx, ac, agent, text, false)
	if err != nil {
		return "", a2aError(err, agent)
	}
	res, err := call.Do(ctx)
	if err != nil {
		return "", a2aError(err, agent)
	}
	return res.Text(), nil
}

func (c agentCompleter) Stream(ctx context.Context, ac a2a.Call, agent *a2a.Agent, text string, onDelta func(string) error) error {
	ctx, call, err := c.start(ctx, ac, agent, text, true)
	if err != nil {
		return a2aError(err, agent)
	}
	st, err := call.Stream(ctx)
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
			if msg, failed := streamErrorFrame(ev.Data); failed {
				// the upstream failed mid-stream and the pipeline rendered its error frame: the
				// task fails with it (it is not a completed reply)
				return &a2a.Error{Code: a2a.CodeInternalError, Message: msg}
			}
			continue
		}
		if err := onDelta(ev.Text); err != nil {
			return err
		}
	}
}

// streamErrorFrame finds the error event an OpenAI chat stream ends with when it fails after
// it started (`data: {"error": {"message", ...}}`, format.Renderer.Fail) in data, one event's
// SSE frames, and returns its message.
func streamErrorFrame(data []byte) (string, bool) {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if j, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.HasPrefix(j, []byte(`{"error"`)) {
			return gjson.GetBytes(j, "error.message").Str, true
		}
	}
	return "", false
}

// start starts the pipeline for one agent message of the A2A request ac (its caller, a
// pipeline.Caller, and headers).
func (c agentCompleter) start(ctx context.Context, ac a2a.Call, agent *a2a.Agent, text string, stream bool) (context.Context, *pipeline.Call, error) {
	who, ok := ac.Caller.(pipeline.Caller)
	if !ok {
		return ctx, nil, errors.New("agent call without a caller") // every A2A route sets one
	}
	return c.s.pipe.StartAgent(ctx, who, ac.Header, ac.RespHeader, agent, text, stream)
}

// a2aError maps a pipeline error to what the A2A caller sees (see agentCompleter).
func a2aError(err error, agent *a2a.Agent) error {
	var ae *Error
	var ad *pipeline.AccessDenied
	var gb *pipeline.Blocked
	var re *format.RequestError
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
	case admitError(err) != nil:
		// the limits step refused the call: its message, and the status the LLM routes answer
		ae = admitError(err)
		return &a2a.Error{Code: a2a.CodeInternalError, Message: ae.Message, Data: map[string]any{"type": ae.Type, "status": ae.Status}}
	case errors.As(err, &re):
		// the request refused before any call: -32603 with the error's text, as a 400 upstream
		// error is answered (a2a's internal error)
		return &a2a.Error{Code: a2a.CodeInternalError, Message: "Internal error: " + err.Error()}
	}
	if ce := callError(err); ce != nil {
		ae = ce
	} else if !errors.As(err, &ae) {
		ae = nil
	}
	if ae != nil && ae.Status == http.StatusUnauthorized { // the key blocked or expired meanwhile
		return &a2a.Error{Code: a2a.CodeUnauthenticated, Message: ae.Message, Data: map[string]any{"type": ae.Type, "model": agent.Model}}
	}
	return err
}
