// Package api is the HTTP surface of a replica (echo/v4): the LiteLLM-compatible management
// API, the LLM routes, A2A, health, /sync/lag and /metrics. Handlers return errors; one
// HTTPErrorHandler maps them to the right envelope (OpenAI, Anthropic, LiteLLM "detail").
package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"lockstep/pkg/a2a"
	"lockstep/pkg/accounts"
	mgmt "lockstep/pkg/admin"
	pipeline "lockstep/pkg/call"
	"lockstep/pkg/cluster"
	"lockstep/pkg/format"
	"lockstep/pkg/guardrail"
	"lockstep/pkg/keys"
	"lockstep/pkg/limits"
	"lockstep/pkg/notify"
	"lockstep/pkg/policy"
	"lockstep/pkg/provider"
	"lockstep/pkg/registry"
	"lockstep/pkg/router"
	"lockstep/pkg/spend"
)

// Deps is everything a Server serves from. DB, Tasks and Syncer are nil when no database is
// configured (config-file only): management writes then answer 503.
type Deps struct {
	ReplicaID string
	MasterKey string // empty: no auth (every caller is admin), as LiteLLM without a master key
	// DB is the database behind the management use-cases and the spend reads (mgmt.PG).
	DB mgmt.Database
	// Tasks is the shared A2A task table (a2a.PGTasks): tasks/get and tasks/cancel on every
	// replica.
	Tasks   a2a.SharedTasks
	Syncer  *notify.Syncer
	Cluster *cluster.Reporter // nil without a database
	Router  *router.Router
	Client  *provider.Client
	// Deployments builds deployments under the configured secrets policy and salt key
	// (provider.Policy; nil: the default policy).
	Deployments *provider.Builder
	Guardrails  *registry.Registry[*guardrail.Guardrail]
	Agents      *registry.Registry[*a2a.Agent]
	Keys        *registry.Registry[*keys.Key]
	// LiteLLM's teams, internal users, organizations and end users (nil: none).
	Teams         *registry.Registry[*accounts.Team]
	Users         *registry.Registry[*accounts.User]
	Organizations *registry.Registry[*accounts.Organization]
	EndUsers      *registry.Registry[*accounts.EndUser]
	// Budgets are LiteLLM's budget objects (sql/012; nil: none): the limits step reads the
	// budget an end user, key, organization or team member links to from it.
	Budgets *registry.Registry[*accounts.Budget]
	// AccessGroups are LiteLLM's unified access groups (sql/016; nil: none): a key's or
	// team's access_group_ids are resolved in it on every call.
	AccessGroups *registry.Registry[*accounts.AccessGroup]
	// Policies are LiteLLM's guardrail policies (sql/017; nil: none): the pipeline runs the
	// guardrails of the policies a caller's key and team attach.
	Policies *registry.Registry[*policy.Policy]
	// Attachments are LiteLLM's policy attachments (sql/021; nil: none): the pipeline runs the
	// guardrails of the policies attached to a call (every call, or its team, key, model, tags).
	Attachments *registry.Registry[*policy.Attachment]
	// Projects are LiteLLM's projects (sql/020; nil: none): a key's project_id names one, whose
	// models, blocked flag, budget and limits gate the key's calls.
	Projects *registry.Registry[*accounts.Project]
	// Registries is every registry, for /sync/lag and /metrics; nil: the typed ones above.
	Registries []registry.Info
	// Supported is supported_db_objects: which types are read from and written to Postgres.
	Supported    map[mgmt.ObjectType]bool
	Log          zerolog.Logger
	MaxBodyBytes int64 // default 32 MiB
	// Timeouts of the HTTP server (zero fields: the defaults, see Timeouts).
	Timeouts Timeouts
	// Limits is the limits step of the call pipeline (rate limits, budgets; see Admitter);
	// nil admits every call.
	Limits Admitter
	// Limiter enforces keys' rpm_limit, tpm_limit and max_parallel_requests cluster-wide; nil
	// without a database. With either set and Limits nil, New makes Limits the governance
	// step (governance.go).
	Limiter *limits.Limiter
	// Spend records spend logs and checks key budgets; nil without a database.
	Spend *spend.Tracker
	// SpendLogLines also writes each spend-log row as a structured log line ("spend_log";
	// general_settings.spend_log_lines).
	SpendLogLines bool
	// ModerationModel is general_settings.moderation_model: the model every /moderations
	// call uses (moderationModel); "" when unset.
	ModerationModel string
	// ProxyBudget is the proxy-wide budget (litellm_settings max_budget, budget_duration):
	// every call counts toward the user store.ProxyBudgetUser; a virtual key's call is refused
	// once its spend reached Max (pipeline.Governance.ProxyBudget). Zero: none.
	ProxyBudget spend.Budget
	// Version is the build version /health/readiness/details reports as litellm_version.
	Version string
	// Callbacks are the litellm_settings callbacks configured (callbacks, success_callback),
	// reported by /health/readiness/details as success_callbacks.
	Callbacks []string
	// KeyRotation is how often this replica runs the scheduled key rotation job
	// (admin.RunKeyRotation; LiteLLM's LITELLM_KEY_ROTATION_ENABLED and
	// LITELLM_KEY_ROTATION_CHECK_INTERVAL_SECONDS). 0: the job is off; it needs DB.
	KeyRotation time.Duration
}

// Server is one replica's HTTP API.
type Server struct {
	Deps
	e       *echo.Echo
	a2a     *a2a.Handler
	mgmt    *mgmt.Admin // the management use-cases and their one write path
	metrics *metrics
	// masterSum is the sha256 of MasterKey (isMasterKey compares digests in constant time).
	masterSum [32]byte
	// detail maps the route pattern (echo's c.Path()) of every management route answering in
	// LiteLLM's {"detail": {"error": msg}} envelope to the objects it manages ("guardrails",
	// "access groups"). Written by New only.
	detail map[string]string
	// longRunning holds the route patterns exempt from the server's write timeout (see
	// markLongRunning). Written by New only.
	longRunning map[string]bool
	// masterToken is the sha256 of the master key: the api_key of the admin's spend logs.
	masterToken string
	// wildcards caches the provider model lists of wildcard deployments (/model_group/info)
	wildcards wildcardLists
	// ids make call ids and spend log request ids unique across replicas and restarts.
	ids *pipeline.IDs
	// pipe is the call pipeline every LLM route and A2A call runs through.
	pipe *pipeline.Pipeline
}

// New builds the server and its routes.
func New(d Deps) *Server {
	if d.MaxBodyBytes == 0 {
		d.MaxBodyBytes = 32 << 20
	}
	if d.Supported == nil {
		d.Supported = map[mgmt.ObjectType]bool{}
	}
	if d.Registries == nil {
		var models registry.Info
		if d.Router != nil {
			models = d.Router.Models()
		}
		for _, r := range []registry.Info{models, d.Guardrails, d.Agents, d.Keys, d.Organizations, d.Teams, d.Users, d.EndUsers, d.Budgets, d.AccessGroups, d.Policies, d.Attachments, d.Projects} {
			if !isNil(r) {
				d.Registries = append(d.Registries, r)
			}
		}
	}
	s := &Server{Deps: d, e: echo.New(), detail: map[string]string{}, longRunning: map[string]bool{}, masterSum: sha256.Sum256([]byte(d.MasterKey))}
	if d.MasterKey != "" {
		s.masterToken = keys.Hash(d.MasterKey)
	}
	s.mgmt = newAdmin(d)
	s.ids = pipeline.NewIDs(d.ReplicaID)
	if s.Limits == nil && (d.Limiter != nil || d.Spend != nil) {
		s.Limits = s.governance()
	}
	s.pipe = &pipeline.Pipeline{Router: d.Router, Client: d.Client, Deployments: d.Deployments, Guardrails: d.Guardrails, Policies: d.Policies, Attachments: d.Attachments,
		Agents: d.Agents, Keys: d.Keys, Teams: d.Teams, Users: d.Users, EndUsers: d.EndUsers, Limits: s.Limits, IDs: s.ids}
	s.e.HideBanner, s.e.HidePort = true, true
	s.e.HTTPErrorHandler = s.errorHandler
	s.metrics = newMetrics(s)
	s.a2a = a2a.NewHandler(s.pipe, agentCompleter{s}, d.Log)

	s.e.Use(s.front) // request id, access log, metrics, recovery, body limit, path parameters, sync token
	s.routes()
	if d.Cluster != nil {
		d.Cluster.SetLocal(s.clusterLocal) // registry counts, apply_errors, request counters in gateway.replicas
	}
	return s
}

// isNil reports whether r holds a nil registry pointer (an optional Deps field left unset).
func isNil(r registry.Info) bool {
	if r == nil {
		return true
	}
	v := reflect.ValueOf(r)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// unescapeParams percent-decodes the path parameters (":id", ":agent", ":g", ...). echo
// matches on the raw path when the request has one (an escaped "/" as in "a%2Fb" makes
// URL.RawPath non-empty) and then leaves the parameters escaped; without a RawPath they are
// already decoded. A parameter that is not valid percent-encoding is kept as sent.
func unescapeParams(c echo.Context) {
	if c.Request().URL.RawPath == "" {
		return
	}
	vals := c.ParamValues()
	if len(vals) == 0 {
		return
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = v
		if u, err := url.PathUnescape(v); err == nil {
			out[i] = u
		}
	}
	c.SetParamValues(out...)
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.e }

// Echo exposes the echo instance (tests).
func (s *Server) Echo() *echo.Echo { return s.e }

// access levels for routes
const (
	public = iota
	anyKey // master key or a virtual key (LLM and A2A routes)
	admin  // master key only
	// viewer: the master key, or a virtual key whose user has user_role proxy_admin or
	// proxy_admin_viewer (LiteLLM's read-only admin); the status routes only (viewerOK).
	viewer
)

func (s *Server) routes() {
	e := s.e
	e.GET("/health/liveliness", s.liveliness)
	e.GET("/health/liveness", s.liveliness)
	e.GET("/health/readiness", s.readiness)
	e.GET("/health/readiness/details", s.readinessDetails, s.auth(anyKey))
	e.GET("/metrics", s.serveMetrics)
	e.GET("/sync/lag", s.syncLag, s.auth(viewer))
	e.GET("/sync/trace", s.syncTrace, s.auth(viewer))
	e.GET("/sync/cluster", s.syncCluster, s.auth(viewer))

	// models
	e.POST("/model/new", s.modelNew, s.auth(admin))
	e.POST("/model/update", s.modelUpdate, s.auth(admin))
	e.PATCH("/model/:id/update", s.modelPatch, s.auth(admin))
	e.POST("/model/delete", s.modelDelete, s.auth(admin))
	// model info: the admin sees every deployment, a virtual key those it may use
	for _, p := range []string{"/model/info", "/v1/model/info", "/v2/model/info"} {
		e.GET(p, s.modelInfo, s.auth(anyKey))
	}
	e.GET("/model_group/info", s.modelGroupInfo, s.auth(anyKey))
	e.GET("/health", s.health, s.auth(admin))
	s.markLongRunning("/health")
	e.GET("/routes", s.listRoutes) // no key, as LiteLLM's /routes
	for _, p := range []string{"/v1/models", "/models"} {
		e.GET(p, s.listModels, s.auth(anyKey))
	}

	// LLM routes
	for _, f := range format.Formats {
		// auth applied here, once, not as route middleware: echo applies route middleware
		// anew for every request (a closure each time)
		h := s.auth(anyKey)(s.llm(f))
		e.POST(f.Path(), h)
		e.POST("/v1"+f.Path(), h)
		s.markLongRunning(f.Path())
		s.markLongRunning("/v1" + f.Path())
	}
	s.azureRoutes()

	s.keyRoutes()
	s.guardrailRoutes()
	s.agentRoutes()
	s.accessGroupRoutes()
	s.accountRoutes()
	s.budgetRoutes()
	s.unifiedGroupRoutes()
	s.policyRoutes()
	s.attachmentRoutes()
	s.projectRoutes()
	s.spendReportRoutes()
	s.uiRoutes()
}

// Start serves on addr until ctx is done, then shuts down gracefully: stops accepting,
// finishes in-flight requests (up to grace), returns.
func (s *Server) Start(ctx context.Context, addr string, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx, ln, grace)
}

// Serve is Start on a listener of the caller's (closed on return).
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	if s.Tasks != nil { // tasks/get and tasks/cancel on every replica
		s.a2a.ShareTasks(ctx, s.Tasks)
	}
	if s.KeyRotation > 0 && s.DB != nil { // one replica at a time rotates (admin/rotation.go)
		go s.mgmt.RunKeyRotation(ctx, s.KeyRotation, s.Log.With().Str("component", "key_rotation").Logger())
	}
	srv := s.httpServer()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	s.Client.CloseIdleConnections()
	return err
}

// --- errors ----------------------------------------------------------------------------------

// envelope styles
const (
	styleOpenAI    = iota // {"error": {"message","type","param","code"}}
	styleAnthropic        // {"type":"error","error":{"type","message"}}
	styleDetail           // {"detail": {"error": msg}}
)

// Error is an API error with its status and the envelope it is rendered in.
type Error struct {
	Status  int
	Message string
	Type    string // OpenAI/Anthropic error type
	Param   string
	// Code is the envelope's "code": the upstream's own (context_length_exceeded, …) when it
	// sent one, else "" and the status is written (API.md "LLM routes").
	Code  string
	style int
}

func (e *Error) Error() string { return e.Message }

func errf(status int, typ, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error {
	return errf(http.StatusBadRequest, "invalid_request_error", format, args...)
}

func detailErr(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...), style: styleDetail}
}

// statusType is the OpenAI error type of a status: the one table, format.ErrorType.
func statusType(status int) string { return format.ErrorType(status) }

// errorInfo maps any error a handler (or the call pipeline, before or during a stream)
// returns to its status, type and message: the one mapping, used by errorHandler and by the
// stream error event. The type is the error's own (an upstream's, key_model_access_denied)
// or the status' (statusType).
func (s *Server) errorInfo(c echo.Context, err error) *Error {
	if clientGone(c) {
		// the caller hung up: whatever failed after that is no fault of the gateway's
		return &Error{Status: StatusClientClosedRequest, Type: "client_closed_request", Message: "client closed request"}
	}
	var ae *Error
	var he *echo.HTTPError
	var ue *format.UpstreamError
	var re *format.RequestError
	var gb *pipeline.Blocked
	var nd *router.NoDeploymentsError
	switch {
	case bodyTooLarge(err):
		ae = &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body too large (limit %d bytes)", s.MaxBodyBytes)}
	case callError(err) != nil: // model access, the limits step (pkg/call)
		ae = callError(err)
	case errors.As(err, &ae):
		ae = &Error{Status: ae.Status, Message: ae.Message, Type: ae.Type, Param: ae.Param, Code: ae.Code, style: ae.style}
	case adminError(err) != nil:
		ae = adminError(err)
	case errors.As(err, &gb):
		ae = badRequest("%s", gb.Message)
	case errors.As(err, &nd): // every deployment cooling down or at its cap (LiteLLM's 429)
		ae = errf(http.StatusTooManyRequests, "rate_limit_error", "%s", nd.Error())
		c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int((nd.RetryAfter+time.Second-1)/time.Second))))
	case errors.As(err, &ue):
		ae = &Error{Status: ue.Status, Message: routerMessage(err, ue), Type: ue.Type, Code: ue.Code}
		if ae.Status < 400 {
			ae.Status = http.StatusBadGateway
		}
	case errors.As(err, &re): // the client's request, refused before any call: its text as is
		ae = &Error{Status: re.Status(), Message: re.Message, Type: "invalid_request_error"}
	case errors.Is(err, mgmt.ErrUnavailable):
		ae = errf(http.StatusServiceUnavailable, "service_unavailable", "database unavailable: the change was not saved; retry when the database is back")
		if what, ok := s.detail[c.Path()]; ok {
			ae.Message = fmt.Sprintf("database unavailable: %s are stored in Postgres and nothing was changed; retry when the database is back", what)
		}
	case errors.As(err, &he):
		ae = &Error{Status: he.Code, Message: fmt.Sprint(he.Message)}
	case errors.Is(err, mgmt.ErrInvalid):
		ae = badRequest("invalid value: %s", sentinelReason(err, mgmt.ErrInvalid, "the database refused the value"))
	case errors.Is(err, mgmt.ErrConflict):
		ae = errf(http.StatusConflict, "conflict_error", "conflict: %s", sentinelReason(err, mgmt.ErrConflict, "the object already exists"))
	case errors.Is(err, mgmt.ErrNotFound):
		ae = errf(http.StatusNotFound, "not_found_error", "not found")
	default:
		// The cause may name hosts, connection strings or SQL: it goes to the log, keyed by
		// the request id the caller gets.
		rid := c.Response().Header().Get(echo.HeaderXRequestID)
		zerolog.Ctx(c.Request().Context()).Error().Err(err).Str("request_id", rid).Msg("internal error")
		ae = errf(http.StatusInternalServerError, "internal_server_error", "internal error (request id %s)", rid)
	}
	if ae.Type == "" {
		ae.Type = statusType(ae.Status)
	}
	return ae
}

func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if clientGone(c) {
		// Nobody reads the answer: record 499 (logged at info, counted as 499), never a 5xx.
		c.Response().WriteHeader(StatusClientClosedRequest)
		return
	}
	ae := s.errorInfo(c, err)
	// The route decides the envelope, whatever raised the error (auth, body limit, handler).
	style := ae.style
	if _, ok := s.detail[c.Path()]; ok {
		style = styleDetail
	} else if style == styleOpenAI && isMessagesRoute(c) {
		style = styleAnthropic
	}
	var body any
	switch style {
	case styleAnthropic:
		body = map[string]any{"type": "error", "error": map[string]any{"type": format.AnthropicType(ae.Status, ae.Type), "message": ae.Message}}
	case styleDetail:
		body = map[string]any{"detail": map[string]any{"error": ae.Message}}
	default:
		typ := ae.Type
		param := any(nil)
		if ae.Param != "" {
			param = ae.Param
		}
		code := ae.Code
		if code == "" {
			code = fmt.Sprint(ae.Status)
		}
		body = map[string]any{"error": map[string]any{"message": ae.Message, "type": typ, "param": param, "code": code}}
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ae.Status)
		return
	}
	// Error texts are written as the contract words them: no HTML escaping of <, > and &
	// (encoding/json's default, which would turn "page must be an integer >= 1" into "\u003e=");
	// LiteLLM's FastAPI answers do not escape them either.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body)
	_ = c.Blob(ae.Status, echo.MIMEApplicationJSON, buf.Bytes())
}

// maxReason bounds the database's reason quoted in a 400 or 409 answer.
const maxReason = 200

// sentinelReason is the short reason a store error carries after its sentinel ("invalid row:
// <reason>", "already exists: <detail>"), e.g. Postgres' `invalid byte sequence for encoding
// "UTF8": 0x00` for a NUL byte in a text value; def when there is none.
func sentinelReason(err, sentinel error, def string) string {
	reason := def
	if _, r, ok := strings.Cut(err.Error(), sentinel.Error()+": "); ok && strings.TrimSpace(r) != "" {
		reason = strings.TrimSpace(r)
	}
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "") + "…"
	}
	return reason
}

func isMessagesRoute(c echo.Context) bool {
	p := c.Path()
	return p == "/v1/messages" || p == "/messages"
}

// detailRoute registers an admin management route of the objects named by what ("guardrails",
// "access groups") whose every error — auth (401/403), body limit, the handler's own — is
// rendered in LiteLLM's {"detail": {"error": msg}} envelope, keeping its status; a database
// outage is a 503 saying nothing was changed. The envelope is chosen by the error handler from
// the matched route, so it also covers errors raised before any route middleware runs (a body
// over the limit by Content-Length).
func (s *Server) detailRoute(method, path, what string, h echo.HandlerFunc) {
	s.detail[path] = what
	s.e.Add(method, path, h, s.auth(admin))
}

// --- auth --------------------------------------------------------------------------------------

// principal is the authenticated caller: who makes the call (call.Caller, the value the
// pipeline takes) and the roles table's decision on a management route (mgmt.Authorize;
// ScopeAll for the admin, ScopeNone on other routes).
type principal struct {
	pipeline.Caller
	scope mgmt.Scope
	// teamKeys: the team's team_member_permissions let this member act on the team's keys on
	// the management route called (mgmt.Caller.TeamKeys).
	teamKeys bool
}

// mgmtCaller is the caller as the management use-cases take it (admin.Caller).
func mgmtCaller(p principal) mgmt.Caller {
	c := mgmt.Caller{Master: p.Admin, User: p.User, Team: p.Team, Scope: p.scope, TeamKeys: p.teamKeys}
	if p.Key != nil {
		c.Token, c.SpendRoutes = p.Key.Token, p.Key.GetSpendRoutes
	}
	return c
}

const principalKey = "lockstep.principal"

func bearer(c echo.Context) string {
	h := c.Request().Header
	if a := h.Get("Authorization"); a != "" {
		if v, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(a, "bearer "); ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(a)
	}
	// canonical names (x-api-key, api-key): Header.Get canonicalises a lower-case name into a
	// new string on every call
	if k := h.Get("X-Api-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	if k := h.Get("Api-Key"); k != "" { // Azure SDKs
		return strings.TrimSpace(k)
	}
	return ""
}

func authErr(status int, msg string) *Error {
	return &Error{Status: status, Type: statusType(status), Message: msg}
}

// auth checks the caller's key: the master key is the admin; a virtual key (sha256 looked up
// in the keys registry, with read-through) may call the LLM and A2A routes, and a management
// route (level admin) as the roles table decides (admin.Authorize: its user's role and its
// team membership), the decision's scope recorded in the caller for the use-case.
func (s *Server) auth(level int) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if level == admin {
			next = s.issuesSyncToken(next) // a management write answers with a sync token
		}
		next = authPassed(next) // ends the auth span (tracing.go)
		return func(c echo.Context) error {
			startAuthSpan(c)
			if s.MasterKey == "" {
				setCaller(c, principal{Caller: pipeline.Caller{Admin: true}, scope: mgmt.ScopeAll})
				return next(c)
			}
			k := bearer(c)
			if k == "" {
				return authErr(http.StatusUnauthorized, "Authentication Error, No api key passed in.")
			}
			if s.isMasterKey(k) {
				setCaller(c, principal{Caller: pipeline.Caller{Admin: true}, scope: mgmt.ScopeAll})
				return next(c)
			}
			vk, err := s.lookupKey(c.Request().Context(), k)
			if err != nil {
				return err
			}
			p := principal{Caller: pipeline.Caller{Key: vk, Groups: s.AccessGroups}}
			if vk.TeamID != "" || vk.UserID != "" || vk.X().OrganizationID != "" || vk.X().ProjectID != "" {
				if err := s.lookupOwners(c.Request().Context(), &p); err != nil {
					return err
				}
			}
			if err := routeAllowed(vk, c.Request().URL.Path); err != nil { // allowed_routes, key_type
				return err
			}
			if err := s.agentKeyTrace(c, vk); err != nil { // agent_id: its agent's trace-id rule
				return err
			}
			if level == admin {
				// the one decision for every management route: the roles table (admin/authz.go)
				mc := mgmtCaller(p)
				scope, err := mgmt.Authorize(c.Request().Method, c.Path(), c.Request().URL.EscapedPath(), mc)
				if err != nil {
					return err
				}
				p.scope, p.teamKeys = scope, mc.TeamMemberMay(c.Request().URL.Path) // team_member_permissions
			}
			if level == viewer && !viewerOK(p) {
				return viewerRefused(c, p)
			}
			setCaller(c, p)
			return next(c)
		}
	}
}

// lookupKey finds the virtual key k (its sha256, keys.Hash, in the keys registry, with a
// read-through on a miss). The hash is looked up from a stack buffer: a key found in the
// registry costs no allocation.
func (s *Server) lookupKey(ctx context.Context, k string) (*keys.Key, error) {
	invalid := func() error {
		return authErr(http.StatusUnauthorized, "Authentication Error, Invalid proxy server token passed. Received API key does not exist or was deleted.")
	}
	if s.Keys == nil {
		return nil, invalid()
	}
	var sum [keys.HashLen]byte
	keys.HashTo(&sum, k)
	e, ok := s.Keys.Load().ByID(unsafe.String(&sum[0], len(sum)))
	if !ok {
		token := string(sum[:])
		if s.Keys.Resolve(ctx, token) != nil {
			return nil, invalid()
		}
		if e, ok = s.Keys.Load().ByID(token); !ok {
			return nil, invalid()
		}
	}
	if why := e.Value.Usable(time.Now()); why != "" {
		return nil, authErr(http.StatusUnauthorized, "Authentication Error, "+why+".")
	}
	return e.Value, nil
}

// setCaller records the authenticated caller of the request: in the request's context made
// by front (a field, no allocation), else (a handler served without front) in echo's store.
func setCaller(c echo.Context, p principal) {
	if rc, ok := c.Request().Context().(*requestContext); ok {
		rc.who, rc.hasWho = p, true
		return
	}
	pp := new(principal) // not &p: p would move to the heap on the path above too
	*pp = p
	c.Set(principalKey, pp)
}

// caller returns the request's caller as auth recorded it (setCaller); the zero principal
// when auth did not run.
func caller(c echo.Context) principal {
	if rc, ok := c.Request().Context().(*requestContext); ok && rc.hasWho {
		return rc.who
	}
	if p, ok := c.Get(principalKey).(*principal); ok {
		return *p
	}
	return principal{}
}

// requireDB refuses a management call on typ unless it is stored in Postgres here (admin.RequireDB).
func (s *Server) requireDB(typ mgmt.ObjectType, what string) error {
	return s.mgmt.RequireDB(typ, what)
}
