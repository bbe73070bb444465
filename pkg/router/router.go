// Package router maps a model group name to its deployments and picks one per call, with
// retries and cooldowns, mirroring LiteLLM's Router: routing strategies (strategies.go),
// deployment rpm/tpm/max_parallel_requests caps held cluster-wide (caps.go), retries per
// error class (retries.go, errors.go) and cooldowns shared by every replica (cooldowns.go);
// router_settings in settings.go.
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"lockstep/pkg/intern"
	"lockstep/pkg/limits"
	"lockstep/pkg/numbers"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// Deployment is a model row as served: the upstream target plus what the management API and
// access checks need.
type Deployment struct {
	*provider.Deployment
	LitellmParams json.RawMessage // as stored (secrets unmasked; never sent to clients)
	ModelInfo     json.RawMessage // as stored, a JSON object
	AccessGroups  []string        // model_info.access_groups
	DB            bool            // from gateway.models (false: config file)
	Routing       Params          // order, weight, max_parallel_requests, price (params.go)
	// Headers are the deployment's response header values, built once (headers.go).
	Headers *Headers
	// TeamID is model_info.team_id: a team-scoped model (LiteLLM's team models, created by a
	// team admin with model_info.team_id), usable and listed only for that team's keys and
	// proxy admins ("": every key its lists allow).
	TeamID string
	// TeamPublicName is model_info.team_public_model_name: the name a team model's team calls
	// it by (LiteLLM stores team models under a unique model_name and aliases this name to it
	// for the team); "" when none.
	TeamPublicName string
	// group is the model group name as registered when it differs from ModelName: the
	// wildcard pattern ("openai/*") of a deployment expand built for a concrete name.
	group string
}

// Group is the deployment's model group as registered: ModelName, or for a wildcard match the
// pattern ("openai/*"), never the name the client sent. Metric labels use it, so that their
// series are bounded by the model table, not by what clients send.
func (d *Deployment) Group() string {
	if d.group != "" {
		return d.group
	}
	return d.ModelName
}

// modelRow is the JSON shape of a gateway.models row (row_to_json).
type modelRow struct {
	ModelID       string          `json:"model_id"`
	ModelName     string          `json:"model_name"`
	LitellmParams json.RawMessage `json:"litellm_params"`
	ModelInfo     json.RawMessage `json:"model_info"`
}

// Builder builds the model registry's deployments under one secrets policy and salt key
// (Deployments, see provider.Policy; nil: the default policy). The gateway makes one from its
// configuration (cmd/gateway) and builds every model through it.
type Builder struct {
	Deployments *provider.Builder
}

// BuildRow builds a Deployment from a gateway.models row: its typed columns (row.Cols, a
// *store.ModelCols, as the change feed's loads read it) or its row_to_json text (row.Data).
// Errors name the bad field; the registry then keeps serving the previous version.
func (b Builder) BuildRow(row store.Row) (*Deployment, error) {
	var r modelRow
	if c, ok := row.Cols.(*store.ModelCols); ok {
		r = modelRow{ModelID: c.ModelID, ModelName: c.ModelName, LitellmParams: c.LitellmParams, ModelInfo: c.ModelInfo}
	} else if err := json.Unmarshal(row.Data, &r); err != nil {
		return nil, fmt.Errorf("model %q: decode row: %w", row.ID, err)
	}
	d, err := b.Build(r.ModelID, r.ModelName, r.LitellmParams, r.ModelInfo)
	if err != nil {
		return nil, err
	}
	d.DB = true
	return d, nil
}

// Build validates a deployment from its parts (API input or DB row: a database object, see
// provider.NewDeployment): the one builder of a model, so every write path refuses the same
// things. Besides the provider's own checks, every timeout, price, budget and limit member of
// litellm_params and model_info (numbers.Guarded: input_cost_per_token, max_budget, rpm, …)
// must be a finite number >= 0 (numbers.CheckObject; the error names the field).
func (b Builder) Build(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	return build(id, name, litellmParams, modelInfo, b.Deployments.NewDeployment)
}

// BuildConfig is [Builder.Build] for a config-file model (provider.NewConfigDeployment: the
// provider's implicit environment credentials are not subject to allowed_env_secrets).
func (b Builder) BuildConfig(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	return build(id, name, litellmParams, modelInfo, b.Deployments.NewConfigDeployment)
}

// BuildRow is [Builder.BuildRow] under the default secrets policy (tests, tools).
func BuildRow(row store.Row) (*Deployment, error) { return Builder{}.BuildRow(row) }

// BuildConfig is [Builder.BuildConfig] under the default secrets policy (tests, tools).
func BuildConfig(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	return Builder{}.BuildConfig(id, name, litellmParams, modelInfo)
}

// Build is [Builder.Build] under the default secrets policy (tests, tools).
func Build(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	return Builder{}.Build(id, name, litellmParams, modelInfo)
}

func build(id, name string, litellmParams, modelInfo []byte, newDeployment func(id, name string, params []byte) (*provider.Deployment, error)) (*Deployment, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("model_name is required")
	}
	if len(litellmParams) == 0 || string(litellmParams) == "null" {
		return nil, errors.New("litellm_params is required")
	}
	pd, err := newDeployment(id, name, litellmParams)
	if err != nil {
		return nil, err
	}
	if err := numbers.CheckObject("litellm_params", gjson.ParseBytes(litellmParams)); err != nil {
		return nil, err
	}
	rp, err := parseParams(litellmParams, modelInfo)
	if err != nil {
		return nil, err
	}
	d := &Deployment{Deployment: pd, LitellmParams: litellmParams, ModelInfo: modelInfo, Routing: rp, Headers: newHeaders(pd, litellmParams)}
	if len(modelInfo) == 0 || string(modelInfo) == "null" {
		d.ModelInfo = json.RawMessage("{}")
		return d, nil
	}
	mi := gjson.ParseBytes(modelInfo)
	if !gjson.ValidBytes(modelInfo) || !mi.IsObject() {
		return nil, errors.New("model_info must be a JSON object")
	}
	if err := numbers.CheckObject("model_info", mi); err != nil {
		return nil, err
	}
	switch ag := mi.Get("access_groups"); {
	case !ag.Exists() || ag.Type == gjson.Null:
	case !ag.IsArray():
		return nil, fmt.Errorf("model_info.access_groups must be an array of strings, got %s", ag.Raw)
	default:
		for i, g := range ag.Array() {
			if g.Type != gjson.String {
				return nil, fmt.Errorf("model_info.access_groups[%d] must be a string, got %s", i, g.Raw)
			}
			d.AccessGroups = append(d.AccessGroups, intern.String(g.Str)) // groups repeat; not a slice of the row
		}
	}
	switch tid := mi.Get("team_id"); tid.Type {
	case gjson.Null:
	case gjson.String:
		d.TeamID = intern.String(tid.Str)
	default:
		return nil, fmt.Errorf("model_info.team_id must be a string, got %s", tid.Raw)
	}
	if pub := mi.Get("team_public_model_name"); pub.Type == gjson.String {
		d.TeamPublicName = pub.Str
	}
	return d, nil
}

// Names indexes a deployment under its model group name.
func Names(e *registry.Entry[*Deployment]) []string { return []string{e.Value.ModelName} }

// ErrUnknownModel: no deployment serves the model group, after a read-through.
var ErrUnknownModel = errors.New("unknown model")

// Router selects deployments. Safe for concurrent use; the hot path takes no lock (the
// limiter's per-deployment lease mutex aside, for capped deployments).
type Router struct {
	models   *registry.Registry[*Deployment]
	client   *provider.Client
	settings Settings
	states   sync.Map // model_id → *depState
	shared   atomic.Pointer[Shared]
	local    *limits.Limiter // caps without Share (no database): an in-memory store

	routed, noDeployments                       atomic.Int64
	cooldowns, publishErrors, ticks, tickErrors atomic.Int64
}

// New builds a Router over the models registry; unset settings take LiteLLM's defaults.
func New(models *registry.Registry[*Deployment], client *provider.Client, s Settings) *Router {
	return &Router{models: models, client: client, settings: s.withDefaults(),
		local: limits.New(limits.Config{Store: &memStore{}, ReplicaID: "local"})}
}

// Settings returns the settings in force (defaults filled).
func (r *Router) Settings() Settings { return r.settings }

// Stats are the router's counters since start.
type Stats struct {
	Routed        int64            // attempts given a deployment
	NoDeployments int64            // attempts refused: every deployment cooling down or capped (429)
	RoundTrips    map[string]int64 // database round trips of the deployment caps' leases: rpm, tpm
	Cooldowns     int64            // cooldowns decided here or learnt from other replicas
	PublishErrors int64            // cooldown events that could not be written
	Ticks         int64            // shared-cooldown reads (one query each)
	TickErrors    int64
}

// Stats returns the counters.
func (r *Router) Stats() Stats {
	st := Stats{Routed: r.routed.Load(), NoDeployments: r.noDeployments.Load(), RoundTrips: map[string]int64{},
		Cooldowns: r.cooldowns.Load(), PublishErrors: r.publishErrors.Load(), Ticks: r.ticks.Load(), TickErrors: r.tickErrors.Load()}
	if sh := r.shared.Load(); sh != nil && sh.Limiter != nil {
		ls := sh.Limiter.Stats()
		st.RoundTrips["rpm"], st.RoundTrips["tpm"] = ls.RoundTrips["rpm"], ls.RoundTrips["tpm"]
	}
	return st
}

// Models is the registry the router serves from.
func (r *Router) Models() *registry.Registry[*Deployment] { return r.models }

// Group returns the deployments serving model name, with a bounded read-through on a miss:
// the model group of that exact name when there is one, else the most specific wildcard group
// matching it (see Lookup). Returns ErrUnknownModel when none exist.
//
// A wildcard match held locally is served without a read-through (as LiteLLM's router matches
// its patterns locally): an exact group of the same name created on another replica takes
// over as soon as the change feed applies it, typically within milliseconds.
func (r *Router) Group(ctx context.Context, name string) ([]*registry.Entry[*Deployment], error) {
	if g := r.Lookup(name); len(g) > 0 {
		return g, nil
	}
	if a, ok := r.settings.ModelGroupAlias[name]; ok {
		name = a
	}
	_ = r.models.Resolve(ctx, name) // read-through of the exact name
	if g := r.Lookup(name); len(g) > 0 {
		return g, nil // the exact group (read through), or a wildcard group the feed applied meanwhile
	}
	// a one-name read-through cannot find a wildcard group written elsewhere and not applied
	// here yet: the notification barrier (one shared round trip) makes the miss authoritative
	if r.models.Barrier(ctx) == nil {
		if g := r.Lookup(name); len(g) > 0 {
			return g, nil
		}
	}
	return nil, ErrUnknownModel
}

// Lookup finds the deployments serving model name in the registry as held (no read-through):
// the exact model group name first; else the wildcard group whose pattern — a model group
// name ending in "*" ("openai/*", "acc-wild/*", "gpt-4*", "*") — is the longest prefix match
// (LiteLLM's precedence: an exact group beats a wildcard, a longer pattern a shorter one).
// For a wildcard match each deployment's litellm_params.model has its "*" replaced by the
// part of name the pattern's "*" matched ("acc-wild/*" with model "openai/*" serves
// "acc-wild/some-model" with upstream model "some-model"), so the returned entries are built
// for this request and are not in the registry.
//
// A model_group_alias entry for name is applied first (LiteLLM: the alias wins).
func (r *Router) Lookup(name string) []*registry.Entry[*Deployment] {
	if a, ok := r.settings.ModelGroupAlias[name]; ok {
		name = a
	}
	snap := r.models.Load()
	if g := snap.ByName(name); len(g) > 0 {
		return g
	}
	for i := len(name); i >= 0; i-- {
		if g := snap.ByName(name[:i] + "*"); len(g) > 0 {
			return expand(g, name, name[i:])
		}
	}
	return nil
}

// expand builds the deployments of wildcard group g for the requested name, rest being what
// the pattern's "*" matched. A deployment whose litellm_params.model has no "*" serves as is;
// one that cannot be rebuilt (cannot happen for a row that built once) is left out.
func expand(g []*registry.Entry[*Deployment], name, rest string) []*registry.Entry[*Deployment] {
	out := make([]*registry.Entry[*Deployment], 0, len(g))
	for _, e := range g {
		d := e.Value
		model := gjson.GetBytes(d.LitellmParams, "model").Str
		if !strings.Contains(model, "*") {
			out = append(out, e)
			continue
		}
		params, err := sjson.SetBytes(d.LitellmParams, "model", strings.Replace(model, "*", rest, 1))
		if err != nil {
			continue
		}
		pd, err := d.Deployment.Derive(name, params) // same policy, same origin (d.DB)
		if err != nil {
			continue
		}
		nd := &Deployment{Deployment: pd, LitellmParams: d.LitellmParams, ModelInfo: d.ModelInfo, AccessGroups: d.AccessGroups, TeamID: d.TeamID, TeamPublicName: d.TeamPublicName, DB: d.DB, Routing: d.Routing, Headers: d.Headers, group: d.ModelName}
		out = append(out, &registry.Entry[*Deployment]{ID: e.ID, Version: e.Version, Config: e.Config, Value: nd})
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
