// Package notify is lockstep's change feed: it keeps every registry on this replica in step
// with Postgres, whoever wrote the change.
//
// Layers (DESIGN.md "The three layers of sync"):
//   - push: one dedicated, never pooled connection LISTENs on gateway_registry; each
//     notification names one changed row, the applier coalesces ids and re-reads them in
//     batches (one query per type), then applies them version-guarded;
//   - catch-up: on every (re)connect the listener first LISTENs, then the applier reads the
//     change log from its xid8 watermark (or does a full versioned reconcile when the
//     watermark is older than the log's retention), then streaming resumes. A periodic poll of
//     the change log repairs any notification lost while the connection looked healthy;
//   - anti-entropy: a slow periodic full reconcile (default 5 min) counts and repairs drift.
//
// Listener death (killed backend, half-open TCP, DB restart) is detected by a self-heartbeat:
// the replica NOTIFYs its own channel every HeartbeatInterval through the pool and expects to
// hear it on the listener within HeartbeatTimeout (PostgreSQL docs "LISTEN", "NOTIFY").
//
// Two change sources feed the same applier (Config.Source): SourceListen, the LISTEN/NOTIFY
// session above, and SourceLogical, a logical-replication session that streams the change
// log's INSERTs through pgoutput on a temporary slot (logical.go). Both follow the same
// order — subscribe, then catch up from the watermark, then stream — and report the same
// states and counters.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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
	Store     *store.Store
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

	HeartbeatInterval time.Duration // self-heartbeat period (listen: NOTIFY; logical: WAL message + status ping); default 1 s
	HeartbeatTimeout  time.Duration // no heartbeat heard (logical: nothing received) for this long → reconnect; default 3 s
	PollInterval      time.Duration // change-log poll repairing lost notifications; default 2 s
	PollGrace         time.Duration // a change younger than this is left to its notification; default 1 s
	ReconcileInterval time.Duration // full reconcile counting drift; default 5 min
	ReconcileGrace    time.Duration // wait before repairing what a reconcile found; default PollInterval+PollGrace+500ms
	Retention         time.Duration // change-log retention this replica prunes to; default 24 h; <0 disables pruning
	BackoffMin        time.Duration // reconnect backoff start; default 100 ms
	BackoffMax        time.Duration // reconnect backoff cap; default 5 s
	BufferSize        int           // changes buffered between listener and applier (logical: also per open transaction); default 8192
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
	hbChan string // listen: the self-heartbeat channel; logical: the heartbeat message prefix

	events  chan event
	catchUp chan catchUpReq
	kick    chan struct{}

	state       atomic.Value                  // State
	changed     atomic.Pointer[chan struct{}] // closed and replaced at every state change (StateChanged)
	reason      atomic.Value                  // string: why the state is degraded
	ready       atomic.Bool
	lastHB      atomic.Int64 // unix nanos of the last heartbeat heard
	hbHeard     atomic.Int64 // unix nanos of the last own heartbeat or barrier token heard
	hbSent      atomic.Int64 // heartbeats committed
	hbRTT       atomic.Int64 // nanos
	headSeq     atomic.Int64
	appliedSeq  atomic.Int64
	eventsApp   atomic.Int64
	applyErrs   atomic.Int64
	reconnects  atomic.Int64
	gaps        atomic.Int64
	drift       atomic.Int64
	dropped     atomic.Int64
	malformed   atomic.Int64
	reconciles  atomic.Int64
	needCatchUp atomic.Bool

	watermarkPub atomic.Uint64 // copy of watermark for Stats

	bar                                          *barriers
	barrierRounds, barrierWaiters, barrierFailed atomic.Int64

	// applier-owned state (one goroutine)
	watermark uint64
	pending   map[store.ObjectType]map[string]change

	lag lagWindow

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
		hbChan:  hbName(cfg),
		events:  make(chan event, cfg.BufferSize),
		catchUp: make(chan catchUpReq),
		kick:    make(chan struct{}, 1),
		pending: map[store.ObjectType]map[string]change{},
		bar:     newBarriers(),
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

func hbName(cfg Config) string {
	if cfg.Source == SourceLogical {
		return logicalHBPrefix + sanitize(cfg.ReplicaID)
	}
	return "gateway_hb_" + sanitize(cfg.ReplicaID)
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
// then starts the listener, applier and heartbeat goroutines. It returns once the initial
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
	s.wg.Add(5)
	go func() { defer s.wg.Done(); s.barrierLoop(ctx) }()
	go func() { defer s.wg.Done(); s.listen(ctx) }()
	go func() { defer s.wg.Done(); s.apply(ctx) }()
	go func() { defer s.wg.Done(); s.heartbeat(ctx) }()
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

// --- listener ------------------------------------------------------------------------------

func (s *Syncer) listen(ctx context.Context) {
	backoff := s.cfg.BackoffMin
	first := true
	for ctx.Err() == nil {
		if !first {
			s.setState(StateReconnecting)
		}
		var err error
		if s.cfg.Source == SourceLogical {
			err = s.logicalSession(ctx, &first, &backoff)
		} else {
			err = s.session(ctx, &first, &backoff)
		}
		if ctx.Err() != nil {
			return
		}
		s.setState(StateReconnecting)
		s.log.Warn().Err(err).Dur("backoff", backoff).Msg("listener connection lost; reconnecting")
		// capped exponential backoff with full jitter, cancellable
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(backoff*2, s.cfg.BackoffMax)
	}
}

// session runs one listener connection until it fails.
func (s *Syncer) session(ctx context.Context, first *bool, backoff *time.Duration) error {
	pcfg, err := s.feedConnConfig()
	if err != nil {
		return err
	}
	pcfg.ConnectTimeout = 5 * time.Second
	pcfg.RuntimeParams["application_name"] = "lockstep-listener-" + s.cfg.ReplicaID
	pcfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) { s.onNotification(n) }
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgconn.ConnectConfig(cctx, pcfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = conn.Exec(lctx, fmt.Sprintf("LISTEN %s; LISTEN %s", Channel, s.hbChan)).ReadAll()
	cancel()
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// LISTEN is in place: anything committed from now on is notified. Catch up on what was
	// committed before (or while disconnected), then stream.
	if err := s.requestCatchUp(ctx, *first); err != nil {
		return err
	}
	s.streaming(first, backoff)
	start := time.Now()
	sentAtStart := s.hbSent.Load()
	var lastPing time.Time
	for {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := conn.WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("wait for notification: %w", err)
		}
		if conn.IsClosed() {
			return errors.New("listener connection closed")
		}
		heardOwn := s.hbHeard.Load() > start.UnixNano()
		switch {
		case !heardOwn && s.hbSent.Load()-sentAtStart >= 2 && time.Since(start) > s.cfg.HeartbeatTimeout:
			// Our own heartbeats were committed, yet none came back on this connection since
			// LISTEN: notifications are not delivered to it. Reconnecting would not help; stay
			// connected, let the change-log poll keep the registries in step, and say why.
			if s.State() != StateDegraded {
				s.reason.Store(degradedReason)
				s.setState(StateDegraded)
				s.log.Warn().Str("reason", degradedReason).Msg("change feed degraded: LISTEN does not receive notifications")
			}
			// the connection may still die: check it is alive, at the heartbeat's pace
			if time.Since(lastPing) >= s.cfg.HeartbeatInterval {
				lastPing = time.Now()
				pctx, cancel := context.WithTimeout(ctx, s.cfg.HeartbeatTimeout)
				_, err := conn.Exec(pctx, "SELECT 1").ReadAll()
				cancel()
				if err != nil {
					return fmt.Errorf("degraded listener connection: %w", err)
				}
			}
		case heardOwn && s.State() == StateDegraded:
			s.setState(StateStreaming)
			s.log.Info().Msg("listener hears its own heartbeat again: streaming")
		case s.State() != StateDegraded:
			if since := time.Since(time.Unix(0, s.lastHB.Load())); since > s.cfg.HeartbeatTimeout {
				return fmt.Errorf("no heartbeat for %s", since.Round(time.Millisecond))
			}
		}
	}
}

// degradedReason is Stats.Reason in StateDegraded.
const degradedReason = "the change feed's LISTEN connection never hears its own heartbeat NOTIFY: notifications are not delivered to it, " +
	"as happens through PgBouncer in transaction pooling mode (pool_mode = transaction); set --listen-database-url " +
	"(GATEWAY_LISTEN_DATABASE_URL) to a direct or session-pooled connection. Meanwhile the change-log poll keeps this replica in sync"

// feedConnConfig is the connection config of the change feed's own connection: ListenURL
// parsed the way the pool parses its URL (store.ParseConnConfig), or a copy of the pool's own
// parsed config. Either way the pgx/pgxpool-only settings (pool_max_conns,
// default_query_exec_mode, ...) are taken out: pgconn would send them to the server as
// run-time parameters, which it refuses.
func (s *Syncer) feedConnConfig() (*pgconn.Config, error) {
	if s.cfg.ListenURL == "" {
		return s.cfg.Store.ConnConfig(), nil
	}
	pcfg, err := store.ParseConnConfig(s.cfg.ListenURL)
	if err != nil {
		return nil, fmt.Errorf("listen database url: %w", err)
	}
	return pcfg, nil
}

// requestCatchUp has the applier read the change log since the watermark and waits for it.
// Both sessions call it once their subscription is in place (LISTEN done, or replication slot
// created), so that a change committed before the subscription is read from the log and one
// committed after it is streamed: nothing falls between the two.
func (s *Syncer) requestCatchUp(ctx context.Context, first bool) error {
	s.setState(StateCatchingUp)
	mode := catchUpReconnect
	if first {
		mode = catchUpStart
	}
	if err := s.runCatchUp(ctx, mode); err != nil {
		return fmt.Errorf("catch-up: %w", err)
	}
	return nil
}

// runCatchUp has the applier run one catch-up pass in mode and waits for its outcome.
func (s *Syncer) runCatchUp(ctx context.Context, mode catchUpMode) error {
	done := make(chan error, 1)
	select {
	case s.catchUp <- catchUpReq{done: done, mode: mode}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streaming records that a session has caught up and is streaming: counts a reconnect (not
// the first session), resets the backoff and the heartbeat clock, and marks the feed ready.
func (s *Syncer) streaming(first *bool, backoff *time.Duration) {
	if !*first {
		s.reconnects.Add(1)
		s.log.Info().Str("source", string(s.cfg.Source)).Msg("listener reconnected and caught up")
	}
	*first = false
	*backoff = s.cfg.BackoffMin
	s.lastHB.Store(time.Now().UnixNano())
	s.setState(StateStreaming)
	s.ready.Store(true)
}

func (s *Syncer) onNotification(n *pgconn.Notification) {
	if n.Channel == s.hbChan {
		now := time.Now()
		s.lastHB.Store(now.UnixNano())
		s.hbHeard.Store(now.UnixNano())
		if s.heardToken(n.Payload) {
			return
		}
		if sent, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			s.hbRTT.Store(now.UnixNano() - sent)
		}
		return
	}
	if n.Channel != Channel {
		return
	}
	// any notification proves the listener connection alive (a burst of thousands can delay
	// the heartbeat's own notification behind it)
	s.lastHB.Store(time.Now().UnixNano())
	var ev event
	if err := json.Unmarshal([]byte(n.Payload), &ev); err != nil || ev.Type == "" || (ev.ID == "" && ev.Op != "truncate") || ev.Seq <= 0 {
		s.malformed.Add(1)
		s.log.Warn().Int("payload_bytes", len(n.Payload)).Str("payload", truncate(n.Payload, 200)).Msg("ignoring malformed notification")
		return
	}
	s.push(ev)
}

// push hands one decoded change to the applier. It never blocks the session: on a full buffer
// the change is counted as dropped and the next change-log poll repairs it.
func (s *Syncer) push(ev event) {
	if _, ok := s.sinks[ev.Type]; !ok {
		return // type not synced here (supported_db_objects)
	}
	if ev.Seq > s.headSeq.Load() {
		s.headSeq.Store(ev.Seq)
	}
	select {
	case s.events <- ev:
	default:
		// Buffer full: count it and let the change-log catch-up repair it.
		s.lost(1)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (s *Syncer) heartbeat(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			hctx, cancel := context.WithTimeout(ctx, s.cfg.HeartbeatInterval)
			now := strconv.FormatInt(time.Now().UnixNano(), 10)
			var err error
			if s.cfg.Source == SourceLogical {
				err = s.emitHeartbeat(hctx, now)
			} else {
				err = s.cfg.Store.Notify(hctx, s.hbChan, now)
			}
			if err != nil && ctx.Err() == nil {
				s.log.Debug().Err(err).Msg("heartbeat failed")
			} else if err == nil {
				s.hbSent.Add(1)
			}
			cancel()
		}
	}
}

// --- applier -------------------------------------------------------------------------------

func (s *Syncer) apply(ctx context.Context) {
	poll := time.NewTicker(s.cfg.PollInterval)
	defer poll.Stop()
	batch := make([]event, 0, 8192)
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-s.catchUp:
			req.done <- s.catchUpNow(ctx, req.mode)
		case <-s.bar.applied:
			s.completeBarriers(ctx, batch)
		case ev := <-s.events:
			batch = append(batch[:0], ev)
		drain:
			for len(batch) < cap(batch) {
				select {
				case ev := <-s.events:
					batch = append(batch, ev)
				default:
					break drain
				}
			}
			s.applyEvents(ctx, batch)
		case <-poll.C:
			if st := s.State(); st != StateStreaming && st != StateDegraded {
				continue
			}
			s.poll(ctx)
		case <-s.kick:
			// notifications were dropped, or re-reads are pending: repair now, not at the
			// next tick; while (re)connecting, the catch-up will do it, try again later
			if st := s.State(); st == StateStreaming || st == StateDegraded {
				s.poll(ctx)
			} else {
				time.AfterFunc(100*time.Millisecond, s.kickNow)
			}
		}
	}
}

// applyEvents coalesces a batch of notifications per type and id (highest version wins),
// re-reads the ids in one query per type and applies the result.
func (s *Syncer) applyEvents(ctx context.Context, batch []event) {
	start := time.Now()
	want := map[store.ObjectType]map[string]change{}
	var maxSeq int64
	for _, ev := range batch {
		if ev.Seq > maxSeq {
			maxSeq = ev.Seq
		}
		if ev.Op == "truncate" {
			if sink := s.sinks[ev.Type]; sink != nil {
				sink.Truncate(ev.V)
			}
			continue
		}
		addChange(want, ev.Type, ev.ID, ev.V, ev.Seq, ev.Op)
	}
	for typ, ids := range want {
		if _, err := s.reread(ctx, typ, ids); err != nil {
			s.log.Warn().Err(err).Str("type", string(typ)).Msg("re-read failed; will retry")
			s.addPending(typ, ids)
		}
	}
	now := time.Now()
	for _, ev := range batch {
		if ev.TS > 0 {
			s.lag.add(now, now.Sub(time.UnixMicro(ev.TS)))
		}
	}
	s.eventsApp.Add(int64(len(batch)))
	traceApplied(start, batch) // one change.apply span per change, when tracing (tracing.go)
	if maxSeq > s.appliedSeq.Load() {
		s.appliedSeq.Store(maxSeq)
	}
}

// change is what the feed knows of one id: the newest change's version and whether it was a
// delete.
type change struct {
	v   int64
	seq int64 // its change-log row
	del bool
}

func addChange(want map[store.ObjectType]map[string]change, typ store.ObjectType, id string, v, seq int64, op string) {
	m := want[typ]
	if m == nil {
		m = map[string]change{}
		want[typ] = m
	}
	if v > m[id].v {
		m[id] = change{v: v, seq: seq, del: op == "delete"}
	}
}

// reread loads the ids the sink does not already hold and applies them version-guarded.
// Absent ids are applied as deletes when the change was a delete and the row is gone, or when
// the row is visible but not loadable (a guardrail moved out of 'active'). A change whose
// version is not visible yet — the row missing after an insert, or older than the change after
// an update or delete — was either superseded since (a later change follows) or, with logical
// decoding, committed but not yet visible to other sessions (PostgreSQL makes a commit
// visible just after its WAL record is flushed and streamed): the logical source re-reads
// those briefly and leaves the rest to the next poll; it never tombstones them.
// Returns how many registry entries changed.
func (s *Syncer) reread(ctx context.Context, typ store.ObjectType, ids map[string]change) (int, error) {
	sink := s.sinks[typ]
	if sink == nil {
		return 0, nil
	}
	need := make([]string, 0, len(ids))
	for id, c := range ids {
		if !sink.Holds(id, c.v) {
			need = append(need, id)
		}
	}
	changed := 0
	for attempt := 0; len(need) > 0; attempt++ {
		// Logical source: first ask which of the changes are visible. A change visible
		// before the re-read is fully reflected by it, so a row still absent or older then
		// means a later change (delete, truncate) superseded it; only changes not visible
		// yet are retried. (Asked before, not after, the re-read: a commit becoming visible
		// between the two must not pass for superseded.)
		var committed map[int64]bool
		if s.cfg.Source == SourceLogical && attempt > 0 {
			seqs := make([]int64, 0, len(need))
			for _, id := range need {
				seqs = append(seqs, ids[id].seq)
			}
			vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			vis, err := s.cfg.Store.VisibleChanges(vctx, seqs)
			cancel()
			if err != nil {
				return changed, err
			}
			committed = vis
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		rows, filtered, err := s.cfg.Store.Reload(rctx, typ, need)
		cancel()
		if err != nil {
			return changed, err
		}
		// seen: the row is visible at (at least) the version the change reported
		seen := make(map[string]bool, len(rows)+len(filtered))
		for _, r := range rows {
			seen[r.ID] = r.Version >= ids[r.ID].v
		}
		absent := map[string]int64{}
		for _, r := range filtered {
			if r.Version >= ids[r.ID].v {
				seen[r.ID] = true
				absent[r.ID] = r.Version
			}
		}
		var invisible []string
		for _, id := range need {
			switch {
			case seen[id]:
			case ids[id].del && !visible(rows, filtered, id):
				absent[id] = ids[id].v
			default:
				// not visible yet (logical decoding) at the change's version: the older
				// version read, if any, is applied below; the change itself is retried
				invisible = append(invisible, id)
			}
		}
		changed += sink.Apply(rows, absent)
		need = invisible
		if len(need) == 0 || s.cfg.Source != SourceLogical {
			break
		}
		need = slices.DeleteFunc(need, func(id string) bool { return committed[ids[id].seq] })
		if len(need) == 0 {
			break
		}
		if attempt == 10 {
			// still not visible after ~20 ms (e.g. a commit waiting on synchronous
			// replication): retry from the applier loop shortly, without blocking it
			s.addPending(typ, pick(ids, need))
			time.AfterFunc(25*time.Millisecond, s.kickNow)
			break
		}
		select {
		case <-ctx.Done():
			return changed, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return changed, nil
}

// visible reports whether id was returned by a re-read, loadable or not.
func visible(rows, filtered []store.Row, id string) bool {
	for _, r := range rows {
		if r.ID == id {
			return true
		}
	}
	for _, r := range filtered {
		if r.ID == id {
			return true
		}
	}
	return false
}

func pick(ids map[string]change, keys []string) map[string]change {
	out := make(map[string]change, len(keys))
	for _, k := range keys {
		out[k] = ids[k]
	}
	return out
}

func (s *Syncer) addPending(typ store.ObjectType, ids map[string]change) {
	m := s.pending[typ]
	if m == nil {
		m = map[string]change{}
		s.pending[typ] = m
	}
	for id, c := range ids {
		if cur, ok := m[id]; !ok || c.v > cur.v {
			m[id] = c
		}
	}
}

// catchUpMode says why the change log is read.
type catchUpMode int

const (
	// catchUpStart: first subscription after the initial load; apply everything, count nothing.
	catchUpStart catchUpMode = iota
	// catchUpReconnect: after a lost subscription; apply everything, count repaired gaps.
	catchUpReconnect
	// catchUpPoll: routine poll or dropped notifications; leave changes younger than
	// PollGrace to their notification, count the rest as repaired gaps.
	catchUpPoll
	// catchUpDegraded: the poll (or a barrier) while notifications do not arrive at all
	// (StateDegraded): apply everything, no grace (no notification is on its way), count
	// nothing (it is the expected path, not a gap).
	catchUpDegraded
)

// poll runs a routine change-log catch-up (also after dropped notifications).
func (s *Syncer) poll(ctx context.Context) {
	force := s.needCatchUp.Swap(false)
	mode := catchUpPoll
	if force {
		mode = catchUpReconnect
	} else if s.State() == StateDegraded {
		mode = catchUpDegraded
	}
	if err := s.catchUpNow(ctx, mode); err != nil {
		s.needCatchUp.Store(force)
		s.log.Debug().Err(err).Msg("change-log poll failed")
	}
}

// kickNow asks the applier for a catch-up pass (pending re-reads first) as soon as it is free.
func (s *Syncer) kickNow() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// lost records that notifications were lost (buffer full) and kicks an immediate catch-up.
func (s *Syncer) lost(n int64) {
	s.dropped.Add(n)
	s.needCatchUp.Store(true)
	s.kickNow()
}

// catchUpNow reads the change log since the watermark and applies what the registries do not
// hold yet. After a reconnect (afterGap) every such change counts as a repaired gap; on a
// routine poll, changes younger than PollGrace are left to their notification and hold the
// watermark back so they are looked at again.
func (s *Syncer) catchUpNow(ctx context.Context, mode catchUpMode) error {
	afterGap := mode != catchUpPoll // no grace: no notification is on its way for these
	// retry re-reads that failed earlier (a retry may leave some pending again)
	pending := s.pending
	s.pending = map[store.ObjectType]map[string]change{}
	for typ, ids := range pending {
		if _, err := s.reread(ctx, typ, ids); err != nil {
			for t, rest := range pending { // keep every type's retries, not only this one's
				s.addPending(t, rest)
			}
			return err
		}
		delete(pending, typ)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := s.cfg.Store.ChangesSince(cctx, s.watermark)
	if err != nil {
		return err
	}
	if b.HeadSeq > s.headSeq.Load() {
		s.headSeq.Store(b.HeadSeq)
	}
	if s.watermark < b.PrunedBefore {
		// The log no longer holds everything since our watermark: full versioned reconcile.
		s.log.Info().Uint64("watermark", s.watermark).Uint64("pruned_before", b.PrunedBefore).Msg("watermark older than change-log retention; full reconcile")
		return s.fullLoad(ctx, true)
	}
	want := map[store.ObjectType]map[string]change{}
	holdBack := false
	gaps := 0
	grace := b.Now.Add(-s.cfg.PollGrace) // the database's clock, like changed_at
	var maxSeq int64
	for _, c := range b.Changes {
		sink := s.sinks[c.Type]
		if sink == nil {
			continue
		}
		if c.Op == "truncate" {
			sink.Truncate(c.Version) // idempotent
			maxSeq = max(maxSeq, c.Seq)
			continue
		}
		if sink.Holds(c.ID, c.Version) {
			maxSeq = max(maxSeq, c.Seq)
			continue
		}
		if !afterGap && c.ChangedAt.After(grace) {
			holdBack = true
			continue
		}
		addChange(want, c.Type, c.ID, c.Version, c.Seq, c.Op)
		maxSeq = max(maxSeq, c.Seq)
	}
	// A repaired gap is a change the notifications missed that changed the registry; a row
	// that cannot be built (counted in apply_errors) or a delete of something never held is not.
	for typ, ids := range want {
		n, err := s.reread(ctx, typ, ids)
		if err != nil {
			return err
		}
		gaps += n
	}
	if mode == catchUpStart || mode == catchUpDegraded {
		gaps = 0 // committed between the initial load and LISTEN, or polled while degraded: expected, not a gap
	}
	if gaps > 0 {
		s.gaps.Add(int64(gaps))
		s.log.Info().Int("changes", gaps).Bool("after_reconnect", afterGap).Msg("repaired changes missed by notifications")
	}
	if maxSeq > s.appliedSeq.Load() {
		s.appliedSeq.Store(maxSeq)
	}
	if !holdBack {
		s.watermark = b.Watermark
		s.watermarkPub.Store(b.Watermark)
	}
	return nil
}

// fullLoad reconciles every sink against a full load. countDrift is false for the initial load.
func (s *Syncer) fullLoad(ctx context.Context, countDrift bool) error {
	types := make([]store.ObjectType, 0, len(s.sinks))
	for t := range s.sinks {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return types[i] < types[j] })
	var wm uint64
	for i, t := range types {
		snap, err := s.load(ctx, t, countDrift)
		if err != nil {
			return err
		}
		if i == 0 || snap < wm {
			wm = snap
		}
	}
	s.watermark = wm
	s.watermarkPub.Store(wm)
	s.reconciles.Add(1)
	return nil
}

func (s *Syncer) load(ctx context.Context, t store.ObjectType, countDrift bool) (uint64, error) {
	sink := s.sinks[t]
	start := sink.Generation()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	snap, err := s.cfg.Store.LoadAll(lctx, t)
	cancel()
	if err != nil {
		return 0, err
	}
	d := sink.Reconcile(snap.Rows, start)
	if countDrift && d > 0 {
		s.drift.Add(int64(d))
		s.log.Warn().Str("type", string(t)).Int("drift", d).Msg("reconcile repaired drift")
	}
	if snap.HeadSeq > s.headSeq.Load() {
		s.headSeq.Store(snap.HeadSeq)
	}
	if snap.HeadSeq > s.appliedSeq.Load() {
		s.appliedSeq.Store(snap.HeadSeq)
	}
	return snap.Watermark, nil
}

// reconciler runs the periodic anti-entropy reconcile and prunes the change log, off the
// applier goroutine so a large full load never stalls applying changes.
func (s *Syncer) reconciler(ctx context.Context) {
	t := time.NewTicker(s.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.State() != StateStreaming {
			continue
		}
		if _, err := s.Reconcile(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Msg("periodic reconcile failed")
		}
		if s.cfg.Retention > 0 {
			if _, err := s.cfg.Store.PruneChanges(ctx, s.cfg.Retention); err != nil {
				s.log.Debug().Err(err).Msg("prune change log failed")
			}
		}
	}
}

// Reconcile runs a full versioned reconcile and returns the drift it repaired: it loads every
// type, waits ReconcileGrace so changes committed before the snapshot but still in flight (a
// queued notification, the next poll) land through the feed, then repairs only what still
// differs — that is drift, which should stay 0 (DESIGN.md, layer 3). Runs on the caller's
// goroutine.
func (s *Syncer) Reconcile(ctx context.Context) (int64, error) {
	type pending struct {
		typ store.ObjectType
		fix func() int
	}
	var fixes []pending
	for t, sink := range s.sinks {
		gen := sink.Generation()
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		snap, err := s.cfg.Store.LoadAll(lctx, t)
		cancel()
		if err != nil {
			return 0, err
		}
		if fix := sink.Diff(snap.Rows, gen); fix != nil {
			fixes = append(fixes, pending{t, fix})
		}
	}
	s.reconciles.Add(1)
	if len(fixes) == 0 {
		return 0, nil
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(s.cfg.ReconcileGrace):
	}
	var total int64
	for _, f := range fixes {
		if n := f.fix(); n > 0 {
			total += int64(n)
			s.log.Warn().Str("type", string(f.typ)).Int("drift", n).Msg("reconcile repaired drift")
		}
	}
	s.drift.Add(total)
	return total, nil
}
