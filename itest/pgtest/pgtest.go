// Package pgtest runs a throwaway PostgreSQL cluster for a test binary and hands each test its
// own database, so tests run in parallel against a real server.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// The cluster is initdb'ed into a temp dir (as the `postgres` OS user when running as root,
// since PostgreSQL refuses to run as root), listens on a random loopback port and a unix
// socket in the temp dir, runs with wal_level=logical and durability off (test data only),
// and is stopped and removed when the tests finish, failed or not.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	Dir  string // data dir parent (also holds the unix socket)
	Port int
	Bin  string // directory of the server binaries
	cmd  *exec.Cmd
	cred *syscall.Credential
}

var current *Cluster

// BinDir finds the PostgreSQL server binaries: on PATH, or under /usr/lib/postgresql/*/bin.
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1]), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found on PATH or under /usr/lib/postgresql/*/bin")
}

// StartCluster initdb's and starts a cluster. Stop it with Stop.
func StartCluster() (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockstep-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs a `postgres` OS user to run the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	for attempt := 0; ; attempt++ {
		c.Port, err = freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		err = c.start()
		if err == nil {
			return c, nil
		}
		if attempt == 3 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func (c *Cluster) start() error {
	data := filepath.Join(c.Dir, "data")
	c.cmd = exec.Command(filepath.Join(c.Bin, "postgres"), "-D", data,
		"-p", strconv.Itoa(c.Port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+c.Dir,
		"-c", "wal_level=logical", "-c", "max_wal_senders=20", "-c", "max_replication_slots=20",
		"-c", "max_connections=400", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "shared_buffers=64MB", "-c", "log_min_messages=fatal")
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true, Pdeathsig: syscall.SIGTERM}
	logf, _ := os.Create(filepath.Join(c.Dir, "postgres.log"))
	if logf != nil {
		c.cmd.Stdout, c.cmd.Stderr = logf, logf
		if c.cred != nil {
			_ = logf.Chown(int(c.cred.Uid), int(c.cred.Gid))
		}
	}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := pgx.Connect(context.Background(), c.URL("postgres"))
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		if c.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = c.cmd.Process.Kill()
	_, _ = c.cmd.Process.Wait()
	log, _ := os.ReadFile(filepath.Join(c.Dir, "postgres.log"))
	return fmt.Errorf("postgres did not become ready: %s", tail(string(log), 2000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is a connection URL for database db over loopback TCP.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Stop stops the server (fast shutdown) and removes its directory.
func (c *Cluster) Stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _, _ = c.cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(c.Dir)
}

// Restart stops the server and starts it again on the same port (an outage in tests).
// It calls down between the stop and the start.
func (c *Cluster) Restart(down func()) error {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		_, _ = c.cmd.Process.Wait()
	}
	if down != nil {
		down()
	}
	return c.start()
}

// Main starts the cluster, runs the tests and removes the cluster; use it as TestMain.
func Main(m *testing.M) {
	c, err := StartCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		os.Exit(1)
	}
	current = c
	// remove the cluster even when the run is interrupted
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; c.Stop(); os.Exit(2) }()
	code := m.Run()
	c.Stop()
	os.Exit(code)
}

// Current is the cluster Main started.
func Current() *Cluster { return current }

// NewDB creates an empty database for this test and returns its URL; it is dropped when the
// test ends.
func NewDB(t testing.TB) string {
	t.Helper()
	c := current
	if c == nil {
		t.Fatal("pgtest: no cluster; call pgtest.Main from TestMain")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + strings.ToLower(sanitize(t.Name())) + "_" + hex.EncodeToString(b)
	if len(name) > 63 {
		name = name[len(name)-63:]
		name = "t" + name[1:]
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return c.URL(name)
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
