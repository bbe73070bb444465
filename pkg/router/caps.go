package router

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"lockstep/pkg/limits"
	"lockstep/pkg/store"
)

// Deployment caps (litellm_params.rpm, tpm, max_parallel_requests) and the usage counts of
// usage-based-routing-v2.
//
// rpm and tpm hold cluster-wide: a deployment is one more owner of a rate window in
// pkg/limits (owner token "deployment:<model_id>", gateway.rate_windows), admitted from this
// replica's lease with no database round trip while the lease lasts (DESIGN.md "Cluster-wide
// limits by leases"). So, per fixed one-minute window on the database clock:
//
//   - rpm: the cluster never admits more than rpm calls to the deployment (the sum of leases
//     never exceeds it). Error bound: 0 over the cap at admission; measured at the upstream,
//     a call admitted just before a window ends may arrive just after it, so a minute counted
//     at the upstream may see up to the calls in flight at the boundary on top. Under-use: at
//     most replicas × lease size (lease size ≤ max(1, rpm/16)) unused in a window.
//   - tpm: admitted while this replica's token lease is positive; the tokens the upstream
//     reports are debited after the call, so the cluster overshoots tpm by at most the tokens
//     of the calls in flight when the cap is reached (as a key's tpm_limit).
//   - max_parallel_requests is per replica (LiteLLM: a per-instance semaphore): no lease.
//
// A deployment at a cap is skipped; when every deployment of the group is skipped the call is
// answered 429 (NoDeploymentsError). With Postgres unreachable, a capped deployment admits
// what this replica holds leased, then is skipped (fail closed, as limited keys).
//
// Under usage-based-routing-v2 every deployment of a group counts its tokens this way (one
// without tpm against an unreachable virtual cap, usageCap), and the strategy reads each
// deployment's cluster-wide usage as this replica last saw it: the window's leased total as of
// this replica's last lease, less what this replica holds unused (limits.Ticket.Status), so it
// lags the cluster by at most about one second of traffic (the lease size).

// usageCap is the virtual tpm of a deployment without one under usage-based-routing-v2: its
// tokens are counted, never refused.
const usageCap = 1 << 50

// Shared is the cluster-wide state the router uses; without it (no database) caps, usage and
// cooldowns are this replica's own.
type Shared struct {
	// Limiter counts deployment rpm/tpm (a limits.Limiter of its own on the store, so its
	// counters are the router's).
	Limiter *limits.Limiter
	// Cooldowns is gateway.deployment_cooldowns.
	Cooldowns CooldownStore
	ReplicaID string
	Log       zerolog.Logger
}

// Share makes the router count caps and usage and publish cooldowns cluster-wide. Call once,
// before serving. Without it the router uses a limiter over an in-memory store (one replica).
func (r *Router) Share(s Shared) { r.shared.Store(&s) }

func (r *Router) limiter() *limits.Limiter {
	if sh := r.shared.Load(); sh != nil && sh.Limiter != nil {
		return sh.Limiter
	}
	return r.local
}

// tracked reports whether a deployment's calls go through the limiter.
func (r *Router) tracked(d *Deployment) bool {
	return d.RPM > 0 || d.TPM > 0 || r.settings.RoutingStrategy == UsageBasedV2
}

func (r *Router) capsOf(d *Deployment) limits.Limits {
	l := limits.Limits{RPM: d.RPM, HasRPM: d.RPM > 0, TPM: d.TPM, HasTPM: d.TPM > 0}
	if !l.HasTPM && r.settings.RoutingStrategy == UsageBasedV2 {
		l.TPM, l.HasTPM = usageCap, true
	}
	return l
}

// admit takes d's caps for one call. ok false: d is at a cap (why says which) and must be
// skipped; retryAfter is when that cap's window turns.
func (r *Router) admit(ctx context.Context, d *Deployment, st *depState) (t limits.Ticket, ok bool, why string, retryAfter time.Duration) {
	lim := r.capsOf(d)
	l := r.limiter()
	t, err := l.Admit(ctx, st.owner, lim)
	if err != nil {
		var le *limits.LimitError
		if errors.As(err, &le) {
			return t, false, le.Kind, le.RetryAfter
		}
		return t, false, "db_unavailable", time.Second
	}
	if r.settings.RoutingStrategy == UsageBasedV2 {
		s := t.Status()
		w := time.Now().UnixNano() / int64(l.Window())
		st.usedTokens.Store(lim.TPM - s.RemainingTokens)
		st.usedWindow.Store(w)
	}
	return t, true, "", 0
}

// usage is usage-based-routing-v2's measure of d: its tokens used in the current window
// cluster-wide as this replica last saw them, 0 when it saw none this window.
func (r *Router) usage(st *depState) int64 {
	if st.usedWindow.Load() != time.Now().UnixNano()/int64(r.limiter().Window()) {
		return 0
	}
	return st.usedTokens.Load()
}

// memStore is limits.Store in memory: deployment caps of a replica without a database
// (windows on the local clock; no slots are used by the router).
type memStore struct {
	mu sync.Mutex
	w  map[[2]string]*memWindow
}

type memWindow struct {
	start time.Time
	used  int64
}

var _ limits.Store = (*memStore)(nil)

func (m *memStore) LeaseWindow(_ context.Context, token, kind string, limit, want int64, window time.Duration) (store.WindowGrant, error) {
	now := time.Now()
	start := now.Truncate(window)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.w == nil {
		m.w = map[[2]string]*memWindow{}
	}
	k := [2]string{token, kind}
	w := m.w[k]
	if w == nil || !w.start.Equal(start) {
		w = &memWindow{start: start}
		m.w[k] = w
	}
	g := min(want, max(0, limit-w.used))
	w.used += g
	return store.WindowGrant{Granted: g, Used: w.used, WindowStart: start, DBNow: now}, nil
}

func (m *memStore) LeaseSlots(context.Context, string, string, int, int, time.Duration) (int, error) {
	return 0, errors.New("router: no parallel slots in memory")
}
func (m *memStore) RenewSlots(context.Context, string, time.Duration) error { return nil }
func (m *memStore) PruneLimits(context.Context, time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cut := time.Now().Add(-time.Hour)
	for k, w := range m.w {
		if w.start.Before(cut) {
			delete(m.w, k)
		}
	}
	return nil
}
