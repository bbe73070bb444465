package ui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"lockstep/pkg/ui"
)

func get(t *testing.T, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	ui.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	return string(b)
}

func TestHandlerServesEmbeddedFiles(t *testing.T) {
	t.Parallel()
	for path, ct := range map[string]string{
		"/ui": "text/html; charset=utf-8", "/ui/": "text/html; charset=utf-8", "/ui/index.html": "text/html; charset=utf-8",
		"/ui/app.js": "text/javascript; charset=utf-8", "/ui/style.css": "text/css; charset=utf-8",
	} {
		r := get(t, path)
		require.Equal(t, http.StatusOK, r.StatusCode, path)
		require.Equal(t, ct, r.Header.Get("Content-Type"), path)
		require.Contains(t, r.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
		require.Contains(t, r.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.NotEmpty(t, body(t, r), path)
	}
	for _, path := range []string{"/ui/missing.js", "/ui/static/app.js", "/ui/../ui.go", "/ui/app.js/x"} {
		require.Equal(t, http.StatusNotFound, get(t, path).StatusCode, path)
	}
}

// The page loads nothing from outside the gateway, and every asset it names is embedded.
func TestPageHasNoExternalAssets(t *testing.T) {
	t.Parallel()
	page := body(t, get(t, "/ui"))
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		require.True(t, strings.HasPrefix(m[1], "/ui/"), "asset %q is not served by the gateway", m[1])
		require.Equal(t, http.StatusOK, get(t, m[1]).StatusCode, m[1])
	}
	for _, f := range []string{"/ui/index.html", "/ui/app.js", "/ui/style.css"} {
		text := body(t, get(t, f))
		require.NotRegexp(t, `https?://|//[a-z0-9.-]+\.[a-z]{2,}/`, text, "%s names an external URL", f)
	}
}

// The key travels in the Authorization header and lives in sessionStorage, never in a URL.
func TestScriptKeepsKeyOutOfURLs(t *testing.T) {
	t.Parallel()
	js := body(t, get(t, "/ui/app.js"))
	require.Contains(t, js, `Authorization: "Bearer " + key`)
	require.Contains(t, js, "sessionStorage")
	require.NotContains(t, js, "localStorage")
	require.NotRegexp(t, `[?&](key|api_key|token)=`, js)
	require.NotContains(t, js, "location.search")
	require.NotContains(t, js, "innerHTML", "data is rendered with textContent only")
}

func TestEmbeddedFilesAllServed(t *testing.T) {
	t.Parallel()
	require.NoError(t, fs.WalkDir(ui.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		require.Equal(t, http.StatusOK, get(t, "/ui/"+p).StatusCode, p)
		return nil
	}))
}
