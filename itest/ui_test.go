package itest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"lockstep/itest/fakeupstream"
	"lockstep/itest/pgtest"
)

// chromiumPath finds the Chromium binary (Debian package `chromium`, installed by .ci/run).
// Without it the test skips, except under CI=true, where it fails loudly.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found on PATH: the status page test needs it under CI (apt-get install -y chromium; .ci/run installs it)")
	}
	t.Skip("chromium not found on PATH (apt-get install -y chromium)")
	return ""
}

// browser starts a headless Chromium driven over the DevTools protocol.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// the first action starts the browser; it must run on a context without a deadline
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	// a generous bound on the page steps for a loaded 2-core machine
	tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	return tctx
}

// artifactDir is where tests keep files worth looking at after the run (screenshots):
// $LOCKSTEP_ARTIFACTS, else itest/testdata/artifacts (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LOCKSTEP_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	return abs
}

// replicaRow is replica id's entry in g's /sync/cluster (nil when absent).
func replicaRow(t testing.TB, g *Gateway, id string) map[string]any {
	t.Helper()
	st, b := g.Do(t, "GET", "/sync/cluster", nil)
	require.Equal(t, 200, st, "%s", b)
	for _, r := range JSON(t, b)["replicas"].([]any) {
		if m := r.(map[string]any); m["replica_id"] == id {
			return m
		}
	}
	return nil
}

// rowCount is a registry's count in a /sync/cluster replica entry (-1 when not reported).
func rowCount(row map[string]any, registry string) int {
	if row == nil {
		return -1
	}
	regs, _ := row["registries"].(map[string]any)
	if c, ok := regs[registry].(map[string]any); ok {
		return int(c["count"].(float64))
	}
	return -1
}

// page runs JavaScript checks against the rendered status page.
type page struct {
	t   *testing.T
	ctx context.Context
}

// wait polls the expression until it is true (60 s: a loaded machine, a 2 s refresh).
func (p page) wait(what, expr string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(p.t, err, "the page never showed: %s", what)
}

func (p page) text(css string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : "<missing>"; })()`, css)))
	require.NoError(p.t, err, css)
	return v
}

func (p page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	require.NoError(p.t, err, expr)
	return v
}

func (p page) login(key string) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx,
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("connect")),
		chromedp.WaitVisible(chromedp.ID("status")),
	))
}

func (p page) forget() {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.ctx, chromedp.Click(chromedp.ID("forget")), chromedp.WaitVisible(chromedp.ID("key"))))
}

// The status page (API.md GET /ui; issue 23 "The status page is the cluster's") in a real
// browser against three replicas. Before any write every replica's lag reads "no samples".
// An invalid model row written by psql is counted in apply_errors on every replica; then c
// is SIGSTOPped while models are written through a. Opened with a proxy_admin_viewer user's
// key, the page shows: the cluster badge "stale" (red), c's state cell "stale" and never
// green, c's models count marked behind a's and b's, apply_errors marked on all three, a lag
// history chart, the database reachable, the version, no cooldown; then a deployment a cools
// down is listed with its reason; and after calls on a that answer 200, 400 and 429, request,
// error and 429 rates. Checked from the rendered DOM and computed
// styles; a screenshot is kept (artifactDir; the path is logged).
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	o := GatewayOpts{Config: "router_settings: {allowed_fails: 1, cooldown_time: 120, num_retries: 1}\n"}
	a := StartGateway(t, db, "a", o)
	b := StartGateway(t, db, "b", o)
	c := StartGateway(t, db, "c", o)
	ctx := browser(t)
	p := page{t: t, ctx: ctx}
	Eventually(t, "three replicas listed", func() bool { v := a.cluster(t); return len(v.Replicas) == 3 && v.Converged })

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(a.URL+"/ui"), chromedp.WaitVisible(chromedp.ID("key"))))
	require.Equal(t, "true", p.eval(`String(!document.getElementById("login").hidden && document.getElementById("status").hidden)`),
		"the page asks for a key before showing anything")
	// a wrong key is refused with the gateway's message
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("key"), "sk-wrong"),
		chromedp.Click(chromedp.ID("connect")),
		chromedp.WaitVisible(chromedp.ID("error")),
	))
	require.Contains(t, p.text("#error"), "401")

	// nothing written yet: no lag samples anywhere, and the page says so instead of "0 ms"
	p.login(MasterKey)
	require.Equal(t, "(GET /sync/cluster)", p.text("#cluster-source"), "the page shows the cluster view")
	for _, id := range []string{"a", "b", "c"} {
		p.wait(id+" lag: no samples", fmt.Sprintf(`(() => { const r = document.querySelector('#replicas tr[data-replica-id=%q]');
			return !!r && r.querySelector("td.lag-p50").textContent === "no samples" && r.querySelector("td.lag-chart").textContent === "no samples"; })()`, id))
	}
	p.wait("converged badge", `document.getElementById("badge").dataset.state === "converged"`)
	require.Equal(t, "converged", p.text("#badge"))
	p.forget()

	// a proxy_admin_viewer user, a model, a read-through miss on a
	st, body := a.Do(t, "POST", "/user/new", map[string]any{"user_id": "ui-viewer", "user_role": "proxy_admin_viewer"})
	require.Equal(t, 200, st, "%s", body)
	viewerKey := JSON(t, body)["key"].(string)
	st, body = b.Do(t, "POST", "/model/new", map[string]any{"model_name": "ui-model", "model_info": map[string]any{"id": "ui-model-1"},
		"litellm_params": map[string]any{"model": "openai/ui-model", "mock_response": "hi"}})
	require.Equal(t, 200, st, "%s", body)
	st, _ = a.Do(t, "POST", "/v1/chat/completions", chatBody("ui-unknown", "x", false))
	require.Equal(t, 400, st)

	// an invalid model row written by psql: every replica counts an apply error and reports it
	PSQL(t, db, `INSERT INTO gateway.models (model_id, model_name, litellm_params) VALUES ('ui-bad', 'ui-bad', '{"model": "nosuch/x"}')`)
	for _, id := range []string{"a", "b", "c"} {
		require.Eventually(t, func() bool {
			r := replicaRow(t, a, id)
			return r != nil && r["apply_errors"].(float64) >= 1 && rowCount(r, "models") >= 1
		}, 30*time.Second, 100*time.Millisecond, "%s reports its apply error and its models", id)
	}

	// c stops while models are written: stale, its counts behind
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = c.cmd.Process.Signal(syscall.SIGCONT) }) // before the harness's SIGTERM
	cModels := rowCount(replicaRow(t, a, "c"), "models")
	for i := range 3 {
		id := fmt.Sprintf("ui-while-c-stopped-%d", i)
		st, body := a.Do(t, "POST", "/model/new", map[string]any{"model_name": id, "model_info": map[string]any{"id": id},
			"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
		require.Equal(t, 200, st, "%s", body)
	}
	require.Eventually(t, func() bool {
		return a.cluster(t).stale("c") && rowCount(replicaRow(t, a, "a"), "models") == cModels+3 && rowCount(replicaRow(t, a, "b"), "models") == cModels+3
	}, 60*time.Second, 200*time.Millisecond, "c stale, a and b report the three models")
	require.Equal(t, cModels, rowCount(replicaRow(t, a, "c"), "models"), "c's report is from before the writes")

	// the page, read with the viewer's key
	p.login(viewerKey)
	p.wait("the stale badge", `document.getElementById("badge").dataset.state === "stale"`)
	require.Contains(t, p.text("#badge"), "stale: c")
	require.Equal(t, "rgb(207, 34, 46)", p.eval(`getComputedStyle(document.getElementById("badge")).backgroundColor`), "the stale badge is red")
	cState := `#replicas tr[data-replica-id="c"] td.state`
	p.wait("c's state cell stale", fmt.Sprintf(`document.querySelector(%q)?.textContent === "stale"`, cState))
	require.Equal(t, "stale", p.eval(fmt.Sprintf(`document.querySelector(%q).dataset.state`, cState)))
	require.NotContains(t, p.eval(fmt.Sprintf(`document.querySelector(%q).className`, cState)), "streaming", "a stale replica is never styled as streaming")
	require.Equal(t, "rgb(207, 34, 46)", p.eval(fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).backgroundColor`, cState)), "c's state cell is red")
	require.Equal(t, "unknown", p.text(`#replicas tr[data-replica-id="c"] td.db`))
	for _, id := range []string{"a", "b"} {
		require.Equal(t, "streaming", p.text(fmt.Sprintf(`#replicas tr[data-replica-id=%q] td.state`, id)))
		require.Equal(t, "rgb(17, 99, 41)", p.eval(fmt.Sprintf(`getComputedStyle(document.querySelector('#replicas tr[data-replica-id=%q] td.state')).color`, id)))
		require.Equal(t, "connected", p.text(fmt.Sprintf(`#replicas tr[data-replica-id=%q] td.db`, id)))
	}

	// registries side by side: c behind on models, every replica's apply error marked
	models := func(id string) string {
		return fmt.Sprintf(`#by-replica tr[data-registry="models"] td[data-replica-id=%q]`, id)
	}
	p.wait("a's models count", fmt.Sprintf(`document.querySelector(%q)?.textContent === %q`, models("a"), strconv.Itoa(cModels+3)))
	require.Equal(t, strconv.Itoa(cModels+3), p.text(models("b")))
	require.Equal(t, strconv.Itoa(cModels), p.text(models("c")))
	require.Contains(t, p.eval(fmt.Sprintf(`document.querySelector(%q).className`, models("c"))), "behind")
	require.NotContains(t, p.eval(fmt.Sprintf(`document.querySelector(%q).className`, models("a"))), "behind")
	require.Contains(t, p.eval(`document.querySelector('#by-replica tr[data-registry="models"]').className`), "differs")
	for _, id := range []string{"a", "b", "c"} {
		css := fmt.Sprintf(`#by-replica tr[data-registry="apply_errors"] td[data-replica-id=%q]`, id)
		n, err := strconv.Atoi(p.text(css))
		require.NoError(t, err, "%s apply_errors", id)
		require.GreaterOrEqual(t, n, 1, "%s apply_errors", id)
		require.Contains(t, p.eval(fmt.Sprintf(`document.querySelector(%q).className`, css)), "bad", "%s's apply error is marked", id)
	}

	// lag history: a applied the writes, its chart has points
	p.wait("a's lag chart", `Number(document.querySelector('#replicas tr[data-replica-id="a"] td.lag-chart')?.dataset.points) >= 1`)
	require.Equal(t, "1", p.eval(`String(document.querySelectorAll('#replicas tr[data-replica-id="a"] td.lag-chart svg polyline').length)`))
	require.Regexp(t, `^[0-9]+(\.[0-9]+)?$`, p.text(`#replicas tr[data-replica-id="a"] td.lag-p99`))
	// database and version
	require.Equal(t, "ok", p.eval(`document.getElementById("db").dataset.state`))
	require.Contains(t, p.text("#db"), "reachable")
	require.Regexp(t, `^version \S+`, p.text("#version"))
	require.Equal(t, "none", p.text("#cooldowns tbody"), "no deployment cooling down yet")

	// a deployment cooling down (allowed_fails 1; its failures retried on the other one): listed
	bad, good := fakeupstream.Start(t), fakeupstream.Start(t)
	rtNewModel(t, a, "ui-cool", "ui-cool-bad", bad, nil)
	rtNewModel(t, a, "ui-cool", "ui-cool-good", good, nil)
	Eventually(t, "ui-cool served on a", func() bool { st, _ := rtChat(t, a, "ui-cool"); return st == 200 })
	bad.SetStatus(500)
	Eventually(t, "ui-cool-bad cooling down on a", func() bool {
		st, body := rtChat(t, a, "ui-cool")
		require.Equal(t, 200, st, "%s", body)
		return cooldownOn(t, a, "ui-cool-bad") != nil
	})
	cool := `#cooldowns tr[data-model-id="ui-cool-bad"]`
	p.wait("the cooldown listed", fmt.Sprintf(`!!document.querySelector(%q)`, cool))
	require.Contains(t, p.text(cool+" td:nth-child(3)"), "replica a", "the reason names the deciding replica")
	_, err := time.Parse(time.RFC3339Nano, p.text(cool+" td:nth-child(2)"))
	require.NoError(t, err, "until is a time")

	// rates: 200s, a 400 and 429s on a (a key limited to one request a minute)
	st, body = a.Do(t, "POST", "/key/generate", map[string]any{"rpm_limit": 1})
	require.Equal(t, 200, st, "%s", body)
	limited := JSON(t, body)["key"].(string)
	saw429 := false
	for range 6 {
		st, _ := a.DoKey(t, limited, "POST", "/v1/chat/completions", chatBody("ui-model", "x", false))
		saw429 = saw429 || st == 429
	}
	require.True(t, saw429, "the limited key got a 429")
	st, _ = a.Do(t, "POST", "/v1/chat/completions", chatBody("ui-unknown", "x", false))
	require.Equal(t, 400, st)
	positive := func(css string) string {
		return fmt.Sprintf(`Number(document.querySelector(%q)?.textContent) > 0`, css)
	}
	p.wait("a's request rate", positive(`#replicas tr[data-replica-id="a"] td.rate-total`))
	p.wait("a's error rate", positive(`#replicas tr[data-replica-id="a"] td.rate-errors`))
	p.wait("a's 429 rate", positive(`#replicas tr[data-replica-id="a"] td.rate-429`))
	p.wait("cluster-wide 429 rate", positive(`#rate-429`))
	require.Equal(t, "—", p.text(`#replicas tr[data-replica-id="c"] td.rate-total`), "no rate for a stale replica")

	// the key never goes into the URL; it is kept in sessionStorage
	url, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.NotContains(t, url, viewerKey)
	require.Equal(t, viewerKey, p.eval(`sessionStorage.getItem("lockstep.masterKey") || ""`))

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(artifactDir(t), "status-page-three-replicas-c-stale.png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot of %s/ui (c stopped, apply errors on every replica): %s (%d bytes)", a.URL, path, len(shot))

	// forgetting the key returns to the form and clears it
	p.forget()
	require.Empty(t, p.eval(`sessionStorage.getItem("lockstep.masterKey") || ""`))
}
