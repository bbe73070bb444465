package itest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 8, input 9: --help on every subcommand prints every flag with its env var and default,
// on stdout, exit 0.
func TestHelpListsEveryFlagWithEnvAndDefault(t *testing.T) {
	t.Parallel()
	cases := map[string][][]string{ // flag, env var ("" when none), default
		"serve": {
			{"--config FILE", "", "none"},
			{"--addr HOST:PORT", "GATEWAY_ADDR", "0.0.0.0:4000"},
			{"--database-url URL", "DATABASE_URL", "general_settings.database_url"},
			{"--master-key KEY", "GATEWAY_MASTER_KEY", "general_settings.master_key"},
			{"--replica-id ID", "GATEWAY_REPLICA_ID", "HOSTNAME-PID"},
			{"--sync-source SOURCE", "", "listen"},
			{"--log-format FORMAT", "", "json"},
			{"--no-migrate", "", "false"},
			{"--listen-database-url URL", "GATEWAY_LISTEN_DATABASE_URL", "--database-url"},
			{"--read-through-budget N", "GATEWAY_READ_THROUGH_BUDGET", "20"},
		},
		"migrate": {{"--database-url URL", "DATABASE_URL", "no default"}},
		"dev":     {{"--replicas N", "", "2"}, {"--base-port PORT", "", "4000"}},
	}
	for cmd, flags := range cases {
		for _, h := range []string{"--help", "-h"} {
			code, out := runGateway(t, nil, cmd, h)
			require.Zero(t, code, "%s %s: %s", cmd, h, out)
			require.Contains(t, out, "usage: gateway "+cmd)
			for _, f := range flags {
				var line string
				for l := range strings.Lines(out) {
					if strings.HasPrefix(strings.TrimSpace(l), f[0]+" ") || strings.TrimSpace(l) == f[0] {
						line = l
					}
				}
				require.NotEmpty(t, line, "%s %s: no line for %s in:\n%s", cmd, h, f[0], out)
				require.Contains(t, line, "default")
				require.Contains(t, line, f[2], "%s: default", f[0])
				if f[1] != "" {
					require.Contains(t, line, "env "+f[1], "%s: env var", f[0])
				}
			}
		}
	}
	// serve's help also names the master key's fallback and the log level's env var
	_, out := runGateway(t, nil, "serve", "--help")
	require.Contains(t, out, "LITELLM_MASTER_KEY")
	require.Contains(t, out, "GATEWAY_LOG_LEVEL")
}

// Issue 8, input 9 (API.md "Security rules"): serve without a master key refuses a non-loopback
// address with a one-line reason and exit code 2; with no --addr it listens on loopback only.
func TestServeWithoutMasterKeyRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	noKey := []string{"GATEWAY_MASTER_KEY=", "LITELLM_MASTER_KEY=", "DATABASE_URL=", "GATEWAY_ADDR="}
	for _, addr := range []string{"0.0.0.0:4999", ":4999", "[::]:4999", "192.0.2.1:4999"} {
		code, out := runGateway(t, noKey, "serve", "--addr", addr)
		require.Equal(t, 2, code, "%s: %s", addr, out)
		out = strings.TrimSpace(out)
		require.NotContains(t, out, "\n", out)
		require.Contains(t, out, "gateway: serve: refusing to listen on "+addr+" without a master key")
	}
	code, out := runGateway(t, append(noKey[:3:3], "GATEWAY_ADDR=0.0.0.0:4999"), "serve")
	require.Equal(t, 2, code, out)

	// loopback without a key serves; with no address, it picks 127.0.0.1:4000 (not asserted
	// here: the port may be taken), so only the explicit loopback case runs a process
	g := StartGateway(t, "", "nokey", GatewayOpts{Env: []string{"GATEWAY_MASTER_KEY=", "LITELLM_MASTER_KEY=", "DATABASE_URL="}})
	st, b := g.DoKey(t, "", "GET", "/sync/lag", nil)
	require.Equal(t, 200, st, "%s", b)
	// Issue 8, input 9: no database → the sync state says so
	require.Equal(t, "disabled", JSON(t, b)["state"])
}

// Issue 8, input 9: a config YAML with a non-string nested key never panics: a scalar key is
// taken as its text (as LiteLLM's json.dumps does), any other key and a value JSON cannot hold
// are errors naming the field.
func TestConfigWithOddKeysNeverPanics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	base := "model_list:\n  - model_name: x\n    litellm_params:\n      model: openai/x\n      mock_response: hi\n"
	complexKey := write("complex.yaml", base+"      ? [a, b]\n      : 1\n")
	nan := write("nan.yaml", base+"    model_info:\n      weight: .nan\n")
	for _, c := range []struct{ file, want string }{
		{complexKey, "model_list[0].litellm_params: a mapping key must be a string"},
		{nan, "model_list[0].model_info: NaN is not a JSON value"},
	} {
		code, out := runGateway(t, []string{"DATABASE_URL="}, "serve", "--addr", "127.0.0.1:0", "--config", c.file)
		require.Equal(t, 1, code, out)
		require.NotContains(t, out, "panic")
		require.Contains(t, out, c.want)
		require.NotContains(t, strings.TrimSpace(out), "\n", out)
	}
	// an integer key is served as its text
	g := StartGateway(t, "", "intkey", GatewayOpts{Env: []string{"DATABASE_URL="},
		Config: base + "      extra_headers: {1: x}\n    model_info: {2: {3: y}}\n"})
	st, b := g.Do(t, "POST", "/v1/chat/completions", chatBody("x", "hi", false))
	require.Equal(t, 200, st, "%s", b)
}
