package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"lockstep/pkg/telemetry"
)

// SyncTokenHeader carries a read-your-writes token (API.md "Health, sync and metrics"): every
// management write answers with it, and any request to any replica carrying it is served only
// once that write is applied there.
const SyncTokenHeader = "x-lockstep-sync-token"

// syncTokenKey is SyncTokenHeader as net/http stores it in a request's Header.
var syncTokenKey = http.CanonicalHeaderKey(SyncTokenHeader)

// syncTokenWait bounds how long a request carrying a sync token waits (API.md: at most 2 s).
const syncTokenWait = 2 * time.Second

// What a token must prove on another replica: that the write it came with is applied there.
// The write committed before its response was sent, and the response was received before any
// request carrying its token was sent, so the write committed before that request reached any
// replica. A notification barrier started when the request arrives (notify.Syncer.Barrier)
// proves the replica has applied every change committed before that moment — the write
// included — whichever registry it touched, whichever change source runs, and whoever made the
// write. So the token needs no position to compare: it is honoured by a barrier, never by a
// clock. It still names its issuer and time ("v1.<base64url(replica_id|unix_ms)>") for logs;
// the receiving replica treats it as opaque and honours any value.

// newSyncToken is the token a management write answers with.
func (s *Server) newSyncToken() string {
	raw := s.ReplicaID + "|" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	return "v1." + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// issuesSyncToken wraps an admin route: a write (any method but GET, HEAD, OPTIONS) that
// succeeds (status below 400) answers with a sync token; a refused write stored nothing and
// carries none.
func (s *Server) issuesSyncToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			telemetry.MarkWrite(c.Request().Context()) // the request's span is the write's
			res := c.Response()
			res.Before(func() {
				if res.Status < 400 {
					res.Header().Set(SyncTokenHeader, s.newSyncToken())
				}
			})
		}
		return next(c)
	}
}

// awaitSyncToken holds a request carrying a sync token until this replica has applied every
// change committed before the request arrived (a notification barrier), for at most 2 s; then
// 503 "replica <id> has not applied the requested write yet" in the route's envelope. While
// the change feed is reconnecting the barrier fails at once; it is retried until the bound.
// Runs before auth, so a key written on another replica is usable with its token.
func (s *Server) awaitSyncToken(c echo.Context) error {
	// indexed under the canonical key: Header.Get(SyncTokenHeader) canonicalises the
	// lower-case name into a new string on every request
	if v := c.Request().Header[syncTokenKey]; s.Syncer == nil || len(v) == 0 || v[0] == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), syncTokenWait)
	defer cancel()
	for {
		if s.Syncer.Barrier(ctx) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			s.metrics.syncTokenTimeouts.Inc()
			return errf(http.StatusServiceUnavailable, "service_unavailable", "replica %s has not applied the requested write yet", s.ReplicaID)
		case <-time.After(25 * time.Millisecond):
		}
	}
}
