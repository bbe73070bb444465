package sidebyside

import (
	"bufio"
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"lockstep/pkg/pgcluster"
)

const masterKey = "sk-bench-master"

// gateway is one replica process of the gateway binary.
type gateway struct {
	Name      string
	URL       string
	PprofAddr string // host:port of net/http/pprof when the binary was built with -tags pprof
	VKey      string // a virtual key (all models)
	cmd       *exec.Cmd
	done      chan struct{}
	logPath   string
}

// buildGateway builds lockstep/cmd/gateway (with -tags pprof, see cmd/gateway/pprof.go) into dir.
func buildGateway(dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	out, err := exec.Command("go", "build", "-tags", "pprof", "-o", bin, "lockstep/cmd/gateway").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startGateway starts bin as replica name on a new database of pg and waits until it is
// ready; its log (level logLevel) goes to a file in dir.
func startGateway(ctx context.Context, pg *pgcluster.Cluster, dir, name, bin, logLevel string) (*gateway, error) {
	db, err := pg.CreateDB(ctx, "bench_"+strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(name)))
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	g := &gateway{Name: name, URL: "http://" + addr, PprofAddr: pprofAddr, done: make(chan struct{}), logPath: filepath.Join(dir, name+".log")}
	logf, err := os.Create(g.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	g.cmd = exec.Command(bin, "serve", "--addr", addr, "--replica-id", name, "--database-url", db)
	g.cmd.Env = append(os.Environ(), "GATEWAY_MASTER_KEY="+masterKey, "GATEWAY_LOG_LEVEL="+logLevel, "GATEWAY_PPROF_ADDR="+pprofAddr)
	g.cmd.Stdout, g.cmd.Stderr = logf, logf
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-g.done:
			return nil, fmt.Errorf("gateway %s exited before becoming ready: %s", name, g.logTail())
		default:
		}
		if resp, err := http.Get(g.URL + "/health/readiness"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g, nil
			}
		}
		if time.Now().After(deadline) {
			g.Stop()
			return nil, fmt.Errorf("gateway %s not ready after 60 s: %s", name, g.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *gateway) logTail() string {
	b, _ := os.ReadFile(g.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop sends SIGTERM and waits (10 s, then SIGKILL).
func (g *gateway) Stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// admin sends a management request with the master key and decodes the JSON answer.
func (g *gateway) admin(method, path string, body any) (map[string]any, error) {
	j, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, g.URL+path, bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+masterKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}

// setup creates the two models (through the API, so they live in Postgres and the registry
// like any production model) and a virtual key allowed every model.
func (g *gateway) setup(up *upstreamProcess) error {
	for _, m := range []struct{ name, upstream string }{{"bench-chat", "gpt-bench"}, {"bench-embed", "text-embedding-bench"}} {
		if _, err := g.admin("POST", "/model/new", map[string]any{
			"model_name":     m.name,
			"model_info":     map[string]any{"id": m.name + "-1"},
			"litellm_params": map[string]any{"model": "openai/" + m.upstream, "api_base": up.URL + "/v1", "api_key": upstreamKey},
		}); err != nil {
			return err
		}
	}
	k, err := g.admin("POST", "/key/generate", map[string]any{"key_alias": "bench"})
	if err != nil {
		return err
	}
	key, _ := k["key"].(string)
	if key == "" {
		return fmt.Errorf("/key/generate returned no key: %v", k)
	}
	g.VKey = key
	return nil
}

// counters reads, from /metrics, go_memstats_mallocs_total (cumulative heap allocations of
// the process) and process_cpu_seconds_total (user + system CPU time).
func (g *gateway) counters() (mallocs, cpu float64, err error) {
	resp, err := http.Get(g.URL + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	found := 0
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_mallocs_total "); ok {
			mallocs, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
			found++
		}
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			cpu, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
			found++
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/metrics lacks go_memstats_mallocs_total or process_cpu_seconds_total")
	}
	return mallocs, cpu, nil
}

func (g *gateway) mallocs() (float64, error) {
	m, _, err := g.counters()
	return m, err
}

// scrapeCost is how many allocations one /metrics scrape itself adds to the mallocs figure
// (the smallest delta over a few back-to-back scrapes).
func (g *gateway) scrapeCost() float64 {
	best := -1.0
	prev, err := g.mallocs()
	if err != nil {
		return 0
	}
	for range 5 {
		cur, err := g.mallocs()
		if err != nil {
			return 0
		}
		if d := cur - prev; best < 0 || d < best {
			best = d
		}
		prev = cur
	}
	return max(best, 0)
}

// profile fetches a pprof profile (e.g. "profile?seconds=5") into file; it returns an error
// when the binary serves no pprof.
func (g *gateway) profile(query, file string) error {
	resp, err := http.Get("http://" + g.PprofAddr + "/debug/pprof/" + query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("pprof %s: %d %s", query, resp.StatusCode, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
