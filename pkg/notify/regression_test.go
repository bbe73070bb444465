package notify_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
	"lockstep/pkg/registry"
	"lockstep/pkg/store"
)

// countingSink counts the Apply calls the change feed makes (every re-read attempt applies).
type countingSink struct {
	*registry.Registry[model]
	applies atomic.Int64
}

func (c *countingSink) Apply(rows []store.Row, absent map[string]int64) int {
	c.applies.Add(1)
	return c.Registry.Apply(rows, absent)
}

// startWithSinks is startReplica with the caller's sinks.
func startWithSinks(t *testing.T, b *bundle, id string, sinks []notify.Sink, tweak func(*notify.Config)) *notify.Syncer {
	t.Helper()
	cfg := notify.Config{
		ReplicaID: id, Store: b.st, Sinks: sinks, Source: b.source,
		Logger:            zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		HeartbeatInterval: 200 * time.Millisecond, HeartbeatTimeout: 1500 * time.Millisecond,
		PollInterval: 100 * time.Millisecond, PollGrace: 300 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s := notify.New(cfg)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	require.Eventually(t, s.Ready, 10*time.Second, 5*time.Millisecond, "replica %s never streamed", id)
	return s
}

// Review: a row inserted (or updated) and then TRUNCATEd before the feed re-read it. The
// re-read finds nothing, the change was not a delete, so the row counts as "not visible yet".
// Logical source: reread retries it 10 times (~20 ms, blocking the applier), puts it in
// s.pending and kicks a catch-up 25 ms later, which re-reads it again ... forever: the truncate
// leaves no tombstone for an id the registry never held (or only for the held version + 1,
// below the update's version), so Holds(id, v) never turns true. Result: ~11 Reload queries
// every ~45 ms per such id, for the life of the process, and every other change waits behind
// the applier's 20 ms sleeps. Listen source: the id is dropped after one re-read (passes).
func TestTruncatedInsertIsNotRereadForever(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		sink := &countingSink{Registry: newModels(b.st)}
		startWithSinks(t, b, "a", []notify.Sink{sink}, nil)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('keep', 'g')`)
		waitFor(t, "keep", func() bool { return sink.Len() == 1 })
		// one transaction: the insert's change and the truncate's change commit together
		exec(t, b.admin, `BEGIN;
			INSERT INTO gateway.models (model_id, model_name) VALUES ('gone', 'g');
			TRUNCATE gateway.models;
			COMMIT`)
		waitFor(t, "truncate applied", func() bool { return sink.Len() == 0 })
		time.Sleep(1500 * time.Millisecond) // every poll and retry that should happen has happened
		before := sink.applies.Load()
		time.Sleep(time.Second)
		n := sink.applies.Load() - before
		require.Less(t, n, int64(5), "the feed keeps re-reading a truncated row: %d applies in 1 s of idle", n)
	})
}

// Review: catchUpNow holds the watermark back on a truncate of a type whose registry has
// Generation() == 0 — which is simply an EMPTY registry (the initial load of an empty table
// never bumps the generation). A TRUNCATE of an empty table (a reset script; a type nobody
// uses yet) therefore pins the change-log cursor: every poll re-reads the whole log since the
// truncate (growing for the 24 h retention, every 2 s, per replica) until an object of that
// type happens to be applied or the prune forces a full reconcile.
//
// Not parallel: it needs the cluster-wide xmin to move (another test's open transaction, e.g.
// TestLateCommitIsNotSkippedByTheWatermark's, would pin it).
func TestTruncateOfEmptyTypeDoesNotPinTheWatermark(t *testing.T) {
	forEachSourceSequential(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		models := newModels(b.st)
		agents := registry.New(registry.Options[string]{
			Type:  store.Agent,
			Build: func(r store.Row) (string, error) { return string(r.Data), nil },
		})
		s := startWithSinks(t, b, "a", []notify.Sink{models, agents}, nil)
		exec(t, b.admin, `TRUNCATE gateway.agents`) // empty table, empty registry
		var txs string
		require.NoError(t, b.admin.QueryRow(context.Background(),
			`SELECT tx::text FROM gateway.registry_changes WHERE op = 'truncate'`).Scan(&txs))
		truncTx, err := strconv.ParseUint(txs, 10, 64)
		require.NoError(t, err)
		// ordinary traffic on another type keeps the feed busy and the polls running
		for i := range 10 {
			exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, "m"+strconv.Itoa(i))
			time.Sleep(100 * time.Millisecond)
		}
		waitFor(t, "models applied", func() bool { return models.Len() == 10 })
		var xs string
		require.NoError(t, b.admin.QueryRow(context.Background(), `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&xs))
		xmin, err := strconv.ParseUint(xs, 10, 64)
		require.NoError(t, err)
		if xmin <= truncTx {
			t.Skipf("cluster xmin %d pinned below the truncate's tx %d by another session", xmin, truncTx)
		}
		require.Eventually(t, func() bool { return s.Stats().Watermark >= xmin }, 3*time.Second, 10*time.Millisecond,
			"watermark %d still pinned at/below the truncate's tx %d (cluster xmin is %d)", s.Stats().Watermark, truncTx, xmin)
	})
}

// Review: TRUNCATE records no version floor, only per-entry eviction tombstones at
// held-version + 1. A row version the registry never held but that an earlier read saw (here
// the periodic reconcile's snapshot, taken while the update's notification was in flight) is
// newer than that tombstone, so the reconcile's deferred repair re-applies it AFTER the
// truncate was applied: the truncated model is resurrected on this replica (and counted as
// drift) until the next periodic reconcile, 5 min later. A slow read-through that read the row
// before the TRUNCATE has the same hole.
// Interleaving: registry holds m@v2; UPDATE m → v4 (notification held up: listener backend
// SIGSTOPped); Reconcile's snapshot sees m@v4 → fresh, repair deferred by ReconcileGrace;
// TRUNCATE; feed resumes: re-read of m@v4 finds nothing (not a delete → ignored), truncate's
// reconcile evicts m@v2 with tombstone v3; catch-up re-reconciles the truncate and advances the
// watermark; repair runs: tombstone 3 < 4 → m@v4 applied.
func TestReconcileRepairResurrectsTruncatedRow(t *testing.T) {
	t.Parallel()
	forEachSource(t, func(t *testing.T, src notify.Source) {
		b := setup(t, src)
		r := startReplica(t, b, "a", nil)
		exec(t, b.admin, `INSERT INTO gateway.models (model_id, model_name) VALUES ('m', 'before')`)
		waitFor(t, "loaded", func() bool { e, ok := r.get("m"); return ok && e.Value.Name == "before" })
		resume := pauseListener(t, b, r)
		exec(t, b.admin, `UPDATE gateway.models SET model_name = 'after' WHERE model_id = 'm'`)
		res := reconcileAsync(r)
		waitFor(t, "reconcile snapshot (m@v4) taken", func() bool { return r.syncer.Stats().Reconciles >= 2 })
		exec(t, b.admin, `TRUNCATE gateway.models`)
		resume()
		waitFor(t, "truncate applied", func() bool { _, ok := r.get("m"); return !ok })
		got := <-res
		require.NoError(t, got.err)
		time.Sleep(time.Second) // polls run; nothing else would remove it before the next reconcile
		e, ok := r.get("m")
		name := ""
		if ok {
			name = e.Value.Name
		}
		require.False(t, ok, "truncated model resurrected by the reconcile repair (as %q, drift counted %d)", name, got.n)
	})
}

// reconcileCounter counts full reconciles of the sink (fullLoad / truncate reloads call
// Reconcile; the periodic reconcile calls Diff).
type reconcileCounter struct {
	*registry.Registry[model]
	reconciles atomic.Int64
}

func (c *reconcileCounter) Reconcile(rows []store.Row, startGen uint64) int {
	c.reconciles.Add(1)
	return c.Registry.Reconcile(rows, startGen)
}

// Review: the prune horizon can lie above every replica's reachable watermark. The change log
// is pruned by changed_at, and the horizon recorded is max(pruned tx)+1 — with no regard for
// the cluster's snapshot xmin. While a transaction older than the newest pruned change is still
// open (an orphaned prepared transaction, a forgotten idle-in-transaction session), every
// snapshot's xmin — hence every watermark a replica can get — stays at or below that old xid,
// below the horizon: each catch-up pass (every PollInterval, 2 s by default) does a FULL
// versioned reload of every type, on every replica, for as long as that transaction stays
// open — the DB hot loop the design rules out. The passage of the retention period is simulated
// by back-dating changed_at. Not parallel: its open transaction pins the cluster-wide xmin.
func TestPruneHorizonAboveXminForcesFullReloadEveryPoll(t *testing.T) {
	b := setup(t, notify.SourceListen)
	ctx := context.Background()
	sink := &reconcileCounter{Registry: newModels(b.st)}
	s := startWithSinks(t, b, "a", []notify.Sink{sink}, nil)

	old, err := b.admin.Begin(ctx) // a transaction that stays open (holds an xid)
	require.NoError(t, err)
	defer old.Rollback(ctx) //nolint:errcheck
	var oldXid string
	require.NoError(t, old.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&oldXid))

	for i := range 3 {
		require.NoError(t, b.st.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'g')`, "m"+strconv.Itoa(i)))
	}
	waitFor(t, "applied", func() bool { return sink.Len() == 3 })
	// a day passes; the log is pruned (the replica's own reconciler calls the same function)
	require.NoError(t, b.st.Exec(ctx, `UPDATE gateway.registry_changes SET changed_at = changed_at - interval '2 days'`))
	_, err = b.st.PruneChanges(ctx, 24*time.Hour)
	require.NoError(t, err)

	time.Sleep(500 * time.Millisecond)
	before := sink.reconciles.Load()
	time.Sleep(time.Second)
	n := sink.reconciles.Load() - before
	require.Less(t, n, int64(3), "full reload of every type on every poll: %d in 1 s (old xid %s, watermark %d)", n, oldXid, s.Stats().Watermark)
}
