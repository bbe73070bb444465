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
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
	"lockstep/pkg/notify"
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
	if err := json.Unmarshal(row.Data, &r); err != nil {
		return model{}, err
	}
	if strings.Contains(string(r.LitellmParams), `"invalid"`) {
		return model{}, fmt.Errorf("litellm_params: invalid")
	}
	return model{Name: r.ModelName, Params: r.LitellmParams}, nil
}

type bundle struct {
	url   string
	st    *store.Store
	admin *pgx.Conn
}

func setup(t *testing.T) *bundle {
	t.Helper()
	url := pgtest.NewDB(t)
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Migrate(ctx))
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	return &bundle{url: url, st: st, admin: admin}
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
		ReplicaID: id, Store: st, Sinks: []notify.Sink{r.models},
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
	b := setup(t)
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
		require.Positive(t, st.LagMs.Samples)
	}
}

func TestTruncateReloads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := startReplica(t, b, "a", nil)
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) SELECT 'm'||g, 'grp' FROM generate_series(1, 5) g`)
	waitFor(t, "5 models", func() bool { return r.models.Len() == 5 })
	exec(t, b.admin, `TRUNCATE gateway.models`)
	waitFor(t, "truncate empties the registry", func() bool { return r.models.Len() == 0 })
}

func listenerPID(t *testing.T, b *bundle, replicaID string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		err := b.admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, "lockstep-listener-"+replicaID).Scan(&pid)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return pid
}

func terminateListener(t *testing.T, b *bundle, r *replica) {
	t.Helper()
	pid := listenerPID(t, b, r.id)
	exec(t, b.admin, `SELECT pg_terminate_backend($1)`, pid)
	waitFor(t, "listener notices its death", func() bool { return r.syncer.State() != notify.StateStreaming })
}

func TestKilledListenerReconnectsAndCatchesUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
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
}

// A silent listener (half-open TCP, a hung backend): the socket stays open but nothing arrives.
// Simulated by SIGSTOPping the listener's backend process; the self-heartbeat stops arriving,
// the replica reconnects on a new backend and catches up.
func TestSilentListenerDetectedByHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := startReplica(t, b, "a", nil)
	waitFor(t, "heartbeat rtt measured", func() bool { return r.syncer.Stats().HeartbeatRTTMs > 0 })
	pid := listenerPID(t, b, r.id)
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('while-silent', 'g')`)
	waitFor(t, "reconnected on a new backend", func() bool { return r.syncer.Stats().Reconnects >= 1 })
	waitFor(t, "change written while silent applied", func() bool { _, ok := r.get("while-silent"); return ok })
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
}

func TestLateCommitIsNotSkippedByTheWatermark(t *testing.T) {
	t.Parallel()
	b := setup(t)
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
	time.Sleep(300 * time.Millisecond) // let a few polls pass (the condition is what follows)
	_, held := r.get("late")
	require.False(t, held, "uncommitted row must not be visible")

	// Commit T1 while the replica is disconnected: its notification is lost, only the
	// change log (read from the watermark, not from the highest seq) can bring it.
	terminateListener(t, b, r)
	require.NoError(t, t1.Commit(ctx))
	waitFor(t, "late commit applied", func() bool { _, ok := r.get("late"); return ok })
	require.GreaterOrEqual(t, r.syncer.Stats().GapsRepaired, int64(1))
}

func TestOversizedRowAndMalformedNotification(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := startReplica(t, b, "a", nil)
	big := strings.Repeat("x", 20*1024)
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('big', 'g', jsonb_build_object('model', 'openai/x', 'blob', $1::text))`, big)
	waitFor(t, "20 KB row applied", func() bool { e, ok := r.get("big"); return ok && len(e.Value.Params) > 20*1024 })

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
	b := setup(t)
	r := startReplica(t, b, "a", nil)
	exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('m', 'g', '{"model":"openai/ok"}')`)
	waitFor(t, "valid row", func() bool { _, ok := r.get("m"); return ok })
	exec(t, b.admin, `UPDATE gateway.models SET litellm_params = '{"model":"invalid"}' WHERE model_id = 'm'`)
	waitFor(t, "apply error counted", func() bool { return r.models.ApplyErrors() >= 1 })
	e, ok := r.get("m")
	require.True(t, ok)
	require.Contains(t, string(e.Value.Params), "openai/ok", "old version keeps serving")
	exec(t, b.admin, `UPDATE gateway.models SET litellm_params = '{"model":"openai/fixed"}' WHERE model_id = 'm'`)
	waitFor(t, "fixed row applied", func() bool { e, _ := r.get("m"); return strings.Contains(string(e.Value.Params), "fixed") })
}

func TestVersionGuardNoResurrection(t *testing.T) {
	t.Parallel()
	b := setup(t)
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
}

func TestReconcileRacingReadThroughNeverEvicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	reg := newModels(b.st)

	// The reconcile takes its snapshot before the row exists ...
	start := reg.Generation()
	snap, err := b.st.LoadAll(ctx, store.Model)
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
	snap, err = b.st.LoadAll(ctx, store.Model)
	require.NoError(t, err)
	require.Equal(t, 1, reg.Reconcile(snap.Rows, start))
	require.Zero(t, reg.Len())
}

func TestPeriodicReconcileCountsDrift(t *testing.T) {
	t.Parallel()
	b := setup(t)
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
}

func TestWriteDuringDatabaseOutage(t *testing.T) {
	// Not parallel: restarts the shared cluster.
	b := setup(t)
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
}

func TestReadThroughBoundsAgainstPostgres(t *testing.T) {
	t.Parallel()
	b := setup(t)
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

// BenchmarkNotifyApply measures end-to-end apply throughput: rows inserted in one
// transaction until one replica has applied all of them.
func BenchmarkNotifyApply(b *testing.B) {
	url := pgtest.NewDB(b)
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	require.NoError(b, err)
	defer st.Close()
	require.NoError(b, st.Migrate(ctx))
	reg := newModels(st)
	s := notify.New(notify.Config{ReplicaID: "bench", Store: st, Sinks: []notify.Sink{reg}, Logger: zerolog.Nop()})
	require.NoError(b, s.Start(ctx))
	defer s.Stop()
	require.Eventually(b, s.Ready, 10*time.Second, time.Millisecond)
	admin, err := pgx.Connect(ctx, url)
	require.NoError(b, err)
	defer admin.Close(ctx)
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
