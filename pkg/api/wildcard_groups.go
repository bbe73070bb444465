package api

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
)

// Wildcard model groups in /model_group/info (LiteLLM's _get_wildcard_models: a provider
// wildcard deployment such as anthropic/* is listed as the provider's concrete models). LiteLLM
// takes the provider's models from its model-cost catalogue (model_prices_and_context_window.json,
// litellm.models_by_provider); lockstep has no such catalogue, so it asks the provider itself,
// as LiteLLM does with check_provider_endpoint: GET /models of the wildcard deployment
// (provider.Client.ListModels, OpenAI-compatible and Anthropic providers), kept
// wildcardListTTL per deployment. A wildcard group whose provider lists nothing (another API,
// a mock, an error) is listed as its pattern, as before.
const (
	wildcardListTTL     = 5 * time.Minute
	wildcardListTimeout = 5 * time.Second
)

// wildcardLists caches the provider model lists of wildcard deployments (a deployment is
// immutable: a changed model row is a new *provider.Deployment, so a new entry).
type wildcardLists struct{ m sync.Map } // *provider.Deployment → wildcardList

type wildcardList struct {
	ids []string
	at  time.Time
}

// expandWildcard returns the concrete model group names of wildcard group pattern ("*",
// "anthropic/*"): the pattern's "*" replaced by each model id the first listing deployment's
// provider returns, sorted; nil when the group has no wildcard deployment or none lists its
// models.
func (s *Server) expandWildcard(ctx context.Context, pattern string, group []*registry.Entry[*router.Deployment]) []string {
	if !strings.Contains(pattern, "*") {
		return nil
	}
	for _, e := range group {
		if !strings.Contains(gjson.GetBytes(e.Value.LitellmParams, "model").Str, "*") {
			continue
		}
		ids, ok := s.wildcards.list(ctx, s.Client, e.Value.Deployment)
		if !ok {
			continue
		}
		seen := map[string]bool{}
		var out []string
		for _, id := range ids {
			n := strings.Replace(pattern, "*", id, 1)
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out
	}
	return nil
}

// list is d's provider model list (cached wildcardListTTL); ok false when it has none.
func (w *wildcardLists) list(ctx context.Context, c *provider.Client, d *provider.Deployment) ([]string, bool) {
	if v, ok := w.m.Load(d); ok && time.Since(v.(wildcardList).at) < wildcardListTTL {
		return v.(wildcardList).ids, true
	}
	if c == nil {
		return nil, false
	}
	lctx, cancel := context.WithTimeout(ctx, wildcardListTimeout)
	defer cancel()
	ids, err := c.ListModels(lctx, d)
	if err != nil || len(ids) == 0 {
		return nil, false
	}
	now := time.Now()
	w.m.Range(func(k, v any) bool { // entries of replaced deployments expire here
		if now.Sub(v.(wildcardList).at) >= wildcardListTTL {
			w.m.Delete(k)
		}
		return true
	})
	w.m.Store(d, wildcardList{ids: ids, at: now})
	return ids, true
}
