package router

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Routing strategies: router_settings.routing_strategy, LiteLLM's names (LiteLLM docs
// "Proxy - Load Balancing", routing_strategy).
const (
	// SimpleShuffle picks at random, weighted by litellm_params.weight, else by rpm, else by
	// tpm when every deployment of the group sets it, else uniformly (LiteLLM's default).
	SimpleShuffle = "simple-shuffle"
	// LeastBusy picks the deployment with the fewest calls in flight on this replica.
	LeastBusy = "least-busy"
	// LatencyBased picks the deployment with the lowest average latency measured on this
	// replica (routing_strategy_args ttl, lowest_latency_buffer).
	LatencyBased = "latency-based-routing"
	// UsageBasedV2 picks the deployment with the fewest tokens used in the current minute,
	// counted cluster-wide by leases (pkg/limits), within its rpm/tpm caps.
	UsageBasedV2 = "usage-based-routing-v2"
	// UsageBased is LiteLLM's older name; lockstep serves it as UsageBasedV2.
	UsageBased = "usage-based-routing"
	// CostBased picks the deployment with the lowest input_cost_per_token +
	// output_cost_per_token (model_info or litellm_params); unpriced ones last.
	CostBased = "cost-based-routing"
)

// Strategies lists the accepted routing_strategy values.
var Strategies = []string{SimpleShuffle, LeastBusy, LatencyBased, UsageBasedV2, UsageBased, CostBased}

// Defaults of router_settings (LiteLLM's: litellm/router.py, router_utils/cooldown_handlers.py
// DEFAULT_COOLDOWN_TIME_SECONDS, router_strategy/lowest_latency.py).
const (
	DefaultNumRetries   = 2
	DefaultAllowedFails = 3
	DefaultCooldownTime = 5 * time.Second
	// DefaultLatencyTTL is routing_strategy_args.ttl: latency samples older than this are
	// forgotten (LiteLLM: 1 hour).
	DefaultLatencyTTL = time.Hour
	// DefaultLatencySamples is routing_strategy_args.max_latency_list_size (LiteLLM: 10).
	DefaultLatencySamples = 10
)

// Settings are router_settings (LiteLLM names and defaults). Build them with Config.Settings;
// New fills unset fields with the defaults.
type Settings struct {
	RoutingStrategy string // one of Strategies; "" = simple-shuffle
	// LatencyTTL, LowestLatencyBuffer and LatencySamples are routing_strategy_args of
	// latency-based-routing: ttl (seconds), lowest_latency_buffer (a fraction: deployments
	// within lowest × (1 + buffer) are picked from at random), max_latency_list_size.
	LatencyTTL          time.Duration
	LowestLatencyBuffer float64
	LatencySamples      int
	// NumRetries: extra attempts on a retryable failure; default 2; < 0 means none.
	NumRetries int
	// RetryPolicy: retries per error class, overriding NumRetries for that class (also for
	// classes that are not retried by default, e.g. BadRequestErrorRetries).
	RetryPolicy map[Class]int
	// AllowedFails: cooldown-eligible failures per minute a deployment may have before it
	// cools down; default 3; < 0 means 0.
	AllowedFails int
	// AllowedFailsPolicy: allowed fails per error class, overriding AllowedFails.
	AllowedFailsPolicy map[Class]int
	// CooldownTime: how long a cooled-down deployment is skipped on every replica; default 5 s.
	CooldownTime time.Duration
	// ModelGroupAlias maps a requested model name to the model group serving it
	// (model_group_alias; LiteLLM applies it before looking the name up).
	ModelGroupAlias map[string]string
	// Fallbacks, ContextWindowFallbacks, ContentPolicyFallbacks and DefaultFallbacks are
	// router_settings.fallbacks, context_window_fallbacks, content_policy_fallbacks and
	// default_fallbacks (fallbacks.go; nil: not set).
	Fallbacks, ContextWindowFallbacks, ContentPolicyFallbacks FallbackList
	DefaultFallbacks                                          []string
}

// Config is router_settings as decoded from the config file (YAML), LiteLLM's keys. Unset
// fields take the defaults.
type Config struct {
	RoutingStrategy     string         `yaml:"routing_strategy"`
	RoutingStrategyArgs map[string]any `yaml:"routing_strategy_args"`
	NumRetries          *int           `yaml:"num_retries"`
	RetryPolicy         map[string]int `yaml:"retry_policy"`
	AllowedFails        *int           `yaml:"allowed_fails"`
	AllowedFailsPolicy  map[string]int `yaml:"allowed_fails_policy"`
	CooldownTime        *float64       `yaml:"cooldown_time"` // seconds
	ModelGroupAlias     map[string]any `yaml:"model_group_alias"`
	// fallbacks.go: lists of {"<group>": ["<fallback>", …]}; default_fallbacks a list of groups
	Fallbacks              any `yaml:"fallbacks"`
	ContextWindowFallbacks any `yaml:"context_window_fallbacks"`
	ContentPolicyFallbacks any `yaml:"content_policy_fallbacks"`
	DefaultFallbacks       any `yaml:"default_fallbacks"`
}

// Settings validates c. Errors name the field as router_settings.<key>[.<sub>] and say what
// is accepted; nothing is coerced.
func (c Config) Settings() (Settings, error) {
	s := Settings{RoutingStrategy: c.RoutingStrategy}
	if s.RoutingStrategy != "" && !contains(Strategies, s.RoutingStrategy) {
		return s, fmt.Errorf("router_settings.routing_strategy: %q is not supported (supported: %s)", s.RoutingStrategy, strings.Join(Strategies, ", "))
	}
	for _, k := range sortedKeys(c.RoutingStrategyArgs) {
		v := c.RoutingStrategyArgs[k]
		f, ok := number(v)
		switch {
		case k != "ttl" && k != "lowest_latency_buffer" && k != "max_latency_list_size":
			return s, fmt.Errorf("router_settings.routing_strategy_args.%s: unknown argument (known: ttl, lowest_latency_buffer, max_latency_list_size)", k)
		case !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0:
			return s, fmt.Errorf("router_settings.routing_strategy_args.%s: must be a number >= 0, got %v", k, v)
		case k == "ttl":
			s.LatencyTTL = time.Duration(f * float64(time.Second))
		case k == "lowest_latency_buffer":
			s.LowestLatencyBuffer = f
		default:
			if f != math.Trunc(f) || f < 1 {
				return s, fmt.Errorf("router_settings.routing_strategy_args.max_latency_list_size: must be an integer >= 1, got %v", v)
			}
			s.LatencySamples = int(f)
		}
	}
	if n := c.NumRetries; n != nil {
		if *n < 0 {
			return s, fmt.Errorf("router_settings.num_retries: must be >= 0, got %d", *n)
		}
		s.NumRetries = *n
		if *n == 0 {
			s.NumRetries = -1
		}
	}
	var err error
	if s.RetryPolicy, err = classCounts("retry_policy", "Retries", c.RetryPolicy); err != nil {
		return s, err
	}
	if n := c.AllowedFails; n != nil {
		if *n < 0 {
			return s, fmt.Errorf("router_settings.allowed_fails: must be >= 0, got %d", *n)
		}
		s.AllowedFails = *n
		if *n == 0 {
			s.AllowedFails = -1
		}
	}
	if s.AllowedFailsPolicy, err = classCounts("allowed_fails_policy", "AllowedFails", c.AllowedFailsPolicy); err != nil {
		return s, err
	}
	if t := c.CooldownTime; t != nil {
		if math.IsNaN(*t) || math.IsInf(*t, 0) || *t < 0 {
			return s, fmt.Errorf("router_settings.cooldown_time: must be a finite number >= 0 seconds, got %v", *t)
		}
		s.CooldownTime = time.Duration(*t * float64(time.Second))
		if s.CooldownTime == 0 {
			s.CooldownTime = -1 // cooldowns off
		}
	}
	for _, k := range sortedKeys(c.ModelGroupAlias) {
		if s.ModelGroupAlias == nil {
			s.ModelGroupAlias = map[string]string{}
		}
		switch v := c.ModelGroupAlias[k].(type) {
		case string:
			s.ModelGroupAlias[k] = v
		case map[string]any: // LiteLLM's {"model": "<group>", "hidden": bool}
			m, ok := v["model"].(string)
			if !ok || m == "" {
				return s, fmt.Errorf("router_settings.model_group_alias.%s.model: must be a model group name", k)
			}
			s.ModelGroupAlias[k] = m
		default:
			return s, fmt.Errorf("router_settings.model_group_alias.%s: must be a model group name or {model, hidden}, got %v", k, v)
		}
	}
	if s.Fallbacks, err = fallbackList("fallbacks", c.Fallbacks); err != nil {
		return s, err
	}
	if s.ContextWindowFallbacks, err = fallbackList("context_window_fallbacks", c.ContextWindowFallbacks); err != nil {
		return s, err
	}
	if s.ContentPolicyFallbacks, err = fallbackList("content_policy_fallbacks", c.ContentPolicyFallbacks); err != nil {
		return s, err
	}
	if c.DefaultFallbacks != nil {
		if s.DefaultFallbacks, err = groupNames("router_settings.default_fallbacks", c.DefaultFallbacks); err != nil {
			return s, err
		}
	}
	return s, nil
}

// classCounts reads a retry_policy or allowed_fails_policy: keys <Class><suffix> (LiteLLM's
// RetryPolicy / AllowedFailsPolicy fields), values >= 0.
func classCounts(field, suffix string, in map[string]int) (map[Class]int, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := map[Class]int{}
	var known []string
	for _, c := range policyClasses {
		known = append(known, c.policyName()+suffix)
	}
	for _, k := range sortedKeys(in) {
		v := in[k]
		var cls Class
		for _, c := range policyClasses {
			if k == c.policyName()+suffix {
				cls = c
			}
		}
		if cls == ClassOther {
			return nil, fmt.Errorf("router_settings.%s.%s: unknown error class (known: %s)", field, k, strings.Join(known, ", "))
		}
		if v < 0 {
			return nil, fmt.Errorf("router_settings.%s.%s: must be >= 0, got %d", field, k, v)
		}
		out[cls] = v
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// withDefaults fills the unset fields of s.
func (s Settings) withDefaults() Settings {
	if s.RoutingStrategy == "" {
		s.RoutingStrategy = SimpleShuffle
	}
	if s.RoutingStrategy == UsageBased {
		s.RoutingStrategy = UsageBasedV2
	}
	switch {
	case s.NumRetries == 0:
		s.NumRetries = DefaultNumRetries
	case s.NumRetries < 0:
		s.NumRetries = 0
	}
	switch {
	case s.AllowedFails == 0:
		s.AllowedFails = DefaultAllowedFails
	case s.AllowedFails < 0:
		s.AllowedFails = 0
	}
	if s.CooldownTime == 0 {
		s.CooldownTime = DefaultCooldownTime
	}
	if s.LatencyTTL <= 0 {
		s.LatencyTTL = DefaultLatencyTTL
	}
	if s.LatencySamples <= 0 {
		s.LatencySamples = DefaultLatencySamples
	}
	return s
}
