package itest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/itest/pgtest"
)

// writeConfig writes a config file into the test's temp dir and returns its path.
func writeConfig(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// oneLineFailure runs the binary, expects exit code want and a one-line "gateway: " reason, and
// returns it.
func oneLineFailure(t *testing.T, want int, env []string, args ...string) string {
	t.Helper()
	code, out := runGateway(t, env, args...)
	require.Equal(t, want, code, out)
	out = strings.TrimSpace(out)
	require.NotContains(t, out, "\n", "one line: %q", out)
	require.True(t, strings.HasPrefix(out, "gateway: "), out)
	return out
}

// Issue 23, item 4: flag > env > config truly. The README's config names its database URL and
// master key as os.environ/NAME; with --database-url given and the master key in the
// environment, NAME need not be set: the config's reference is not resolved for a setting a
// flag or env var already set.
func TestConfigEnvRefNotResolvedWhenFlagOrEnvSet(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	cfg := "general_settings:\n  master_key: os.environ/LOCKSTEP_ITEST_UNSET_MASTER_KEY\n  database_url: os.environ/LOCKSTEP_ITEST_UNSET_DATABASE_URL\n"
	g := StartGateway(t, db, "preset", GatewayOpts{Config: cfg})
	st, b := g.Do(t, "GET", "/sync/lag", nil) // the master key of the environment is the one in force
	require.Equal(t, 200, st, "%s", b)
	require.Equal(t, "streaming", JSON(t, b)["state"])
}

// Issue 23, item 4: every unset os.environ/NAME is reported at once, in one line.
func TestConfigEnvErrorsReportedAtOnce(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "env.yaml", "model_list:\n  - model_name: x\n    litellm_params: {model: openai/x, api_key: os.environ/LOCKSTEP_ITEST_UNSET_A}\n"+
		"general_settings:\n  master_key: os.environ/LOCKSTEP_ITEST_UNSET_B\n  database_url: os.environ/LOCKSTEP_ITEST_UNSET_C\n")
	out := oneLineFailure(t, 1, []string{"DATABASE_URL=", "GATEWAY_MASTER_KEY=", "LITELLM_MASTER_KEY="}, "serve", "--addr", "127.0.0.1:0", "--config", cfg)
	for _, want := range []string{
		"model_list[0].litellm_params.api_key: environment variable LOCKSTEP_ITEST_UNSET_A is not set",
		"general_settings.master_key: environment variable LOCKSTEP_ITEST_UNSET_B is not set",
		"general_settings.database_url: environment variable LOCKSTEP_ITEST_UNSET_C is not set",
	} {
		require.Contains(t, out, want)
	}
}

// Issue 23, item 4: a general_settings key LiteLLM does not define is refused naming it, with
// a "did you mean" for a near miss (master_kye would otherwise start with no master key); a
// key LiteLLM defines that lockstep does not implement is accepted and logged once at start.
func TestGeneralSettingsUnknownKeyRefused(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=", "GATEWAY_MASTER_KEY=", "LITELLM_MASTER_KEY="}
	typo := writeConfig(t, "typo.yaml", "general_settings:\n  master_kye: sk-1234\n")
	out := oneLineFailure(t, 1, env, "serve", "--addr", "127.0.0.1:0", "--config", typo)
	require.Contains(t, out, `general_settings: unknown key "master_kye" (line 2)`)
	require.Contains(t, out, `did you mean "master_key"?`)
	far := writeConfig(t, "far.yaml", "general_settings:\n  frobnication_level: 3\n")
	out = oneLineFailure(t, 1, env, "serve", "--addr", "127.0.0.1:0", "--config", far)
	require.Contains(t, out, `general_settings: unknown key "frobnication_level" (line 2)`)
	require.NotContains(t, out, "did you mean")

	g := StartGateway(t, "", "litellm-keys", GatewayOpts{Env: []string{"DATABASE_URL="},
		Config: "general_settings:\n  disable_spend_logs: true\n  alerting: [slack]\nlitellm_settings: {drop_params: true}\n"})
	log := g.Log()
	require.Equal(t, 1, strings.Count(log, "LiteLLM settings lockstep does not implement"), log)
	for _, k := range []string{"general_settings.disable_spend_logs", "general_settings.alerting", "litellm_settings.drop_params"} {
		require.Contains(t, log, `"`+k+`"`)
	}
}

// Issue 23, item 4: serve binds before it logs "gateway serving": a port in use fails with a
// one-line reason and nothing reads as serving.
func TestServeBindsBeforeLoggingServing(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	code, out := runGateway(t, []string{"DATABASE_URL="}, "serve", "--addr", addr, "--log-format", "json")
	require.Equal(t, 1, code, out)
	require.NotContains(t, out, "gateway serving")
	last := strings.TrimSpace(out)
	last = last[strings.LastIndex(last, "\n")+1:]
	require.Equal(t, "gateway: serve: cannot listen on "+addr+": address already in use (another process holds the port; stop it or pick another --addr)", last)
}

// Issue 23, item 4: --addr (or GATEWAY_ADDR) without HOST:PORT gets a precise message, exit 2.
func TestServeAddrWithoutHostPort(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL=", "GATEWAY_ADDR="}
	require.Equal(t, `gateway: serve: --addr "4100": want HOST:PORT, e.g. 127.0.0.1:4100`, oneLineFailure(t, 2, env, "serve", "--addr", "4100"))
	require.Equal(t, `gateway: serve: GATEWAY_ADDR "localhost": want HOST:PORT, e.g. 127.0.0.1:4000`,
		oneLineFailure(t, 2, []string{"DATABASE_URL=", "GATEWAY_ADDR=localhost"}, "serve"))
}

// Issue 23, item 5: database URL messages. A URL that does not parse is a URL error (not
// "database unreachable"); mysql:// is named as the wrong scheme; a refused connection says
// "connection refused" once (pgconn's sslmode=prefer fallback dials twice).
func TestDatabaseURLMessages(t *testing.T) {
	t.Parallel()
	env := []string{"DATABASE_URL="}
	out := oneLineFailure(t, 1, env, "serve", "--database-url", "postgres://u:secret@127.0.0.1:port/db")
	require.Contains(t, out, "gateway: --database-url: not a valid Postgres URL: ")
	require.Contains(t, out, "invalid port")
	require.NotContains(t, out, "unreachable")
	require.NotContains(t, out, "secret", "the password is masked")

	out = oneLineFailure(t, 1, env, "serve", "--database-url", "mysql://u@127.0.0.1:3306/db")
	require.Equal(t, `gateway: --database-url: scheme "mysql" is not PostgreSQL's (want postgres:// or postgresql://)`, out)
	out = oneLineFailure(t, 1, []string{"DATABASE_URL=mysql://u@127.0.0.1:3306/db"}, "migrate")
	require.Equal(t, `gateway: migrate: DATABASE_URL: scheme "mysql" is not PostgreSQL's (want postgres:// or postgresql://)`, out)

	out = oneLineFailure(t, 1, env, "serve", "--database-url", fmt.Sprintf("postgres://u@127.0.0.1:%d/db?connect_timeout=2", freePort(t)))
	require.Contains(t, out, "database unreachable")
	require.Equal(t, 1, strings.Count(out, "connection refused"), out)
}

// Issue 23, item 5: a YAML syntax error names the line of the problem (yaml.v3 alone says
// line 1 for a mis-indented key on line 3 of a list entry).
func TestConfigYAMLErrorLine(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, "indent.yaml", "model_list:\n  - model_name: x\n   litellm_params: {model: openai/x}\n")
	out := oneLineFailure(t, 1, []string{"DATABASE_URL="}, "serve", "--config", cfg)
	require.Contains(t, out, "yaml: line 3: ")
}

// Issue 23, item 5: `gateway help serve` prints serve's usage (as serve --help); a bad flag
// points to the command's --help.
func TestHelpCommandAndBadFlagHint(t *testing.T) {
	t.Parallel()
	code, help := runGateway(t, nil, "help", "serve")
	require.Zero(t, code, help)
	_, want := runGateway(t, nil, "serve", "--help")
	require.Equal(t, want, help)
	require.Contains(t, help, "usage: gateway serve")
	for _, cmd := range []string{"serve", "migrate", "dev", "healthcheck"} {
		out := oneLineFailure(t, 1, []string{"DATABASE_URL="}, cmd, "--no-such-flag")
		require.Contains(t, out, "flag provided but not defined: -no-such-flag (see gateway "+cmd+" --help)")
	}
}

// Issue 23, item 5: GATEWAY_LOG_LEVEL with a value that is not a level is refused naming the
// allowed ones (it was silently ignored).
func TestLogLevelRefused(t *testing.T) {
	t.Parallel()
	out := oneLineFailure(t, 1, []string{"DATABASE_URL=", "GATEWAY_LOG_LEVEL=verbose"}, "serve", "--addr", "127.0.0.1:0")
	require.Equal(t, `gateway: serve: GATEWAY_LOG_LEVEL: "verbose" is not a log level (want debug, info, warn, error)`, out)
}

// Issue 23, item 5: /routes lists paths and methods with readable names, never a closure's
// name such as func9.
func TestRoutesHaveNoClosureNames(t *testing.T) {
	t.Parallel()
	g := StartGateway(t, "", "routes-names", GatewayOpts{Env: []string{"DATABASE_URL="}})
	st, b := g.Do(t, "GET", "/routes", nil)
	require.Equal(t, 200, st, "%s", b)
	routes := JSON(t, b)["routes"].([]any)
	require.NotEmpty(t, routes)
	closure := regexp.MustCompile(`^func\d+`)
	for _, r := range routes {
		m := r.(map[string]any)
		require.NotEmpty(t, m["path"])
		require.NotEmpty(t, m["methods"], "%v", m)
		name, _ := m["name"].(string)
		require.NotEmpty(t, name, "%v", m)
		require.NotRegexp(t, closure, name, "%v", m)
	}
}
