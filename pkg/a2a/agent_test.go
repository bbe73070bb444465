package a2a

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewAgent(t *testing.T) {
	t.Parallel()

	agent, err := NewAgent("id-1", "echo", []byte("  "+testCard("echo")+"\n"),
		[]byte(`{"model": "openai/gpt-4o-mini", "custom_llm_provider": "openai", "guardrails": ["pii", "words"], "api_key": "ignored"}`))
	require.NoError(t, err)
	require.Equal(t, "id-1", agent.ID)
	require.Equal(t, "echo", agent.Name)
	require.JSONEq(t, testCard("echo"), string(agent.Card))
	require.Equal(t, "openai/gpt-4o-mini", agent.Model)
	require.Equal(t, "openai", agent.CustomLLMProvider)
	require.Equal(t, []string{"pii", "words"}, agent.Guardrails)
	require.JSONEq(t, `{"model": "openai/gpt-4o-mini", "custom_llm_provider": "openai", "guardrails": ["pii", "words"], "api_key": "ignored"}`,
		string(agent.LitellmParams))

	// A single guardrail name is a one-element list, as in LiteLLM.
	agent, err = NewAgent("id-1", "echo", []byte(testCard("echo")), []byte(`{"model": "m", "guardrails": "pii"}`))
	require.NoError(t, err)
	require.Equal(t, []string{"pii"}, agent.Guardrails)
	require.Empty(t, agent.CustomLLMProvider)
}

func TestNewAgentErrors(t *testing.T) {
	t.Parallel()

	card := testCard("echo")
	tests := []struct {
		name    string
		id      string
		agent   string
		card    string
		params  string
		wantErr string
	}{
		{name: "NoName", id: "id", agent: " ", card: card, params: `{"model": "m"}`,
			wantErr: "agent_name is required"},
		{name: "NoID", id: "", agent: "a", card: card, params: `{"model": "m"}`,
			wantErr: "agent_id is required"},
		{name: "NoParams", id: "id", agent: "a", card: card, params: ``,
			wantErr: "litellm_params.model is required"},
		{name: "NullParams", id: "id", agent: "a", card: card, params: `null`,
			wantErr: "litellm_params.model is required"},
		{name: "EmptyModel", id: "id", agent: "a", card: card, params: `{"model": ""}`,
			wantErr: "litellm_params.model is required"},
		{name: "ModelNotString", id: "id", agent: "a", card: card, params: `{"model": 4}`,
			wantErr: "litellm_params.model must be a string"},
		{name: "ParamsNotObject", id: "id", agent: "a", card: card, params: `["m"]`,
			wantErr: "litellm_params must be an object"},
		{name: "BadProvider", id: "id", agent: "a", card: card, params: `{"model": "m", "custom_llm_provider": 1}`,
			wantErr: "litellm_params.custom_llm_provider must be a string"},
		{name: "BadGuardrails", id: "id", agent: "a", card: card, params: `{"model": "m", "guardrails": [1]}`,
			wantErr: "litellm_params.guardrails must be an array of strings"},
		{name: "Everything", id: "id", agent: "", card: `{}`, params: `{}`,
			wantErr: "agent_name is required; agent_card_params.name is required; agent_card_params.description is required; " +
				"agent_card_params.version is required; agent_card_params.capabilities is required; " +
				"agent_card_params.defaultInputModes is required; agent_card_params.defaultOutputModes is required; " +
				"agent_card_params.skills is required; litellm_params.model is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent, err := NewAgent(tt.id, tt.agent, []byte(tt.card), []byte(tt.params))
			require.Nil(t, agent)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}

func TestValidateCard(t *testing.T) {
	t.Parallel()

	replace := func(old, new string) string {
		card := testCard("echo")
		require.Contains(t, card, old)
		return strings.Replace(card, old, new, 1)
	}
	tests := []struct {
		name    string
		card    string
		wantErr string // "" for valid
	}{
		{name: "Valid", card: testCard("echo")},
		{name: "NoURL", card: replace(`"url": "http://upstream.internal:9999/",`, ``)},
		{name: "EmptySkills", card: replace(`"skills": [{"id": "echo", "name": "Echo", "description": "Says it back", "tags": ["test"]}]`, `"skills": []`)},
		{name: "Empty", card: ``, wantErr: "agent_card_params is required"},
		{name: "Null", card: `null`, wantErr: "agent_card_params is required"},
		{name: "NotJSON", card: `{name: x}`, wantErr: "agent_card_params is not valid JSON"},
		{name: "NotObject", card: `[1]`, wantErr: "agent_card_params must be an object"},
		{name: "EmptyName", card: replace(`"name": "echo"`, `"name": ""`), wantErr: "agent_card_params.name is required"},
		{name: "NameNotString", card: replace(`"name": "echo"`, `"name": 1`), wantErr: "agent_card_params.name must be a string"},
		{name: "SkillsNotArray", card: replace(`"skills": [`, `"skills": {"x": [`) + "}",
			wantErr: "agent_card_params.skills must be an array"},
		{name: "SkillFields", card: replace(`{"id": "echo", "name": "Echo", "description": "Says it back", "tags": ["test"]}`,
			`{"id": "echo", "tags": "x"}, 5`),
			wantErr: "agent_card_params.skills[0].name is required; agent_card_params.skills[0].description is required; " +
				"agent_card_params.skills[0].tags must be an array of strings; agent_card_params.skills[1] must be an object"},
		{name: "CapabilitiesNotObject", card: replace(`"capabilities": {"streaming": true}`, `"capabilities": true`),
			wantErr: "agent_card_params.capabilities must be an object"},
		{name: "StreamingNotBool", card: replace(`"streaming": true`, `"streaming": "yes"`),
			wantErr: "agent_card_params.capabilities.streaming must be a boolean"},
		{name: "ModesNotStrings", card: replace(`"defaultInputModes": ["text/plain"]`, `"defaultInputModes": [1]`),
			wantErr: "agent_card_params.defaultInputModes must be an array of strings"},
		{name: "URLNotString", card: replace(`"url": "http://upstream.internal:9999/"`, `"url": 5`),
			wantErr: "agent_card_params.url must be a string"},
		{name: "OptionalFieldWrongType", card: replace(`"version": "1.0.0",`, `"version": "1.0.0", "iconUrl": 5,`),
			wantErr: "agent_card_params is not a valid A2A AgentCard: json: cannot unmarshal number into Go struct field AgentCard.iconUrl of type string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateCard([]byte(tt.card))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.EqualError(t, err, tt.wantErr)
		})
	}
}
