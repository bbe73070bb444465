package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
	"lockstep/pkg/notify"
	"lockstep/pkg/pgcluster"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// model is the runtime value the test registry builds from a gateway.models row.
type model struct {
	Name   string
	Params json.RawMessage
}

func buildModel(row store.Row) (model, error) {
	var r struct {
		ModelName     string          `json:"model_name"`
		LitellmParams json.RawMessage `json:"litellm_params"`
	}
	if c, ok := row.Cols.(*store.ModelCols); ok { // the feed's loads read typed columns
		r.ModelName, r.LitellmParams = c.ModelName, c.LitellmParams
	} else if err := json.Unmarshal(row.Data, &r); err != nil {
		return model{}, err
	}
	if strings.Contains(string(r.LitellmParams), `"invalid"`) {
		return model{}, fmt.Errorf("litellm_params: invalid")
	}
	return model{Name: r.ModelName, Params: r.LitellmParams}, nil
}

// sources are the change sources every conformance test runs against (DESIGN.md: both
// sources "must pass the same conformance tests").
var sources = []notify.Source{notify.SourceListen, notify.SourceLogical}

// forEachSource runs body once per change source, as parallel subtests named after the source,
// each with its own database (body calls setup). The test calls t.Parallel itself first, so the
// pair also runs alongside the other tests.
func forEachSource(t *testing.T, body func(t *testing.T, src notify.Source)) {
	t.Helper()
	for _, src := range sources {
		t.Run(string(src), func(t *testing.T) {
			t.Parallel()
			body(t, src)
		})
	}
}

// forEachSourceSequential is forEachSource for tests that must run alone (they restart the
// shared cluster).
func forEachSourceSequential(t *testing.T, body func(t *testing.T, src notify.Source)) {
	t.Helper()
	for _, src := range sources {
		t.Run(string(src), func(t *testing.T) { body(t, src) })
	}
}

type bundle struct {
	url    string
	st     *store.Store
	admin  *pgx.Conn
	source notify.Source // the change source startReplica configures
}

func setup(t *testing.T, src notify.Source) *bundle {
	t.Helper()
	return setupURL(t, pgtest.NewDB(t), src)
}

// setupURL is setup on a database of the caller's (e.g. on a cluster of its own).
func setupURL(t *testing.T, url string, src notify.Source) *bundle {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx))
	if src == notify.SourceLogical {
		// Runs after every replica of the test has stopped: a stopped replica leaves no slot
		// behind (temporary slots go with their session), and DROP DATABASE, which refuses a
		// database with an active slot, can clean up.
		t.Cleanup(func() { requireNoSlots(t, url) })
	}
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	return &bundle{url: url, st: st, admin: admin, source: src}
}

// slots lists the replication slots of conn's database.
func slots(t *testing.T, conn *pgx.Conn) []slotInfo {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT slot_name, slot_type, plugin, temporary, active
		FROM pg_replication_slots WHERE database = current_database() ORDER BY slot_name`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[slotInfo])
	require.NoError(t, err)
	return out
}

type slotInfo struct {
	Name, Type, Plugin string
	Temporary, Active  bool
}

func requireNoSlots(t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool { return len(slots(t, conn)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"replication slots left behind after every replica stopped")
}

type replica struct {
	id     string
	st     *store.Store
	models *registry.Registry[model]
	syncer *notify.Syncer
}

func newModels(st *store.Store) *registry.Registry[model] {
	return registry.New(registry.Options[model]{
		Type:  store.Model,
		Build: buildModel,
		Names: func(e *registry.Entry[model]) []string { return []string{e.Value.Name} },
		Load: func(ctx context.Context, name string) ([]store.Row, error) {
			return st.LoadByName(ctx, store.Model, name)
		},
	})
}

// startReplica starts an independent syncer (own pool, own listener) on the bundle's database.
func startReplica(t *testing.T, b *bundle, id string, tweak func(*notify.Config)) *replica {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, b.url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	r := &replica{id: id, st: st, models: newModels(st)}
	cfg := notify.Config{
		ReplicaID: id, Store: st, Sinks: []notify.Sink{r.models}, Source: b.source,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		HeartbeatInterval: 200 * time.Millisecond, HeartbeatTimeout: 1500 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, PollGrace: 300 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	r.syncer = notify.New(cfg)
	require.NoError(t, r.syncer.Start(ctx))
	t.Cleanup(r.syncer.Stop)
	require.Eventually(t, r.syncer.Ready, 10*time.Second, 5*time.Millisecond, "replica %s never streamed", id)
	return r
}

func (r *replica) get(id string) (*registry.Entry[model], bool) { return r.models.Load().ByID(id) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 15*time.Second, 2*time.Millisecond, "timed out waiting for: %s", what)
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func TestPlainSQLWritesPropagateToThreeSyncers(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		reps := []*replica{startReplica(t, b, "a", nil), startReplica(t, b, "b", nil), startReplica(t, b, "c", nil)}

		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('m1', 'gpt', '{"model":"openai/gpt-4o"}')`)
		for _, r := range reps {
			waitFor(t, r.id+" sees insert", func() bool { e, ok := r.get("m1"); return ok && e.Value.Name == "gpt" })
			require.Len(t, r.models.Load().ByName("gpt"), 1)
		}
		exec(t, b.admin, `UPDATE gateway.models SET model_name = 'gpt-renamed' WHERE model_id = 'm1'`)
		for _, r := range reps {
			waitFor(t, r.id+" sees update", func() bool { e, ok := r.get("m1"); return ok && e.Value.Name == "gpt-renamed" })
			require.Empty(t, r.models.Load().ByName("gpt"), "old group name must be gone")
		}
		exec(t, b.admin, `DELETE FROM gateway.models WHERE model_id = 'm1'`)
		for _, r := range reps {
			waitFor(t, r.id+" sees delete", func() bool { _, ok := r.get("m1"); return !ok })
			st := r.syncer.Stats()
			require.GreaterOrEqual(t, st.EventsApplied, int64(3))
			require.Equal(t, notify.StateStreaming, st.State)
			require.Equal(t, src, st.Source)
			require.Positive(t, st.LagMs.Samples)
		}
	})
}

func TestTruncateReloads(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) SELECT 'm'||g, 'grp' FROM generate_series(1, 5) g`)
		waitFor(t, "5 models", func() bool { return r.models.Len() == 5 })
		exec(t, b.admin, `TRUNCATE gateway.models`)
		waitFor(t, "truncate empties the registry", func() bool { return r.models.Len() == 0 })
	})
}

// listenerPID is the backend serving the replica's change feed: its LISTEN connection, or for
// the logical source its walsender (backend_type 'walsender', application_name
// notify.LogicalApplicationName); the newest one, should an old one still be exiting.
func listenerPID(t *testing.T, b *bundle, replicaID string) int {
	t.Helper()
	q, app := `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1
		ORDER BY backend_start DESC LIMIT 1`, "lockstep-listener-"+replicaID
	if b.source == notify.SourceLogical {
		q, app = `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'walsender' AND application_name = $1
			ORDER BY backend_start DESC LIMIT 1`, notify.LogicalApplicationName(replicaID)
	}
	var pid int
	require.Eventually(t, func() bool {
		return b.admin.QueryRow(context.Background(), q, app).Scan(&pid) == nil
	}, 10*time.Second, 10*time.Millisecond)
	return pid
}

// pauseListener SIGSTOPs the replica's listener backend (walsender for logical), holding its
// notifications up; the returned resume (also run at cleanup) SIGCONTs it once.
func pauseListener(t *testing.T, b *bundle, r *replica) (resume func()) {
	t.Helper()
	pid := listenerPID(t, b, r.id)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	var resumed atomic.Bool
	resume = func() {
		if !resumed.Swap(true) {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

type reconcileResult struct {
	n   int64
	err error
}

// reconcileAsync runs a full reconcile on another goroutine; Stats().Reconciles grows once its
// snapshot is taken (the initial load counts 1).
func reconcileAsync(r *replica) <-chan reconcileResult {
	res := make(chan reconcileResult, 1)
	go func() { n, err := r.syncer.Reconcile(context.Background()); res <- reconcileResult{n, err} }()
	return res
}

func terminateListener(t *testing.T, b *bundle, r *replica) {
	t.Helper()
	pid := listenerPID(t, b, r.id)
	exec(t, b.admin, `SELECT pg_terminate_backend($1)`, pid)
	waitFor(t, "listener notices its death", func() bool { return r.syncer.State() != notify.StateStreaming })
}

func TestKilledListenerReconnectsAndCatchesUp(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		// A long backoff keeps the replica disconnected while the test writes.
		r := startReplica(t, b, "a", func(c *notify.Config) { c.BackoffMin = 800 * time.Millisecond; c.BackoffMax = 800 * time.Millisecond })
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('before', 'g')`)
		waitFor(t, "first row", func() bool { _, ok := r.get("before"); return ok })

		terminateListener(t, b, r)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('during', 'g')`)
		exec(t, b.admin, `DELETE FROM gateway.models WHERE model_id = 'before'`)
		require.NotEqual(t, notify.StateStreaming, r.syncer.State(), "write must happen during the outage")

		waitFor(t, "row written during outage applied", func() bool { _, ok := r.get("during"); return ok })
		waitFor(t, "delete during outage applied", func() bool { _, ok := r.get("before"); return !ok })
		waitFor(t, "streaming again", func() bool { return r.syncer.State() == notify.StateStreaming })
		st := r.syncer.Stats()
		require.GreaterOrEqual(t, st.Reconnects, int64(1))
		require.GreaterOrEqual(t, st.GapsRepaired, int64(2))
	})
}

// A silent listener (half-open TCP, a hung backend): the socket stays open but nothing arrives.
// Simulated by SIGSTOPping the listener's backend process (logical: its walsender); the
// heartbeat stops arriving, the replica notices while the backend is still frozen, reconnects
// on a new backend and catches up.
//
// The frozen backend is resumed once the silence is detected: left frozen, it cannot absorb
// the ProcSignalBarrier every DROP DATABASE in the cluster waits for, so another test's
// cleanup would hang holding an xid — and creating a logical slot waits for every running
// xid in the cluster, so a logical replica anywhere could not reconnect until the SIGCONT.
func TestSilentListenerDetectedByHeartbeat(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		waitFor(t, "heartbeat rtt measured", func() bool { return r.syncer.Stats().HeartbeatRTTMs > 0 })
		pid := listenerPID(t, b, r.id)
		var resumed atomic.Bool
		resume := func() {
			if !resumed.Swap(true) {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
		t.Cleanup(resume)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('while-silent', 'g')`)
		waitFor(t, "silence detected while the backend is frozen", func() bool { return r.syncer.State() != notify.StateStreaming })
		resume()
		waitFor(t, "reconnected", func() bool { return r.syncer.Stats().Reconnects >= 1 })
		require.NotEqual(t, pid, listenerPID(t, b, r.id), "reconnected on a new backend")
		waitFor(t, "change written while silent applied", func() bool { _, ok := r.get("while-silent"); return ok })
		require.Equal(t, notify.StateStreaming, r.syncer.State())
	})
}

func TestLateCommitIsNotSkippedByTheWatermark(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", func(c *notify.Config) { c.BackoffMin = 800 * time.Millisecond; c.BackoffMax = 800 * time.Millisecond })
		ctx := context.Background()

		// T1 writes first (lower seq) and stays open.
		t1, err := b.admin.Begin(ctx)
		require.NoError(t, err)
		_, err = t1.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name) VALUES ('late', 'g')`)
		require.NoError(t, err)

		// T2 writes (higher seq) and commits; the replica applies it and polls past it.
		other, err := pgx.Connect(ctx, b.url)
		require.NoError(t, err)
		defer other.Close(ctx)
		exec(t, other, `INSERT INTO gateway.models (model_id, model_name) VALUES ('early', 'g')`)
		waitFor(t, "T2 applied", func() bool { _, ok := r.get("early"); return ok })
		wm := r.syncer.Stats().Watermark
		waitFor(t, "a poll ran after T2", func() bool { return r.syncer.Stats().Watermark != wm || r.syncer.Stats().AppliedSeq > 0 })
		_, held := r.get("late")
		require.False(t, held, "uncommitted row must not be visible")

		// Commit T1 while the replica is disconnected: its notification is lost, only the
		// change log (read from the watermark, not from the highest seq) can bring it.
		terminateListener(t, b, r)
		require.NoError(t, t1.Commit(ctx))
		waitFor(t, "late commit applied", func() bool { _, ok := r.get("late"); return ok })
		require.GreaterOrEqual(t, r.syncer.Stats().GapsRepaired, int64(1))
	})
}

func TestOversizedRow(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		big := strings.Repeat("x", 20*1024)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('big', 'g', jsonb_build_object('model', 'openai/x', 'blob', $1::text))`, big)
		waitFor(t, "20 KB row applied", func() bool { e, ok := r.get("big"); return ok && len(e.Value.Params) > 20*1024 })
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('after', 'g')`)
		waitFor(t, "still streaming after the big row", func() bool { _, ok := r.get("after"); return ok })
		require.Equal(t, notify.StateStreaming, r.syncer.State())
	})
}

// Listen only: a NOTIFY payload is free text any session can send on the channel. The
// logical source never reads NOTIFY; its analog, a hand-written change-log row, is
// TestLogicalMalformedChangeLogRow.
func TestMalformedNotification(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	r := startReplica(t, b, "a", nil)
	for _, payload := range []string{`not json`, `{"seq":1}`, `{"type":"model","id":"x"}`, `[]`, strings.Repeat("{", 7000)} {
		exec(t, b.admin, `SELECT pg_notify('gateway_registry', $1)`, payload)
	}
	waitFor(t, "malformed counted", func() bool { return r.syncer.Stats().Malformed >= 5 })
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('after', 'g')`)
	waitFor(t, "still streaming after malformed payloads", func() bool { _, ok := r.get("after"); return ok })
	require.Equal(t, notify.StateStreaming, r.syncer.State())
}

func TestInvalidRowNeverReplacesServingEntry(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('m', 'g', '{"model":"openai/ok"}')`)
		waitFor(t, "valid row", func() bool { _, ok := r.get("m"); return ok })
		exec(t, b.admin, `UPDATE gateway.models SET litellm_params = '{"model":"invalid"}' WHERE model_id = 'm'`)
		waitFor(t, "apply error counted", func() bool { return r.models.ApplyErrors() >= 1 })
		e, ok := r.get("m")
		require.True(t, ok)
		require.Contains(t, string(e.Value.Params), "openai/ok", "old version keeps serving")
		// the known-bad version is not re-read by later polls or a reconcile: counted once, no gap
		polls := r.syncer.Stats().Watermark
		waitFor(t, "a few polls", func() bool { return r.syncer.Stats().Watermark != polls })
		_, err := r.syncer.Reconcile(context.Background())
		require.NoError(t, err)
		require.Equal(t, int64(1), r.models.ApplyErrors())
		require.Zero(t, r.syncer.Stats().GapsRepaired)
		require.Zero(t, r.syncer.Stats().DriftRepaired)
		exec(t, b.admin, `UPDATE gateway.models SET litellm_params = '{"model":"openai/fixed"}' WHERE model_id = 'm'`)
		waitFor(t, "fixed row applied", func() bool { e, _ := r.get("m"); return strings.Contains(string(e.Value.Params), "fixed") })
	})
}

func TestVersionGuardNoResurrection(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		ctx := context.Background()
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('m', 'g', '{"model":"openai/v1"}')`)
		waitFor(t, "v1", func() bool { _, ok := r.get("m"); return ok })

		// A slow read-through reads v1 ...
		stale, err := b.st.LoadByIDs(ctx, store.Model, []string{"m"})
		require.NoError(t, err)
		require.Len(t, stale, 1)
		// ... a newer version arrives by notification first ...
		exec(t, b.admin, `UPDATE gateway.models SET litellm_params = '{"model":"openai/v2"}' WHERE model_id = 'm'`)
		waitFor(t, "v2", func() bool { e, _ := r.get("m"); return strings.Contains(string(e.Value.Params), "v2") })
		// ... then the stale read lands: nothing changes.
		require.Zero(t, r.models.Apply(stale, nil))
		e, _ := r.get("m")
		require.Contains(t, string(e.Value.Params), "v2")

		// Same after a delete: the stale read must not resurrect the model.
		stale2, err := b.st.LoadByIDs(ctx, store.Model, []string{"m"})
		require.NoError(t, err)
		exec(t, b.admin, `DELETE FROM gateway.models WHERE model_id = 'm'`)
		waitFor(t, "deleted", func() bool { _, ok := r.get("m"); return !ok })
		require.Zero(t, r.models.Apply(stale2, nil))
		_, ok := r.get("m")
		require.False(t, ok, "stale read-through resurrected a deleted model")

		// A re-insert of the same id is newer than the tombstone and is applied.
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m', 'g')`)
		waitFor(t, "re-created", func() bool { _, ok := r.get("m"); return ok })
	})
}

// Source-independent: exercises the registry and the store only.
func TestReconcileRacingReadThroughNeverEvicts(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	ctx := context.Background()
	reg := newModels(b.st)

	// The reconcile takes its snapshot before the row exists ...
	start := reg.Generation()
	snap, err := b.st.LoadAll(ctx, store.Model, nil)
	require.NoError(t, err)
	require.Empty(t, snap.Rows)
	// ... the row is created and a read-through loads it ...
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m', 'grp')`)
	require.NoError(t, reg.Resolve(ctx, "grp"))
	require.Len(t, reg.Load().ByName("grp"), 1)
	// ... then the reconcile applies its older snapshot: the entry stays.
	require.Zero(t, reg.Reconcile(snap.Rows, start))
	require.Len(t, reg.Load().ByName("grp"), 1, "reconcile evicted an entry loaded after its snapshot")

	// An entry loaded before the snapshot and absent from it is evicted (real drift).
	start = reg.Generation()
	exec(t, b.admin, `DELETE FROM gateway.models`)
	snap, err = b.st.LoadAll(ctx, store.Model, nil)
	require.NoError(t, err)
	require.Equal(t, 1, reg.Reconcile(snap.Rows, start))
	require.Zero(t, reg.Len())
}

func TestPeriodicReconcileCountsDrift(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		// Drift: a row the registry never heard of (inserted with triggers disabled for this session).
		ctx := context.Background()
		tx, err := b.admin.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SET LOCAL session_replication_role = replica`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name, version) VALUES ('silent', 'g', 1)`)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		n, err := r.syncer.Reconcile(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		_, ok := r.get("silent")
		require.True(t, ok)
		require.Equal(t, int64(1), r.syncer.Stats().DriftRepaired)
	})
}

func TestWriteDuringDatabaseOutage(t *testing.T) {
	// Not parallel: restarts the shared cluster.
	forEachSourceSequential(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m1', 'g')`)
		waitFor(t, "m1", func() bool { _, ok := r.get("m1"); return ok })
		b.admin.Close(context.Background())

		c := pgtest.Current()
		require.NoError(t, c.Restart(func() {
			waitFor(t, "reconnecting while the DB is down", func() bool { return r.syncer.State() == notify.StateReconnecting })
			// static stability: what the replica holds keeps serving
			_, ok := r.get("m1")
			require.True(t, ok)
		}))
		admin, err := pgx.Connect(context.Background(), b.url)
		require.NoError(t, err)
		defer admin.Close(context.Background())
		exec(t, admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m2', 'g')`)
		waitFor(t, "write after outage applied", func() bool { _, ok := r.get("m2"); return ok })
		waitFor(t, "streaming", func() bool { return r.syncer.State() == notify.StateStreaming })
		require.GreaterOrEqual(t, r.syncer.Stats().Reconnects, int64(1))
	})
}

// Source-independent: exercises the registry's read-through only.
func TestReadThroughBoundsAgainstPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceListen)
	ctx := context.Background()
	var loads atomic.Int64
	reg := registry.New(registry.Options[model]{
		Type: store.Model, Build: buildModel,
		Names: func(e *registry.Entry[model]) []string { return []string{e.Value.Name} },
		Load: func(ctx context.Context, name string) ([]store.Row, error) {
			loads.Add(1)
			time.Sleep(50 * time.Millisecond) // keep the fetch in flight while the others pile up
			return b.st.LoadByName(ctx, store.Model, name)
		},
	})
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m', 'grp')`)

	// 50 concurrent misses on one key → 1 DB read.
	errs := make(chan error, 50)
	for range 50 {
		go func() { errs <- reg.Resolve(ctx, "grp") }()
	}
	for range 50 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, int64(1), loads.Load())
	require.Len(t, reg.Load().ByName("grp"), 1)

	// Unknown key → negative-cached: the second miss costs no read.
	require.ErrorIs(t, reg.Resolve(ctx, "nope"), registry.ErrNotFound)
	require.ErrorIs(t, reg.Resolve(ctx, "nope"), registry.ErrNotFound)
	require.Equal(t, int64(2), loads.Load())
	st := reg.ReadThroughStats()
	require.Equal(t, int64(1), st.NegativeHits)
	require.Equal(t, int64(1), st.NotFound)
}

// The other tests would pass on the change-log poll alone; here the poll is effectively off,
// so only the source's stream can deliver, and nothing may count as a repaired gap.
func TestStreamAloneDeliversEveryChange(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", func(c *notify.Config) { c.PollInterval = time.Hour })
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m1', 'g'), ('m2', 'g')`)
		waitFor(t, "inserts", func() bool { return r.models.Len() == 2 })
		exec(t, b.admin, `UPDATE gateway.models SET model_name = 'h' WHERE model_id = 'm1'`)
		waitFor(t, "update", func() bool { e, ok := r.get("m1"); return ok && e.Value.Name == "h" })
		exec(t, b.admin, `DELETE FROM gateway.models WHERE model_id = 'm2'`)
		waitFor(t, "delete", func() bool { _, ok := r.get("m2"); return !ok })
		// a primary-key rename: the old id goes as fast as a delete, the new one appears
		exec(t, b.admin, `UPDATE gateway.models SET model_id = 'm1-renamed' WHERE model_id = 'm1'`)
		waitFor(t, "rename", func() bool { _, old := r.get("m1"); _, renamed := r.get("m1-renamed"); return !old && renamed })
		exec(t, b.admin, `TRUNCATE gateway.models`)
		waitFor(t, "truncate", func() bool { return r.models.Len() == 0 })
		st := r.syncer.Stats()
		require.Zero(t, st.GapsRepaired)
		require.GreaterOrEqual(t, st.EventsApplied, int64(5))
		waitFor(t, "heartbeat heard", func() bool { return r.syncer.Stats().HeartbeatRTTMs > 0 })
	})
}

// A transaction with more changes than the buffer holds: the overflow is counted as dropped
// (logical: beyond BufferSize within one transaction; listen: when the applier falls behind)
// and repaired by the change-log poll.
func TestTransactionLargerThanTheBuffer(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", func(c *notify.Config) { c.BufferSize = 10 })
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) SELECT 'm'||g, 'grp' FROM generate_series(1, 50) g`)
		waitFor(t, "all 50 applied", func() bool { return r.models.Len() == 50 })
		if src == notify.SourceLogical {
			// the poll may apply the rows before the (slower) WAL stream delivers them
			waitFor(t, "overflow counted", func() bool { return r.syncer.Stats().Dropped >= 40 })
		}
		require.Equal(t, notify.StateStreaming, r.syncer.State())
	})
}

// The logical source's session runs on a TEMPORARY pgoutput slot, unique per session, which
// the server drops with the session: a killed session's slot is gone, a stopped replica leaves
// none (setup's cleanup asserts that for every logical test).
func TestLogicalSlotIsTemporaryAndGoesWithTheSession(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceLogical)
	r := startReplica(t, b, "a", func(c *notify.Config) { c.BackoffMin = 50 * time.Millisecond })
	ss := slots(t, b.admin)
	require.Len(t, ss, 1)
	first := ss[0]
	require.Equal(t, slotInfo{Name: first.Name, Type: "logical", Plugin: "pgoutput", Temporary: true, Active: true}, first)
	require.True(t, strings.HasPrefix(first.Name, "lockstep_a_"), first.Name)

	terminateListener(t, b, r)
	waitFor(t, "streaming again", func() bool { return r.syncer.State() == notify.StateStreaming })
	waitFor(t, "only the new session's slot remains", func() bool {
		ss := slots(t, b.admin)
		return len(ss) == 1 && ss[0].Name != first.Name && ss[0].Active
	})

	// A replica id that is long and not a valid identifier still makes a valid slot name.
	long := startReplica(t, b, strings.Repeat("Replica-ÄÖ.", 10), nil)
	require.Equal(t, notify.SourceLogical, long.syncer.Stats().Source)
	for _, sl := range slots(t, b.admin) {
		require.LessOrEqual(t, len(sl.Name), 63)
	}
	long.syncer.Stop()
	r.syncer.Stop()
	requireNoSlots(t, b.url)
}

// The logical analog of TestMalformedNotification: the stream is the change log, so malformed
// input is a change-log row some tool wrote by hand. It is counted and skipped.
func TestLogicalMalformedChangeLogRow(t *testing.T) {
	t.Parallel()
	b := setup(t, notify.SourceLogical)
	r := startReplica(t, b, "a", nil)
	exec(t, b.admin, `INSERT INTO gateway.registry_changes (object_type, op, object_id, version) VALUES
		('model', 'insert', '', 1), ('', 'insert', 'x', 1)`)
	waitFor(t, "malformed counted", func() bool { return r.syncer.Stats().Malformed >= 2 })
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('after', 'g')`)
	waitFor(t, "still streaming after malformed rows", func() bool { _, ok := r.get("after"); return ok })
	require.Equal(t, notify.StateStreaming, r.syncer.State())
}

func TestStartRejectsAnUnknownSource(t *testing.T) {
	t.Parallel()
	s := notify.New(notify.Config{Source: "kafka"})
	require.ErrorContains(t, s.Start(context.Background()), `"kafka" is not a change source`)
	s.Stop()
}

// BenchmarkNotifyApply measures end-to-end apply throughput: rows inserted in one
// transaction until one replica has applied all of them.
func BenchmarkNotifyApply(b *testing.B) { benchApply(b, notify.SourceListen) }

// BenchmarkNotifyApplyLogical is BenchmarkNotifyApply on the logical-replication source.
func BenchmarkNotifyApplyLogical(b *testing.B) { benchApply(b, notify.SourceLogical) }

func benchApply(b *testing.B, src notify.Source) {
	ctx := context.Background()
	reg, admin := benchReplica(b, src)
	// The test cluster runs with synchronous_commit=off; the writer uses the production default.
	// It matters to the logical source only: a walsender streams flushed WAL, and an async
	// commit waits for the WAL writer (~2×wal_writer_delay, ~400 ms) — NOTIFY does not.
	_, err := admin.Exec(ctx, `SET synchronous_commit = on`)
	require.NoError(b, err)
	const perTx = 1000
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		_, err := admin.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name) SELECT $1||'-'||g, 'grp'||(g % 50) FROM generate_series(1, $2) g`, fmt.Sprint(i), perTx)
		require.NoError(b, err)
		want := (i + 1) * perTx
		for reg.Len() < want {
			time.Sleep(200 * time.Microsecond)
		}
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N*perTx)/el.Seconds(), "changes/s")
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*perTx), "ns/change")
}

// Many small transactions committed back to back: every one ends up applied. With logical
// decoding a commit can be streamed a moment before it is visible to other sessions; a
// re-read that misses it must not tombstone the row (that would hide it for good).
func TestEveryCommitIsAppliedUnderLoad(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		const n = 400
		for i := range n {
			exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'load')`, fmt.Sprint("m", i))
		}
		waitFor(t, "every commit applied", func() bool { return r.models.Len() == n })
		require.Zero(t, r.models.ApplyErrors())
	})
}

// A DELETE and a re-INSERT of the same key racing: the INSERT's BEFORE trigger draws its
// version before it waits on the unique-index entry of the row being deleted, while the
// DELETE's AFTER trigger (which records the tombstone, OLD.version + 1) has not run yet; the
// INSERT commits after the DELETE. Row versions are even and tombstones odd, so the
// re-inserted row is always newer than the tombstone and is applied (it used to equal it and
// stay hidden on every replica).
func TestDeleteRacingReinsertOfSameKey(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		ctx := context.Background()
		deleter, err := pgx.Connect(ctx, b.url)
		require.NoError(t, err)
		defer deleter.Close(ctx)
		inserter, err := pgx.Connect(ctx, b.url)
		require.NoError(t, err)
		defer inserter.Close(ctx)
		for i := range 5 {
			id := fmt.Sprint("k", i)
			exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, id)
			waitFor(t, "created", func() bool { _, ok := r.get(id); return ok })
			deleted := make(chan error, 1)
			go func() {
				// the row is deleted, then the statement sleeps: its AFTER trigger runs at the end
				_, err := deleter.Exec(ctx, `WITH d AS (DELETE FROM gateway.models WHERE model_id = $1 RETURNING 1)
					SELECT pg_sleep(0.3) FROM d`, id)
				deleted <- err
			}()
			waitFor(t, "delete statement sleeping", func() bool {
				var n int
				_ = b.st.QueryInt(ctx, &n, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`)
				return n > 0
			})
			inserted := make(chan error, 1)
			go func() {
				_, err := inserter.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g-again') ON CONFLICT DO NOTHING`, id)
				inserted <- err
			}()
			require.NoError(t, <-deleted)
			require.NoError(t, <-inserted)
			var n int
			require.NoError(t, b.st.QueryInt(ctx, &n, `SELECT count(*) FROM gateway.models WHERE model_id = $1`, id))
			require.Equal(t, 1, n, "the re-insert must have committed")
			waitFor(t, "re-inserted row served", func() bool { e, ok := r.get(id); return ok && e.Value.Name == "g-again" })
		}
	})
}

// Logical decoding can stream a commit before it is visible to other sessions (here: a
// commit waiting for a synchronous standby that never answers). The re-read then sees the
// previous version; the change must be retried until it is visible, not taken as applied.
// The poll is off, so only the re-read retry can deliver. Runs on a cluster of its own
// (synchronous_standby_names is server-wide).
func TestChangeStreamedBeforeVisibleIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		c, err := pgcluster.Start() // a cluster per source: the setting is server-wide
		require.NoError(t, err)
		t.Cleanup(c.Stop)
		url, err := c.CreateDB(ctx, "vis_"+string(src))
		require.NoError(t, err)
		b := setupURL(t, url, src)
		// the logical heartbeat is a transactional message: it waits for the standby too, so
		// a long heartbeat timeout keeps the session up while the commit is held
		r := startReplica(t, b, "a", func(c *notify.Config) { c.PollInterval = time.Hour; c.HeartbeatTimeout = time.Minute })
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m', 'before')`)
		waitFor(t, "created", func() bool { e, ok := r.get("m"); return ok && e.Value.Name == "before" })

		exec(t, b.admin, `ALTER SYSTEM SET synchronous_standby_names = 'nobody'`)
		exec(t, b.admin, `SELECT pg_reload_conf()`)
		t.Cleanup(func() {
			conn, err := pgx.Connect(ctx, url)
			if err == nil {
				_, _ = conn.Exec(ctx, `ALTER SYSTEM RESET synchronous_standby_names`)
				_, _ = conn.Exec(ctx, `SELECT pg_reload_conf()`)
				conn.Close(ctx)
			}
		})
		writer, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer writer.Close(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := writer.Exec(ctx, `UPDATE gateway.models SET model_name = 'after' WHERE model_id = 'm'`)
			done <- err
		}()
		// wait until the commit is flushed and waiting for the standby
		waitFor(t, "commit waiting for sync rep", func() bool {
			var n int
			_ = b.st.QueryInt(ctx, &n, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
			return n > 0
		})
		// the stream delivers the not-yet-visible commit (listen: nothing until it is visible)
		if src == notify.SourceLogical {
			waitFor(t, "commit streamed", func() bool { return r.syncer.Stats().EventsApplied >= 2 })
		}
		exec(t, b.admin, `ALTER SYSTEM RESET synchronous_standby_names`)
		exec(t, b.admin, `SELECT pg_reload_conf()`)
		require.NoError(t, <-done)
		ok := assert.Eventually(t, func() bool { e, _ := r.get("m"); return e.Value.Name == "after" }, 15*time.Second, 2*time.Millisecond)
		if !ok {
			e, _ := r.get("m")
			var dbv int
			_ = b.st.QueryInt(ctx, &dbv, `SELECT version::int FROM gateway.models WHERE model_id = 'm'`)
			t.Fatalf("update not applied once visible: registry v%d %q, db v%d, stats %+v", e.Version, e.Value.Name, dbv, r.syncer.Stats())
		}
	})
}

// A reconcile whose snapshot sees a change the feed has not applied yet (its notification is
// held up: the listener's backend is paused for a moment) waits for the feed and does not
// count the change as drift — drift is an alarm, not a normal path. The same reconcile with no
// grace would have counted it.
func TestReconcileDoesNotCountChangesInFlightAsDrift(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m', 'before')`)
		waitFor(t, "loaded", func() bool { e, ok := r.get("m"); return ok && e.Value.Name == "before" })
		resume := pauseListener(t, b, r)
		exec(t, b.admin, `UPDATE gateway.models SET model_name = 'after' WHERE model_id = 'm'`)
		res := reconcileAsync(r)
		waitFor(t, "reconcile snapshot taken", func() bool { return r.syncer.Stats().Reconciles >= 2 })
		resume()
		got := <-res
		require.NoError(t, got.err)
		require.Zero(t, got.n, "a change in flight was counted as drift")
		e, _ := r.get("m")
		require.Equal(t, "after", e.Value.Name)
		require.Zero(t, r.syncer.Stats().DriftRepaired)
	})
}

// benchReplica is a benchmark's replica on a database of its own: a syncer on src applying
// models into the returned registry (ready), and a direct connection to write with; both end
// with the benchmark.
func benchReplica(b *testing.B, src notify.Source) (*registry.Registry[model], *pgx.Conn) {
	b.Helper()
	url := pgtest.NewDB(b)
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	require.NoError(b, err)
	b.Cleanup(st.Close)
	require.NoError(b, st.Migrate(ctx))
	reg := newModels(st)
	s := notify.New(notify.Config{ReplicaID: "bench", Store: st, Sinks: []notify.Sink{reg}, Logger: zerolog.Nop(), Source: src})
	require.NoError(b, s.Start(ctx))
	b.Cleanup(s.Stop)
	require.Eventually(b, s.Ready, 10*time.Second, time.Millisecond)
	admin, err := pgx.Connect(ctx, url)
	require.NoError(b, err)
	b.Cleanup(func() { admin.Close(ctx) })
	return reg, admin
}
