package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"lockstep/pkg/notify"
	"lockstep/pkg/readthrough"
	"lockstep/pkg/router"
)

// liveliness: GET /health/liveliness → 200 "I'm alive!" (LiteLLM's exact body).
func (s *Server) liveliness(c echo.Context) error {
	return c.JSON(http.StatusOK, "I'm alive!")
}

// readiness: 503 with the reason until the initial load is done and the change feed has
// streamed once; 200 from then on, also while Postgres is down (static stability). The body
// says whether the database is reachable now (see dbStatus); "Not connected" when none is
// configured (LiteLLM's text).
func (s *Server) readiness(c echo.Context) error {
	if s.Syncer != nil && !s.Syncer.Ready() {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{
			"status": "unhealthy", "replica_id": s.ReplicaID,
			"reason": "change feed not started yet (state " + string(s.Syncer.State()) + ")",
		})
	}
	body := map[string]any{"status": "healthy", "replica_id": s.ReplicaID, "db": "Not connected"}
	if s.Syncer != nil {
		st := s.Syncer.State()
		body["db"] = dbStatus(st)
		body["sync_state"] = st
	}
	return c.JSON(http.StatusOK, body)
}

// readinessDetails: GET /health/readiness/details (any key) → readiness' answer plus LiteLLM's
// authenticated diagnostics (its /health/readiness/details: "status", "db", "cache",
// "litellm_version", "success_callbacks", "use_aiohttp_transport", "log_level",
// "is_detailed_debug"): cache null (lockstep has no response cache), litellm_version the
// build version (Deps.Version), success_callbacks the configured litellm_settings callbacks,
// use_aiohttp_transport false, log_level the logger's level in Python's names (INFO, DEBUG,
// ...). 503 with the reason while not ready, as /health/readiness.
func (s *Server) readinessDetails(c echo.Context) error {
	if s.Syncer != nil && !s.Syncer.Ready() {
		return s.readiness(c)
	}
	body := map[string]any{"status": "healthy", "replica_id": s.ReplicaID, "db": "Not connected"}
	if s.Syncer != nil {
		st := s.Syncer.State()
		body["db"] = dbStatus(st)
		body["sync_state"] = st
	}
	level := strings.ToUpper(s.Log.GetLevel().String())
	switch level {
	case "WARN":
		level = "WARNING"
	case "FATAL", "PANIC":
		level = "CRITICAL"
	case "TRACE":
		level = "DEBUG"
	case "", "DISABLED":
		level = "INFO"
	}
	callbacks := s.Callbacks
	if callbacks == nil {
		callbacks = []string{}
	}
	body["cache"] = nil
	body["litellm_version"] = s.Version
	body["success_callbacks"] = callbacks
	body["use_aiohttp_transport"] = false
	body["log_level"] = level
	body["is_detailed_debug"] = level == "DEBUG"
	return c.JSON(http.StatusOK, body)
}

// dbStatus is readiness' "db": "connected" while the change feed is streaming, catching up or
// degraded (it holds a working connection; degraded only lacks notifications), else
// "disconnected" (reconnecting after an outage, or not started).
func dbStatus(st notify.State) string {
	if st == notify.StateStreaming || st == notify.StateCatchingUp || st == notify.StateDegraded {
		return "connected"
	}
	return "disconnected"
}

type registryCount struct {
	Count int `json:"count"`
}

// LagReport is the /sync/lag body (API.md "Health, sync and metrics").
type LagReport struct {
	ReplicaID string `json:"replica_id"`
	notify.Stats
	ReadThrough map[string]readthrough.Stats `json:"read_through"`
	Registries  map[string]registryCount     `json:"registries"`
	// Cooldowns are the deployments the router skips now on this replica (pkg/router).
	Cooldowns []router.ActiveCooldown `json:"cooldowns"`
	// StagesMs summarises the change path of the last notified changes per stage (beyond
	// API.md; notify.Syncer.StageStats; empty without a change feed).
	StagesMs map[string]notify.StageStats `json:"stages_ms"`
}

func (s *Server) lagReport() LagReport {
	r := LagReport{ReplicaID: s.ReplicaID, Cooldowns: []router.ActiveCooldown{}}
	if s.Router != nil {
		r.Cooldowns = s.Router.Cooldowns()
	}
	if s.Syncer != nil {
		r.Stats = s.Syncer.Stats()
		r.StagesMs = s.Syncer.StageStats()
	} else {
		r.StagesMs = map[string]notify.StageStats{}
		r.Stats = notify.Stats{Source: notify.SourceListen, State: notify.StateDisabled}
	}
	r.ReadThrough = make(map[string]readthrough.Stats, len(s.Registries))
	r.Registries = make(map[string]registryCount, len(s.Registries))
	for _, reg := range s.Registries {
		name := reg.Type().Plural()
		r.ReadThrough[name] = reg.ReadThroughStats()
		r.Registries[name] = registryCount{reg.Len()}
		r.ApplyErrors += reg.ApplyErrors()
	}
	return r
}

// syncLag: GET /sync/lag (viewer: the master key or a proxy_admin / proxy_admin_viewer user's key).
func (s *Server) syncLag(c echo.Context) error { return c.JSON(http.StatusOK, s.lagReport()) }

// syncTrace: GET /sync/trace (viewer) — the change path of the last notified changes on this
// replica (notify.Trace: at most 4096, oldest first, with stages_ms); beyond API.md, for
// measuring propagation without probing the registries. Without a change feed: no changes.
func (s *Server) syncTrace(c echo.Context) error {
	if s.Syncer == nil {
		return c.JSON(http.StatusOK, notify.Trace{Changes: []notify.TracedChange{}, Stages: map[string]notify.StageStats{}})
	}
	return c.JSON(http.StatusOK, s.Syncer.Trace())
}

type metrics struct {
	// series caches the resolved series: the request path does a lock-free map read
	// instead of the vectors' locked label lookups.
	series   seriesCache
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec

	budgetRejections prometheus.Counter
	handler          http.Handler
	// syncTokenTimeouts counts requests refused because their sync token's write was not
	// applied here within 2 s.
	syncTokenTimeouts prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lockstep_http_requests_total", Help: "HTTP requests by route, method and status."}, []string{"route", "method", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lockstep_http_request_duration_seconds", Help: "HTTP request duration by route.", Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14)}, []string{"route"})
	m.syncTokenTimeouts = prometheus.NewCounter(prometheus.CounterOpts{Name: "lockstep_sync_token_timeouts_total", Help: "Requests refused (503) because the write their x-lockstep-sync-token names was not applied here within 2 s."})
	m.budgetRejections = prometheus.NewCounter(prometheus.CounterOpts{Name: "lockstep_budget_rejections_total", Help: "Calls refused because the key's spend reached max_budget (or its spend could not be read)."})
	m.reg.MustRegister(m.requests, m.latency, m.syncTokenTimeouts, &syncCollector{s: s}, &clusterCollector{s: s}, &governanceCollector{s: s}, &routerCollector{s: s}, m.budgetRejections)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observe(route, method string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.series.counter(m.requests, seriesKey{route, method, status}).Inc()
	m.series.hist(m.latency, route).Observe(d.Seconds())
}

func (s *Server) serveMetrics(c echo.Context) error {
	s.metrics.handler.ServeHTTP(c.Response(), c.Request())
	return nil
}

// syncCollector exports /sync/lag as Prometheus metrics at scrape time.
type syncCollector struct{ s *Server }

var (
	descState    = prometheus.NewDesc("lockstep_sync_state", "1 for the change feed's current state.", []string{"state"}, nil)
	descSeq      = prometheus.NewDesc("lockstep_sync_seq", "Change-log sequence numbers: applied and head.", []string{"kind"}, nil)
	descCounters = prometheus.NewDesc("lockstep_sync_events_total", "Change-feed counters.", []string{"counter"}, nil)
	descLag      = prometheus.NewDesc("lockstep_sync_lag_ms", "Notification lag (change written → applied) over the last 60 s.", []string{"stat"}, nil)
	descHB       = prometheus.NewDesc("lockstep_sync_heartbeat_rtt_ms", "Round trip of the last liveness probe on the change-feed connection (listen: SELECT 1; logical: standby status keepalive).", nil, nil)
	descRT       = prometheus.NewDesc("lockstep_read_through_total", "Read-through counters per registry.", []string{"registry", "outcome"}, nil)
	descReg      = prometheus.NewDesc("lockstep_registry_entries", "Entries per registry.", []string{"registry"}, nil)
)

func (sc *syncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descSeq, descCounters, descLag, descHB, descRT, descReg} {
		ch <- d
	}
}

func (sc *syncCollector) Collect(ch chan<- prometheus.Metric) {
	r := sc.s.lagReport()
	for _, st := range []notify.State{notify.StateStarting, notify.StateCatchingUp, notify.StateStreaming, notify.StateReconnecting, notify.StateDegraded, notify.StateDisabled} {
		v := 0.0
		if r.State == st {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, string(st))
	}
	ch <- prometheus.MustNewConstMetric(descSeq, prometheus.GaugeValue, float64(r.AppliedSeq), "applied")
	ch <- prometheus.MustNewConstMetric(descSeq, prometheus.GaugeValue, float64(r.HeadSeq), "head")
	for name, v := range map[string]int64{"events_applied": r.EventsApplied, "events_inline": r.EventsInline, "apply_errors": r.ApplyErrors, "reconnects": r.Reconnects,
		"gaps_repaired": r.GapsRepaired, "drift_repaired": r.DriftRepaired, "notifications_dropped": r.Dropped, "notifications_malformed": r.Malformed,
		"barrier_rounds": r.Barrier.Rounds, "barrier_waiters": r.Barrier.Waiters, "barrier_failed": r.Barrier.Failed} {
		ch <- prometheus.MustNewConstMetric(descCounters, prometheus.CounterValue, float64(v), name)
	}
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, r.LagMs.P50, "p50")
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, r.LagMs.P99, "p99")
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, r.LagMs.Max, "max")
	ch <- prometheus.MustNewConstMetric(descHB, prometheus.GaugeValue, r.HeartbeatRTTMs)
	for reg, st := range r.ReadThrough {
		for outcome, v := range map[string]int64{"attempts": st.Attempts, "found": st.Found, "not_found": st.NotFound,
			"negative_hits": st.NegativeHits, "budget_exhausted": st.BudgetExhausted, "errors": st.Errors} {
			ch <- prometheus.MustNewConstMetric(descRT, prometheus.CounterValue, float64(v), reg, outcome)
		}
	}
	for reg, n := range r.Registries {
		ch <- prometheus.MustNewConstMetric(descReg, prometheus.GaugeValue, float64(n.Count), reg)
	}
}

// governanceCollector exports the limiter's and the spend tracker's counters at scrape time.
type governanceCollector struct{ s *Server }

var (
	descLimitAdmitted = prometheus.NewDesc("lockstep_limit_admitted_total", "Calls of keys with limits admitted.", nil, nil)
	descLimitRejected = prometheus.NewDesc("lockstep_limit_rejections_total", "Calls refused by a key limit, by reason (requests, tokens, max_parallel_requests, db_unavailable).", []string{"reason"}, nil)
	descLeaseRT       = prometheus.NewDesc("lockstep_limit_lease_round_trips_total", "Database round trips taken to lease rate-limit units or parallel slots, by kind (rpm, tpm, slots).", []string{"kind"}, nil)
	descLeaseErrors   = prometheus.NewDesc("lockstep_limit_lease_errors_total", "Lease round trips that failed (database unreachable).", nil, nil)
	descSpend         = prometheus.NewDesc("lockstep_spend_usd_total", "Spend recorded on this replica (USD), by model group.", []string{"model"}, nil)
	descSpendLogs     = prometheus.NewDesc("lockstep_spend_logs_total", "Spend logs by outcome (recorded, flushed, dropped, pruned).", []string{"outcome"}, nil)
	descSpendFlushes  = prometheus.NewDesc("lockstep_spend_flushes_total", "Spend flush round trips by outcome (ok, error).", []string{"outcome"}, nil)
)

func (gc *governanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimitAdmitted, descLimitRejected, descLeaseRT, descLeaseErrors, descSpend, descSpendLogs, descSpendFlushes} {
		ch <- d
	}
}

func (gc *governanceCollector) Collect(ch chan<- prometheus.Metric) {
	if l := gc.s.Limiter; l != nil {
		st := l.Stats()
		ch <- prometheus.MustNewConstMetric(descLimitAdmitted, prometheus.CounterValue, float64(st.Admitted))
		for reason, n := range st.Rejected {
			ch <- prometheus.MustNewConstMetric(descLimitRejected, prometheus.CounterValue, float64(n), reason)
		}
		for kind, n := range st.RoundTrips {
			ch <- prometheus.MustNewConstMetric(descLeaseRT, prometheus.CounterValue, float64(n), kind)
		}
		ch <- prometheus.MustNewConstMetric(descLeaseErrors, prometheus.CounterValue, float64(st.LeaseErrors))
	}
	if t := gc.s.Spend; t != nil {
		st := t.Stats()
		for model, usd := range st.SpendByModel {
			ch <- prometheus.MustNewConstMetric(descSpend, prometheus.CounterValue, usd, model)
		}
		ch <- prometheus.MustNewConstMetric(descSpendLogs, prometheus.CounterValue, float64(st.Logged), "recorded")
		ch <- prometheus.MustNewConstMetric(descSpendLogs, prometheus.CounterValue, float64(st.Flushed), "flushed")
		ch <- prometheus.MustNewConstMetric(descSpendLogs, prometheus.CounterValue, float64(st.Dropped), "dropped")
		ch <- prometheus.MustNewConstMetric(descSpendLogs, prometheus.CounterValue, float64(st.Pruned), "pruned")
		ch <- prometheus.MustNewConstMetric(descSpendFlushes, prometheus.CounterValue, float64(st.Flushes-st.FlushErrors), "ok")
		ch <- prometheus.MustNewConstMetric(descSpendFlushes, prometheus.CounterValue, float64(st.FlushErrors), "error")
	}
}
