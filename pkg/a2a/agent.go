// Package a2a serves the gateway's agents over the A2A protocol v0.3 JSON-RPC 2.0 binding
// (A2A spec §3.2.1, §7) and, on the same route, the A2A 1.0 JSON-RPC binding (rpc10.go), chosen
// per request by the A2A-Version header (version.go): the agent card at
// GET /a2a/{id_or_name}/.well-known/agent-card.json and JSON-RPC at POST /a2a/{id_or_name}.
//
// An agent is a thin shell around one of the gateway's models: the text parts of an incoming
// message go to the agent's model through a [Completer] and the reply comes back as an A2A
// Message (message/send, §7.1) or as a streamed Task (message/stream, §7.2). The package knows
// neither storage nor the LLM plumbing: agents come from a [Resolver], replies from a
// [Completer], both implemented by the gateway.
//
// Wire shapes are those of github.com/a2aproject/a2a-go/a2a (the v0.3 types), so the official
// clients parse them; 1.0 requests get the same results converted to the 1.0 shapes
// (wire10.go).
package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	a2atypes "github.com/a2aproject/a2a-go/a2a"
	"github.com/tidwall/gjson"

	"lockstep/pkg/numbers"
)

// ErrAgentNotFound is returned by a [Resolver] when no agent has the requested id or name
// (after the caller's read-through).
var ErrAgentNotFound = errors.New("agent not found")

// Agent is an immutable runtime agent built from a gateway.agents row (or the config's
// `agents` list) by [NewAgent]. Treat every field as read-only.
type Agent struct {
	// ID is agent_id (a uuid); the served card's url ends in "/a2a/" + ID.
	ID string
	// Name is agent_name, unique; requests may address the agent by it.
	Name string
	// Card is agent_card_params exactly as given: an A2A AgentCard (A2A spec §5.5) that
	// passed [ValidateCard].
	Card json.RawMessage
	// Model is litellm_params.model: a model group name served by the gateway router, or
	// "provider/model".
	Model string
	// CustomLLMProvider is litellm_params.custom_llm_provider; empty when not set.
	CustomLLMProvider string
	// Guardrails is litellm_params.guardrails (names); nil when not set. The Completer
	// applies them; this package does not.
	Guardrails []string
	// LitellmParams is litellm_params exactly as given (a JSON object), for a Completer that
	// calls the upstream directly (api_base, api_key, ...). It may hold secrets: never serve it
	// unmasked.
	LitellmParams json.RawMessage
	// RequireTraceIDByAgent is litellm_params.require_trace_id_on_calls_by_agent: a call made
	// with a key the agent owns (the key's agent_id) must carry x-litellm-trace-id (LiteLLM
	// common_checks; pkg/api agentKeyTrace).
	RequireTraceIDByAgent bool
	// FromConfig: the agent comes from the config file, whose objects may take the
	// provider's implicit environment credentials whatever allowed_env_secrets says
	// (provider.NewConfigDeployment); false for database agents.
	FromConfig bool
	// Row is the gateway.agents row as row_to_json text when the agent was built from one
	// (BuildRow; nil for a config-file agent): the management API serves it.
	Row json.RawMessage
}

// ValidationError lists every problem found in an agent definition, each naming the field,
// e.g. "agent_card_params.skills[0].tags is required". The admin API answers it with 400.
type ValidationError struct {
	Problems []string
}

// Error joins the problems with "; ".
func (e *ValidationError) Error() string {
	return strings.Join(e.Problems, "; ")
}

// NewAgent validates and builds an Agent from the columns of a gateway.agents row.
//
// id (agent_id) and name (agent_name) must be non-blank. agentCardParams must pass
// [ValidateCard]. litellmParams must be a JSON object with a non-empty string "model"; the
// optional "custom_llm_provider" must be a string and the optional "guardrails" an array of
// strings (a single string is accepted as a one-element list, as LiteLLM does). Other
// litellm_params keys (api_base, api_key, ...) are not checked here; they are kept in
// Agent.LitellmParams for the Completer.
//
// On failure the error is a *[ValidationError] naming every bad field, e.g.
// `agent_name is required; agent_card_params.name is required; litellm_params.model is required`.
func NewAgent(id, name string, agentCardParams, litellmParams []byte) (*Agent, error) {
	var problems []string
	if strings.TrimSpace(id) == "" {
		problems = append(problems, "agent_id is required")
	}
	if strings.TrimSpace(name) == "" {
		problems = append(problems, "agent_name is required")
	}
	problems = append(problems, cardProblems(agentCardParams)...)
	params, paramProblems := parseLiteLLMParams(litellmParams)
	problems = append(problems, paramProblems...)
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return &Agent{
		ID:                    id,
		Name:                  name,
		Card:                  bytes.Clone(bytes.TrimSpace(agentCardParams)),
		Model:                 params.model,
		CustomLLMProvider:     params.customLLMProvider,
		Guardrails:            params.guardrails,
		RequireTraceIDByAgent: params.traceByAgent,
		LitellmParams:         bytes.Clone(bytes.TrimSpace(litellmParams)),
	}, nil
}

// ValidateCard checks card against the A2A v0.3 AgentCard object (A2A spec §5.5; the
// required list of the v0.3 JSON schema, specification/json/a2a.json) and returns a
// *[ValidationError] naming every problem, each prefixed "agent_card_params.", or nil.
//
// Required: name (non-empty string), description (string), version (string), capabilities
// (object; streaming, pushNotifications and stateTransitionHistory booleans when present),
// defaultInputModes and defaultOutputModes (arrays of strings), skills (array, may be empty;
// each an AgentSkill, §5.5.4, with string id, name, description and a string-array tags).
//
// Deliberately optional although the schema lists them as required:
//   - url: the gateway serves the card with url rewritten to its own /a2a/{agent_id}, so a
//     card registered without one is still servable; when present it must be a string.
//   - protocolVersion: the schema gives it a default; the served card gets "0.3.0" when the
//     registered one has none.
//
// Finally the card must decode into a2a-go's a2a.AgentCard, so that every optional field has
// the type the official clients expect.
func ValidateCard(card []byte) error {
	if problems := cardProblems(card); len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
}

func cardProblems(card []byte) []string {
	const root = "agent_card_params"
	fields, problem := decodeObject(card, root)
	if problem != "" {
		return []string{problem}
	}
	c := checker{fields: fields, prefix: root + "."}
	c.nonEmptyString("name")
	c.str("description")
	c.str("version")
	if caps, ok := c.object("capabilities"); ok {
		cc := checker{fields: caps, prefix: root + ".capabilities."}
		for _, f := range []string{"streaming", "pushNotifications", "stateTransitionHistory"} {
			cc.optionalBool(f)
		}
		c.problems = append(c.problems, cc.problems...)
	}
	c.stringArray("defaultInputModes")
	c.stringArray("defaultOutputModes")
	if skills, ok := c.array("skills"); ok {
		for i, raw := range skills {
			path := fmt.Sprintf("%s.skills[%d]", root, i)
			if jsonKind(raw) != kindObject {
				c.problems = append(c.problems, path+" must be an object")
				continue
			}
			var skill map[string]json.RawMessage
			_ = json.Unmarshal(raw, &skill) // an object by jsonKind
			sc := checker{fields: skill, prefix: path + "."}
			sc.str("id")
			sc.str("name")
			sc.str("description")
			sc.stringArray("tags")
			c.problems = append(c.problems, sc.problems...)
		}
	}
	c.optionalString("url")
	c.optionalString("protocolVersion")
	c.optionalString("preferredTransport")
	if len(c.problems) > 0 {
		return c.problems
	}
	var typed a2atypes.AgentCard
	if err := json.Unmarshal(card, &typed); err != nil {
		return []string{fmt.Sprintf("%s is not a valid A2A AgentCard: %v", root, err)}
	}
	return nil
}

type litellmParams struct {
	model             string
	customLLMProvider string
	guardrails        []string
	traceByAgent      bool
}

func parseLiteLLMParams(raw []byte) (litellmParams, []string) {
	const root = "litellm_params"
	var out litellmParams
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || jsonKind(trimmed) == kindNull {
		return out, []string{root + ".model is required"}
	}
	fields, problem := decodeObject(trimmed, root)
	if problem != "" {
		return out, []string{problem}
	}
	c := checker{fields: fields, prefix: root + "."}
	// timeouts, prices, budgets and limits: finite numbers >= 0 (numbers.CheckObject)
	if err := numbers.CheckObject(root, gjson.ParseBytes(trimmed)); err != nil {
		c.problems = append(c.problems, err.Error())
	}
	out.model, _ = c.nonEmptyString("model")
	out.customLLMProvider, _ = c.optionalString("custom_llm_provider")
	c.optionalBool("require_trace_id_on_calls_by_agent")
	out.traceByAgent = string(bytes.TrimSpace(fields["require_trace_id_on_calls_by_agent"])) == "true"
	if g, ok := fields["guardrails"]; ok {
		switch jsonKind(g) {
		case kindNull:
		case kindString:
			var s string
			_ = json.Unmarshal(g, &s)
			out.guardrails = []string{s}
		default:
			if err := json.Unmarshal(g, &out.guardrails); err != nil {
				c.problems = append(c.problems, root+".guardrails must be an array of strings")
			}
		}
	}
	return out, c.problems
}

// decodeObject decodes raw as a JSON object; problem names root when it is missing, invalid
// or not an object.
func decodeObject(raw []byte, root string) (fields map[string]json.RawMessage, problem string) {
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0 || jsonKind(trimmed) == kindNull:
		return nil, root + " is required"
	case !json.Valid(trimmed):
		return nil, root + " is not valid JSON"
	case jsonKind(trimmed) != kindObject:
		return nil, root + " must be an object"
	}
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return nil, root + " must be an object"
	}
	return fields, ""
}

// checker collects field problems of one JSON object. A field that is absent or null is
// "required"; one of the wrong JSON type "must be a ...".
type checker struct {
	fields   map[string]json.RawMessage
	prefix   string
	problems []string
}

func (c *checker) fail(field, problem string) {
	c.problems = append(c.problems, c.prefix+field+" "+problem)
}

// present returns the raw value of field unless it is absent or null.
func (c *checker) present(field string) (json.RawMessage, bool) {
	raw, ok := c.fields[field]
	if !ok || jsonKind(raw) == kindNull {
		return nil, false
	}
	return raw, true
}

func (c *checker) str(field string) (string, bool) {
	raw, ok := c.present(field)
	if !ok {
		c.fail(field, "is required")
		return "", false
	}
	var s string
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		c.fail(field, "must be a string")
		return "", false
	}
	return s, true
}

func (c *checker) nonEmptyString(field string) (string, bool) {
	s, ok := c.str(field)
	if !ok {
		return "", false
	}
	if strings.TrimSpace(s) == "" {
		c.fail(field, "is required")
		return "", false
	}
	return s, true
}

func (c *checker) optionalString(field string) (string, bool) {
	raw, ok := c.present(field)
	if !ok {
		return "", false
	}
	var s string
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		c.fail(field, "must be a string")
		return "", false
	}
	return s, true
}

func (c *checker) optionalBool(field string) {
	if raw, ok := c.present(field); ok && jsonKind(raw) != kindBool {
		c.fail(field, "must be a boolean")
	}
}

func (c *checker) object(field string) (map[string]json.RawMessage, bool) {
	raw, ok := c.present(field)
	if !ok {
		c.fail(field, "is required")
		return nil, false
	}
	var m map[string]json.RawMessage
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &m) != nil {
		c.fail(field, "must be an object")
		return nil, false
	}
	return m, true
}

func (c *checker) array(field string) ([]json.RawMessage, bool) {
	raw, ok := c.present(field)
	if !ok {
		c.fail(field, "is required")
		return nil, false
	}
	var a []json.RawMessage
	if jsonKind(raw) != kindArray || json.Unmarshal(raw, &a) != nil {
		c.fail(field, "must be an array")
		return nil, false
	}
	return a, true
}

func (c *checker) stringArray(field string) {
	raw, ok := c.present(field)
	if !ok {
		c.fail(field, "is required")
		return
	}
	var a []string
	if jsonKind(raw) != kindArray || json.Unmarshal(raw, &a) != nil {
		c.fail(field, "must be an array of strings")
	}
}

type kind int

const (
	kindInvalid kind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// jsonKind tells the JSON type of a (valid) raw value from its first byte.
func jsonKind(raw []byte) kind {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return kindInvalid
	}
	switch raw[0] {
	case 'n':
		return kindNull
	case 't', 'f':
		return kindBool
	case '"':
		return kindString
	case '[':
		return kindArray
	case '{':
		return kindObject
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return kindNumber
	}
	return kindInvalid
}
