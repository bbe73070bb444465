// Package cluster is the cluster view: every replica upserts its change-feed state into
// gateway.replicas every 2 s and at every change-feed state change (a non-notifying table,
// DESIGN.md "Non-notifying shared tables"),
// and any replica can report the whole cluster from it (GET /sync/cluster, API.md "Health,
// sync and metrics").
package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"lockstep/pkg/notify"
	"lockstep/pkg/store"
)

// Defaults (API.md: each replica upserts its row every 2 s; silent > 10 s → stale).
const (
	DefaultInterval = 2 * time.Second
	DefaultStale    = 10 * time.Second
	// DefaultPrune: a row silent this long (a replica that died without deleting it) is
	// removed by the replicas still running.
	DefaultPrune = 10 * time.Minute
)

// Config configures a Reporter. Zero durations take the defaults above.
type Config struct {
	ReplicaID string
	Addr      string // the address this replica serves on (--addr)
	Version   string // build version
	Store     *store.Store
	// Status returns this replica's change-feed state (notify.Syncer.Stats).
	Status func() notify.Stats
	// Changed returns a channel closed at the feed's next state change
	// (notify.Syncer.StateChanged): the row is upserted then too, so /sync/cluster agrees with
	// each replica's /sync/lag within one round trip of a transition. Nil: the timer only.
	Changed func() <-chan struct{}
	Logger  zerolog.Logger
	// Local returns what the replica reports beyond its change feed (registry counts,
	// apply_errors, request counters); it can also be set later with SetLocal, once the
	// server exists. Nil: none reported (empty registries, zero counters).
	Local    func() Local
	Interval time.Duration
	Stale    time.Duration
	Prune    time.Duration
	// OnTick, when set, runs on every tick after the upsert (also when it failed): state
	// other packages read on the heartbeat, e.g. the router's shared cooldowns (router.Tick).
	OnTick func(ctx context.Context)
}

// Reporter upserts this replica's row on a timer and at every change-feed state change, and
// keeps the last cluster view read.
// Start once; Stop is idempotent, blocks, and deletes the row.
type Reporter struct {
	cfg     Config
	log     zerolog.Logger
	started time.Time
	last    atomic.Pointer[View] // the view read after the last upsert (for /metrics)
	local   atomic.Pointer[func() Local]
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stop    sync.Once
}

// New builds a Reporter.
func New(cfg Config) *Reporter {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Stale == 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.Prune == 0 {
		cfg.Prune = DefaultPrune
	}
	r := &Reporter{cfg: cfg, log: cfg.Logger.With().Str("component", "cluster").Logger(), started: time.Now().UTC()}
	if cfg.Local != nil {
		r.SetLocal(cfg.Local)
	}
	return r
}

// Local is what a replica reports about itself beyond its change feed, carried in its
// gateway.replicas row (sql/009_replica_status.sql).
type Local struct {
	Registries  map[string]int // entries per registry, by /sync/lag's names
	ApplyErrors int64          // rows not applied since start (/sync/lag apply_errors)
	Requests    store.RequestCounts
}

// SetLocal sets the function the row's registry counts, apply_errors and request counters
// are read from at every upsert (safe while the reporter runs).
func (r *Reporter) SetLocal(f func() Local) { r.local.Store(&f) }

// Start writes the first row and starts the timer and the state-change watch. A failed write
// is logged, not returned: the view is advisory and Postgres may come back (static stability).
func (r *Reporter) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	changed := r.changed() // taken before the state is read: a change after it is not missed
	r.tick(ctx, true)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for n := 1; ; {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				changed = r.changed()
				r.tick(ctx, false)
			case <-t.C:
				r.tick(ctx, n%15 == 0) // prune about every 30 s
				n++
			}
		}
	}()
}

// changed is the channel closed at the next state change (never closed without Config.Changed).
func (r *Reporter) changed() <-chan struct{} {
	if r.cfg.Changed == nil {
		return nil
	}
	return r.cfg.Changed()
}

// Stop stops the timer and deletes this replica's row (a clean shutdown is not "stale").
func (r *Reporter) Stop() {
	r.stop.Do(func() {
		if r.cancel != nil {
			r.cancel()
		}
		r.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := r.cfg.Store.DeleteReplica(ctx, r.cfg.ReplicaID); err != nil {
			r.log.Debug().Err(err).Msg("delete replica row")
		}
	})
}

func (r *Reporter) tick(ctx context.Context, prune bool) {
	if r.cfg.OnTick != nil {
		defer r.cfg.OnTick(ctx)
	}
	st := r.cfg.Status()
	row := store.ReplicaStatus{
		ReplicaID: r.cfg.ReplicaID, Addr: r.cfg.Addr, Source: string(st.Source), State: string(st.State),
		Reason: st.Reason, AppliedSeq: st.AppliedSeq, LagP50Ms: st.LagMs.P50, LagP99Ms: st.LagMs.P99,
		LagSamples: int64(st.LagMs.Samples), Version: r.cfg.Version, StartedAt: r.started, ApplyErrors: st.ApplyErrors,
	}
	if f := r.local.Load(); f != nil {
		l := (*f)()
		row.Registries, row.ApplyErrors, row.Requests = l.Registries, st.ApplyErrors+l.ApplyErrors, l.Requests
	}
	err := r.cfg.Store.UpsertReplica(ctx, row)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug().Err(err).Msg("upsert replica row")
		}
		return
	}
	if prune {
		if n, err := r.cfg.Store.PruneReplicas(ctx, r.cfg.Prune); err == nil && n > 0 {
			r.log.Info().Int64("rows", n).Dur("silent_for", r.cfg.Prune).Msg("pruned rows of replicas gone silent")
		}
	}
	if v, err := r.View(ctx); err == nil {
		r.last.Store(&v)
	}
}

// LagMs is a replica's change-written → applied lag over the last 60 s, in milliseconds.
// Samples is how many changes the percentiles are over (0: none in the window, and p50/p99
// are 0 without meaning "0 ms").
type LagMs struct {
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Samples int64   `json:"samples"`
}

// Count is one registry's size in a replica's report ({"count": n}, as in /sync/lag).
type Count struct {
	Count int `json:"count"`
}

// Database connectivity of a replica as /sync/cluster reports it (Replica.DB).
const (
	DBConnected    = "connected"    // its change feed holds a working connection
	DBDisconnected = "disconnected" // reconnecting or not started: it serves from memory
	DBUnknown      = "unknown"      // stale: it has not reported for more than 10 s
)

// Replica is one replica in GET /sync/cluster.
type Replica struct {
	ReplicaID      string    `json:"replica_id"`
	Addr           string    `json:"addr"`
	Source         string    `json:"source"`
	State          string    `json:"state"`
	Reason         string    `json:"reason,omitempty"` // why the state is degraded
	Applied        int64     `json:"applied"`          // applied_seq as it last reported it
	LagMs          LagMs     `json:"lag_ms"`
	HeartbeatAgeMs float64   `json:"heartbeat_age_ms"` // since its last upsert, on the database clock
	Version        string    `json:"version"`
	StartedAt      time.Time `json:"started_at"`
	Stale          bool      `json:"stale"` // silent for more than 10 s

	// Beyond API.md's list (issue 23): what the replica reported with its state.
	// Registries: entries per registry as of its last report ({} before its server reported).
	Registries  map[string]Count    `json:"registries"`
	ApplyErrors int64               `json:"apply_errors"` // as its /sync/lag apply_errors
	Requests    store.RequestCounts `json:"requests"`     // counters since it started
	// DB: DBConnected while its change feed is streaming, catching up or degraded (the rule of
	// readiness' "db"), DBDisconnected otherwise, DBUnknown when stale.
	DB string `json:"db"`
}

// View is the GET /sync/cluster body.
type View struct {
	// Converged: at least one replica, none stale, every one streaming, and all have applied
	// the same change-log position.
	Converged bool `json:"converged"`
	// MaxLagMs is the highest lag_ms.p99 among replicas that are not stale.
	MaxLagMs float64   `json:"max_lag_ms"`
	Replicas []Replica `json:"replicas"`
}

// View reads gateway.replicas now. Errors: store.ErrUnavailable.
func (r *Reporter) View(ctx context.Context) (View, error) {
	rows, err := r.cfg.Store.ListReplicas(ctx)
	if err != nil {
		return View{}, err
	}
	return build(rows, r.cfg.Stale), nil
}

// Last is the view read after the last successful upsert (nil before the first), for metrics.
func (r *Reporter) Last() *View { return r.last.Load() }

func build(rows []store.ReplicaStatus, stale time.Duration) View {
	v := View{Replicas: make([]Replica, 0, len(rows)), Converged: len(rows) > 0}
	var applied int64 = -1
	for _, row := range rows {
		rep := Replica{
			ReplicaID: row.ReplicaID, Addr: row.Addr, Source: row.Source, State: row.State, Reason: row.Reason,
			Applied: row.AppliedSeq, LagMs: LagMs{P50: row.LagP50Ms, P99: row.LagP99Ms, Samples: row.LagSamples},
			HeartbeatAgeMs: float64(row.HeartbeatAge.Microseconds()) / 1000, Version: row.Version,
			StartedAt: row.StartedAt.UTC(), Stale: row.HeartbeatAge > stale,
			Registries: make(map[string]Count, len(row.Registries)), ApplyErrors: row.ApplyErrors, Requests: row.Requests,
			DB: dbOf(row.State, row.HeartbeatAge > stale),
		}
		for name, n := range row.Registries {
			rep.Registries[name] = Count{n}
		}
		v.Replicas = append(v.Replicas, rep)
		if rep.Stale || rep.State != string(notify.StateStreaming) || (applied >= 0 && rep.Applied != applied) {
			v.Converged = false
		}
		applied = rep.Applied
		if !rep.Stale && rep.LagMs.P99 > v.MaxLagMs {
			v.MaxLagMs = rep.LagMs.P99
		}
	}
	return v
}

// dbOf is a replica's database connectivity from the state it reported (see Replica.DB).
func dbOf(state string, stale bool) string {
	switch {
	case stale:
		return DBUnknown
	case state == string(notify.StateStreaming) || state == string(notify.StateCatchingUp) || state == string(notify.StateDegraded):
		return DBConnected
	}
	return DBDisconnected
}
