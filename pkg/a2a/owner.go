package a2a

import "context"

// Owner is who created a task (recorded by message/stream) or who asks for one (tasks/get,
// tasks/cancel, and any later task method). Tasks belong to their caller (API.md "Agents and
// A2A": tasks answer only their creator's key, or team; others get task-not-found): LiteLLM
// scopes A2A work by the calling key and its team, so the same rule is applied here.
type Owner struct {
	// Key is the sha256 hex of the caller's virtual key; "" for the master key or a gateway
	// without authentication.
	Key string
	// Team is the key's team_id; "" for none.
	Team string
	// Admin is the master key: it may read and cancel every task.
	Admin bool
}

type ownerCtxKey struct{}

// WithOwner carries the caller of an RPC request into the handler (set by the HTTP layer
// after authentication). A request without one is the unauthenticated caller, Owner{}.
func WithOwner(ctx context.Context, o Owner) context.Context {
	return context.WithValue(ctx, ownerCtxKey{}, o)
}

func ownerFrom(ctx context.Context) Owner {
	o, _ := ctx.Value(ownerCtxKey{}).(Owner)
	return o
}

// mayAccess reports whether o may see a task creator made: the master key always; otherwise
// the creating key itself, or a key of the creator's team (a non-empty team_id). A task
// another caller made is answered exactly as a task that does not exist (no oracle).
func (o Owner) mayAccess(creator Owner) bool {
	switch {
	case o.Admin:
		return true
	case o.Key == creator.Key:
		return true
	default:
		return o.Team != "" && o.Team == creator.Team
	}
}
