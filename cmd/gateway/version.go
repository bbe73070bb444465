package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"time"
)

// Stamped at link time by the Dockerfile (its build args VERSION, COMMIT and BUILD_TIME):
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=<sha> -X main.buildTime=<RFC 3339>"
//
// Empty: taken from the binary's build info (runtime/debug.ReadBuildInfo: the module version,
// and vcs.revision / vcs.time / vcs.modified, which `go build` records in a git checkout).
var version, commit, buildTime string

// buildInfo is what the binary knows about its build.
type buildInfo struct {
	Version   string // module version, "(devel)" for a plain go build of a checkout
	Commit    string // VCS revision, "" when unknown
	BuildTime string // RFC 3339; the commit time when built from a checkout without a stamp
	Modified  bool   // built from a checkout with uncommitted changes
}

// readBuildInfo merges the -ldflags stamps (which win) over the Go build info.
func readBuildInfo() buildInfo {
	var b buildInfo
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.time":
				b.BuildTime = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	b.Version = firstNonEmpty(version, b.Version, "unknown")
	b.Commit = firstNonEmpty(commit, b.Commit)
	b.BuildTime = firstNonEmpty(buildTime, b.BuildTime)
	return b
}

// buildVersion is the one-word version gateway.replicas and /sync/cluster report: the module
// version, "+" and the first 12 characters of the commit when known, "+dirty" for a modified
// checkout (e.g. "v1.2.3+0123456789ab", "(devel)+0123456789ab+dirty").
func buildVersion() string {
	b := readBuildInfo()
	v := b.Version
	if len(b.Commit) >= 12 {
		v += "+" + b.Commit[:12]
	} else if b.Commit != "" {
		v += "+" + b.Commit
	}
	if b.Modified {
		v += "+dirty"
	}
	return v
}

// printVersion is `gateway version` / `gateway --version`: one line, e.g.
// "gateway v1.2.3 commit 0123abc… built 2026-12-01T20:30:00Z" (unknown parts say "unknown").
func printVersion() {
	b := readBuildInfo()
	c := firstNonEmpty(b.Commit, "unknown")
	if b.Modified {
		c += " (modified)"
	}
	fmt.Printf("gateway %s commit %s built %s\n", b.Version, c, firstNonEmpty(b.BuildTime, "unknown"))
}

// healthcheck is `gateway healthcheck [--url URL]`: GET URL (default
// http://127.0.0.1:4000/health/readiness, or the GATEWAY_ADDR port) with a 3 s timeout; nil on
// 200, else an error with a one-line reason (exit 1). For container health checks: the
// distroless image has no curl (Dockerfile HEALTHCHECK, compose.yaml healthcheck).
func healthcheck(ctx context.Context, args []string) error {
	fs := newCommand("healthcheck", "gateway healthcheck [flags]",
		"Exits 0 when the replica answers GET /health/readiness with 200, 1 otherwise (one-line\n"+
			"reason on stderr). For container health checks: the image has no curl.")
	url := fs.String("url", "", "readiness `URL` (default http://127.0.0.1:PORT/health/readiness, PORT from GATEWAY_ADDR, else 4000)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after `DURATION`")
	if err := fs.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("healthcheck: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("healthcheck: unexpected argument %q", fs.Arg(0))
	}
	u := *url
	if u == "" {
		port := "4000"
		if _, p, err := splitAddr(os.Getenv("GATEWAY_ADDR")); err == nil {
			port = p
		}
		u = "http://127.0.0.1:" + port + "/health/readiness"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: --url %q: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %s: not reachable: %w", u, errors.Unwrap(err))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: not ready (HTTP %d)", u, resp.StatusCode)
	}
	fmt.Println("ready")
	return nil
}
