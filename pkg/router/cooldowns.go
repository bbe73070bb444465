package router

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"lockstep/pkg/store"
)

// Cooldowns (LiteLLM router_utils/cooldown_handlers.py, with its allowed_fails logic):
//
//   - A failure counts towards a cooldown when LiteLLM's _is_cooldown_required says so: 401,
//     404, 408, 429 and 5xx (timeouts and transport failures included); other 4xx never.
//   - A deployment that has more such failures in the current minute (this replica's count)
//     than allowed_fails — or allowed_fails_policy's entry for the failure's class — cools
//     down for cooldown_time. A group with one deployment never cools down (nothing else
//     could serve it; LiteLLM likewise spares single-deployment groups).
//   - A cooldown is an event shared through Postgres without a per-request write: the replica
//     deciding it inserts one row into gateway.deployment_cooldowns (model_id, until on the
//     database clock, reason, replica_id); every replica reads the active rows on its cluster
//     heartbeat tick (pkg/cluster, every 2 s: Router.Tick) and skips the deployment until
//     `until`. So a cooldown reaches every replica within one tick (≤ 2 s plus a query) and
//     ends everywhere at the same database-clock instant (each replica converts the remaining
//     time to its own clock, so clock skew between replicas does not matter).

// CooldownStore is what shared cooldowns need from Postgres (implemented by *store.Store).
type CooldownStore interface {
	InsertCooldown(ctx context.Context, c store.Cooldown) error
	ActiveCooldowns(ctx context.Context) ([]store.Cooldown, error)
}

var _ CooldownStore = (*store.Store)(nil)

// depState is a deployment's runtime state on this replica, by model_id (it outlives
// versions of the row).
type depState struct {
	owner    string // the deployment's owner token in pkg/limits ("deployment:<model_id>")
	inflight atomic.Int64

	minute    atomic.Int64 // the minute the fail count belongs to (unix seconds / 60)
	fails     atomic.Int64
	coolUntil atomic.Int64 // unix nanos, local clock; 0 = never cooled down
	reason    atomic.Pointer[string]

	lat [2]latency // [0] non-streamed (seconds per completion token), [1] streamed (time to open)

	usedTokens atomic.Int64 // usage-based-routing-v2: tokens used cluster-wide in window usedWindow
	usedWindow atomic.Int64
}

func (r *Router) state(id string) *depState {
	if v, ok := r.states.Load(id); ok {
		return v.(*depState)
	}
	v, _ := r.states.LoadOrStore(id, &depState{owner: "deployment:" + id})
	return v.(*depState)
}

// cooling reports whether the deployment is cooled down at now (unix nanos).
func (st *depState) cooling(now int64) bool { return st.coolUntil.Load() > now }

// cooldownEligible is LiteLLM's _is_cooldown_required by class.
func cooldownEligible(c Class) bool {
	switch c {
	case ClassAuthentication, ClassNotFound, ClassTimeout, ClassRateLimit, ClassInternalServer:
		return true
	}
	return false
}

// fail counts a failed call of d (group size n) and cools d down when it is over its allowed
// fails this minute.
func (r *Router) fail(d *Deployment, st *depState, n int, c Class, err error) {
	if n <= 1 || !cooldownEligible(c) || r.settings.CooldownTime < 0 {
		return
	}
	allowed, ok := r.settings.AllowedFailsPolicy[c]
	if !ok {
		if allowed, ok = r.settings.AllowedFailsPolicy[c.parent()]; !ok {
			allowed = r.settings.AllowedFails
		}
	}
	now := time.Now()
	minute := now.Unix() / 60
	if old := st.minute.Load(); old != minute && st.minute.CompareAndSwap(old, minute) {
		st.fails.Store(0)
	}
	if st.fails.Add(1) <= int64(allowed) {
		return
	}
	r.coolDown(d.ModelID, st, now, r.settings.CooldownTime, c.String()+": "+err.Error(), true)
}

// coolDown marks the deployment cooled down for d from now; publish writes the event row
// (only the replica that decided it does, once per cooldown).
func (r *Router) coolDown(id string, st *depState, now time.Time, d time.Duration, reason string, publish bool) {
	until := now.Add(d).UnixNano()
	for {
		old := st.coolUntil.Load()
		if old >= until {
			return // already cooling at least that long
		}
		if st.coolUntil.CompareAndSwap(old, until) {
			st.reason.Store(&reason)
			if !publish || old > now.UnixNano() {
				return // an extension of a running cooldown is not a new event
			}
			break
		}
	}
	r.cooldowns.Add(1)
	sh := r.shared.Load()
	if sh == nil || sh.Cooldowns == nil {
		return
	}
	if len(reason) > 500 {
		reason = reason[:500]
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := sh.Cooldowns.InsertCooldown(ctx, store.Cooldown{ModelID: id, Remaining: d, Reason: reason, ReplicaID: sh.ReplicaID}); err != nil {
			r.publishErrors.Add(1)
			sh.Log.Warn().Err(err).Str("model_id", id).Msg("publish deployment cooldown")
		}
	}()
}

// Tick reads the active cooldowns of every replica (gateway.deployment_cooldowns) and applies
// them here. Called on the cluster heartbeat tick (cluster.Config.OnTick); one query. A
// failed read keeps what is known (cooldowns already applied run their course).
func (r *Router) Tick(ctx context.Context) {
	sh := r.shared.Load()
	if sh == nil || sh.Cooldowns == nil {
		return
	}
	rows, err := sh.Cooldowns.ActiveCooldowns(ctx)
	r.ticks.Add(1)
	if err != nil {
		r.tickErrors.Add(1)
		return
	}
	now := time.Now()
	for _, c := range rows {
		r.coolDown(c.ModelID, r.state(c.ModelID), now, c.Remaining, c.Reason+" (replica "+c.ReplicaID+")", false)
	}
}

// Cooldown is a deployment's cooldown as this replica holds it.
type Cooldown struct {
	Until  time.Time // local clock
	Reason string
}

// CooldownOf returns the deployment's cooldown when it is cooling down now.
func (r *Router) CooldownOf(modelID string) (Cooldown, bool) {
	v, ok := r.states.Load(modelID)
	if !ok {
		return Cooldown{}, false
	}
	st := v.(*depState)
	until := st.coolUntil.Load()
	if until <= time.Now().UnixNano() {
		return Cooldown{}, false
	}
	c := Cooldown{Until: time.Unix(0, until)}
	if p := st.reason.Load(); p != nil {
		c.Reason = *p
	}
	return c, true
}

// latency holds the last samples of one measure (LiteLLM lowest_latency.py: a list of at most
// max_latency_list_size values, forgotten after ttl). Written under mu after a call; read
// without a lock (avg, last).
type latency struct {
	mu   sync.Mutex
	vals []float64
	at   []int64
	next int
	avg  atomic.Uint64 // math.Float64bits of the average of the samples younger than ttl
	last atomic.Int64  // unix nanos of the newest sample
}

// ActiveCooldown is one deployment cooling down, for /sync/lag and the status page.
type ActiveCooldown struct {
	ModelID string    `json:"model_id"`
	Until   time.Time `json:"until"` // local clock, RFC 3339
	Reason  string    `json:"reason"`
}

// Cooldowns lists the deployments cooling down now on this replica, by model_id.
func (r *Router) Cooldowns() []ActiveCooldown {
	out := []ActiveCooldown{}
	now := time.Now().UnixNano()
	r.states.Range(func(k, v any) bool {
		st := v.(*depState)
		if until := st.coolUntil.Load(); until > now {
			c := ActiveCooldown{ModelID: k.(string), Until: time.Unix(0, until).UTC()}
			if p := st.reason.Load(); p != nil {
				c.Reason = *p
			}
			out = append(out, c)
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ModelID < out[j].ModelID })
	return out
}
