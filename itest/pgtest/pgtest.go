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
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"lockstep/pkg/pgcluster"
)

var current *pgcluster.Cluster

// Main starts the cluster, runs the tests, removes the cluster and runs cleanups (also when
// interrupted); use it as TestMain.
func Main(m *testing.M, cleanups ...func()) {
	c, err := pgcluster.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		os.Exit(1)
	}
	current = c
	// remove the cluster even when the run is interrupted
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	stop := func() {
		c.Stop()
		for _, f := range cleanups {
			f()
		}
	}
	go func() { <-sig; stop(); os.Exit(2) }()
	code := m.Run()
	stop()
	os.Exit(code)
}

// Current is the cluster Main started.
func Current() *pgcluster.Cluster { return current }

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
