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

// Build validates a deployment from its parts (API input, config file or DB row).
func Build(id, name string, litellmParams, modelInfo []byte) (*Deployment, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("model_name is required")
	}
	if len(litellmParams) == 0 || string(litellmParams) == "null" {
		return nil, errors.New("litellm_params is required")
	}
	pd, err := provider.NewDeployment(id, name, litellmParams)
	if err != nil {
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

// Group returns the deployments of a model group, with a bounded read-through on a miss.
// Returns ErrUnknownModel when none exist.
func (r *Router) Group(ctx context.Context, name string) ([]*registry.Entry[*Deployment], error) {
	if g := r.models.Load().ByName(name); len(g) > 0 {
		return g, nil
	}
	if err := r.models.Resolve(ctx, name); err != nil {
		return nil, ErrUnknownModel
	}
	if g := r.models.Load().ByName(name); len(g) > 0 {
		return g, nil
	}
	return nil, ErrUnknownModel
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
	return attempt(r, ctx, group, in, func(d *Deployment) (*provider.Response, error) {
		return r.client.Do(ctx, d.Deployment, in, body)
	})
}

// Stream opens a streaming request, retrying like Do until the upstream accepted it.
func (r *Router) Stream(ctx context.Context, group []*registry.Entry[*Deployment], in provider.Format, body []byte) (provider.Stream, *Deployment, error) {
	return attempt(r, ctx, group, in, func(d *Deployment) (provider.Stream, error) {
		return r.client.Stream(ctx, d.Deployment, in, body)
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
