package registry

import (
	"context"
	"errors"
	"fmt"

	"lockstep/pkg/store"
)

// ErrNotFound is returned by Resolve when the name is unknown after any read-through.
var ErrNotFound = errors.New("not found")

// SetBarrier installs the change feed's notification barrier (notify.Syncer.Barrier; the
// feed installs it on every sink it is given). Resolve uses it to make a miss authoritative.
func (r *Registry[T]) SetBarrier(fn func(context.Context) error) { r.barrier.Store(&fn) }

// Barrier waits (at most MissBarrierTimeout) until the registry holds every change committed
// before the call (the change feed's notification barrier, shared by concurrent callers); nil
// at once when no barrier is installed. For lookups that a one-name read-through cannot settle
// (a wildcard model group matching a name, pkg/router).
func (r *Registry[T]) Barrier(ctx context.Context) error {
	b := r.barrier.Load()
	if b == nil {
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, r.opts.MissBarrierTimeout)
	defer cancel()
	return (*b)(bctx)
}

// Resolve runs a read-through for a missed name: it loads the rows for name from Postgres and
// applies them (version-guarded), so the caller's next lookup sees them. Outcome per
// readthrough.Group.Do:
//   - found: the name is held now → nil;
//   - fetched and not found: the fetch read the database after the request arrived, so the
//     miss is authoritative → ErrNotFound;
//   - anything else (a negative-cache hit or a fetch shared with an earlier caller, both of
//     which may predate a commit this request should see; or a fail-closed miss: budget
//     exhausted, DB error): the notification barrier proves the registry holds every change
//     committed before the request, at no DB read (DESIGN.md "Notification barrier"); then
//     the name is held (nil) or unknown (ErrNotFound). When the barrier cannot be completed
//     within MissBarrierTimeout (Postgres down or hung: static stability) the miss stands and
//     ErrNotFound wraps the cause.
func (r *Registry[T]) Resolve(ctx context.Context, name string) error {
	if r.rt == nil {
		return ErrNotFound
	}
	res := r.rt.Do(ctx, name)
	if res.Found || r.Has(name) { // the feed may have applied it while the fetch ran
		return nil
	}
	if !res.NegativeHit && !res.BudgetExhausted && res.Err == nil && !res.Shared {
		return ErrNotFound // fetched at the database's current state: authoritative
	}
	cause := res.Err
	if b := r.barrier.Load(); b != nil {
		bctx, cancel := context.WithTimeout(ctx, r.opts.MissBarrierTimeout)
		err := (*b)(bctx)
		cancel()
		if r.Has(name) {
			return nil
		}
		if err == nil {
			return ErrNotFound
		}
		cause = err
	}
	if cause != nil {
		return fmt.Errorf("%w: %v", ErrNotFound, cause)
	}
	return ErrNotFound
}

// fetch is the read-through: load the rows for name and apply them. It reports found only
// when the name is then held, so rows that could not be applied (invalid, or older than a
// tombstone) are negative-cached like a miss instead of costing a DB read per request.
func (r *Registry[T]) fetch(ctx context.Context, name string) (bool, error) {
	rows, err := r.opts.Load(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.Apply(rows, nil)
	return r.Has(name), nil
}
