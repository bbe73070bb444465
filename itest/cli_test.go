package itest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/itest/pgtest"
	"lockstep/pkg/pgcluster"
)

// runGateway runs the binary to completion and returns its exit code and output.
// freePortPair returns a port p such that p and p+1 were both free.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 50 {
		p := freePort(t)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no two consecutive free ports")
	return 0
}

func runGateway(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	require.NoError(t, err)
	return 0, string(out)
}

func TestCLIBadInputsExitWithOneLineReason(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	badProvider := write("bad-provider.yaml", "model_list:\n  - model_name: x\n    litellm_params:\n      model: nosuch/x\n")
	missingEnv := write("missing-env.yaml", "general_settings:\n  master_key: os.environ/LOCKSTEP_TEST_UNSET_VAR\n")
	badObjects := write("bad-objects.yaml", "general_settings:\n  supported_db_objects: [models, widgets]\n")
	badRetention := write("bad-retention.yaml", "general_settings:\n  maximum_spend_logs_retention_period: 7 days\n")
	badYAML := write("bad.yaml", "model_list: [\n")
	typoSection := write("typo-section.yaml", "modl_list: []\nlitellm_settings: {drop_params: true}\n")
	typoEntry := write("typo-entry.yaml", "model_list:\n  - model_name: x\n    bogus_key: 1\n    litellm_params: {model: openai/x}\n")
	badType := write("bad-type.yaml", "router_settings: {num_retries: abc}\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"serve", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{"bad sync source", []string{"serve", "--sync-source", "carrier-pigeon"}, `--sync-source: "carrier-pigeon"`},
		{"bad log format", []string{"serve", "--log-format", "xml"}, "--log-format"},
		{"bad provider in config", []string{"serve", "--config", badProvider}, `model_list[0] (x): litellm_params.model: unknown provider "nosuch"`},
		{"missing env var", []string{"serve", "--config", missingEnv}, "general_settings.master_key: environment variable LOCKSTEP_TEST_UNSET_VAR is not set"},
		{"unknown db object", []string{"serve", "--config", badObjects}, `general_settings.supported_db_objects[1]: unknown object "widgets"`},
		{"bad spend log retention", []string{"serve", "--config", badRetention}, `general_settings.maximum_spend_logs_retention_period: duration: "7 days" is not a duration`},
		{"unknown top-level key", []string{"serve", "--config", typoSection}, `unknown top-level key "modl_list" (line 1)`},
		{"unknown model_list field", []string{"serve", "--config", typoEntry}, `model_list[0]: unknown field "bogus_key" (line 3); accepted: model_name, litellm_params, model_info`},
		{"wrong type named", []string{"serve", "--config", badType}, "router_settings.num_retries: line 1: cannot unmarshal !!str `abc` into int"},
		{"malformed yaml", []string{"serve", "--config", badYAML}, "config " + badYAML},
		{"missing config file", []string{"serve", "--config", filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"unreachable database", []string{"serve", "--database-url", "postgres://u@127.0.0.1:1/db?connect_timeout=2"}, "database unreachable"},
		{"migrate without url", []string{"migrate"}, "--database-url (or DATABASE_URL) is required"},
		{"dev bad replicas", []string{"dev", "--replicas", "0"}, "--replicas"},
	}
	for _, c := range cases {
		code, out := runGateway(t, []string{"DATABASE_URL="}, c.args...)
		require.NotZero(t, code, "%s: exit code", c.name)
		out = strings.TrimSpace(out)
		require.NotContains(t, out, "\n", "%s: reason must be one line: %q", c.name, out)
		require.Contains(t, out, c.want, c.name)
		require.True(t, strings.HasPrefix(out, "gateway: "), "%s: %q", c.name, out)
	}
}

func TestMigrateCommandIsIdempotent(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	for range 2 {
		code, out := runGateway(t, nil, "migrate", "--database-url", db)
		require.Zero(t, code, out)
		require.Contains(t, out, "migrations applied")
	}
	// DATABASE_URL env is read too
	code, out := runGateway(t, []string{"DATABASE_URL=" + db}, "migrate")
	require.Zero(t, code, out)
}

// SIGTERM: in-flight requests (here a slow stream) finish, then the process exits 0.
func TestGracefulShutdownFinishesInFlightStream(t *testing.T) {
	t.Parallel()
	up := fakeupstream.Start(t, fakeupstream.WithChunkDelay(150*time.Millisecond), fakeupstream.WithStreamChunks(6))
	db := pgtest.NewDB(t)
	g := StartGateway(t, db, "graceful", GatewayOpts{})
	st, b := g.Do(t, "POST", "/model/new", newModelBody("slow", up))
	require.Equal(t, 200, st, "%s", b)

	req, _ := http.NewRequest("POST", g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"take your time"}]}`))
	req.Header.Set("Authorization", "Bearer "+MasterKey)
	resp, err := httpClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "data: "), first)

	require.NoError(t, g.cmd.Process.Signal(syscall.SIGTERM))
	rest, err := io.ReadAll(r)
	require.NoError(t, err, "stream cut by shutdown")
	require.Contains(t, string(rest), "data: [DONE]")
	exited := make(chan struct{})
	go func() {
		for {
			if g.cmd.ProcessState != nil || syscall.Kill(g.cmd.Process.Pid, 0) != nil {
				close(exited)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("gateway did not exit after SIGTERM")
	}
	// new connections are refused after shutdown
	_, err = http.Get(g.URL + "/health/liveliness")
	require.Error(t, err)
}

// `gateway dev` — the README's first command — brings up Postgres, replicas and a mock model,
// prints a working master key, and removes everything on Ctrl-C.
func TestDevCommand(t *testing.T) {
	t.Parallel()
	// Two consecutive free ports; parallel tests grab ports too, so retry if dev finds one taken.
	var base int
	var key, dbURL string
	var cmd *exec.Cmd
	var stdout io.ReadCloser
	var out strings.Builder
	for attempt := 0; attempt < 5 && key == ""; attempt++ {
		base = freePortPair(t)
		cmd = exec.Command(gatewayBinary(t), "dev", "--replicas", "2", "--base-port", fmt.Sprint(base))
		var err error
		stdout, err = cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = cmd.Stdout
		require.NoError(t, cmd.Start())
		c := cmd
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		out.Reset()
		sc := bufio.NewScanner(stdout)
		keyRe := regexp.MustCompile(`master key:\s+(\S+)`)
		dbRe := regexp.MustCompile(`database:\s+(\S+)`)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if m := keyRe.FindStringSubmatch(line); m != nil {
				key = m[1]
			}
			if m := dbRe.FindStringSubmatch(line); m != nil {
				dbURL = m[1]
			}
			if strings.Contains(line, "Ctrl-C stops") {
				break
			}
		}
		if key == "" {
			_ = cmd.Wait()
			require.Contains(t, out.String(), "is in use", "dev failed for another reason: %s", out.String())
		}
	}
	require.NotEmpty(t, key, "dev printed no master key")
	require.NotEmpty(t, dbURL)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	a := &Gateway{URL: fmt.Sprintf("http://127.0.0.1:%d", base)}
	b := &Gateway{URL: fmt.Sprintf("http://127.0.0.1:%d", base+1)}
	st, body := b.DoKey(t, key, "POST", "/v1/chat/completions", chatBody("mock-gpt", "hi", false))
	require.Equal(t, 200, st, "%s", body)

	// The printed walk-through is the README's, command for command, and every command works
	// as printed, run by a shell after the printed export line.
	printed := out.String()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	section := string(readme)[strings.Index(string(readme), "## Walk-through"):]
	end := strings.Index(section, "`gateway dev` prints these same commands")
	require.Positive(t, end, "the README's walk-through ends with the line naming this test")
	section = section[:end]
	devCmds, readmeCmds := shellCommands(printed), shellCommands(section)
	require.NotEmpty(t, devCmds, "dev printed no walk-through: %s", printed)
	normalized := func(cs []shellCommand) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.norm)
		}
		return out
	}
	require.Equal(t, normalized(readmeCmds), normalized(devCmds), "gateway dev prints the README's walk-through")
	export := regexp.MustCompile(`(?m)^\s*(export A=.*)$`).FindStringSubmatch(printed)
	require.NotNil(t, export, "dev printed the export line")
	binDir, err := pgcluster.BinDir() // psql lives next to the server binaries
	require.NoError(t, err)
	run := func(c shellCommand) string {
		sh := exec.Command("bash", "-c", export[1]+"\n"+c.raw)
		sh.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
		b, err := sh.CombinedOutput()
		require.NoError(t, err, "%s\n%s", c.raw, b)
		return string(b)
	}
	// what each step answers, in the README's order
	want := []struct{ cmd, out string }{
		{"/model/new", `"model_id":"my-model-1"`},
		{"/v1/chat/completions", "hi from my-model"},
		{`"stream":true`, "data: [DONE]"},
		{"/sync/lag", `"replica_id":"replica-2"`},
		{"/sync/cluster", `"replica_id":"replica-1"`},
		{"INSERT INTO gateway.models", "INSERT 0 1"},
		{"from-psql", "written with psql"},
		{"/model/delete", "Model: my-model-1 deleted successfully"},
		{"/v1/chat/completions", "Invalid model name passed in model=my-model"},
	}
	require.Len(t, devCmds, len(want), "one expectation per walk-through command")
	for i, c := range devCmds {
		require.Contains(t, c.norm, want[i].cmd, "step %d", i+1)
		if i == len(want)-1 {
			// B refuses the deleted model once the change is applied there (a poll, not a sleep)
			Eventually(t, "B refuses the deleted model", func() bool { return strings.Contains(run(c), want[i].out) })
			continue
		}
		got := run(c)
		require.Contains(t, got, want[i].out, "step %d: %s", i+1, c.raw)
	}

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "dev should exit 0 on Ctrl-C")
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop on Ctrl-C")
	}
	_, err = http.Get(a.URL + "/health/liveliness")
	require.Error(t, err, "replica still running after Ctrl-C")
}

// shellCommand is one curl or psql command from a walk-through: raw as printed (continuation
// lines kept), norm with continuations joined and whitespace collapsed (for comparing).
type shellCommand struct{ raw, norm string }

// shellCommands returns the curl and psql commands of text in order.
func shellCommands(text string) []shellCommand {
	var out []shellCommand
	var raw []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if len(raw) == 0 && !strings.HasPrefix(l, "curl ") && !strings.HasPrefix(l, "psql ") {
			continue
		}
		raw = append(raw, l)
		if strings.HasSuffix(l, `\`) {
			continue
		}
		joined := strings.Join(raw, "\n")
		out = append(out, shellCommand{raw: joined, norm: strings.Join(strings.Fields(strings.ReplaceAll(joined, "\\\n", " ")), " ")})
		raw = nil
	}
	return out
}
