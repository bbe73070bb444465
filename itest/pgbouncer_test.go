package itest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// startPgBouncer starts a real PgBouncer (Debian package `pgbouncer`) in transaction pooling
// mode on a free port in front of dbURL's database, as the postgres OS user when the test runs
// as root (PgBouncer refuses root), and returns the URL that goes through it. Missing
// pgbouncer: the test is skipped, or fails under CI=true (.ci/run installs it).
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer"
		if _, serr := os.Stat(bin); serr != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("pgbouncer not installed (apt-get install -y pgbouncer); required under CI=true")
			}
			t.Skip("pgbouncer not installed (apt-get install -y pgbouncer)")
		}
	}
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	db := strings.TrimPrefix(u.Path, "/")
	dir, err := os.MkdirTemp("", "pgbouncer-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	port := freePort(t)
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = %s
`, db, u.Hostname(), u.Port(), db, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "users.txt"), []byte(`"postgres" ""`+"\n"), 0o644))
	cfg := filepath.Join(dir, "pgbouncer.ini")
	require.NoError(t, os.WriteFile(cfg, []byte(ini), 0o644))
	cmd := exec.Command(bin, cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root needs a postgres OS user for pgbouncer")
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Logf("--- pgbouncer ---\n%s%s", out.String(), tailString(string(log), 4000))
		}
	})
	bouncer := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, db)
	require.Eventually(t, func() bool {
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer exited: %s%s", out.String(), log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, bouncer)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx) == nil
	}, 15*time.Second, 50*time.Millisecond, "pgbouncer accepting connections")
	return bouncer
}

func servesModelID(t testing.TB, g *Gateway, id string) bool {
	st, b := g.Do(t, "GET", "/model/info?litellm_model_id="+id, nil)
	return st == 200 && strings.Contains(string(b), id)
}

// TestPgBouncerWithoutListenURLDegrades (issue 10): a replica whose only URL goes through
// PgBouncer in transaction pooling: migrations, the pool and management writes work (no
// prepared statements kept across transactions); the feed's LISTEN cannot hear its own
// heartbeat, so /sync/lag and /sync/cluster say "degraded" with a reason naming transaction
// pooling; a model written with psql meanwhile still reaches the replica (change-log poll),
// and an unknown name is still answered (the barrier falls back to a change-log read).
func TestPgBouncerWithoutListenURLDegrades(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	bouncer := startPgBouncer(t, db)
	g := StartGateway(t, bouncer, "pgb", GatewayOpts{})
	Eventually(t, "degraded", func() bool { return g.SyncLag(t)["state"] == "degraded" })
	lag := g.SyncLag(t)
	require.Contains(t, lag["reason"], "transaction pooling")
	require.Contains(t, lag["reason"], "--listen-database-url")

	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params)
		VALUES ('via-psql', 'via-psql', '{"model": "openai/x", "mock_response": "ok"}')`)
	Eventually(t, "model written with psql reaches the degraded replica", func() bool { return servesModelID(t, g, "via-psql") })

	st, b := g.Do(t, "POST", "/model/new", map[string]any{"model_name": "via-gw", "litellm_params": map[string]any{"model": "openai/x", "mock_response": "ok"}})
	require.Equal(t, 200, st, "write through the pool via PgBouncer: %s", b)
	st, b = g.Do(t, "POST", "/v1/chat/completions", chatBody("via-gw", "x", false))
	require.Equal(t, 200, st, "%s", b)
	st, b = g.Do(t, "POST", "/v1/chat/completions", chatBody("nowhere", "x", false))
	require.Equal(t, 400, st, "%s", b)
	require.Equal(t, unknownModelText("nowhere"), errMessage(t, b))

	Eventually(t, "cluster view shows the reason", func() bool {
		v := g.cluster(t)
		return len(v.Replicas) == 1 && v.Replicas[0].State == "degraded" && !v.Converged
	})
	st, b = g.Do(t, "GET", "/sync/cluster", nil)
	require.Equal(t, 200, st)
	require.Contains(t, string(b), "transaction pooling")
	require.Equal(t, "degraded", g.SyncLag(t)["state"], "stays degraded: no reconnect loop")
	st, b = g.Do(t, "GET", "/health/readiness", nil)
	require.Equal(t, 200, st)
	require.Equal(t, "connected", JSON(t, b)["db"], "degraded still holds a working connection")
}

// TestPgBouncerWithDirectListenURLStreams: the same pool through PgBouncer with
// --listen-database-url pointing straight at Postgres streams: notifications arrive and are
// applied (no repair by the poll), the heartbeat comes back.
func TestPgBouncerWithDirectListenURLStreams(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	bouncer := startPgBouncer(t, db)
	g := StartGateway(t, bouncer, "pgb-direct", GatewayOpts{Args: []string{"--listen-database-url", db}})
	Eventually(t, "heartbeat heard", func() bool { return g.SyncLag(t)["heartbeat_rtt_ms"].(float64) > 0 })
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params)
		VALUES ('direct', 'direct', '{"model": "openai/x", "mock_response": "ok"}')`)
	Eventually(t, "model applied", func() bool { return servesModelID(t, g, "direct") })
	lag := g.SyncLag(t)
	require.Equal(t, "streaming", lag["state"])
	require.Nil(t, lag["reason"])
	require.Equal(t, 0.0, lag["gaps_repaired"], "applied from its notification, not repaired by the poll")
}
