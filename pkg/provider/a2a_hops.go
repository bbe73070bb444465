package provider

import (
	"context"
	"strconv"
)

// A2AHopsHeader counts the remote A2A agent calls a request has already passed through: a call
// to a remote A2A agent (provider "a2a_agent", pkg/a2a/remote) carries the count of the
// request that made it plus one. An agent whose URL points back at a gateway (its own
// /a2a/<agent>, or another lockstep's) would otherwise call itself until the outermost
// timeout — thousands of nested calls a second. The A2A route refuses a request whose count
// reached MaxA2AHops (pkg/api agentRPC), so such a loop ends after MaxA2AHops calls.
const A2AHopsHeader = "X-Lockstep-A2A-Hops"

// MaxA2AHops is how many remote A2A agent calls deep a request may be: 8 (a chain of
// gateways that deep is a loop, not a design).
const MaxA2AHops = 8

// a2aRemoteProvider is a2a.RemoteProvider (pkg/a2a imports nothing of this package, but the
// constant lives there with the agent rows).
const a2aRemoteProvider = "a2a_agent"

type a2aHopsKey struct{}

// WithA2AHops is ctx carrying the A2AHopsHeader count of the inbound request (0 when absent).
func WithA2AHops(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, a2aHopsKey{}, n)
}

// ParseA2AHops reads an inbound A2AHopsHeader value: "" is 0; ok is false for anything but a
// non-negative decimal integer.
func ParseA2AHops(v string) (n int, ok bool) {
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 0
}

// a2aHopsHeader is the value a remote A2A agent call carries: ctx's count plus one.
func a2aHopsHeader(ctx context.Context) string {
	n, _ := ctx.Value(a2aHopsKey{}).(int)
	return strconv.Itoa(n + 1)
}
