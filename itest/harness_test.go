// Package itest holds lockstep's integration tests: a throwaway Postgres cluster (pgtest),
// gateway replicas as real processes of the built binary talking HTTP, official SDK clients,
// and fake upstreams speaking the real wire formats (fakeupstream).
package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func() {
		if binPath != "" {
			_ = os.RemoveAll(filepath.Dir(binPath))
		}
	})
}

// MasterKey is the admin key every test replica runs with.
const MasterKey = "sk-itest-master"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// gatewayBinary builds cmd/gateway once per test run.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lockstep-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "gateway")
		args := []string{"build", "-o", binPath}
		if os.Getenv("LOCKSTEP_ITEST_RACE") != "" { // build the replicas with the race detector
			args = append(args, "-race")
		}
		if tags := os.Getenv("LOCKSTEP_ITEST_TAGS"); tags != "" { // e.g. pprof: GATEWAY_PPROF_ADDR serves net/http/pprof
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, "lockstep/cmd/gateway")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// Gateway is one replica process.
type Gateway struct {
	URL       string
	ReplicaID string
	cmd       *exec.Cmd
	t         testing.TB
	abandoned *atomic.Bool // set by Kill: the cleanup no longer expects a clean exit
	logs      *lockedBuffer
}

// Kill SIGKILLs the replica (a crash: nothing is given back or flushed) and waits until it is
// gone.
func (g *Gateway) Kill(t testing.TB) {
	t.Helper()
	g.abandoned.Store(true)
	require.NoError(t, g.cmd.Process.Kill())
	for g.cmd.ProcessState == nil && syscall.Kill(g.cmd.Process.Pid, 0) == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// Log returns what the replica has logged so far.
func (g *Gateway) Log() string {
	g.logs.mu.Lock()
	defer g.logs.mu.Unlock()
	return g.logs.String()
}

// GatewayOpts tweak a replica.
type GatewayOpts struct {
	Config string   // YAML config file contents (written to a temp file)
	Env    []string // extra environment
	Args   []string // extra serve flags
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type lockedBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

// StartGateway starts a replica on dbURL and waits until it is ready. It is stopped (SIGTERM)
// when the test ends; its log is printed if the test failed.
func StartGateway(t testing.TB, dbURL, replicaID string, o GatewayOpts) *Gateway {
	t.Helper()
	for attempt := 0; ; attempt++ {
		// the port is picked free, but a parallel test may bind it first: try another
		if g := startGateway(t, dbURL, replicaID, o, attempt < 3); g != nil {
			return g
		}
	}
}

// startGateway starts one replica; it returns nil (when retry is allowed) if the port was
// taken meanwhile.
func startGateway(t testing.TB, dbURL, replicaID string, o GatewayOpts, retry bool) *Gateway {
	t.Helper()
	bin := gatewayBinary(t)
	port := freePort(t)
	args := []string{"serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--replica-id", replicaID}
	if dbURL != "" {
		args = append(args, "--database-url", dbURL)
	}
	if o.Config != "" {
		f := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(f, []byte(o.Config), 0o600))
		args = append(args, "--config", f)
	}
	args = append(args, o.Args...)
	cmd := exec.Command(bin, args...)
	level := os.Getenv("LOCKSTEP_ITEST_LOG_LEVEL") // replicas' log level; default info
	if level == "" {
		level = "info"
	}
	cmd.Env = append(append(os.Environ(), "GATEWAY_MASTER_KEY="+MasterKey, "GATEWAY_LOG_LEVEL="+level), o.Env...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	var abandoned atomic.Bool
	g := &Gateway{URL: fmt.Sprintf("http://127.0.0.1:%d", port), ReplicaID: replicaID, cmd: cmd, t: t, abandoned: &abandoned, logs: logs}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if abandoned.Load() {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			// a clean SIGTERM shutdown exits 0; 66 is the race detector's exit code
			if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("replica %s exited with code %d on SIGTERM", replicaID, code)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("replica %s did not stop within 10 s of SIGTERM", replicaID)
		}
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("--- log of replica %s ---\n%s", replicaID, tailString(logs.String(), 8000))
			logs.mu.Unlock()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			if retry && strings.Contains(logs.String(), "address already in use") {
				abandoned.Store(true)
				return nil
			}
			t.Fatalf("replica %s exited before becoming ready: %s", replicaID, logs.String())
		default:
		}
		resp, err := http.Get(g.URL + "/health/readiness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready after 30 s: %s", replicaID, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Pair is two replicas on one fresh database.
type Pair struct {
	DB   string
	A, B *Gateway
}

// StartPair starts replicas A and B on a new database.
func StartPair(t testing.TB, o GatewayOpts) *Pair {
	t.Helper()
	db := pgtest.NewDB(t)
	a := StartGateway(t, db, "a", o)
	b := StartGateway(t, db, "b", o)
	return &Pair{DB: db, A: a, B: b}
}

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// Do sends a request with the master key. body may be nil, a string/[]byte (sent as is) or
// any value (JSON-encoded). Returns status and body.
func (g *Gateway) Do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	return g.DoKey(t, MasterKey, method, path, body)
}

// DoKey is Do with another key ("" for none).
func (g *Gateway) DoKey(t testing.TB, key, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(t, err)
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, g.URL+path, r)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// JSON decodes b into a generic map, failing the test on invalid JSON.
func JSON(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "body: %s", b)
	return m
}

// SyncLag fetches /sync/lag.
func (g *Gateway) SyncLag(t testing.TB) map[string]any {
	t.Helper()
	st, b := g.Do(t, "GET", "/sync/lag", nil)
	require.Equal(t, 200, st, "%s", b)
	return JSON(t, b)
}

// ReadThrough returns the read_through counters of one registry ("models", "guardrails", ...).
func (g *Gateway) ReadThrough(t testing.TB, registry string) map[string]float64 {
	t.Helper()
	rt := g.SyncLag(t)["read_through"].(map[string]any)[registry].(map[string]any)
	out := map[string]float64{}
	for k, v := range rt {
		out[k] = v.(float64)
	}
	return out
}

// PSQL runs SQL on the database directly (no gateway code on the write path).
func PSQL(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

// Eventually polls cond (a condition, never a fixed sleep).
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 15*time.Second, 5*time.Millisecond, "timed out waiting for: %s", what)
}

// pgtestNewMigratedDB creates a database and applies the migrations with `gateway migrate`.
func pgtestNewMigratedDB(t testing.TB) string {
	t.Helper()
	db := pgtest.NewDB(t)
	out, err := exec.Command(gatewayBinary(t), "migrate", "--database-url", db).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return db
}
