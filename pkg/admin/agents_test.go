package admin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lockstep/pkg/a2a"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func newAgentAdmin(t *testing.T) (*Admin, *fakeStore, *registry.Registry[*a2a.Agent]) {
	t.Helper()
	reg := registry.New(registry.Options[*a2a.Agent]{Type: store.Agent, Build: a2a.BuildRow,
		Names: func(e *registry.Entry[*a2a.Agent]) []string { return []string{e.Value.Name} }})
	cfg, err := a2a.NewAgent("cfg-agent", "cfgname", cardOf("cfgname"), json.RawMessage(`{"model":"gpt"}`))
	if err != nil {
		t.Fatal(err)
	}
	reg.SetConfig(map[string]*a2a.Agent{"cfg-agent": cfg})
	st := newFakeStore()
	return New(Deps{Store: st, Agents: reg, Registries: []Sink{reg}}), st, reg
}

// cardOf is a valid agent card (A2A 0.3 required fields).
func cardOf(name string) json.RawMessage {
	return json.RawMessage(`{"name":"` + name + `","description":"d","version":"1.0.0","url":"http://agent.invalid/","protocolVersion":"0.3.0",` +
		`"capabilities":{"streaming":true},"defaultInputModes":["text"],"defaultOutputModes":["text"],` +
		`"skills":[{"id":"chat","name":"Chat","description":"chats","tags":["chat"]}]}`)
}

var (
	card   = cardOf("A")
	aparam = json.RawMessage(`{"model":"openai/gpt","api_key":"sk-agent-secret-9999","api_base":"http://up/v1"}`)
)

func TestAgents(t *testing.T) {
	a, st, reg := newAgentAdmin(t)
	ctx := context.Background()

	_, err := a.CreateAgent(ctx, AgentRequest{})
	var in *Invalid
	if !errors.As(err, &in) || !strings.HasPrefix(in.Msg, "Invalid agent: ") || !strings.Contains(in.Msg, "agent_name is required") {
		t.Fatalf("%v", err)
	}
	_, err = a.CreateAgent(ctx, AgentRequest{AgentName: ptr("cfgname"), AgentCardParams: card, LitellmParams: aparam})
	asInvalid(t, err, "Agent with name 'cfgname' already exists")
	_, err = a.CreateAgent(ctx, AgentRequest{AgentName: ptr("x"), AgentCardParams: card, LitellmParams: json.RawMessage(`{"model":"openai/gpt","api_base":"ftp://x"}`)})
	if !errors.As(err, &in) || !strings.HasPrefix(in.Msg, "Invalid agent: ") {
		t.Fatalf("an agent whose own upstream is no valid deployment: %v", err)
	}

	row, err := a.CreateAgent(ctx, AgentRequest{AgentName: ptr("one"), AgentCardParams: card, LitellmParams: aparam})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := reg.Load().ByID(row.ID); !ok || e.Value.Name != "one" {
		t.Fatal("the writer serves its agent at once")
	}
	st.failOn["insert agent"] = store.ErrConflict
	_, err = a.CreateAgent(ctx, AgentRequest{AgentName: ptr("one"), AgentCardParams: card, LitellmParams: aparam})
	asInvalid(t, err, "Agent with name 'one' already exists")
	delete(st.failOn, "insert agent")

	// replace: a masked secret sent back keeps the stored one
	asInvalid(t, a.EditableAgent("cfg-agent"), configAgentEditErr)
	_, err = a.ReplaceAgent(ctx, "cfg-agent", AgentRequest{})
	asInvalid(t, err, configAgentEditErr)
	_, err = a.ReplaceAgent(ctx, "nope", AgentRequest{})
	asNotFound(t, err, "Agent with id=nope not found")
	row, err = a.ReplaceAgent(ctx, row.ID, AgentRequest{AgentName: ptr("two"), AgentCardParams: card, LitellmParams: json.RawMessage(`{"model":"openai/gpt","api_key":"sk****9999","api_base":"http://up/v1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Load().ByID(row.ID)
	if e.Value.Name != "two" || !strings.Contains(string(e.Value.LitellmParams), "sk-agent-secret-9999") {
		t.Fatalf("replace applied, secret kept: %s %s", e.Value.Name, e.Value.LitellmParams)
	}
	_, err = a.ReplaceAgent(ctx, row.ID, AgentRequest{AgentName: ptr("cfgname"), AgentCardParams: card, LitellmParams: aparam})
	asInvalid(t, err, "Agent with name 'cfgname' already exists")

	// patch: params merged
	_, err = a.PatchAgent(ctx, "cfg-agent", AgentRequest{})
	asInvalid(t, err, configAgentEditErr)
	_, err = a.PatchAgent(ctx, "nope", AgentRequest{})
	asNotFound(t, err, "Agent with id=nope not found")
	_, err = a.PatchAgent(ctx, row.ID, AgentRequest{LitellmParams: json.RawMessage(`[1]`)})
	asInvalid(t, err, "litellm_params must be a JSON object")
	row, err = a.PatchAgent(ctx, row.ID, AgentRequest{AgentName: ptr("three"), AgentCardParams: cardOf("B"), LitellmParams: json.RawMessage(`{"temperature":0.5}`)})
	if err != nil {
		t.Fatal(err)
	}
	e, _ = reg.Load().ByID(row.ID)
	if e.Value.Name != "three" || !strings.Contains(string(e.Value.LitellmParams), "sk-agent-secret-9999") || !strings.Contains(string(e.Value.LitellmParams), "temperature") {
		t.Fatalf("patch merged: %s", e.Value.LitellmParams)
	}
	st.failOn["update agent"] = store.ErrNotFound
	_, err = a.PatchAgent(ctx, row.ID, AgentRequest{})
	asNotFound(t, err, "Agent with id="+row.ID+" not found")
	st.failOn["update agent"] = store.ErrConflict
	_, err = a.PatchAgent(ctx, row.ID, AgentRequest{})
	asInvalid(t, err, "Agent with name 'three' already exists")
	delete(st.failOn, "update agent")

	// reads
	views, err := a.ListAgents(ctx, true)
	if err != nil || len(views) != 2 || views[0].Entry == nil || views[1].Row == nil {
		t.Fatalf("config agent first, then the rows: %+v %v", views, err)
	}
	views, _ = a.ListAgents(ctx, false)
	if len(views) != 1 {
		t.Fatalf("without a database: config agents only: %+v", views)
	}
	st.failOn["list agent"] = fmtUnavailable()
	views, err = a.ListAgents(ctx, true)
	if err != nil || len(views) != 2 || views[1].Entry == nil {
		t.Fatalf("during an outage, the agents held: %+v %v", views, err)
	}
	st.failOn["list agent"] = errDown
	if _, err := a.ListAgents(ctx, true); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	if v, err := a.GetAgent(ctx, "cfg-agent", true); err != nil || v.Entry == nil {
		t.Fatal(err)
	}
	if v, err := a.GetAgent(ctx, row.ID, true); err != nil || v.Row == nil {
		t.Fatal(err)
	}
	_, err = a.GetAgent(ctx, row.ID, false)
	asNotFound(t, err, "Agent with id="+row.ID+" not found")
	_, err = a.GetAgent(ctx, "nope", true)
	asNotFound(t, err, "Agent with id=nope not found")
	st.failOn["get agent"] = fmtUnavailable()
	if v, err := a.GetAgent(ctx, row.ID, true); err != nil || v.Entry == nil {
		t.Fatalf("during an outage, the agent held: %v", err)
	}
	st.failOn["get agent"] = errDown
	if _, err := a.GetAgent(ctx, row.ID, true); !errors.Is(err, errDown) {
		t.Fatal(err)
	}
	delete(st.failOn, "get agent")

	// delete
	asInvalid(t, a.DeleteAgent(ctx, "cfg-agent"), configAgentDeleteErr)
	asNotFound(t, a.DeleteAgent(ctx, "nope"), "Agent with id=nope not found")
	if err := a.DeleteAgent(ctx, row.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Load().ByID(row.ID); ok {
		t.Fatal("the delete is applied at once")
	}
}

func fmtUnavailable() error { return errors.Join(store.ErrUnavailable) }
