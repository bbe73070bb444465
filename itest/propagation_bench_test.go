package itest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/pkg/notify"
)

// BenchmarkPropagation: 1000 model writes on A at a steady rate (200/s unless LOCKSTEP_BENCH_RATE), and for each the
// time from the commit until every other replica applied it (issue 22: SQL commit → applied
// on all replicas), with where that time goes and what it costs.
//
// Nothing probes the replicas while the writes run: each replica records the path of every
// notified change (notify's trace: notification received, decoded, taken by the applier,
// re-read sent, answered, published — monotonic readings, served as wall-clock µs by
// GET /sync/trace), and the figures are computed from those records once every replica has
// applied the last write. "Commit" is the trigger's clock_timestamp, taken just before the
// commit, so the figures include the commit itself. (An earlier version polled B's registry
// over HTTP every 100 µs per write in flight: the polling loaded B and the machine it
// measured, and B's p99 was the cluster's worst.)
//
// Printed, not asserted:
//   - commit → applied on all receivers (per write, the slowest receiver): p50, p99, max; and
//     per receiver (median p50, median p99, max p99);
//   - A's response → applied on B (the figure earlier runs printed);
//   - per stage (notify: trigger → received; parse; queue: decoded → taken by the applier;
//     prepare; reread: the re-read's round trip; publish: build and publish), over every
//     receiver and write: p50, p99, max, and the mean of each stage over the slowest 1 %
//     (where the p99 goes);
//   - CPU: per replica, its processes' CPU time (every thread's /proc/<pid>/task/*/schedstat)
//     over the writes less its idle rate, ÷ writes; idle CPU per replica per second (measured
//     over 2 s before the writes); Postgres CPU per write over the database's backends, split into
//     the listeners, the receivers' pools (their re-reads), the writer's pool and the rest;
//   - the load average before and after.
//
// LOCKSTEP_BENCH_REPLICAS=N (default 2) starts N replicas on the database: A writes, the
// other N-1 receive. LOCKSTEP_BENCH_PERF=<file> records B's CPU profile with perf(1) (perf
// record -g) while the writes run; LOCKSTEP_BENCH_PERF_TARGET=writer profiles A instead, =all
// the whole machine (perf record -a: every replica, Postgres, the benchmark itself). LOCKSTEP_BENCH_ENV=K=V,... adds to every replica's
// environment (GOMAXPROCS=1, GOGC=..., to compare runtime settings). LOCKSTEP_BENCH_RATE=W
// (writes per second, 1..1000, default 200) sets A's write rate: with 20 replicas on 2 cores
// each write costs ~9 ms of CPU in all (19 receivers' apply, Postgres, the writer), so 200/s
// keeps the cores ~95 % busy and the figures are queueing; a lower rate shows the path's own
// latency.
//
//	go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
//	LOCKSTEP_BENCH_SOURCE=logical go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
//	LOCKSTEP_BENCH_REPLICAS=20 go test ./itest/ -run '^$' -bench Propagation -benchtime 1x
func BenchmarkPropagation(b *testing.B) {
	const writes = 1000
	rate := 200 // per second
	if v := os.Getenv("LOCKSTEP_BENCH_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err, "LOCKSTEP_BENCH_RATE")
		require.True(b, n >= 1 && n <= 1000, "LOCKSTEP_BENCH_RATE must be 1..1000 writes per second, got %d", n)
		rate = n
	}
	const idleWindow = 2 * time.Second
	for i := 0; i < b.N; i++ {
		var args []string
		if src := os.Getenv("LOCKSTEP_BENCH_SOURCE"); src != "" { // listen (default) or logical
			args = []string{"--sync-source", src}
		}
		var env []string
		if e := os.Getenv("LOCKSTEP_BENCH_ENV"); e != "" { // e.g. GOMAXPROCS=1,GOGC=200: the replicas' environment
			env = strings.Split(e, ",")
		}
		p := StartPair(b, GatewayOpts{Args: args, Env: env})
		recv := []*Gateway{p.B}
		if v := os.Getenv("LOCKSTEP_BENCH_REPLICAS"); v != "" {
			n, err := strconv.Atoi(v)
			require.NoError(b, err, "LOCKSTEP_BENCH_REPLICAS")
			for r := 2; r < n; r++ {
				recv = append(recv, StartGateway(b, p.DB, fmt.Sprintf("r%d", r), GatewayOpts{Args: args, Env: env}))
			}
		}
		ctx := context.Background()
		admin, err := pgx.Connect(ctx, p.DB)
		require.NoError(b, err)
		defer admin.Close(ctx)
		pgCPU := func() map[int32]backendCPU { // per backend of the database, this session's excluded
			rows, err := admin.Query(ctx, `SELECT pid, COALESCE(application_name, '') FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
			require.NoError(b, err)
			out := map[int32]backendCPU{}
			for rows.Next() {
				var pid int32
				var app string
				require.NoError(b, rows.Scan(&pid, &app))
				kind := "other"
				switch {
				case strings.HasPrefix(app, "lockstep-listener-"):
					kind = "listeners"
				case app == "lockstep-pool-a":
					kind = "writer's pool"
				case strings.HasPrefix(app, "lockstep-pool-"):
					kind = "receivers' pools"
				}
				out[pid] = backendCPU{kind: kind, cpu: procCPU([]int32{pid})}
			}
			require.NoError(b, rows.Err())
			return out
		}
		all := append([]*Gateway{p.A}, recv...)
		cpu := func() []time.Duration {
			out := make([]time.Duration, len(all))
			for j, g := range all {
				out[j] = procCPU([]int32{int32(g.cmd.Process.Pid)})
			}
			return out
		}
		runs := func() []int64 {
			out := make([]int64, len(all))
			for j, g := range all {
				out[j] = procRuns(int32(g.cmd.Process.Pid))
			}
			return out
		}
		loadBefore := loadAvg()

		// idle: every replica streaming, nothing written
		i0, r0, pg0, t0 := cpu(), runs(), pgCPU(), time.Now()
		time.Sleep(idleWindow) // the idle measurement window, not a wait for a condition
		i1, r1, pg1, t1 := cpu(), runs(), pgCPU(), time.Now()
		idleSecs := t1.Sub(t0).Seconds()

		gcs := func() (cycles, alloc []float64) {
			cycles, alloc = make([]float64, len(all)), make([]float64, len(all))
			for j, g := range all {
				m := goMetrics(b, g, "go_gc_duration_seconds_count", "go_memstats_alloc_bytes_total")
				cycles[j], alloc[j] = m[0], m[1]
			}
			return cycles, alloc
		}
		gc1, al1 := gcs()
		var perf *exec.Cmd
		if out := os.Getenv("LOCKSTEP_BENCH_PERF"); out != "" { // profile B (a receiver), A or the machine while the writes run
			target := []string{"-p", strconv.Itoa(p.B.cmd.Process.Pid)}
			switch t := os.Getenv("LOCKSTEP_BENCH_PERF_TARGET"); t {
			case "", "receiver":
			case "writer":
				target = []string{"-p", strconv.Itoa(p.A.cmd.Process.Pid)}
			case "all":
				target = []string{"-a"}
			default:
				b.Fatalf("LOCKSTEP_BENCH_PERF_TARGET: want receiver, writer or all, got %q", t)
			}
			perf = exec.Command("perf", append([]string{"record", "-g", "-o", out}, target...)...)
			require.NoError(b, perf.Start())
		}
		acked := make(map[string]time.Time, writes) // id → A's response
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for w := range writes {
			<-tick.C
			id := fmt.Sprintf("prop-%d-%d", i, w)
			st, body := p.A.Do(b, "POST", "/model/new", map[string]any{
				"model_name": "prop-" + id, "model_info": map[string]any{"id": id},
				"litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"},
			})
			require.Equal(b, 200, st, "%s", body)
			acked[id] = time.Now()
		}
		tick.Stop()
		var head int64
		require.NoError(b, admin.QueryRow(ctx, `SELECT max(seq) FROM gateway.registry_changes`).Scan(&head))
		for _, g := range recv {
			deadline := time.Now().Add(30 * time.Second)
			for appliedSeq(b, g) < head {
				require.True(b, time.Now().Before(deadline), "replica %s did not apply seq %d within 30 s", g.ReplicaID, head)
				time.Sleep(10 * time.Millisecond)
			}
		}
		c1, r2, pg2, t2 := cpu(), runs(), pgCPU(), time.Now()
		gc2, al2 := gcs()
		if perf != nil {
			_ = perf.Process.Signal(os.Interrupt)
			_ = perf.Wait()
		}
		loadAfter := loadAvg()

		// CPU per notification per replica: over the writes, less the idle rate
		busySecs := t2.Sub(t1).Seconds()
		perNote := make([]float64, len(all)) // ms per write
		idleRate := make([]float64, len(all))
		idleRuns := make([]float64, len(all))    // thread wake-ups per second, idle
		runsPerNote := make([]float64, len(all)) // thread wake-ups per write, less the idle rate
		for j := range all {
			idleRate[j] = float64((i1[j] - i0[j]).Microseconds()) / 1000 / idleSecs
			perNote[j] = (float64((c1[j]-i1[j]).Microseconds())/1000 - idleRate[j]*busySecs) / writes
			idleRuns[j] = float64(r1[j]-r0[j]) / idleSecs
			runsPerNote[j] = (float64(r2[j]-r1[j]) - idleRuns[j]*busySecs) / writes
		}
		pgIdleBy, pgBusyBy := sumCPUDelta(pg0, pg1), sumCPUDelta(pg1, pg2)
		var pgIdle, pgPerWrite float64
		var pgSplit []string
		for _, kind := range []string{"listeners", "receivers' pools", "writer's pool", "other"} {
			idle := float64(pgIdleBy[kind].Microseconds()) / 1000 / idleSecs
			per := (float64(pgBusyBy[kind].Microseconds())/1000 - idle*busySecs) / writes
			pgIdle, pgPerWrite = pgIdle+idle, pgPerWrite+per
			pgSplit = append(pgSplit, fmt.Sprintf("%s %.3f", kind, per))
		}

		// latencies and stages from every receiver's trace
		var perWriteAll = map[string]float64{} // id → slowest receiver's commit → applied, ms
		var over10 = map[string]int{}          // id → receivers that took over 10 ms
		type worst struct {
			recv   int
			stages [7]float64
		}
		var worstOf = map[string]worst{} // id → its slowest receiver and that receiver's stages
		var samples [][7]float64         // per (receiver, write): notify, parse, queue, prepare, reread, publish, total (ms)
		var recvP50, recvP99 []float64
		var ab []float64 // A's response → applied on B
		missing := 0
		for j, g := range recv {
			tr := syncTrace(b, g)
			seen := map[string]bool{}
			var mine []float64
			for _, c := range tr {
				at, ok := acked[c.ID]
				if !ok || seen[c.ID] || c.PublishedUs == 0 || c.CommittedUs == 0 {
					continue
				}
				seen[c.ID] = true
				total := float64(c.PublishedUs-c.CommittedUs) / 1000
				mine = append(mine, total)
				perWriteAll[c.ID] = max(perWriteAll[c.ID], total)
				if total > 10 {
					over10[c.ID]++
				}
				if j == 0 {
					ab = append(ab, float64(c.PublishedUs-at.UnixMicro())/1000)
				}
				d := func(from, to int64) float64 {
					if from == 0 || to == 0 {
						return 0
					}
					return float64(to-from) / 1000
				}
				s := [7]float64{d(c.CommittedUs, c.ReceivedUs), d(c.ReceivedUs, c.ParsedUs), d(c.ParsedUs, c.DequeuedUs),
					d(c.DequeuedUs, c.RereadSentUs), d(c.RereadSentUs, c.RereadAnsweredUs), d(c.RereadAnsweredUs, c.PublishedUs), total}
				if c.RereadSentUs == 0 { // held already: no re-read stages
					s[3], s[4], s[5] = 0, 0, d(c.DequeuedUs, c.PublishedUs)
				}
				samples = append(samples, s)
				if total >= perWriteAll[c.ID] {
					worstOf[c.ID] = worst{recv: j + 1, stages: s}
				}
			}
			missing += writes - len(seen)
			if len(mine) > 0 {
				recvP50 = append(recvP50, quantile(mine, 0.5))
				recvP99 = append(recvP99, quantile(mine, 0.99))
			}
		}
		allVals := make([]float64, 0, len(perWriteAll))
		for _, v := range perWriteAll {
			allVals = append(allVals, v)
		}
		require.NotEmpty(b, allVals, "no traced write on any receiver")
		fmt.Printf("propagation: %d replicas (1 writer, %d receivers), %d writes at %d/s; load average before %s, after %s\n",
			len(all), len(recv), writes, rate, loadBefore, loadAfter)
		fmt.Printf("  commit → applied on all receivers: p50=%.2fms p99=%.2fms max=%.2fms (writes traced on every receiver: %d of %d; receiver-write pairs untraced: %d)\n",
			quantile(allVals, 0.5), quantile(allVals, 0.99), quantile(allVals, 1), len(allVals), writes, missing)
		fmt.Printf("  per receiver commit → applied: median p50=%.2fms median p99=%.2fms max p99=%.2fms\n",
			quantile(recvP50, 0.5), quantile(recvP99, 0.5), quantile(recvP99, 1))
		// the slowest writes, in write order: clustered in time (a pause somewhere: GC, a
		// checkpoint, autovacuum) or spread (queueing), and one slow receiver or many
		slow := slices.SortedFunc(maps.Keys(perWriteAll), func(x, y string) int { return cmp.Compare(perWriteAll[y], perWriteAll[x]) })
		slow = slow[:min(12, len(slow))]
		slices.SortFunc(slow, func(x, y string) int { return cmp.Compare(writeIndex(x), writeIndex(y)) })
		var sl []string
		for _, id := range slow {
			w := worstOf[id]
			k := 0 // the stage that took longest
			for x := range 6 {
				if w.stages[x] > w.stages[k] {
					k = x
				}
			}
			sl = append(sl, fmt.Sprintf("#%d %.1fms r%d %s %.1fms (%d over 10 ms)", writeIndex(id), perWriteAll[id], w.recv,
				[]string{"notify", "parse", "queue", "prepare", "reread", "publish"}[k], w.stages[k], over10[id]))
		}
		fmt.Printf("  slowest writes (write #, slowest receiver, its longest stage, receivers over 10 ms): %s\n", strings.Join(sl, "; "))
		if len(ab) > 0 {
			fmt.Printf("  A's response → applied on B: p50=%.2fms p99=%.2fms max=%.2fms\n", quantile(ab, 0.5), quantile(ab, 0.99), quantile(ab, 1))
		}
		names := []string{"notify", "parse", "queue", "prepare", "reread", "publish", "total"}
		sort.Slice(samples, func(x, y int) bool { return samples[x][6] < samples[y][6] })
		tail := samples[len(samples)*99/100:]
		fmt.Printf("  %-8s %9s %9s %9s %14s\n", "stage", "p50 ms", "p99 ms", "max ms", "slowest 1% ms")
		for k, n := range names {
			col := make([]float64, len(samples))
			for x, s := range samples {
				col[x] = s[k]
			}
			var mean float64
			for _, s := range tail {
				mean += s[k] / float64(len(tail))
			}
			fmt.Printf("  %-8s %9.3f %9.3f %9.3f %14.3f\n", n, quantile(col, 0.5), quantile(col, 0.99), quantile(col, 1), mean)
		}
		rcpu := slices.Clone(perNote[1:])
		ridle := slices.Clone(idleRate[1:])
		fmt.Printf("  CPU per notification per receiver: median %.3f ms, max %.3f ms (writer A: %.3f ms per write); idle CPU per replica: median %.2f ms/s\n",
			quantile(rcpu, 0.5), quantile(rcpu, 1), perNote[0], quantile(ridle, 0.5))
		fmt.Printf("  thread wake-ups (schedstat timeslices) per notification per receiver: median %.1f; idle wake-ups per replica: median %.1f/s\n",
			quantile(slices.Clone(runsPerNote[1:]), 0.5), quantile(slices.Clone(idleRuns[1:]), 0.5))
		gcRecv, alRecv := make([]float64, len(recv)), make([]float64, len(recv))
		for j := range recv {
			gcRecv[j] = gc2[j+1] - gc1[j+1]
			alRecv[j] = (al2[j+1] - al1[j+1]) / writes / 1024
		}
		fmt.Printf("  Go heap allocated per notification per receiver: median %.1f KB; GC cycles during the writes: per receiver median %.0f, max %.0f (writer A: %.0f)\n",
			quantile(alRecv, 0.5), quantile(slices.Clone(gcRecv), 0.5), quantile(slices.Clone(gcRecv), 1), gc2[0]-gc1[0])
		fmt.Printf("  Postgres CPU per write (the database's backends, less idle): %.3f ms (%s); idle %.2f ms/s\n", pgPerWrite, strings.Join(pgSplit, ", "), pgIdle)
		b.ReportMetric(quantile(allVals, 0.5), "all-p50-ms")
		b.ReportMetric(quantile(allVals, 0.99), "all-p99-ms")
		b.ReportMetric(quantile(rcpu, 0.5), "cpu-ms/notification")
		b.ReportMetric(pgPerWrite, "pg-cpu-ms/write")
	}
}

// goMetrics reads the named counters from the replica's /metrics (the Go collector's), in
// order; the scrape itself allocates, the same amount before and after the writes.
func goMetrics(b *testing.B, g *Gateway, names ...string) []float64 {
	st, body := g.Do(b, "GET", "/metrics", nil)
	require.Equal(b, 200, st, "%s", body)
	out := make([]float64, len(names))
	for i, name := range names {
		found := false
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				require.NoError(b, err)
				out[i], found = n, true
				break
			}
		}
		require.True(b, found, "no %s in %s's /metrics", name, g.ReplicaID)
	}
	return out
}

// writeIndex is the write number w of a benchmark model id prop-<i>-<w>.
func writeIndex(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// procRuns is how many times the process's threads were scheduled onto a CPU (the third field
// of each /proc/<pid>/task/<tid>/schedstat: timeslices run), a count of its wake-ups.
func procRuns(pid int32) int64 {
	var n int64
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 2 {
			v, _ := strconv.ParseInt(f[2], 10, 64)
			n += v
		}
	}
	return n
}

// quantile is the q-quantile of v (sorted in place; q=1: the maximum).
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

// backendCPU is one backend's CPU time and what it serves (its application_name's kind).
type backendCPU struct {
	kind string
	cpu  time.Duration
}

// sumCPUDelta is the CPU the backends spent from one reading to the next, per kind: a backend
// present only in the later reading started meanwhile and counts whole.
func sumCPUDelta(before, after map[int32]backendCPU) map[string]time.Duration {
	d := map[string]time.Duration{}
	for pid, c := range after {
		d[c.kind] += c.cpu - before[pid].cpu
	}
	return d
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

func appliedSeq(b *testing.B, g *Gateway) int64 {
	v, _ := g.SyncLag(b)["applied_seq"].(float64)
	return int64(v)
}

// syncTrace fetches GET /sync/trace's changes.
func syncTrace(b testing.TB, g *Gateway) []notify.TracedChange {
	st, body := g.Do(b, "GET", "/sync/trace", nil)
	require.Equal(b, 200, st, "%s", body)
	var tr notify.Trace
	require.NoError(b, json.Unmarshal(body, &tr))
	return tr.Changes
}
