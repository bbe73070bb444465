package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"lockstep/pkg/keys"
	"lockstep/pkg/router"
	"lockstep/pkg/store"
)

// FileConfig is the LiteLLM-style YAML config (https://docs.litellm.ai/docs/proxy/configs).
// Any string value "os.environ/NAME" is replaced by the environment variable NAME.
type FileConfig struct {
	ModelList       []ModelConfig     `yaml:"model_list"`
	Guardrails      []GuardrailConfig `yaml:"guardrails"`
	Agents          []AgentConfig     `yaml:"agents"`
	GeneralSettings GeneralSettings   `yaml:"general_settings"`
	RouterSettings  RouterSettings    `yaml:"router_settings"`
	// LiteLLMSettings: of LiteLLM's litellm_settings, lockstep reads callbacks and
	// success_callback ("otel" turns OpenTelemetry on; docs/configuration.md); the rest is
	// accepted, logged once and ignored, its os.environ/NAME values left unresolved.
	LiteLLMSettings LiteLLMSettings `yaml:"litellm_settings"`

	// notImplemented are the keys present that LiteLLM defines and lockstep accepts without
	// reading (its other top-level sections, general_settings, router_settings and
	// litellm_settings keys), as "section" or "section.key": serve logs them once at start.
	notImplemented []string
}

// ModelConfig is one model_list entry: a deployment of model group ModelName.
type ModelConfig struct {
	ModelName     string         `yaml:"model_name"`
	LitellmParams map[string]any `yaml:"litellm_params"`
	ModelInfo     map[string]any `yaml:"model_info"`
}

// GuardrailConfig is one guardrails entry.
type GuardrailConfig struct {
	GuardrailName string         `yaml:"guardrail_name"`
	LitellmParams map[string]any `yaml:"litellm_params"`
	GuardrailInfo map[string]any `yaml:"guardrail_info"`
}

// AgentConfig is one agents entry.
type AgentConfig struct {
	AgentID         string         `yaml:"agent_id"`
	AgentName       string         `yaml:"agent_name"`
	AgentCardParams map[string]any `yaml:"agent_card_params"`
	LitellmParams   map[string]any `yaml:"litellm_params"`
}

// GeneralSettings mirrors LiteLLM's general_settings (the subset lockstep reads).
type GeneralSettings struct {
	// SpendLogLines (default false) also writes each call's spend-log row as a structured log
	// line, message "spend_log" (docs/operations.md "Request log export").
	SpendLogLines bool   `yaml:"spend_log_lines"`
	MasterKey     string `yaml:"master_key"`
	DatabaseURL   string `yaml:"database_url"`
	// StoreModelInDB (default true) loads and writes models in Postgres; false keeps models
	// config-only, as in LiteLLM.
	StoreModelInDB *bool `yaml:"store_model_in_db"`
	// SupportedDBObjects limits which types are read from Postgres: models, guardrails,
	// agents, keys. Default: all.
	SupportedDBObjects []string `yaml:"supported_db_objects"`
	// MaximumSpendLogsRetentionPeriod ("7d", "24h", "60m", "3600s"): spend logs older than
	// this are deleted (LiteLLM's setting of that name). Unset: spend logs are kept.
	MaximumSpendLogsRetentionPeriod string `yaml:"maximum_spend_logs_retention_period"`
	// MaximumSpendLogsRetentionInterval: how often the prune runs (default "1d", as LiteLLM).
	MaximumSpendLogsRetentionInterval string `yaml:"maximum_spend_logs_retention_interval"`
	// AllowedEnvSecrets are glob patterns of the environment variables an object stored in the
	// database may name as "os.environ/NAME" (API.md "Security rules"). Absent: *_API_KEY and
	// *_API_BASE; [] allows none. DATABASE_URL, GATEWAY_* and *_MASTER_KEY are never allowed.
	// Config-file objects may name any variable.
	AllowedEnvSecrets []string `yaml:"allowed_env_secrets"`
	// ModerationModel (LiteLLM's moderation_model) is the model every /moderations call uses,
	// whatever the request names; unset: the request's model, else omni-moderation-latest.
	ModerationModel string `yaml:"moderation_model"`
}

// spendRetention returns the spend-log retention period and prune interval (0, 0: none).
// Errors name the setting.
func (g GeneralSettings) spendRetention() (period, every time.Duration, err error) {
	if g.MaximumSpendLogsRetentionPeriod != "" {
		if period, err = keys.ParseDuration(g.MaximumSpendLogsRetentionPeriod); err != nil {
			return 0, 0, fmt.Errorf("general_settings.maximum_spend_logs_retention_period: %w", err)
		}
	}
	if g.MaximumSpendLogsRetentionInterval != "" {
		if every, err = keys.ParseDuration(g.MaximumSpendLogsRetentionInterval); err != nil {
			return 0, 0, fmt.Errorf("general_settings.maximum_spend_logs_retention_interval: %w", err)
		}
	}
	return period, every, nil
}

// RouterSettings mirrors LiteLLM's router_settings: router.Config (its fields, names and
// defaults are documented there and in docs/configuration.md).
type RouterSettings = router.Config

// loadConfig reads and validates a config file. Errors name the file and the bad field.
// preset names the settings a flag or env var already set ("general_settings.master_key",
// "general_settings.database_url"): their os.environ/NAME is not resolved (flag > env > config,
// so an unset NAME there is no error) and their config value is dropped. Every unset
// os.environ/NAME is reported in one error.
func loadConfig(path string, preset map[string]bool) (*FileConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var node yaml.Node
	if err := yaml.Unmarshal(raw, &node); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, yamlSyntaxError(raw, err))
	}
	var unset []string
	if err := resolveEnv(&node, "", preset, ignoredPaths(&node), &unset); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if len(unset) > 0 {
		return nil, fmt.Errorf("config %s: %s", path, strings.Join(unset, "; "))
	}
	ignored, err := checkConfigShape(&node)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	cfg := FileConfig{notImplemented: ignored}
	dec := func() error {
		if len(node.Content) == 0 {
			return nil
		}
		return node.Content[0].Decode(&cfg)
	}
	if err := dec(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return &cfg, nil
}

// liteLLMSections are the top-level keys of a LiteLLM proxy config that lockstep accepts and
// does not read (so a LiteLLM config loads as it is); any other unknown top-level key is an
// error naming it: a typo such as "modl_list" would otherwise serve no models without a word.
var liteLLMSections = map[string]bool{"litellm_settings": true, "environment_variables": true,
	"include": true, "credential_list": true, "mcp_servers": true, "mcp_aliases": true,
	"callback_settings": true, "search_tools": true, "prompts": true, "vector_store_registry": true,
	"finetune_settings": true, "files_settings": true, "assistant_settings": true, "model_group_alias": true}

// entryFields are the keys of one entry of each list section (LiteLLM's own entry shapes).
var entryFields = map[string][]string{
	"model_list": {"model_name", "litellm_params", "model_info"},
	"guardrails": {"guardrail_name", "litellm_params", "guardrail_info"},
	"agents":     {"agent_id", "agent_name", "agent_card_params", "litellm_params"},
}

// checkConfigShape refuses what decoding would silently drop or report without a field name:
// an unknown top-level key (other than LiteLLM's sections, accepted and ignored), an unknown
// key in a model_list, guardrails or agents entry, a general_settings key LiteLLM does not
// define (liteLLMGeneralSettings; with a "did you mean" for a near miss), and a value of the
// wrong type anywhere in the sections lockstep reads (named as section.key, e.g.
// router_settings.num_retries). Unknown keys inside router_settings are accepted and ignored.
// It returns the LiteLLM sections, general_settings keys, router_settings keys and
// litellm_settings keys present that lockstep does not read (FileConfig.notImplemented).
func checkConfigShape(doc *yaml.Node) (notImplemented []string, err error) {
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the config must be a mapping of sections (model_list, guardrails, agents, general_settings, router_settings), got a %s", kindName(root))
	}
	sections := map[string]any{"model_list": &[]ModelConfig{}, "guardrails": &[]GuardrailConfig{},
		"agents": &[]AgentConfig{}, "general_settings": &GeneralSettings{}, "router_settings": &RouterSettings{}}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		if _, ok := sections[key]; !ok {
			if key == "litellm_settings" && val.Kind == yaml.MappingNode {
				notImplemented = append(notImplemented, unreadKeys(val, key, yamlKeys(reflect.TypeOf(LiteLLMSettings{})))...)
				continue
			}
			if liteLLMSections[key] {
				notImplemented = append(notImplemented, key)
				continue
			}
			return nil, fmt.Errorf("unknown top-level key %q (line %d): lockstep reads model_list, guardrails, agents, general_settings and router_settings", key, root.Content[i].Line)
		}
		if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
			continue
		}
		if fieldsOf, ok := entryFields[key]; ok {
			if val.Kind != yaml.SequenceNode {
				return nil, fmt.Errorf("%s must be a list, got a %s (line %d)", key, kindName(val), val.Line)
			}
			for j, item := range val.Content {
				if item.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("%s[%d] must be a mapping, got a %s (line %d)", key, j, kindName(item), item.Line)
				}
				if err := checkPairs(item, fmt.Sprintf("%s[%d]", key, j), fieldsOf, reflect.TypeOf(sections[key]).Elem().Elem()); err != nil {
					return nil, err
				}
			}
			continue
		}
		if val.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s must be a mapping, got a %s (line %d)", key, kindName(val), val.Line)
		}
		if key == "general_settings" {
			ni, err := checkGeneralSettingsKeys(val)
			if err != nil {
				return nil, err
			}
			notImplemented = append(notImplemented, ni...)
		}
		if key == "router_settings" {
			notImplemented = append(notImplemented, unreadKeys(val, key, yamlKeys(reflect.TypeOf(RouterSettings{})))...)
		}
		if err := checkPairs(val, key, nil, reflect.TypeOf(sections[key]).Elem()); err != nil {
			return nil, err
		}
	}
	return notImplemented, nil
}

// checkGeneralSettingsKeys refuses a general_settings key that neither lockstep
// (GeneralSettings) nor LiteLLM (liteLLMGeneralSettings) defines, naming it and its line, with
// `did you mean "master_key"?` for a near miss; it returns the LiteLLM keys lockstep does not
// read, as "general_settings.key".
func checkGeneralSettingsKeys(m *yaml.Node) ([]string, error) {
	read := yamlKeys(reflect.TypeOf(GeneralSettings{}))
	var ignored []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		switch {
		case slices.Contains(read, k.Value):
		case slices.Contains(liteLLMGeneralSettings, k.Value):
			ignored = append(ignored, "general_settings."+k.Value)
		default:
			msg := fmt.Sprintf("general_settings: unknown key %q (line %d): neither lockstep nor LiteLLM defines it", k.Value, k.Line)
			if near := didYouMean(k.Value, append(read, liteLLMGeneralSettings...)); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			return nil, errors.New(msg)
		}
	}
	return ignored, nil
}

// unreadKeys are the keys of mapping m not in read, as "section.key".
func unreadKeys(m *yaml.Node, section string, read []string) []string {
	var out []string
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := m.Content[i].Value; !slices.Contains(read, k) {
			out = append(out, section+"."+k)
		}
	}
	return out
}

// yamlKeys are the yaml tag names of struct type t's fields.
func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// checkPairs decodes each key of mapping m alone into a fresh value of type t, so a type error
// names path.key; with allowed set, a key outside it is an error naming it.
func checkPairs(m *yaml.Node, path string, allowed []string, t reflect.Type) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return fmt.Errorf("%s: unknown field %q (line %d); accepted: %s", path, k.Value, k.Line, strings.Join(allowed, ", "))
		}
		one := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{k, m.Content[i+1]}}
		if err := one.Decode(reflect.New(t).Interface()); err != nil {
			msg := err.Error()
			if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
				msg = te.Errors[0]
			}
			return fmt.Errorf("%s.%s: %s", path, k.Value, strings.TrimPrefix(msg, "yaml: "))
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	}
	return "node"
}

// ignoredPaths are the paths of a config whose values lockstep does not read (LiteLLM's
// sections other than the five it reads, the general_settings keys only LiteLLM defines, the
// router_settings keys lockstep does not know, every litellm_settings key but callbacks and
// success_callback): their os.environ/NAME is left unresolved, so a LiteLLM config naming
// LANGFUSE_PUBLIC_KEY or REDIS_PASSWORD there starts without them set (API.md "Compatibility
// policy": os.environ/ in a section lockstep ignores is not resolved).
func ignoredPaths(doc *yaml.Node) map[string]bool {
	out := map[string]bool{}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return out
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		if liteLLMSections[key] && key != "litellm_settings" {
			out[key] = true
			continue
		}
		var read []string
		switch key {
		case "litellm_settings":
			read = yamlKeys(reflect.TypeOf(LiteLLMSettings{}))
		case "general_settings":
			read = yamlKeys(reflect.TypeOf(GeneralSettings{}))
		case "router_settings":
			read = yamlKeys(reflect.TypeOf(RouterSettings{}))
		default:
			continue
		}
		if val.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(val.Content); j += 2 {
			if k := val.Content[j].Value; !slices.Contains(read, k) {
				out[key+"."+k] = true
			}
		}
	}
	return out
}

// resolveEnv replaces every "os.environ/NAME" scalar with $NAME, except at the paths in preset
// (set by a flag or env var: the value is dropped, unresolved) and under the paths in skip
// (ignoredPaths: left as written). Each unset variable is added to *unset as "path:
// environment variable NAME is not set"; other errors are returned.
func resolveEnv(n *yaml.Node, path string, preset, skip map[string]bool, unset *[]string) error {
	if skip[path] {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			p := path
			if n.Kind == yaml.SequenceNode {
				p = fmt.Sprintf("%s[%d]", path, i)
			}
			if err := resolveEnv(c, p, preset, skip, unset); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := k.Value
			if path != "" {
				p = path + "." + p
			}
			// Objects become JSON, whose keys are strings: a scalar key (1, true) is taken as
			// its text, as LiteLLM's json.dumps does; any other key is an error naming it.
			switch {
			case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
			case k.Kind == yaml.ScalarNode:
				k.Tag = "!!str"
			default:
				return fmt.Errorf("%s: a mapping key must be a string (line %d)", strings.TrimSuffix(path, "."), k.Line)
			}
			if err := resolveEnv(n.Content[i+1], p, preset, skip, unset); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if preset[path] {
			n.Value, n.Tag, n.Style = "", "!!str", yaml.DoubleQuotedStyle
			return nil
		}
		if name, ok := strings.CutPrefix(n.Value, "os.environ/"); ok {
			v, set := os.LookupEnv(name)
			if !set {
				*unset = append(*unset, fmt.Sprintf("%s: environment variable %s is not set", path, name))
				return nil
			}
			n.Value, n.Tag, n.Style = v, "!!str", yaml.DoubleQuotedStyle
		}
	}
	return nil
}

func (c *FileConfig) validate() error {
	for i, m := range c.ModelList {
		if m.ModelName == "" {
			return fmt.Errorf("model_list[%d].model_name is required", i)
		}
		if m.LitellmParams == nil {
			return fmt.Errorf("model_list[%d].litellm_params is required", i)
		}
	}
	for i, g := range c.Guardrails {
		if g.GuardrailName == "" {
			return fmt.Errorf("guardrails[%d].guardrail_name is required", i)
		}
	}
	for i, a := range c.Agents {
		if a.AgentName == "" {
			return fmt.Errorf("agents[%d].agent_name is required", i)
		}
	}
	for i, o := range c.GeneralSettings.SupportedDBObjects {
		if _, ok := store.TypeOfPlural(o); !ok {
			known := make([]string, len(store.Tables))
			for j, t := range store.Tables {
				known[j] = t.Plural
			}
			return fmt.Errorf("general_settings.supported_db_objects[%d]: unknown object %q (known: %s)", i, o, strings.Join(known, ", "))
		}
	}
	if _, _, err := c.GeneralSettings.spendRetention(); err != nil {
		return err
	}
	if _, err := c.RouterSettings.Settings(); err != nil {
		return err
	}
	return nil
}

// supported returns the object types synced with Postgres.
func (c *FileConfig) supported() map[store.ObjectType]bool {
	out := map[store.ObjectType]bool{}
	if len(c.GeneralSettings.SupportedDBObjects) == 0 {
		for _, t := range store.AllTypes {
			out[t] = true
		}
	} else {
		for _, o := range c.GeneralSettings.SupportedDBObjects {
			t, _ := store.TypeOfPlural(o)
			out[t] = true
		}
	}
	if s := c.GeneralSettings.StoreModelInDB; s != nil && !*s {
		delete(out, store.Model)
	}
	return out
}

// toJSON encodes a config object's YAML-decoded value; an error names field (a value JSON
// cannot hold, such as .nan or .inf).
func toJSON(field string, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		var ue *json.UnsupportedValueError
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("%s: %s is not a JSON value", field, ue.Str)
		}
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return b, nil
}

// LiteLLMSettings is what lockstep reads of litellm_settings: the callback lists of LiteLLM's
// logging integrations (litellm_settings.callbacks, success_callback). "otel" turns on the
// OpenTelemetry export (pkg/telemetry); other integrations are not implemented and ignored.
type LiteLLMSettings struct {
	Callbacks       callbackList `yaml:"callbacks"`
	SuccessCallback callbackList `yaml:"success_callback"`
}

// callbacks is every callback named, both lists.
func (l LiteLLMSettings) callbacks() []string {
	return append(append([]string(nil), l.Callbacks...), l.SuccessCallback...)
}

// callbackList is a list of callback names; LiteLLM also accepts one name as a string.
type callbackList []string

// UnmarshalYAML takes a string or a list of strings.
func (c *callbackList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*c = callbackList{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return fmt.Errorf("litellm_settings callbacks (line %d): a list of callback names: %w", n.Line, err)
	}
	*c = l
	return nil
}
