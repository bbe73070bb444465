// Package pgcluster runs a throwaway PostgreSQL cluster from the server binaries on PATH (or
// under /usr/lib/postgresql/*/bin): initdb into a temp dir, a random loopback port, a unix
// socket in the temp dir, wal_level=logical. Used by `gateway dev` and by the tests.
//
// PostgreSQL refuses to run as root; when running as root the server runs as the `postgres`
// OS user.
package pgcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	Dir  string // data dir parent (also holds the unix socket)
	Port int
	Bin  string // directory of the server binaries
	opts Options
	cmd  *exec.Cmd
	cred *syscall.Credential
}

// Options are server settings a caller may change; zero fields take the defaults.
type Options struct {
	// MaxConnections is the server's max_connections (default 400). A simulation of many
	// replicas' change-feed connections needs more (PostgreSQL docs, "Connections and
	// Authentication": each slot costs shared memory, reserved at start).
	MaxConnections int
}

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

// Start initdb's and starts a cluster with durability off (throwaway data only). Stop it
// with Stop.
func Start() (*Cluster, error) { return StartWith(Options{}) }

// StartWith is Start with server settings changed by opts.
func StartWith(opts Options) (*Cluster, error) {
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 400
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "lockstep-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Bin: bin, opts: opts}
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
		"-c", "max_connections="+strconv.Itoa(c.opts.MaxConnections), "-c", "fsync=off", "-c", "synchronous_commit=on",
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

// CreateDB creates database name and returns its URL.
func (c *Cluster) CreateDB(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return c.URL(name), nil
}
