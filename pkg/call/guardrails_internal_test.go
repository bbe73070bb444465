package call

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func testGuardrails(t *testing.T, defs map[string]string) *registry.Registry[*guardrail.Guardrail] {
	reg := registry.New(registry.Options[*guardrail.Guardrail]{Type: store.Guardrail, Build: guardrail.BuildRow, Names: GuardrailNames})
	cfg := map[string]*guardrail.Guardrail{}
	for name, def := range defs {
		g, err := guardrail.Compile(name, []byte(def))
		require.NoError(t, err)
		cfg[name] = g
	}
	reg.SetConfig(cfg)
	return reg
}

func names(gs []*guardrail.Guardrail) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name)
	}
	return out
}

// One resolver for every source of guardrail names: default_on first, then each list in
// order, each guardrail once; an unknown name fails the call (never skipped).
func TestResolveGuardrails(t *testing.T) {
	t.Parallel()
	const filter = `{"guardrail": "litellm_content_filter", "mode": "pre_call", "blocked_words": [{"keyword": "x", "action": "BLOCK"}]}`
	const defOn = `{"guardrail": "litellm_content_filter", "mode": "pre_call", "default_on": true, "blocked_words": [{"keyword": "x", "action": "BLOCK"}]}`
	p := &Pipeline{Guardrails: testGuardrails(t, map[string]string{"d": defOn, "a": filter, "b": filter, "c": filter})}
	ctx := context.Background()

	gs, err := p.resolveGuardrails(ctx, nil, true, []string{"b", "d", "a"}, []string{"a", "c"})
	require.NoError(t, err)
	require.Equal(t, []string{"d", "b", "a", "c"}, names(gs))

	// the caller's key and team add theirs after the request's
	key := &keys.Key{Extra: &keys.Extra{Guardrails: []string{"c", "b"}}}
	gs, _, err = p.callerGuardrails(ctx, Caller{Key: key}, "m", nil, gs[:2])
	require.NoError(t, err)
	require.Equal(t, []string{"d", "b", "c"}, names(gs))

	_, err = p.resolveGuardrails(ctx, nil, true, []string{"a", "nope"})
	var ug *UnknownGuardrail
	require.ErrorAs(t, err, &ug)
	require.Equal(t, "nope", ug.Name)

	// without a guardrails registry every name is unknown, and none is none
	gs, err = (&Pipeline{}).resolveGuardrails(ctx, nil, true, nil)
	require.NoError(t, err)
	require.Empty(t, gs)
	_, err = (&Pipeline{}).resolveGuardrails(ctx, nil, true, []string{"a"})
	require.ErrorAs(t, err, &ug)
}
