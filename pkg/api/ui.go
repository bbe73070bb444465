package api

import (
	"github.com/labstack/echo/v4"

	"lockstep/pkg/ui"
)

// uiRoutes serves the status page (GET /ui, API.md "Health, sync and metrics"). The page and
// its assets are public: they hold no data; the page asks for the master key and calls the
// admin routes /sync/cluster and /sync/lag with it.
func (s *Server) uiRoutes() {
	h := echo.WrapHandler(ui.Handler())
	s.e.GET(ui.Prefix, h)
	s.e.GET(ui.Prefix+"/*", h)
}
