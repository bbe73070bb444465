// Package ui is the status page served at GET /ui (API.md "Health, sync and metrics"; issue 23
// "The status page is the cluster's"): one HTML page, a script and a stylesheet embedded in the
// binary (go:embed), no external assets. The page asks for a key in a form (the master key, or
// a proxy_admin_viewer / proxy_admin user's key: the status routes accept those), keeps it in
// sessionStorage (never in a URL), and polls GET /sync/lag and GET /sync/cluster (falling back
// to this replica alone when the cluster view answers 404 or 503) every 2 s to show: a
// converged / not converged / stale badge, every replica's state, database, lag with a history
// chart (inline SVG from the reports the page keeps), request / error / 429 rates from the
// counters in the replicas' reports, version, every replica's registry counts and apply_errors
// side by side with differences marked, the deployment cooldowns /sync/lag reports, and this
// replica's counters and read-through.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path the page is served under.
const Prefix = "/ui"

// files are the embedded assets by name ("index.html", "app.js", "style.css").
var files = func() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	return sub
}()

// Files is the embedded file system the page is served from (tests walk it).
func Files() fs.FS { return files }

// contentTypes are the types of the embedded files, by extension.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// Handler serves the page: GET /ui and /ui/ answer index.html, /ui/<file> an embedded asset,
// anything else 404. Every answer forbids framing and any origin but this one (CSP
// default-src 'self'), so the page can load nothing from outside and no other site can embed
// it; the page carries no data itself (it fetches with the key the user typed).
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, Prefix), "/")
		if name == "" {
			name = "index.html"
		}
		b, err := fs.ReadFile(files, name)
		ct, known := contentTypes[path.Ext(name)]
		if err != nil || !known || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ct)
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b)
	})
}
