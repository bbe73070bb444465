// Package keys holds virtual keys (LiteLLM "virtual keys"): generation, hashing, the runtime
// key built from a gateway.api_keys row, and the model access rule.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"lockstep/pkg/intern"
	"lockstep/pkg/limits"
	"lockstep/pkg/numbers"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
	"lockstep/pkg/store"
)

// AllProxyModels is LiteLLM's special model name granting every model.
const AllProxyModels = "all-proxy-models"

// Key is a virtual key as served. Immutable.
type Key struct {
	Token   string // sha256 hex of the key
	Alias   string
	Models  []string // model group names, access group names, or AllProxyModels; empty = all
	Blocked bool
	// GetSpendRoutes: LiteLLM permissions {"get_spend_routes": true}, the /global/spend routes
	// for a key that is not the admin's. (Next to Blocked: the two bools share one word; a
	// million keys are 8 MB smaller per word saved, more when it crosses a size class.)
	GetSpendRoutes bool
	Expires        time.Time // zero: never
	Metadata       json.RawMessage
	TeamID         string // "": no team (sql/005); the team's models and limits bind the key too
	UserID         string // "": no internal user
	// Limits are rpm_limit, tpm_limit and max_parallel_requests (zero value: none).
	Limits limits.Limits
	// Budget is max_budget (USD) and budget_duration (zero value: none).
	Budget spend.Budget
	// Extra holds the rarely set fields (nil: none of them is set, the common case). Read them
	// through X, which never returns nil; set it only when building a Key. One pointer instead of
	// the fields themselves keeps a plain key at 208 bytes instead of 408 (a million keys: ~200
	// MB less; BenchmarkColdLoadKeys).
	Extra *Extra
}

// Extra is the part of a Key that few keys set: per-key aliases, per-model limits and budgets,
// enforced params, guardrails, allowed routes, agents and cache controls, the organization and
// the budget tier. Immutable, like the Key.
type Extra struct {
	// Aliases map a model name the caller sends to the model group it is served by (LiteLLM's
	// key "aliases", applied before routing; nil: none). From litellm_fields (sql/011).
	Aliases map[string]string
	// ModelLimits are the key's per-model rate limits (LiteLLM model_rpm_limit and
	// model_tpm_limit: model group → requests or tokens per minute), by model group (nil: none).
	ModelLimits map[string]limits.Limits
	// EnforcedParams are the request-body params every call with the key must carry (LiteLLM
	// enforced_params: "user", or "metadata.generation_name" one level down; nil: none).
	EnforcedParams []string
	// Guardrails run on every call with the key, besides the request's own and the default_on
	// ones (LiteLLM key "guardrails"; nil: none).
	Guardrails []string
	// Policies name the guardrail policies (gateway.policies, sql/017) whose guardrails run on
	// every call with the key, as its own guardrails do (LiteLLM key "policies", kept in its
	// metadata; nil: none). From litellm_fields.
	Policies []string
	// AllowedRoutes are the routes the key may call (LiteLLM allowed_routes: paths, path
	// prefixes, "*" patterns or LiteLLM route group names; access.RouteAllowed; nil: every
	// route its role allows). /key/generate's key_type sets them.
	AllowedRoutes []string
	// Agents are the A2A agents the key may call (LiteLLM object_permission.agents, by
	// agent_id or name; access.AgentAllowed; nil: every agent).
	Agents []string
	// AllowedCacheControls are the request "cache" controls the key may set (LiteLLM
	// allowed_cache_controls; nil: any).
	AllowedCacheControls []string
	// OrganizationID is the key's own organization (LiteLLM key organization_id; "" none): a
	// key without a team is bound by that organization's limits and budget. A team key's
	// organization is its team's.
	OrganizationID string
	// ProjectID is the project the key belongs to (gateway.projects, sql/020; LiteLLM key
	// project_id, set by /key/generate; "" none): the project's models, blocked flag, budget
	// and rate limits gate the key's calls too. From litellm_fields.
	ProjectID string
	// BudgetID names the budget (gateway.budgets, sql/012) whose limits hold for the key as
	// well as its own, on the key's own spend and windows (LiteLLM key budget_id, its "budget
	// tiers"); "" none. From litellm_fields.
	BudgetID string
	// TempBudgetIncrease (USD) is added to max_budget until TempBudgetExpiry (LiteLLM key
	// temp_budget_increase / temp_budget_expiry, its _PROXY_... get_key_max_budget); 0 none.
	TempBudgetIncrease float64
	TempBudgetExpiry   time.Time
	// ModelBudgets are the key's per-model budgets (LiteLLM model_max_budget: model group →
	// max_budget, budget_duration) on its spend for that model alone (nil: none).
	ModelBudgets map[string]spend.Budget
	// RouterSettings are the key's router_settings (LiteLLM key router_settings: per-call
	// fallbacks, num_retries, timeout, model_group_alias; router.CallerSettings), which win
	// over its team's; nil: none. From litellm_fields.
	RouterSettings *router.CallerSettings
	// AccessGroupIDs are LiteLLM's key access_group_ids: the unified access groups
	// (gateway.access_groups, sql/016) whose models and agents the key may use (LiteLLM
	// can_key_call_model; a key with none of its own models is narrowed to theirs); nil: none.
	AccessGroupIDs []string
	// AgentID is LiteLLM's key agent_id: the agent (by agent_id) that owns the key, its
	// identity when it calls the gateway; "" none. LiteLLM's common_checks hold such a key to
	// its agent's require_trace_id_on_calls_by_agent.
	AgentID string
}

// noExtra is what X returns for a key without Extra: shared, never written.
var noExtra Extra

// X returns the key's rarely set fields: k.Extra, or an empty Extra (shared; never modify it)
// when the key sets none of them. Never nil; no allocation.
func (k *Key) X() *Extra {
	if k.Extra != nil {
		return k.Extra
	}
	return &noExtra
}

// MaxBudgetAt is the key's budget at now: max_budget plus temp_budget_increase while
// temp_budget_expiry is ahead (LiteLLM).
func (k *Key) MaxBudgetAt(now time.Time) spend.Budget {
	b := k.Budget
	if x := k.X(); b.Has && x.TempBudgetIncrease > 0 && now.Before(x.TempBudgetExpiry) {
		b.Max += x.TempBudgetIncrease
	}
	return b
}

type row struct {
	Token          string          `json:"token"`
	KeyAlias       *string         `json:"key_alias"`
	Models         []string        `json:"models"`
	Blocked        bool            `json:"blocked"`
	Expires        *time.Time      `json:"expires"`
	Metadata       json.RawMessage `json:"metadata"`
	RPMLimit       *int64          `json:"rpm_limit"`
	TPMLimit       *int64          `json:"tpm_limit"`
	MaxParallel    *int64          `json:"max_parallel_requests"`
	MaxBudget      *float64        `json:"max_budget"`
	BudgetDuration *string         `json:"budget_duration"`
	TeamID         *string         `json:"team_id"`
	UserID         *string         `json:"user_id"`
	LitellmFields  json.RawMessage `json:"litellm_fields"`
}

func limitOf(p *int64) (int64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

// BuildRow builds a Key from a gateway.api_keys row: its typed columns (r.Cols, a
// *store.KeyCols, as the change feed's loads read it) or its row_to_json text (r.Data, as
// writes return it). The token shares the row id's string when they are equal, and the models
// list is interned (models.go): a million keys drawing on a few hundred lists hold each list
// once.
func BuildRow(r store.Row) (*Key, error) {
	if c, ok := r.Cols.(*store.KeyCols); ok {
		return build(c, r.ID)
	}
	var kr row
	if err := json.Unmarshal(r.Data, &kr); err != nil {
		return nil, fmt.Errorf("key row: %w", err)
	}
	return build(&store.KeyCols{Token: kr.Token, KeyAlias: kr.KeyAlias, Models: kr.Models, Blocked: kr.Blocked,
		Expires: kr.Expires, Metadata: kr.Metadata, RPMLimit: kr.RPMLimit, TPMLimit: kr.TPMLimit, MaxParallel: kr.MaxParallel,
		MaxBudget: kr.MaxBudget, BudgetDuration: kr.BudgetDuration, TeamID: kr.TeamID, UserID: kr.UserID, LitellmFields: kr.LitellmFields}, r.ID)
}

func build(kr *store.KeyCols, id string) (*Key, error) {
	if !isSHA256Hex(kr.Token) {
		return nil, fmt.Errorf("token: want the lowercase hex sha256 of the key (64 characters [0-9a-f]), got %d characters", len(kr.Token))
	}
	// psql may write what the API refuses: a negative or non-finite limit or budget refuses
	// the row (numbers; the serving version, if any, stays)
	for _, err := range []error{numbers.CheckPtr("rpm_limit", kr.RPMLimit), numbers.CheckPtr("tpm_limit", kr.TPMLimit),
		numbers.CheckPtr("max_parallel_requests", kr.MaxParallel), numbers.CheckPtr("max_budget", kr.MaxBudget)} {
		if err != nil {
			return nil, fmt.Errorf("key row: %w", err)
		}
	}
	token := kr.Token
	if token == id {
		token = id // one string for the registry's id and the key's token
	}
	k := &Key{Token: token, Models: internModels(kr.Models), Blocked: kr.Blocked, Metadata: compactMetadata(kr.Metadata)}
	k.Limits.RPM, k.Limits.HasRPM = limitOf(kr.RPMLimit)
	k.Limits.TPM, k.Limits.HasTPM = limitOf(kr.TPMLimit)
	k.Limits.Parallel, k.Limits.HasParallel = limitOf(kr.MaxParallel)
	if kr.MaxBudget != nil {
		k.Budget.Max, k.Budget.Has = *kr.MaxBudget, true
	}
	if kr.BudgetDuration != nil && *kr.BudgetDuration != "" {
		d, err := ParseDuration(*kr.BudgetDuration)
		if err != nil {
			return nil, fmt.Errorf("budget_duration: %w", err)
		}
		k.Budget.Every = d
	}
	if kr.KeyAlias != nil {
		k.Alias = *kr.KeyAlias
	}
	if kr.Expires != nil {
		k.Expires = *kr.Expires
	}
	if kr.TeamID != nil {
		k.TeamID = intern.String(*kr.TeamID)
	}
	if kr.UserID != nil {
		k.UserID = intern.String(*kr.UserID)
	}
	if len(kr.LitellmFields) > 2 { // "{}": the common case, no decode
		var lf struct {
			Aliases        map[string]string `json:"aliases"`
			ModelRPM       map[string]int64  `json:"model_rpm_limit"`
			ModelTPM       map[string]int64  `json:"model_tpm_limit"`
			EnforcedParams []string          `json:"enforced_params"`
			Guardrails     []string          `json:"guardrails"`
			Policies       []string          `json:"policies"`
			BudgetID       string            `json:"budget_id"`
			TempIncrease   *float64          `json:"temp_budget_increase"`
			TempExpiry     *time.Time        `json:"temp_budget_expiry"`
			ModelMaxBudget json.RawMessage   `json:"model_max_budget"`
			AllowedRoutes  []string          `json:"allowed_routes"`
			CacheControls  []string          `json:"allowed_cache_controls"`
			Permissions    map[string]any    `json:"permissions"`
			OrgID          string            `json:"organization_id"`
			ProjectID      string            `json:"project_id"`
			RouterSettings json.RawMessage   `json:"router_settings"`
			AccessGroups   []string          `json:"access_group_ids"`
			AgentID        string            `json:"agent_id"`
			ObjectPerm     *struct {
				Agents []string `json:"agents"`
			} `json:"object_permission"`
		}
		if err := json.Unmarshal(kr.LitellmFields, &lf); err != nil {
			return nil, fmt.Errorf("litellm_fields: %w", err)
		}
		var x Extra
		if len(lf.Aliases) > 0 {
			x.Aliases = lf.Aliases
		}
		ml, err := ModelLimits(lf.ModelRPM, lf.ModelTPM)
		if err != nil {
			return nil, fmt.Errorf("litellm_fields: %w", err)
		}
		x.ModelLimits = ml
		if len(lf.EnforcedParams) > 0 {
			x.EnforcedParams = lf.EnforcedParams
		}
		if len(lf.Guardrails) > 0 {
			x.Guardrails = lf.Guardrails
		}
		if len(lf.Policies) > 0 {
			x.Policies = lf.Policies
		}
		x.BudgetID = lf.BudgetID
		if x.ModelBudgets, err = ParseModelBudgets(lf.ModelMaxBudget); err != nil {
			return nil, fmt.Errorf("litellm_fields: %w", err)
		}
		if lf.TempIncrease != nil && lf.TempExpiry != nil {
			if err := numbers.Check("temp_budget_increase", *lf.TempIncrease); err != nil {
				return nil, fmt.Errorf("litellm_fields: %w", err)
			}
			x.TempBudgetIncrease, x.TempBudgetExpiry = *lf.TempIncrease, *lf.TempExpiry
		}
		if len(lf.AllowedRoutes) > 0 {
			x.AllowedRoutes = lf.AllowedRoutes
		}
		if len(lf.CacheControls) > 0 {
			x.AllowedCacheControls = lf.CacheControls
		}
		if lf.ObjectPerm != nil && len(lf.ObjectPerm.Agents) > 0 {
			x.Agents = lf.ObjectPerm.Agents
		}
		k.GetSpendRoutes = lf.Permissions["get_spend_routes"] == true
		x.OrganizationID = intern.String(lf.OrgID)
		x.ProjectID = intern.String(lf.ProjectID)
		if x.RouterSettings, err = router.ParseCallerSettings(lf.RouterSettings); err != nil {
			return nil, fmt.Errorf("litellm_fields: %w", err)
		}
		if len(lf.AccessGroups) > 0 {
			x.AccessGroupIDs = lf.AccessGroups
		}
		x.AgentID = intern.String(lf.AgentID)
		if !x.empty() {
			heap := x // only a key that sets one of them allocates its Extra
			k.Extra = &heap
		}
	}
	return k, nil
}

// empty reports whether no field of x is set (a key's litellm_fields that set none of them
// leave Extra nil).
func (x *Extra) empty() bool {
	return x.Aliases == nil && x.ModelLimits == nil && x.EnforcedParams == nil && x.Guardrails == nil && x.Policies == nil &&
		x.AllowedRoutes == nil && x.Agents == nil && x.AllowedCacheControls == nil && x.OrganizationID == "" &&
		x.ProjectID == "" && x.BudgetID == "" && x.TempBudgetIncrease == 0 && x.TempBudgetExpiry.IsZero() && x.ModelBudgets == nil && x.RouterSettings == nil &&
		x.AccessGroupIDs == nil && x.AgentID == ""
}

// ModelLimits builds per-model rate limits from LiteLLM's model_rpm_limit and model_tpm_limit
// maps (model group → per minute; nil when both are empty). A negative limit is an error
// naming the model.
func ModelLimits(rpm, tpm map[string]int64) (map[string]limits.Limits, error) {
	if len(rpm) == 0 && len(tpm) == 0 {
		return nil, nil
	}
	out := make(map[string]limits.Limits, len(rpm)+len(tpm))
	for m, n := range rpm {
		if n < 0 {
			return nil, fmt.Errorf("model_rpm_limit[%q] must be >= 0, got %d", m, n)
		}
		l := out[m]
		l.RPM, l.HasRPM = n, true
		out[m] = l
	}
	for m, n := range tpm {
		if n < 0 {
			return nil, fmt.Errorf("model_tpm_limit[%q] must be >= 0, got %d", m, n)
		}
		l := out[m]
		l.TPM, l.HasTPM = n, true
		out[m] = l
	}
	return out, nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !lowerHex[s[i]] {
			return false
		}
	}
	return true
}

// lowerHex marks the bytes [0-9a-f] (one load per byte: a cold start checks a million tokens).
var lowerHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()

// MaxDuration caps key durations (100 years): longer ones are refused rather than overflowing
// into the past.
const MaxDuration = 100 * 365 * 24 * time.Hour

// Hash returns the sha256 hex digest under which a key is stored (the key itself never is).
func Hash(key string) string {
	var out [HashLen]byte // hex on the stack: one allocation, the string
	HashTo(&out, key)
	return string(out[:])
}

// HashLen is the length of a key's hash (Hash): 64 hex digits.
const HashLen = 2 * sha256.Size

// HashTo writes Hash(key) into dst, without allocating: for lookups on the request path.
func HashTo(dst *[HashLen]byte, key string) {
	// a read-only view of key's bytes: sha256 only reads its input (a []byte(key) copy
	// allocates for keys over 32 bytes)
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(key), len(key)))
	hex.Encode(dst[:], sum[:])
}

// Generate returns a new random key, "sk-" + 22 url-safe base64 characters (128 bits), the
// shape of LiteLLM's generated keys.
func Generate() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "sk-" + base64.RawURLEncoding.EncodeToString(b)
}

// DurationError words a ParseDuration error for the field it was read from, naming the field
// once: `budget_duration: "x" is not a duration like ...` (ParseDuration's own text starts
// with "duration: ").
func DurationError(field string, err error) string {
	return field + strings.TrimPrefix(err.Error(), "duration")
}

// ParseDuration parses LiteLLM's key durations: "30s", "30m", "1h", "30d", "2w", "1mo".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		d      time.Duration
	}{{"mo", 30 * 24 * time.Hour}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.Atoi(num)
			if err != nil || n <= 0 {
				break
			}
			if int64(n) > int64(MaxDuration/u.d) {
				return 0, fmt.Errorf("duration: %q is longer than the maximum of 100 years", s)
			}
			return time.Duration(n) * u.d, nil
		}
	}
	return 0, fmt.Errorf("duration: %q is not a duration like 30s, 30m, 1h, 30d, 2w or 1mo", s)
}

// Usable reports why the key cannot be used now ("" when it can).
func (k *Key) Usable(now time.Time) string {
	if k.Blocked {
		return "key is blocked"
	}
	if !k.Expires.IsZero() && now.After(k.Expires) {
		return "key expired at " + k.Expires.UTC().Format(time.RFC3339)
	}
	return ""
}

// AllModels reports whether the key may use every model (no list, or all-proxy-models).
func (k *Key) AllModels() bool {
	if len(k.Models) == 0 {
		return true
	}
	for _, m := range k.Models {
		if m == AllProxyModels {
			return true
		}
	}
	return false
}

// ListAllows reports whether a models list (of a key, team or user) allows model group name,
// whose deployments are in the given access groups: an empty list or one holding
// all-proxy-models allows every model; otherwise the list must name the group or one of its
// access groups, or hold a wildcard pattern matching the name ("openai/*" allows
// "openai/gpt-4o", "*" every name; LiteLLM's wildcard model access).
func ListAllows(models []string, name string, accessGroups func(yield func(string) bool)) bool {
	if len(models) == 0 {
		return true
	}
	for _, m := range models {
		if m == name || m == AllProxyModels {
			return true
		}
		if p, ok := strings.CutSuffix(m, "*"); ok && strings.HasPrefix(name, p) {
			return true
		}
	}
	ok := false
	if accessGroups != nil {
		accessGroups(func(g string) bool {
			for _, m := range models {
				if m == g {
					ok = true
					return false
				}
			}
			return true
		})
	}
	return ok
}
