package api

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// accessGroupsFor lists, as OpenAI model objects, the access groups the caller may use: every
// access group for the admin; for a virtual key those its (and its team's) lists name, or
// every one when its lists allow every model.
func (s *Server) accessGroupsFor(p principal, snap *registry.Snapshot[*router.Deployment]) []map[string]any {
	groups := map[string]bool{}
	snap.All(func(e *registry.Entry[*router.Deployment]) bool {
		for _, g := range e.Value.AccessGroups {
			groups[g] = true
		}
		return true
	})
	names := make([]string, 0, len(groups))
	for g := range groups {
		if p.CanUse(g, nil) || p.canUseGroup(g) {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"id": n, "object": "model", "created": 1677610602, "owned_by": "openai"})
	}
	return out
}

// canUseGroup reports whether the caller's lists (with their unified access groups) grant
// model access group g.
func (p principal) canUseGroup(g string) bool {
	return p.ListsAllow("\x00", func(f func(string) bool) { f(g) })
}

// modelGroupInfo: GET /model_group/info[?model_group=] → {"data": [{"model_group",
// "providers", "max_input_tokens", "max_output_tokens", "input_cost_per_token",
// "output_cost_per_token", "mode", "tpm", "rpm", "access_groups", "supports_*"...}]}: one entry
// per model group the caller may use, its values taken from its deployments' model_info
// (LiteLLM's ModelGroupInfo; the largest limits and costs across deployments), sorted by name.
// A provider wildcard group (anthropic/*) is listed as the concrete models its provider
// serves (expandWildcard; an exact group of the same name is listed as itself); ?model_group=
// a name a wildcard group serves answers that name.
func (s *Server) modelGroupInfo(c echo.Context) error {
	p := caller(c)
	ctx := c.Request().Context()
	snap := s.Router.Models().Load()
	type named struct {
		name  string
		group []*registry.Entry[*router.Deployment]
	}
	var groups []named
	if want := c.QueryParam("model_group"); want != "" {
		group := snap.ByName(want)
		if len(group) == 0 {
			group = s.Router.Lookup(want) // a concrete name of a wildcard group
		}
		groups = append(groups, named{want, group})
	} else {
		for _, n := range snap.Names() {
			group := snap.ByName(n)
			expanded := s.expandWildcard(ctx, n, group)
			if expanded == nil {
				groups = append(groups, named{n, group})
				continue
			}
			for _, e := range expanded {
				if len(snap.ByName(e)) == 0 {
					groups = append(groups, named{e, group})
				}
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	data := make([]map[string]any, 0, len(groups))
	for _, g := range groups {
		if len(g.group) == 0 || !p.CanUse(g.name, g.group) {
			continue
		}
		data = append(data, groupInfo(g.name, g.group))
	}
	return c.JSON(http.StatusOK, map[string]any{"data": data})
}

func groupInfo(name string, group []*registry.Entry[*router.Deployment]) map[string]any {
	out := map[string]any{"model_group": name, "mode": "chat", "max_input_tokens": nil, "max_output_tokens": nil,
		"input_cost_per_token": nil, "output_cost_per_token": nil, "tpm": nil, "rpm": nil,
		"supports_parallel_function_calling": false, "supports_vision": false, "supports_function_calling": false}
	providers := map[string]bool{}
	groups := map[string]bool{}
	var tpm, rpm int64
	for _, e := range group {
		d := e.Value
		providers[d.Provider] = true
		for _, g := range d.AccessGroups {
			groups[g] = true
		}
		tpm += d.TPM
		rpm += d.RPM
		mi := gjson.ParseBytes(d.ModelInfo)
		for _, f := range []string{"max_input_tokens", "max_output_tokens", "input_cost_per_token", "output_cost_per_token"} {
			if v := mi.Get(f); v.Type == gjson.Number {
				if cur, ok := out[f].(float64); !ok || v.Num > cur {
					out[f] = v.Num
				}
			}
		}
		if m := mi.Get("mode"); m.Type == gjson.String {
			out["mode"] = m.Str
		}
		mi.ForEach(func(k, v gjson.Result) bool {
			if strings.HasPrefix(k.Str, "supports_") && v.Type == gjson.True {
				out[k.Str] = true
			}
			return true
		})
	}
	if tpm > 0 {
		out["tpm"] = tpm
	}
	if rpm > 0 {
		out["rpm"] = rpm
	}
	out["providers"] = sortedSet(providers)
	out["access_groups"] = sortedSet(groups)
	return out
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Health probe bounds (GET /health).
const (
	healthConcurrency = 8
	healthTimeout     = 10 * time.Second
)

// health: GET /health[?model=] (admin) → {"healthy_endpoints", "unhealthy_endpoints",
// "healthy_count", "unhealthy_count"} (LiteLLM). Each deployment (of model group ?model= when
// given) is probed with provider.Client.Probe — a token-free request, at most healthConcurrency
// at once, each bounded by healthTimeout; mock deployments answer without a call. An endpoint
// is the deployment's litellm_params (secrets masked) plus "model_name" and "model_id"; an
// unhealthy one also carries "error".
func (s *Server) health(c echo.Context) error {
	snap := s.Router.Models().Load()
	var entries []*registry.Entry[*router.Deployment]
	if m := c.QueryParam("model"); m != "" {
		entries = append(entries, snap.ByName(m)...)
	} else {
		snap.All(func(e *registry.Entry[*router.Deployment]) bool { entries = append(entries, e); return true })
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i].Value, entries[j].Value
		if a.ModelName != b.ModelName {
			return a.ModelName < b.ModelName
		}
		return a.ModelID < b.ModelID
	})
	errs := make([]error, len(entries))
	sem := make(chan struct{}, healthConcurrency)
	var wg sync.WaitGroup
	ctx := c.Request().Context()
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pctx, cancel := context.WithTimeout(ctx, healthTimeout)
			defer cancel()
			errs[i] = s.Client.Probe(pctx, e.Value.Deployment)
		}()
	}
	wg.Wait()
	healthy, unhealthy := []map[string]any{}, []map[string]any{}
	for i, e := range entries {
		ep := map[string]any{}
		_ = json.Unmarshal(provider.MaskParams(e.Value.LitellmParams), &ep)
		ep["model_name"] = e.Value.ModelName
		ep["model_id"] = e.Value.ModelID
		if cd, ok := s.Router.CooldownOf(e.Value.ModelID); ok { // skipped by the router until then
			ep["cooldown_until"], ep["cooldown_reason"] = cd.Until.UTC().Format(time.RFC3339Nano), cd.Reason
		}
		if errs[i] != nil {
			ep["error"] = errs[i].Error()
			unhealthy = append(unhealthy, ep)
		} else {
			healthy = append(healthy, ep)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"healthy_endpoints": healthy, "unhealthy_endpoints": unhealthy,
		"healthy_count": len(healthy), "unhealthy_count": len(unhealthy)})
}

// anonymousFunc matches the name Go gives a closure handler ("func9", "func1.2").
var anonymousFunc = regexp.MustCompile(`^func\d+(\.\d+)*$`)

// routeName names a route by its path: "/v1/chat/completions" → "v1_chat_completions",
// "/key/:key_id" → "key_key_id" (the name of a route whose handler is a closure).
func routeName(path string) string {
	var b strings.Builder
	for _, r := range strings.Trim(path, "/") {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "root"
	}
	return strings.TrimSuffix(b.String(), "_")
}

// listRoutes: GET /routes → {"routes": [{"path", "methods", "name"}]}, every route this
// replica serves, sorted by path (LiteLLM's /routes).
func (s *Server) listRoutes(c echo.Context) error {
	byPath := map[string]map[string]bool{}
	names := map[string]string{}
	for _, r := range s.e.Routes() {
		if r.Method == echo.RouteNotFound || strings.HasPrefix(r.Method, "echo_") {
			continue
		}
		if byPath[r.Path] == nil {
			byPath[r.Path] = map[string]bool{}
		}
		byPath[r.Path][r.Method] = true
		n := r.Name
		if i := strings.LastIndex(n, "."); i >= 0 {
			n = n[i+1:]
		}
		n = strings.TrimSuffix(strings.TrimPrefix(n, "("), "-fm")
		if anonymousFunc.MatchString(n) { // a closure (func9): named after its path instead
			n = routeName(r.Path)
		}
		names[r.Path] = n
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]map[string]any, 0, len(paths))
	for _, p := range paths {
		out = append(out, map[string]any{"path": p, "methods": sortedSet(byPath[p]), "name": names[p]})
	}
	return c.JSON(http.StatusOK, map[string]any{"routes": out})
}
