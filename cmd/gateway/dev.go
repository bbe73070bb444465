package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"lockstep/pkg/keys"
	"lockstep/pkg/pgcluster"
	"lockstep/pkg/store"
)

// dev starts a throwaway local Postgres, N replicas on consecutive ports and a mock model,
// prints how to use them, and removes everything on Ctrl-C.
func dev(ctx context.Context, args []string) error {
	fs := newCommand("dev", "gateway dev [flags]",
		"Starts a throwaway local Postgres (initdb/postgres from PATH or /usr/lib/postgresql/*/bin),\n"+
			"N replicas on consecutive ports of 127.0.0.1 and a mock model (mock-gpt), prints the URLs,\n"+
			"the master key and a sample curl, and removes everything on Ctrl-C.")
	n := fs.Int("replicas", 2, "number of replicas `N`, 1..32")
	basePort := fs.Int("base-port", 4000, "`PORT` of the first replica; the others follow")
	if err := fs.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("dev: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("dev: unexpected argument %q", fs.Arg(0))
	}
	if *n < 1 || *n > 32 {
		return fmt.Errorf("dev: --replicas: want 1..32, got %d", *n)
	}
	if *basePort < 1 || *basePort+*n-1 > 65535 {
		return fmt.Errorf("dev: --base-port: %d is out of range", *basePort)
	}
	for i := range *n {
		if err := portFree(*basePort + i); err != nil {
			return fmt.Errorf("dev: %w (choose another --base-port)", err)
		}
	}
	fmt.Println("starting a throwaway PostgreSQL cluster…")
	cluster, err := pgcluster.Start()
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer cluster.Stop()
	dbURL, err := cluster.CreateDB(ctx, "lockstep")
	if err != nil {
		return fmt.Errorf("dev: create database: %w", err)
	}
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return fmt.Errorf("dev: %w", err)
	}
	_, err = st.Insert(ctx, store.Model, store.Values{
		"model_id": "mock-gpt-1", "model_name": "mock-gpt",
		"litellm_params": []byte(`{"model":"openai/mock-gpt","mock_response":"Hello from lockstep! This answer came from a mock model."}`),
		"model_info":     []byte(`{"id":"mock-gpt-1"}`),
	})
	st.Close()
	if err != nil {
		return fmt.Errorf("dev: seed mock model: %w", err)
	}

	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	master := "sk-dev-" + keys.Generate()[3:]
	// Each replica is waited for by exactly one goroutine, which closes its done channel;
	// shutdown signals them all and waits on those channels.
	var procs []*exec.Cmd
	var done []chan struct{}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, d := range done {
			<-d
		}
	}()
	exited := make(chan error, *n)
	urls := make([]string, *n)
	for i := range *n {
		port := *basePort + i
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d", port)
		// secrets travel in the environment, not argv (visible to every user in ps)
		cmd := exec.Command(self, "serve", "--addr", fmt.Sprintf("127.0.0.1:%d", port),
			"--replica-id", "replica-"+strconv.Itoa(i+1), "--log-format", "console")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "GATEWAY_MASTER_KEY="+master)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("dev: start replica %d: %w", i+1, err)
		}
		procs = append(procs, cmd)
		d := make(chan struct{})
		done = append(done, d)
		go func() {
			err := cmd.Wait()
			close(d)
			select {
			case exited <- err:
			default:
			}
		}()
	}
	for _, u := range urls {
		if err := waitReady(ctx, u, exited); err != nil {
			return fmt.Errorf("dev: replica %s: %w", u, err)
		}
	}
	fmt.Printf(`
lockstep dev is up: %d replicas sharing one Postgres.
  replicas:    %v
  master key:  %s
  database:    %s
  mock model:  mock-gpt
  status page: %s/ui

In another shell:
  export A=%s B=%s KEY=%s DATABASE_URL='%s'

Walk-through (the README's): create a model on replica A and call it on replica B at once:
%s
Ctrl-C stops the replicas and removes the database.
`, *n, urls, master, dbURL, urls[0], urls[0], urls[len(urls)-1], master, dbURL, indent(walkthrough, "  "))
	select {
	case <-ctx.Done():
		fmt.Println("\nstopping…")
		return nil
	case err := <-exited:
		return fmt.Errorf("dev: a replica exited: %v", err)
	}
}

// walkthrough is the README's "Walk-through" section, command for command: dev prints it
// after the export line that sets A, B, KEY and DATABASE_URL. itest TestDevCommand checks that
// the README has the same commands and runs each printed command against the dev setup.
const walkthrough = `# create on A, call on B at once (no sleep)
curl -s $A/model/new -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"model_name":"my-model","model_info":{"id":"my-model-1"},"litellm_params":{"model":"openai/my-model","mock_response":"hi from my-model"}}'
curl -s $B/v1/chat/completions -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"model":"my-model","messages":[{"role":"user","content":"hello"}]}'
# streaming ("stream": true → SSE, flushed chunk by chunk)
curl -sN $B/v1/chat/completions -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"model":"my-model","stream":true,"messages":[{"role":"user","content":"hello"}]}'
# how far behind is B? and the whole cluster at a glance (or open $A/ui in a browser)
curl -s $B/sync/lag -H "Authorization: Bearer $KEY"
curl -s $B/sync/cluster -H "Authorization: Bearer $KEY"
# a write from any tool propagates too
psql "$DATABASE_URL" -c "INSERT INTO gateway.models (model_id, model_name, litellm_params) \
  VALUES ('m-psql', 'from-psql', '{\"model\":\"openai/x\",\"mock_response\":\"written with psql\"}')"
curl -s $B/v1/chat/completions -H "Authorization: Bearer $KEY" -d '{"model":"from-psql","messages":[]}'
# delete on A: B refuses the model as soon as the change is applied
curl -s $A/model/delete -H "Authorization: Bearer $KEY" -d '{"id":"my-model-1"}'
curl -s $B/v1/chat/completions -H "Authorization: Bearer $KEY" -d '{"model":"my-model","messages":[]}'
`

// indent prefixes every non-empty line of s with p.
func indent(s, p string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = p + l
		}
	}
	return strings.Join(lines, "")
}

func portFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("port %d is in use", port)
	}
	return l.Close()
}

func waitReady(ctx context.Context, base string, exited chan error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("exited before becoming ready: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		resp, err := http.Get(base + "/health/readiness")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not ready after 60 s")
}
