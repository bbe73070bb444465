package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// CallerSettings are a key's or a team's router_settings (LiteLLM GenerateKeyRequest /
// TeamBase router_settings): LiteLLM's proxy takes the key's when it has any, else its team's
// (proxy_server.py _get_hierarchical_router_settings: the whole object, never merged), and
// applies to that caller's call only the settings its Router reads per request
// (route_llm_request.py router_settings_override: fallbacks, context_window_fallbacks,
// content_policy_fallbacks, num_retries, timeout), each only when the request did not set it
// itself; model_group_alias is resolved per request too (litellm_pre_call_utils
// _resolve_per_request_model_group_alias), after the key's and team's aliases. Immutable.
type CallerSettings struct {
	// Fallbacks, ContextWindowFallbacks, ContentPolicyFallbacks replace the config's lists of
	// the same name for the caller's calls (nil: the config's).
	Fallbacks, ContextWindowFallbacks, ContentPolicyFallbacks FallbackList
	// NumRetries replaces router_settings.num_retries (HasNumRetries false: the config's).
	NumRetries    int
	HasNumRetries bool
	// Timeout is the caller's per-call timeout (0: the deployment's); a request's
	// x-litellm-timeout header wins.
	Timeout time.Duration
	// ModelGroupAlias maps a model name the caller sends to the group serving it (nil: none).
	ModelGroupAlias map[string]string
}

// CallerSettingKeys are the router_settings members a key or team may set, in name order.
var CallerSettingKeys = []string{"content_policy_fallbacks", "context_window_fallbacks", "fallbacks", "model_group_alias", "num_retries", "timeout"}

// ParseCallerSettings validates a key's or team's router_settings (a JSON object; null or {}
// give nil). Errors name router_settings.<member>: a member LiteLLM's Router does not read
// per request (routing_strategy, allowed_fails, cooldown_time, retry_policy, ...) or does not
// define is refused naming it, never stored and ignored.
func ParseCallerSettings(raw json.RawMessage) (*CallerSettings, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("router_settings: must be an object of router settings (%s)", strings.Join(CallerSettingKeys, ", "))
	}
	if len(m) == 0 {
		return nil, nil
	}
	var unknown []string
	for k := range m {
		if !contains(CallerSettingKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("router_settings: %s not supported on a key or team (LiteLLM applies per call only: %s)", quoteList(unknown), strings.Join(CallerSettingKeys, ", "))
	}
	cs := &CallerSettings{}
	var err error
	for _, f := range [...]struct {
		name string
		dst  *FallbackList
	}{{"fallbacks", &cs.Fallbacks}, {"context_window_fallbacks", &cs.ContextWindowFallbacks}, {"content_policy_fallbacks", &cs.ContentPolicyFallbacks}} {
		if *f.dst, err = fallbackList(f.name, jsonAny(m[f.name])); err != nil {
			return nil, err
		}
	}
	if v, ok := m["num_retries"]; ok && v != nil {
		n, ok := intOf(v)
		if !ok || n < 0 {
			return nil, fmt.Errorf("router_settings.num_retries: must be an integer >= 0, got %v", v)
		}
		cs.NumRetries, cs.HasNumRetries = n, true
	}
	if v, ok := m["timeout"]; ok && v != nil {
		n, isNum := v.(json.Number)
		f, err := n.Float64()
		if !isNum || err != nil || math.IsInf(f, 0) || f <= 0 {
			return nil, fmt.Errorf("router_settings.timeout: must be a number of seconds > 0, got %v", v)
		}
		cs.Timeout = time.Duration(f * float64(time.Second))
	}
	if v, ok := m["model_group_alias"]; ok && v != nil {
		c := Config{}
		mm, isMap := v.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("router_settings.model_group_alias: must be an object of model group names, got %v", v)
		}
		c.ModelGroupAlias = mm
		s, err := c.Settings()
		if err != nil {
			return nil, err
		}
		cs.ModelGroupAlias = s.ModelGroupAlias
	}
	return cs, nil
}

// Apply returns s with the caller's fallbacks lists in place of the config's.
func (cs *CallerSettings) Apply(s Settings) Settings {
	if cs == nil {
		return s
	}
	if cs.Fallbacks != nil {
		s.Fallbacks = cs.Fallbacks
	}
	if cs.ContextWindowFallbacks != nil {
		s.ContextWindowFallbacks = cs.ContextWindowFallbacks
	}
	if cs.ContentPolicyFallbacks != nil {
		s.ContentPolicyFallbacks = cs.ContentPolicyFallbacks
	}
	return s
}

type numRetriesKey struct{}

// WithNumRetries returns ctx carrying a caller's num_retries (CallerSettings), which replaces
// router_settings.num_retries for the calls made with it (retry_policy still wins per class).
func WithNumRetries(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, numRetriesKey{}, n)
}

// numRetriesOf is the caller's num_retries on ctx, if any (read only on a failure).
func numRetriesOf(ctx context.Context) (int, bool) {
	n, ok := ctx.Value(numRetriesKey{}).(int)
	return n, ok
}

// jsonAny turns json.Number leaves into float64 (as YAML decoding gives them) for the shared
// validators.
func jsonAny(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = jsonAny(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = jsonAny(x[k])
		}
	}
	return v
}

func intOf(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	if err != nil || i > math.MaxInt32 {
		return 0, false
	}
	return int(i), true
}

func quoteList(ns []string) string {
	q := make([]string, len(ns))
	for i, n := range ns {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
