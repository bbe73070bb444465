// Package router maps a model group name to its deployments and picks one per call, with
// retries and cooldowns, mirroring LiteLLM's Router (simple-shuffle routing, num_retries,
// allowed_fails, cooldown_time).
package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

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

// BuildRow builds a Deployment from a gateway.models row. Errors name the bad field; the
// registry then keeps serving the previous version.
func BuildRow(row store.Row) (*Deployment, error) {
	var r modelRow
	if err := json.Unmarshal(row.Data, &r); err != nil {
		return nil, fmt.Errorf("model %q: decode row: %w", row.ID, err)
	}
	d, err := Build(r.ModelID, r.ModelName, r.LitellmParams, r.ModelInfo)
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
func Build(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	return build(id, name, litellmParams, modelInfo, provider.NewDeployment)
}

// BuildConfig is [Build] for a config-file model (provider.NewConfigDeployment: the
// provider's implicit environment credentials are not subject to allowed_env_secrets).
func BuildConfig(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	return build(id, name, litellmParams, modelInfo, provider.NewConfigDeployment)
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
	d := &Deployment{Deployment: pd, LitellmParams: litellmParams, ModelInfo: modelInfo}
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
			d.AccessGroups = append(d.AccessGroups, g.Str)
		}
	}
	return d, nil
}

// Names indexes a deployment under its model group name.
func Names(e *registry.Entry[*Deployment]) []string { return []string{e.Value.ModelName} }

// Settings are router_settings (LiteLLM names and defaults).
type Settings struct {
	RoutingStrategy string        // only "simple-shuffle" is implemented
	NumRetries      int           // extra attempts on a retryable failure; default 2
	AllowedFails    int           // failures per minute before a cooldown; default 3
	CooldownTime    time.Duration // how long a failing deployment is skipped; default 5 s
}

// ErrUnknownModel: no deployment serves the model group, after a read-through.
var ErrUnknownModel = errors.New("unknown model")

// Router selects deployments. Safe for concurrent use; the hot path takes no lock.
type Router struct {
	models   *registry.Registry[*Deployment]
	client   *provider.Client
	settings Settings
	health   sync.Map // model_id → *health
}

type health struct {
	window    atomic.Int64 // unix seconds of the current minute window
	fails     atomic.Int64
	coolUntil atomic.Int64 // unix nanos
}

// New builds a Router over the models registry.
func New(models *registry.Registry[*Deployment], client *provider.Client, s Settings) *Router {
	if s.NumRetries == 0 {
		s.NumRetries = 2
	}
	if s.NumRetries < 0 {
		s.NumRetries = 0
	}
	if s.AllowedFails == 0 {
		s.AllowedFails = 3
	}
	if s.CooldownTime == 0 {
		s.CooldownTime = 5 * time.Second
	}
	return &Router{models: models, client: client, settings: s}
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
func (r *Router) Lookup(name string) []*registry.Entry[*Deployment] {
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
		newDeployment := provider.NewDeployment
		if !d.DB {
			newDeployment = provider.NewConfigDeployment
		}
		pd, err := newDeployment(d.ModelID, name, params)
		if err != nil {
			continue
		}
		nd := &Deployment{Deployment: pd, LitellmParams: d.LitellmParams, ModelInfo: d.ModelInfo, AccessGroups: d.AccessGroups, DB: d.DB, group: d.ModelName}
		out = append(out, &registry.Entry[*Deployment]{ID: e.ID, Version: e.Version, Config: e.Config, Row: e.Row, Value: nd})
	}
	return out
}

// pick chooses a deployment at random among those not cooling down (simple-shuffle), avoiding
// the ones already tried when possible.
func (r *Router) pick(group []*registry.Entry[*Deployment], tried []string) *Deployment {
	n := len(group)
	start := rand.IntN(n)
	now := time.Now().UnixNano()
	var fallback *Deployment
	for i := range n {
		d := group[(start+i)%n].Value
		if contains(tried, d.ModelID) {
			if fallback == nil {
				fallback = d
			}
			continue
		}
		if h, ok := r.health.Load(d.ModelID); ok && h.(*health).coolUntil.Load() > now {
			if fallback == nil {
				fallback = d
			}
			continue
		}
		return d
	}
	return fallback
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (r *Router) fail(d *Deployment) {
	v, _ := r.health.LoadOrStore(d.ModelID, &health{})
	h := v.(*health)
	now := time.Now()
	minute := now.Unix() / 60
	if h.window.Swap(minute) != minute {
		h.fails.Store(0)
	}
	if h.fails.Add(1) > int64(r.settings.AllowedFails) {
		h.coolUntil.Store(now.Add(r.settings.CooldownTime).UnixNano())
	}
}

// Do sends a non-streaming request for the model group through a deployment, retrying
// retryable upstream failures on another deployment up to NumRetries times.
func (r *Router) Do(ctx context.Context, group []*registry.Entry[*Deployment], in provider.Format, body []byte) (*provider.Response, *Deployment, error) {
	return r.DoWith(ctx, group, in, body, provider.Headers{})
}

// DoWith is Do with the call's headers (provider.Client.DoWith).
func (r *Router) DoWith(ctx context.Context, group []*registry.Entry[*Deployment], in provider.Format, body []byte, h provider.Headers) (*provider.Response, *Deployment, error) {
	return attempt(r, ctx, group, in, func(d *Deployment) (*provider.Response, error) {
		return r.client.DoWith(ctx, d.Deployment, in, body, h)
	})
}

// Stream opens a streaming request, retrying like Do until the upstream accepted it.
func (r *Router) Stream(ctx context.Context, group []*registry.Entry[*Deployment], in provider.Format, body []byte) (provider.Stream, *Deployment, error) {
	return r.StreamWith(ctx, group, in, body, provider.Headers{})
}

// StreamWith is Stream with the call's headers (provider.Client.StreamWith).
func (r *Router) StreamWith(ctx context.Context, group []*registry.Entry[*Deployment], in provider.Format, body []byte, h provider.Headers) (provider.Stream, *Deployment, error) {
	return attempt(r, ctx, group, in, func(d *Deployment) (provider.Stream, error) {
		return r.client.StreamWith(ctx, d.Deployment, in, body, h)
	})
}

// attempt runs call on a picked deployment; a retryable failure counts against the
// deployment's cooldown and is retried on another one (LiteLLM Router num_retries).
func attempt[T any](r *Router, ctx context.Context, group []*registry.Entry[*Deployment], in provider.Format, call func(*Deployment) (T, error)) (T, *Deployment, error) {
	var zero T
	var tried []string
	var lastErr error
	for range r.settings.NumRetries + 1 {
		d := r.pick(group, tried)
		if !d.Supports(in) {
			return zero, d, &provider.UpstreamError{Status: 400, Message: fmt.Sprintf("%s not supported by provider %s", in.RouteName(), d.Provider)}
		}
		res, err := call(d)
		if err == nil {
			return res, d, nil
		}
		lastErr = err
		if !provider.IsRetryable(err) || ctx.Err() != nil {
			return zero, d, err
		}
		r.fail(d)
		tried = append(tried, d.ModelID)
	}
	return zero, nil, lastErr
}
