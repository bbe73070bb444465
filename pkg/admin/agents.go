package admin

// Agents management (LiteLLM /v1/agents): create, replace, patch, delete and read the rows of
// gateway.agents. Config-file agents are served and listed but never written here.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"lockstep/pkg/a2a"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// AgentRequest is the body of POST /v1/agents and PUT/PATCH /v1/agents/{id}.
type AgentRequest struct {
	AgentName       *string         `json:"agent_name"`
	AgentCardParams json.RawMessage `json:"agent_card_params"`
	LitellmParams   json.RawMessage `json:"litellm_params"`
}

// AgentRow is a gateway.agents row (row_to_json).
type AgentRow struct {
	AgentID         string          `json:"agent_id"`
	AgentName       string          `json:"agent_name"`
	AgentCardParams json.RawMessage `json:"agent_card_params"`
	LitellmParams   json.RawMessage `json:"litellm_params"`
	CreatedAt       *time.Time      `json:"created_at"`
	UpdatedAt       *time.Time      `json:"updated_at"`
}

const (
	configAgentEditErr   = "Can't edit agent. Agent in config. Store agent in db via `/v1/agents`. to edit."
	configAgentDeleteErr = "Can't delete agent. Agent in config. Remove it from the config file instead."
)

func agentNotFound(id string) error { return notFound("Agent with id=%s not found", id) }

func agentNameTaken(name string) error {
	return invalid("agent_name", "Agent with name '%s' already exists", name)
}

// validateAgent builds the agent exactly as the registry will (a2a.NewAgent), so an invalid
// definition is refused (Invalid "Invalid agent: ...", naming every bad field) before anything
// is written. An agent with its own upstream (a2a.Agent.OwnUpstream) must also make a valid
// deployment.
func validateAgent(b *provider.Builder, id, name string, card, params []byte) error {
	agent, err := a2a.NewAgent(id, name, card, params)
	var ve *a2a.ValidationError
	if errors.As(err, &ve) {
		return invalidf("Invalid agent: %s", ve.Error())
	}
	if err != nil {
		return invalidf("Invalid agent: %v", err)
	}
	if agent.OwnUpstream() {
		if _, err := b.NewDeployment(agent.DeploymentID(), agent.Name, agent.UpstreamParams()); err != nil {
			return invalidf("Invalid agent: %v", err)
		}
	}
	return nil
}

// configAgentNamed reports whether a config-file agent is called name.
func (a *Admin) configAgentNamed(name string) bool {
	for _, e := range a.agents.Load().ByName(name) {
		if e.Config {
			return true
		}
	}
	return false
}

// configAgent reports whether id is a config-file agent.
func (a *Admin) configAgent(id string) bool {
	e, ok := a.agents.Load().ByID(id)
	return ok && e.Config
}

// EditableAgent refuses a config-file agent (Invalid "Can't edit agent. Agent in config. ...").
func (a *Admin) EditableAgent(id string) error {
	if a.configAgent(id) {
		return invalidf(configAgentEditErr)
	}
	return nil
}

// DeletableAgent refuses a config-file agent (Invalid "Can't delete agent. Agent in config. ...").
func (a *Admin) DeletableAgent(id string) error {
	if a.configAgent(id) {
		return invalidf(configAgentDeleteErr)
	}
	return nil
}

// CreateAgent is POST /v1/agents: a new gateway.agents row with a new agent_id (uuid),
// litellm_params secrets sealed at rest. Errors: Invalid (an invalid definition, a name taken
// by a config-file or a DB agent).
func (a *Admin) CreateAgent(ctx context.Context, req AgentRequest) (store.Row, error) {
	name := ""
	if req.AgentName != nil {
		name = *req.AgentName
	}
	id := uuid.NewString()
	if err := validateAgent(a.build, id, name, req.AgentCardParams, req.LitellmParams); err != nil {
		return store.Row{}, err
	}
	if a.configAgentNamed(name) {
		return store.Row{}, agentNameTaken(name)
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		row, err = w.Insert(ctx, store.Agent, store.Values{
			"agent_id": id, "agent_name": name,
			"agent_card_params": []byte(req.AgentCardParams), "litellm_params": a.build.SealParams(req.LitellmParams),
		})
		return err
	})
	if errors.Is(err, store.ErrConflict) {
		return store.Row{}, agentNameTaken(name)
	}
	return row, err
}

// editableAgent returns the stored row of id, refusing config agents.
func (a *Admin) editableAgent(ctx context.Context, id string) (AgentRow, error) {
	row, err := a.st.Get(ctx, store.Agent, id)
	if errors.Is(err, store.ErrNotFound) {
		return AgentRow{}, agentNotFound(id)
	}
	if err != nil {
		return AgentRow{}, err
	}
	var r AgentRow
	if err := json.Unmarshal(row.Data, &r); err != nil {
		return AgentRow{}, fmt.Errorf("agent row: %w", err)
	}
	return r, nil
}

// ReplaceAgent is PUT /v1/agents/{id}: the agent's name, card and litellm_params are
// replaced. A litellm_params secret sent back in the masked form the API shows
// ("sk****3456") keeps the stored secret (provider.RestoreMaskedSecrets). Errors: Invalid,
// NotFound "Agent with id=<id> not found".
func (a *Admin) ReplaceAgent(ctx context.Context, id string, req AgentRequest) (store.Row, error) {
	if err := a.EditableAgent(id); err != nil {
		return store.Row{}, err
	}
	cur, err := a.editableAgent(ctx, id)
	if err != nil {
		return store.Row{}, err
	}
	name := ""
	if req.AgentName != nil {
		name = *req.AgentName
	}
	return a.updateAgent(ctx, id, name, req.AgentCardParams, provider.RestoreMaskedSecrets(req.LitellmParams, cur.LitellmParams))
}

// PatchAgent is PATCH /v1/agents/{id}: the given fields replace the stored ones, except
// litellm_params whose keys are merged over the stored ones (so an api_key is kept, as PATCH
// /model/{id}/update does; so is one sent back masked). Errors as ReplaceAgent.
func (a *Admin) PatchAgent(ctx context.Context, id string, req AgentRequest) (store.Row, error) {
	if err := a.EditableAgent(id); err != nil {
		return store.Row{}, err
	}
	cur, err := a.editableAgent(ctx, id)
	if err != nil {
		return store.Row{}, err
	}
	name := cur.AgentName
	if req.AgentName != nil {
		name = *req.AgentName
	}
	card := cur.AgentCardParams
	if !isNull(req.AgentCardParams) {
		card = req.AgentCardParams
	}
	params := cur.LitellmParams
	if !isNull(req.LitellmParams) {
		base, err := objectOf(cur.LitellmParams, "litellm_params")
		if err != nil {
			return store.Row{}, err
		}
		patch, err := objectOf(provider.RestoreMaskedSecrets(req.LitellmParams, cur.LitellmParams), "litellm_params")
		if err != nil {
			return store.Row{}, err
		}
		if params, err = json.Marshal(mergeObjects(base, patch)); err != nil {
			return store.Row{}, err
		}
	}
	return a.updateAgent(ctx, id, name, card, params)
}

// updateAgent validates and writes the edited agent.
func (a *Admin) updateAgent(ctx context.Context, id, name string, card, params []byte) (store.Row, error) {
	if err := validateAgent(a.build, id, name, card, params); err != nil {
		return store.Row{}, err
	}
	if a.configAgentNamed(name) {
		return store.Row{}, agentNameTaken(name)
	}
	var row store.Row
	err := a.Write(ctx, func(w *Writer) error {
		var err error
		row, err = w.Update(ctx, store.Agent, id, store.Values{
			"agent_name": name, "agent_card_params": card, "litellm_params": a.build.SealParams(params),
		})
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Row{}, agentNotFound(id)
	case errors.Is(err, store.ErrConflict):
		return store.Row{}, agentNameTaken(name)
	}
	return row, err
}

// DeleteAgent is DELETE /v1/agents/{id}; the tombstone is applied after commit, so a late
// read-through cannot resurrect the agent. Errors: Invalid (a config-file agent), NotFound.
func (a *Admin) DeleteAgent(ctx context.Context, id string) error {
	if err := a.DeletableAgent(id); err != nil {
		return err
	}
	return a.deleteOne(ctx, store.Agent, id, agentNotFound)
}

// AgentView is an agent as the management routes show it: the data of its gateway.agents row
// (Row), or its registry entry (Entry: a config-file agent, or a DB agent held here while
// Postgres is unreachable).
type AgentView struct {
	Row   []byte
	Entry *registry.Entry[*a2a.Agent]
}

// ListAgents is GET /v1/agents: config-file agents (by name), then, when db, the rows of
// gateway.agents (by created_at, a config agent's id skipped: the config agent is the one
// served). While Postgres is unreachable the DB agents this replica holds are listed instead
// (by name), so a read keeps working during an outage.
func (a *Admin) ListAgents(ctx context.Context, db bool) ([]AgentView, error) {
	snap := a.agents.Load()
	var config, held []*registry.Entry[*a2a.Agent]
	snap.All(func(e *registry.Entry[*a2a.Agent]) bool {
		if e.Config {
			config = append(config, e)
		} else {
			held = append(held, e)
		}
		return true
	})
	byName := func(es []*registry.Entry[*a2a.Agent]) {
		sortEntries(es, func(e *registry.Entry[*a2a.Agent]) string { return e.Value.Name })
	}
	byName(config)
	out := make([]AgentView, 0, snap.Len())
	for _, e := range config {
		out = append(out, AgentView{Entry: e})
	}
	if !db {
		return out, nil
	}
	rows, err := a.st.List(ctx, store.Agent)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		byName(held)
		for _, e := range held {
			out = append(out, AgentView{Entry: e})
		}
	case err != nil:
		return nil, err
	default:
		for _, r := range rows {
			if e, ok := snap.ByID(r.ID); ok && e.Config {
				continue
			}
			out = append(out, AgentView{Row: r.Data})
		}
	}
	return out, nil
}

// GetAgent is GET /v1/agents/{id}: read from Postgres (when db); from this replica's registry
// for a config agent or while Postgres is unreachable. NotFound "Agent with id=<id> not found".
func (a *Admin) GetAgent(ctx context.Context, id string, db bool) (AgentView, error) {
	e, held := a.agents.Load().ByID(id)
	if held && e.Config {
		return AgentView{Entry: e}, nil
	}
	if !db {
		return AgentView{}, agentNotFound(id)
	}
	row, err := a.st.Get(ctx, store.Agent, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return AgentView{}, agentNotFound(id)
	case errors.Is(err, store.ErrUnavailable) && held:
		return AgentView{Entry: e}, nil
	case err != nil:
		return AgentView{}, err
	}
	return AgentView{Row: row.Data}, nil
}

// sortEntries sorts registry entries by name, then id.
func sortEntries[T any](es []*registry.Entry[T], name func(*registry.Entry[T]) string) {
	slices.SortFunc(es, func(x, y *registry.Entry[T]) int {
		if nx, ny := name(x), name(y); nx != ny {
			return strings.Compare(nx, ny)
		}
		return strings.Compare(x.ID, y.ID)
	})
}
