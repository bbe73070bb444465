package itest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 23: `gateway version` and `gateway --version` print the module version, commit and
// build time on one line, exit 0; a binary stamped the way the Dockerfile stamps it (-ldflags
// -X from its VERSION, COMMIT, BUILD_TIME build args) prints the stamps.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	line := regexp.MustCompile(`^gateway \S+ commit \S+( \(modified\))? built \S+$`)
	for _, arg := range []string{"version", "--version"} {
		code, out := runGateway(t, nil, arg)
		require.Zero(t, code, out)
		require.Regexp(t, line, strings.TrimSpace(out))
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	ld := "-X main.version=v9.8.7 -X main.commit=0123456789abcdef -X main.buildTime=2026-12-01T20:00:00Z"
	out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, "lockstep/cmd/gateway").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "gateway v9.8.7 commit 0123456789abcdef built 2026-12-01T20:00:00Z\n", string(out))
}

// Issue 23: `gateway healthcheck [--url URL]` exits 0 when GET /health/readiness answers 200
// and 1 with a one-line reason otherwise (nothing listening, or a route that is not 200).
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	g := StartGateway(t, "", "hc", GatewayOpts{Env: []string{"DATABASE_URL="}})
	code, out := runGateway(t, nil, "healthcheck", "--url", g.URL+"/health/readiness")
	require.Zero(t, code, out)
	// GATEWAY_ADDR's port is the default target (as in the image)
	code, out = runGateway(t, []string{"GATEWAY_ADDR=0.0.0.0:" + strings.TrimPrefix(g.URL, "http://127.0.0.1:")}, "healthcheck")
	require.Zero(t, code, out)

	dead := fmt.Sprintf("http://127.0.0.1:%d/health/readiness", freePort(t))
	for url, want := range map[string]string{dead: "not reachable", g.URL + "/no/such/route": "not ready (HTTP 404)"} {
		code, out = runGateway(t, nil, "healthcheck", "--url", url, "--timeout", "2s")
		require.Equal(t, 1, code, out)
		out = strings.TrimSpace(out)
		require.NotContains(t, out, "\n", out)
		require.Contains(t, out, "gateway: healthcheck: "+url+": "+want)
	}
}
