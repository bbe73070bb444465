// Package notify is lockstep's change feed: it keeps every registry on this replica in step
// with Postgres, whoever wrote the change.
//
// Layers (DESIGN.md "The three layers of sync"):
//   - push: one dedicated, never pooled connection LISTENs on gateway_registry; each
//     notification names one changed row; the listen session applies a small batch itself,
//     re-reading the rows on that same connection (inline.go), and otherwise the applier
//     coalesces ids and re-reads them through the pool in batches (one query per type);
//     either way they are applied version-guarded;
//   - catch-up: on every (re)connect the listener first LISTENs, then the applier reads the
//     change log from its xid8 watermark (or does a full versioned reconcile when the
//     watermark is older than the log's retention), then streaming resumes. A periodic poll of
//     the change log repairs any notification lost while the connection looked healthy;
//   - anti-entropy: a slow periodic full reconcile (default 5 min) counts and repairs drift.
//
// Listener death (killed or frozen backend, half-open TCP, DB restart) is detected on the
// feed's own connection, at no cost to any other session: when nothing arrived for
// HeartbeatInterval the replica probes the connection (listen: SELECT 1 on it, failed when
// nothing arrives for HeartbeatTimeout-HeartbeatInterval; logical: a standby status update
// asking for a keepalive)
// and reconnects when nothing was received and no probe answered for HeartbeatTimeout; TCP
// keepalive runs on the socket besides. A NOTIFY wakes every listening backend of the database
// (PostgreSQL's async.c signals them all, whatever the channel), so a periodic self-NOTIFY of R
// replicas cost R² wake-ups a second; the self-NOTIFY is now sent only on demand — the
// notification barrier (barrier.go), and the check that notifications reach a new LISTEN
// connection at all (StateDegraded).
//
// Two change sources feed the same applier (Config.Source): SourceListen, the LISTEN/NOTIFY
// session above, and SourceLogical, a logical-replication session that streams the change
// log's INSERTs through pgoutput on a temporary slot (logical.go). Both follow the same
// order — subscribe, then catch up from the watermark, then stream — and report the same
// states and counters.
package notify

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"lockstep/pkg/store"
)

// Channel is the NOTIFY channel the registry triggers publish on.
const Channel = "gateway_registry"

// Sink is one registry the feed keeps in step (implemented by registry.Registry).
type Sink interface {
	Type() store.ObjectType
	// Apply applies re-read rows and absent ids (id → version of the change that reported
	// them), version-guarded; returns how many entries changed.
	Apply(rows []store.Row, absent map[string]int64) int
	// Holds reports whether version (or newer) of id is already reflected (held or deleted).
	Holds(id string, version int64) bool
	// Generation is the local apply generation, read before a reconcile snapshot.
	Generation() uint64
	// Reconcile makes the registry match a full load; returns the drift it repaired.
	Reconcile(rows []store.Row, startGen uint64) int
	// Diff compares with a full load and returns the repair to run later (nil: no
	// difference); the repair re-checks each difference and returns how many it changed.
	Diff(rows []store.Row, startGen uint64) func() int
	// Truncate applies a TRUNCATE reported with its version: older entries go, and no older
	// version is applied again. Returns how many entries it evicted.
	Truncate(version int64) int
}

// Preparer is a Sink that builds the rows of a full load while they stream in (LoadAll's
// prepare; registry.Registry.Prepare), before Reconcile applies them.
type Preparer interface {
	Prepare(rows []store.Row)
}

// Store is what the change feed reads and writes in Postgres (implemented by *store.Store;
// each method's contract is documented there).
type Store interface {
	// LoadAll reads every loadable row of a type in one snapshot (initial load, reconcile),
	// calling prepare (when not nil) on each chunk of rows as it is read.
	LoadAll(ctx context.Context, typ store.ObjectType, prepare func([]store.Row)) (store.Snapshot, error)
	// Reload re-reads rows by id, telling loadable rows from visible but filtered ones.
	Reload(ctx context.Context, typ store.ObjectType, ids []string) (rows, filtered []store.Row, err error)
	// ChangesSince reads a page of the change log from an xid8 watermark: changes after seq
	// afterSeq, at most limit (<= 0: all).
	ChangesSince(ctx context.Context, watermark uint64, afterSeq int64, limit int) (store.ChangeBatch, error)
	// VisibleChanges reports which change-log rows are visible (logical source).
	VisibleChanges(ctx context.Context, seqs []int64) (map[int64]bool, error)
	// PruneChanges deletes change-log rows older than retention.
	PruneChanges(ctx context.Context, retention time.Duration) (int64, error)
	// Notify runs pg_notify(channel, payload) in its own transaction (listen source).
	Notify(ctx context.Context, channel, payload string) error
	// Exec runs one statement (logical source: pg_logical_emit_message).
	Exec(ctx context.Context, sql string, args ...any) error
	// ReloadOn is Reload on the given idle connection (the listen session's own: a
	// notification's row is re-read on the connection that delivered it, inline.go).
	ReloadOn(ctx context.Context, on store.Querier, typ store.ObjectType, ids []string) (rows, filtered []store.Row, err error)
	// ConnConfig is a copy of the pool's parsed connection config (the feed's connection).
	ConnConfig() *pgx.ConnConfig
}

// BarrierSink is a Sink that makes its misses authoritative with the feed's notification
// barrier (registry.Registry): New installs Syncer.Barrier on every such sink, so a registry
// added to the feed gets the barrier without further wiring.
type BarrierSink interface {
	SetBarrier(func(context.Context) error)
}

// Source names a change source in /sync/lag.
type Source string

// Change sources.
const (
	SourceListen  Source = "listen"
	SourceLogical Source = "logical"
)

// State is the feed's state as /sync/lag reports it.
type State string

// States.
const (
	StateStarting     State = "starting"
	StateCatchingUp   State = "catching_up"
	StateStreaming    State = "streaming"
	StateReconnecting State = "reconnecting"
	// StateDegraded: the listener connection is up but does not hear its own heartbeat (e.g.
	// a LISTEN through PgBouncer in transaction pooling); the change-log poll keeps the
	// replica in sync meanwhile. Stats.Reason names the cause.
	StateDegraded State = "degraded"
	// StateDisabled is reported when no database is configured: there is no change feed
	// (a Syncer never reports it).
	StateDisabled State = "disabled"
)

// Config configures a Syncer. Zero durations take the documented defaults.
type Config struct {
	ReplicaID string
	Store     Store
	Sinks     []Sink
	Logger    zerolog.Logger
	// ListenURL is the change feed's own connection string (--listen-database-url); empty:
	// the pool's. Set it to a direct (or session-pooled) connection when the pool goes through
	// a pooler in transaction pooling mode, where LISTEN does not work (see StateDegraded).
	ListenURL string
	// Source is the change source: SourceListen (default) or SourceLogical. The logical source
	// needs wal_level=logical, a free replication slot and wal sender per replica, the
	// REPLICATION attribute for the connecting role, and migration 002 (the publication).
	Source Source

	HeartbeatInterval time.Duration // liveness probe period when the feed's connection is idle (listen: SELECT 1; logical: status update asking for a keepalive); default 1 s
	HeartbeatTimeout  time.Duration // nothing received and no probe answered for this long → reconnect; default 3 s
	PollInterval      time.Duration // change-log poll repairing lost notifications; default 2 s
	PollGrace         time.Duration // a change younger than this is left to its notification; default 1 s
	ReconcileInterval time.Duration // full reconcile counting drift; default 5 min
	ReconcileGrace    time.Duration // wait before repairing what a reconcile found; default PollInterval+PollGrace+500ms
	Retention         time.Duration // change-log retention this replica prunes to; default 24 h; <0 disables pruning
	BackoffMin        time.Duration // reconnect backoff start; default 100 ms
	BackoffMax        time.Duration // reconnect backoff cap; default 5 s
	BufferSize        int           // changes buffered between listener and applier (logical: also per open transaction); default 8192
	CatchUpPage       int           // change-log rows a catch-up reads, re-reads and applies at a time (each page within its own 30 s); default 50000
	BarrierTimeout    time.Duration // a barrier round not heard back and applied within this fails; default 2 s
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Source == "" {
		c.Source = SourceListen
	}
	def(&c.HeartbeatInterval, time.Second)
	def(&c.HeartbeatTimeout, 3*time.Second)
	def(&c.PollInterval, 2*time.Second)
	def(&c.PollGrace, time.Second)
	def(&c.ReconcileInterval, 5*time.Minute)
	def(&c.ReconcileGrace, c.PollInterval+c.PollGrace+500*time.Millisecond)
	def(&c.Retention, 24*time.Hour)
	def(&c.BackoffMin, 100*time.Millisecond)
	def(&c.BackoffMax, 5*time.Second)
	def(&c.BarrierTimeout, 2*time.Second)
	if c.BufferSize == 0 {
		c.BufferSize = 8192
	}
	if c.CatchUpPage <= 0 {
		c.CatchUpPage = 50000
	}
	if c.ReplicaID == "" {
		c.ReplicaID = "replica"
	}
}

// event is one decoded gateway_registry notification.
type event struct {
	Seq  int64            `json:"seq"`
	Type store.ObjectType `json:"type"`
	Op   string           `json:"op"`
	ID   string           `json:"id"`
	V    int64            `json:"v"`
	TS   int64            `json:"ts"` // changed_at, µs since the epoch

	// trace (trace.go): mono readings when the notification was received and decoded
	received, parsed int64
}

type catchUpReq struct {
	done chan error
	mode catchUpMode
}

// Syncer runs the change feed. Start it once; Stop is idempotent and blocks.
type Syncer struct {
	cfg    Config
	log    zerolog.Logger
	sinks  map[store.ObjectType]Sink
	src    changeSource
	hbChan string // listen: the self-heartbeat channel; logical: the heartbeat message prefix

	events  chan event
	catchUp chan catchUpReq
	kick    chan struct{}

	state        atomic.Value                  // State
	changed      atomic.Pointer[chan struct{}] // closed and replaced at every state change (StateChanged)
	reason       atomic.Value                  // string: why the state is degraded
	ready        atomic.Bool
	lastHB       atomic.Int64 // unix nanos of the last proof of life (anything received, a probe answered)
	hbHeard      atomic.Int64 // unix nanos of the last own heartbeat or barrier token heard
	probing      atomic.Bool  // a liveness probe's query is running on the listen connection
	hbSent       atomic.Int64 // own NOTIFYs committed (the listen delivery check)
	hbRTT        atomic.Int64 // nanos: the last liveness probe's round trip
	probes       atomic.Int64 // liveness probes answered
	headSeq      atomic.Int64
	appliedSeq   atomic.Int64
	eventsApp    atomic.Int64
	eventsInline atomic.Int64
	applyErrs    atomic.Int64
	reconnects   atomic.Int64
	gaps         atomic.Int64
	drift        atomic.Int64
	dropped      atomic.Int64
	malformed    atomic.Int64
	reconciles   atomic.Int64
	needCatchUp  atomic.Bool

	watermarkPub atomic.Uint64 // copy of watermark for Stats

	bar                                          *barriers
	barrierRounds, barrierWaiters, barrierFailed atomic.Int64

	// Applier-owned state: owned by whoever holds applyMu, the applier goroutine or the listen
	// session applying a notification inline (inline.go).
	applyMu   sync.Mutex
	watermark uint64
	pending   map[store.ObjectType]map[string]change
	pollFails int // change-log polls failed in a row

	lag   lagWindow
	trace traceRing
	rr    stageTimes // the applier's last re-read timing (reread), for the trace

	// listen-session-owned (inline.go): notifications received and not yet applied or
	// handed to the applier, and the batch buffer swapped with it
	inbox, inboxSpare []event
	inline            *inlineWatch // the session's inline re-reads' watchdog (inlineWatchFor)

	cancel context.CancelFunc
	wg     sync.WaitGroup
	stop   sync.Once
}

// New builds a Syncer; call Start.
func New(cfg Config) *Syncer {
	cfg.defaults()
	s := &Syncer{
		cfg:     cfg,
		log:     cfg.Logger.With().Str("component", "notify").Logger(),
		sinks:   map[store.ObjectType]Sink{},
		events:  make(chan event, cfg.BufferSize),
		catchUp: make(chan catchUpReq),
		kick:    make(chan struct{}, 1),
		pending: map[store.ObjectType]map[string]change{},
		bar:     newBarriers(),
	}
	if cfg.Source == SourceLogical {
		s.src, s.hbChan = logicalSource{s}, logicalHBPrefix+sanitize(cfg.ReplicaID)
	} else {
		s.src, s.hbChan = listenSource{s}, listenChannel(cfg.ReplicaID)
	}
	for _, sk := range cfg.Sinks {
		s.sinks[sk.Type()] = sk
		if bs, ok := sk.(BarrierSink); ok {
			bs.SetBarrier(s.Barrier)
		}
	}
	s.state.Store(StateStarting)
	ch := make(chan struct{})
	s.changed.Store(&ch)
	return s
}

func sanitize(id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}

// Start runs the initial full load of every sink (failing fast if Postgres cannot be read),
// then starts the listener, applier, barrier and reconciler goroutines. It returns once the initial
// load is done; Ready reports when the feed has streamed once. Errors: an unknown
// Config.Source, or the initial load's error.
func (s *Syncer) Start(ctx context.Context) error {
	if s.cfg.Source != SourceListen && s.cfg.Source != SourceLogical {
		return fmt.Errorf("source: %q is not a change source (want %s or %s)", s.cfg.Source, SourceListen, SourceLogical)
	}
	if err := s.fullLoad(ctx, false); err != nil {
		return fmt.Errorf("initial load: %w", err)
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(4)
	go func() { defer s.wg.Done(); s.barrierLoop(ctx) }()
	go func() { defer s.wg.Done(); s.listen(ctx) }()
	go func() { defer s.wg.Done(); s.apply(ctx) }()
	go func() { defer s.wg.Done(); s.reconciler(ctx) }()
	return nil
}

// Stop stops every goroutine and closes the listener connection. Idempotent; blocks.
func (s *Syncer) Stop() {
	s.stop.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
	})
	s.wg.Wait()
}

// Ready reports whether the initial load is done and the feed has started streaming once.
func (s *Syncer) Ready() bool { return s.ready.Load() }

// State is the feed's current state.
func (s *Syncer) State() State { return s.state.Load().(State) }

// StateChanged returns a channel closed at the feed's next state change (starting →
// catching_up → streaming, reconnecting, degraded): read it before State, then wait on it.
func (s *Syncer) StateChanged() <-chan struct{} { return *s.changed.Load() }

// setState records state st and, when it differs from the current one, closes the
// StateChanged channel (replacing it first, so every change is broadcast exactly once).
func (s *Syncer) setState(st State) {
	if old, _ := s.state.Swap(st).(State); old == st {
		return
	}
	ch := make(chan struct{})
	close(*s.changed.Swap(&ch))
}

// Reason says why the state is degraded; empty in any other state.
func (s *Syncer) Reason() string {
	if s.State() != StateDegraded {
		return ""
	}
	r, _ := s.reason.Load().(string)
	return r
}
