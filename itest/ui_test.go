package itest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
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

// The status page (API.md GET /ui) in a real browser against two replicas: it loads from the
// gateway alone, asks for the master key, then shows both replicas with their lag, the
// registries and the read-through counters, refreshed live. A screenshot is saved
// (LOCKSTEP_SCREENSHOT_DIR keeps it; the path is logged).
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	p := StartPair(t, GatewayOpts{})
	ctx := browser(t)

	// make the counters move: a model on B, a read-through miss on A
	st, b := p.B.Do(t, "POST", "/model/new", map[string]any{"model_name": "ui-model", "model_info": map[string]any{"id": "ui-model-1"},
		"litellm_params": map[string]any{"model": "openai/ui-model", "mock_response": "hi"}})
	require.Equal(t, 200, st, "%s", b)
	st, _ = p.A.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": "ui-unknown", "messages": []any{}})
	require.Equal(t, 400, st)
	Eventually(t, "A applied B's model", func() bool {
		return p.A.SyncLag(t)["registries"].(map[string]any)["models"].(map[string]any)["count"].(float64) >= 1
	})

	text := func(css string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
		require.NoError(t, err, css)
		return v
	}
	g := p.A
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(g.URL+"/ui"), chromedp.WaitVisible(chromedp.ID("key"))))
	loginVisible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("login").hidden && document.getElementById("status").hidden`))
	require.NoError(t, err)
	require.True(t, loginVisible, "the page asks for the key before showing anything")

	// a wrong key is refused with the gateway's message
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("key"), "sk-wrong"),
		chromedp.Click(chromedp.ID("connect")),
		chromedp.WaitVisible(chromedp.ID("error")),
	))
	errText, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("error")))
	require.NoError(t, err)
	require.Contains(t, errText, "401")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("key"), MasterKey),
		chromedp.Click(chromedp.ID("connect")),
		chromedp.WaitVisible(chromedp.ID("status")),
	))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#cluster-source`))))
	require.Equal(t, "(GET /sync/cluster)", text(`#cluster-source`), "the page shows the cluster view")
	for _, id := range []string{p.A.ReplicaID, p.B.ReplicaID} {
		// the replica's row, with a numeric lag once the replica has applied a change
		css := fmt.Sprintf(`#replicas tr[data-replica-id=%q] td.lag-p50`, id)
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](
			fmt.Sprintf(`(() => { const td = document.querySelector(%q); return !!td && /^[0-9]+(\.[0-9]+)?$/.test(td.textContent); })()`, css),
			chromedp.WithPollingTimeout(60*time.Second)))
		require.NoError(t, err, "replica %s with a numeric lag p50 in the replicas table", id)
	}
	require.Equal(t, "streaming", text(`#self dd[data-field="state"]`))
	models := text(`#registries tr[data-registry="models"] td:nth-child(2)`)
	require.NotEqual(t, "0", models, "ui-model on %s", g.ReplicaID)
	require.NotEqual(t, "0", text(`#registries tr[data-registry="models"] td:nth-child(3)`), "A's read-through of ui-unknown is counted")
	url, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.NotContains(t, url, MasterKey, "the key never goes into the URL")
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("lockstep.masterKey") || ""`))
	require.NoError(t, err)
	require.Equal(t, MasterKey, stored, "the key is kept in sessionStorage")

	// refreshed live: a model created now is counted without reloading the page
	id := "ui-live-" + g.ReplicaID
	st, b = p.B.Do(t, "POST", "/model/new", map[string]any{"model_name": id, "model_info": map[string]any{"id": id},
		"litellm_params": map[string]any{"model": "openai/x", "mock_response": "hi"}})
	require.Equal(t, 200, st, "%s", b)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](
		fmt.Sprintf(`document.querySelector('#registries tr[data-registry="models"] td:nth-child(2)').textContent !== %q`, models),
		chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the registries table refreshes without a reload")

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	dir := os.Getenv("LOCKSTEP_SCREENSHOT_DIR") // keep the screenshots; default: the test's temp dir
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "status-"+g.ReplicaID+".png")
	require.NoError(t, os.WriteFile(path, shot, 0o644))
	t.Logf("screenshot of %s/ui: %s (%d bytes)", g.URL, path, len(shot))

	// forgetting the key returns to the form and clears it
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.ID("forget")), chromedp.WaitVisible(chromedp.ID("key"))))
	stored, err = chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("lockstep.masterKey") || ""`))
	require.NoError(t, err)
	require.Empty(t, stored)
}
