package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/pgcluster"
)

// TestScaleSimBench simulates R replicas' change-feed connections in one process against one
// Postgres, exactly as replicas hold them — LISTEN gateway_registry and the replica's own
// channel, a catch-up query, then waiting for notifications — with either liveness scheme:
//
//   - heartbeat (before issue 22): every connection's replica NOTIFYs its own channel every
//     second through a shared pool (8 connections) and hears it back;
//   - probe (now): a connection idle for 1 s runs SELECT 1 on itself.
//
// For each R and scheme it prints: the CPU time the database's backends burn per second
// while idle (every backend of the database, from /proc/<pid>/schedstat), the CPU
// per registry write beyond that, the commit latency of a registry write (INSERT into
// gateway.models, one transaction, 10/s) and the time until all R connections received its
// notification (p50/p99 over the writes). Figures are printed, never asserted:
//
//	LOCKSTEP_BENCH_SIM=10,100,300 go test ./itest/ -run TestScaleSimBench -count=1 -v -timeout 30m
//
// It runs on a cluster of its own whose max_connections is sized for the largest R (R + 150,
// at least 400), so R = 1000 fits.
func TestScaleSimBench(t *testing.T) {
	v := os.Getenv("LOCKSTEP_BENCH_SIM")
	if v == "" {
		t.Skip("set LOCKSTEP_BENCH_SIM=10,100,300 to run the change-feed scale simulation")
	}
	var counts []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		require.NoError(t, err, "LOCKSTEP_BENCH_SIM: %q is not a replica count", s)
		counts = append(counts, n)
	}
	// its own cluster, sized for the largest R: R listeners + the heartbeat pool + the
	// writer (the shared test cluster allows 400)
	c, err := pgcluster.StartWith(pgcluster.Options{MaxConnections: max(400, slices.Max(counts)+150)})
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	fmt.Printf("%-9s %-10s %-20s %-18s %-22s %-22s %s\n", "replicas", "liveness", "idle DB CPU ms/s", "DB CPU ms/write", "commit p50/p99 ms", "reach all p50/p99 ms", "load")
	for i, n := range counts {
		for _, mode := range []string{"heartbeat", "probe"} {
			db, err := c.CreateDB(context.Background(), fmt.Sprintf("sim_%d_%s", i, mode))
			require.NoError(t, err)
			out, err := exec.Command(gatewayBinary(t), "migrate", "--database-url", db).CombinedOutput()
			require.NoError(t, err, "%s", out)
			simulate(t, db, n, mode)
		}
	}
}

func simulate(t *testing.T, db string, r int, mode string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pcfg, err := pgxpool.ParseConfig(db)
	require.NoError(t, err)
	pcfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	defer pool.Close()

	got := make([]atomic.Int64, r) // highest change seq each connection heard
	var wg sync.WaitGroup
	for i := range r {
		ccfg, err := pgconn.ParseConfig(db)
		require.NoError(t, err)
		ccfg.RuntimeParams["application_name"] = fmt.Sprintf("lockstep-sim-%d", i)
		own := fmt.Sprintf("gateway_hb_sim_%d", i)
		ccfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
			if n.Channel != "gateway_registry" {
				return
			}
			var ev struct {
				Seq int64 `json:"seq"`
			}
			if json.Unmarshal([]byte(n.Payload), &ev) == nil && ev.Seq > got[i].Load() {
				got[i].Store(ev.Seq)
			}
		}
		conn, err := pgconn.ConnectConfig(ctx, ccfg)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "LISTEN gateway_registry; LISTEN "+own).ReadAll()
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT count(*) FROM gateway.registry_changes WHERE tx >= '0'::xid8").ReadAll()
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close(context.Background())
			next := time.Now().Add(time.Duration(i) * time.Second / time.Duration(r)) // spread over the second
			for ctx.Err() == nil {
				if !time.Now().Before(next) {
					next = next.Add(time.Second)
					if mode == "heartbeat" {
						go func() {
							_, _ = pool.Exec(ctx, "SELECT pg_notify($1, $2)", own, strconv.FormatInt(time.Now().UnixNano(), 10))
						}()
					} else {
						pctx, c := context.WithTimeout(ctx, 2*time.Second)
						_, _ = conn.Exec(pctx, "SELECT 1").ReadAll()
						c()
					}
				}
				wctx, c := context.WithTimeout(ctx, max(time.Millisecond, time.Until(next)))
				_ = conn.WaitForNotification(wctx)
				c()
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	admin, err := pgx.Connect(context.Background(), db)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	time.Sleep(2 * time.Second) // let every connection reach its steady pace (a measurement window, not a wait for a condition)
	cpu := func() time.Duration {
		rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		require.NoError(t, err)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.NoError(t, err)
		return procCPU(pids)
	}
	// the window is timed from the end of one CPU reading to the end of the next: reading a
	// thousand backends' counters takes a while on a saturated machine
	const window = 10 * time.Second
	c0 := cpu()
	i0 := time.Now()
	time.Sleep(window) // the idle measurement window
	c1 := cpu()
	idle := float64((c1 - c0).Microseconds()) / 1000 / time.Since(i0).Seconds()

	const writes = 50
	var commit, reach []time.Duration
	c2 := cpu()
	w0 := time.Now()
	for i := range writes {
		t0 := time.Now()
		_, err := admin.Exec(ctx, `INSERT INTO gateway.models (model_id, model_name) VALUES ($1, 'sim')`, fmt.Sprint("sim-", i))
		require.NoError(t, err)
		commit = append(commit, time.Since(t0))
		var seq int64
		require.NoError(t, admin.QueryRow(ctx, `SELECT max(seq) FROM gateway.registry_changes`).Scan(&seq))
		for {
			all := true
			for j := range got {
				if got[j].Load() < seq {
					all = false
					break
				}
			}
			if all {
				break
			}
			require.Less(t, time.Since(t0), 30*time.Second, "write %d not heard by every connection", i)
			time.Sleep(100 * time.Microsecond)
		}
		reach = append(reach, time.Since(t0))
		time.Sleep(time.Until(t0.Add(100 * time.Millisecond))) // 10 writes/s
	}
	c3 := cpu()
	perWrite := (float64((c3 - c2).Milliseconds()) - idle*time.Since(w0).Seconds()) / writes
	q := func(d []time.Duration, p float64) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	var load string
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	pw := fmt.Sprintf("%.3f", perWrite)
	if perWrite < 0 { // the writes' CPU is below the idle load's variance: the machine is saturated
		pw = "saturated"
	}
	fmt.Printf("%-9d %-10s %-20.2f %-18s %-22s %-22s %s\n", r, mode, idle, pw,
		fmt.Sprintf("%.2f / %.2f", q(commit, 0.5), q(commit, 0.99)), fmt.Sprintf("%.2f / %.2f", q(reach, 0.5), q(reach, 0.99)), load)
}

// procCPU sums the CPU time of the given processes, every thread of each: the first field of
// /proc/<pid>/task/<tid>/schedstat, the time spent on a CPU in nanoseconds (/proc/<pid>/schedstat
// alone is the main thread only — a Go process does most of its work on other threads — and
// utime/stime in /proc/<pid>/stat count 10 ms ticks, which rounds a backend's occasional
// SELECT 1 to nothing).
func procCPU(pids []int32) time.Duration {
	var ns int64
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				ns += n
			}
		}
	}
	return time.Duration(ns)
}
