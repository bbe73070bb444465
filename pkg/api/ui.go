package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/ui"
)

// uiRoutes serves the status page (GET /ui, API.md "Health, sync and metrics"). The page and
// its assets are public: they hold no data; the page asks for a key and calls the status
// routes /sync/cluster and /sync/lag with it (auth level viewer).
func (s *Server) uiRoutes() {
	h := echo.WrapHandler(ui.Handler())
	s.e.GET(ui.Prefix, h)
	s.e.GET(ui.Prefix+"/*", h)
}

// Roles that may read the status routes besides the master key (API.md "Roles and
// self-service": proxy_admin_viewer reads everything and writes nothing; LiteLLM's
// _user_has_admin_view is the same pair).
const (
	roleProxyAdmin       = "proxy_admin"
	roleProxyAdminViewer = "proxy_admin_viewer"
	roleInternalUser     = "internal_user" // a key's role when its user has none, or it has no user
)

// viewerOK reports whether the virtual key's caller may read the status routes: its user has
// user_role proxy_admin or proxy_admin_viewer.
func viewerOK(p principal) bool {
	r := callerRole(p)
	return r == roleProxyAdmin || r == roleProxyAdminViewer
}

func callerRole(p principal) string {
	if p.User != nil && p.User.Role != nil && *p.User.Role != "" {
		return *p.User.Role
	}
	return roleInternalUser
}

// viewerRefused is the 403 for a key whose role may not read a status route, in LiteLLM's
// words (litellm/proxy/auth/route_checks.py): "user not allowed to access this route, role=
// <role>. Trying to access: <path>".
func viewerRefused(c echo.Context, p principal) error {
	return authErr(http.StatusForbidden, "user not allowed to access this route, role= "+callerRole(p)+". Trying to access: "+c.Request().URL.EscapedPath())
}
