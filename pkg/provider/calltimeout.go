package provider

import (
	"context"
	"time"
)

type callTimeoutKey struct{}

// WithCallTimeout returns ctx carrying a per-request timeout (LiteLLM's x-litellm-timeout
// request header, docs "Request Headers"): it replaces the deployment's timeout and
// stream_timeout for every upstream call made with ctx (each attempt, as LiteLLM passes the
// request's timeout to each deployment call). t must be > 0.
func WithCallTimeout(ctx context.Context, t time.Duration) context.Context {
	return context.WithValue(ctx, callTimeoutKey{}, t)
}

// CallTimeout is the timeout of an upstream call made with ctx: the per-request one
// (WithCallTimeout) when set, else def (the deployment's).
func CallTimeout(ctx context.Context, def time.Duration) time.Duration {
	if t, ok := ctx.Value(callTimeoutKey{}).(time.Duration); ok {
		return t
	}
	return def
}
