package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"lockstep/pkg/cluster"
)

// syncCluster: GET /sync/cluster (viewer: the master key or a proxy_admin / proxy_admin_viewer
// user's key) → cluster.View read from gateway.replicas now
// (API.md "Health, sync and metrics"). 503 when no database is configured or it cannot be read.
func (s *Server) syncCluster(c echo.Context) error {
	if s.Cluster == nil {
		return errf(http.StatusServiceUnavailable, "service_unavailable", "no database configured: the cluster view is read from gateway.replicas; set --database-url or general_settings.database_url")
	}
	v, err := s.Cluster.View(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// clusterCollector exports the cluster view read after this replica's last upsert (at most
// 2 s old) as per-replica gauges; scraping never queries Postgres.
type clusterCollector struct{ s *Server }

var (
	descClusterConverged = prometheus.NewDesc("lockstep_cluster_converged", "1 when every replica in gateway.replicas is streaming, none is stale, and all applied the same change-log position.", nil, nil)
	descClusterMaxLag    = prometheus.NewDesc("lockstep_cluster_max_lag_ms", "Highest lag_ms p99 among replicas that are not stale.", nil, nil)
	descReplicaStale     = prometheus.NewDesc("lockstep_cluster_replica_stale", "1 when the replica has not reported for more than 10 s.", []string{"replica_id"}, nil)
	descReplicaAge       = prometheus.NewDesc("lockstep_cluster_replica_heartbeat_age_ms", "Time since the replica last reported, on the database clock.", []string{"replica_id"}, nil)
	descReplicaApplied   = prometheus.NewDesc("lockstep_cluster_replica_applied_seq", "Change-log seq the replica last reported applied.", []string{"replica_id"}, nil)
	descReplicaLag       = prometheus.NewDesc("lockstep_cluster_replica_lag_ms", "Change written → applied lag the replica last reported (60 s window).", []string{"replica_id", "stat"}, nil)
	descReplicaState     = prometheus.NewDesc("lockstep_cluster_replica_state", "1 for the change-feed state the replica last reported.", []string{"replica_id", "state"}, nil)
)

func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descClusterConverged, descClusterMaxLag, descReplicaStale, descReplicaAge, descReplicaApplied, descReplicaLag, descReplicaState} {
		ch <- d
	}
}

func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	if cc.s.Cluster == nil {
		return
	}
	v := cc.s.Cluster.Last()
	if v == nil {
		return
	}
	b := func(x bool) float64 {
		if x {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(descClusterConverged, prometheus.GaugeValue, b(v.Converged))
	ch <- prometheus.MustNewConstMetric(descClusterMaxLag, prometheus.GaugeValue, v.MaxLagMs)
	for _, r := range v.Replicas {
		ch <- prometheus.MustNewConstMetric(descReplicaStale, prometheus.GaugeValue, b(r.Stale), r.ReplicaID)
		ch <- prometheus.MustNewConstMetric(descReplicaAge, prometheus.GaugeValue, r.HeartbeatAgeMs, r.ReplicaID)
		ch <- prometheus.MustNewConstMetric(descReplicaApplied, prometheus.GaugeValue, float64(r.Applied), r.ReplicaID)
		ch <- prometheus.MustNewConstMetric(descReplicaLag, prometheus.GaugeValue, r.LagMs.P50, r.ReplicaID, "p50")
		ch <- prometheus.MustNewConstMetric(descReplicaLag, prometheus.GaugeValue, r.LagMs.P99, r.ReplicaID, "p99")
		ch <- prometheus.MustNewConstMetric(descReplicaState, prometheus.GaugeValue, 1, r.ReplicaID, r.State)
	}
}

// statusRoutes are the route patterns the status page and monitoring poll; their requests are
// left out of the request counters a replica reports (the page's own polling would otherwise
// be most of the rate it shows).
var statusRoutes = map[string]bool{
	"/sync/lag": true, "/sync/trace": true, "/sync/cluster": true, "/metrics": true, "/ui": true, "/ui/*": true,
	"/health/liveliness": true, "/health/liveness": true, "/health/readiness": true,
}

// clusterLocal is what this replica reports in its gateway.replicas row beyond the change
// feed: its registries' sizes and apply errors (as /sync/lag) and its request counters. Read
// on the reporter's tick (every 2 s), never on the request path: the counters are summed from
// lockstep_http_requests_total's series.
func (s *Server) clusterLocal() cluster.Local {
	l := cluster.Local{Registries: make(map[string]int, len(s.Registries))}
	for _, reg := range s.Registries {
		l.Registries[reg.Type().Plural()] = reg.Len()
		l.ApplyErrors += reg.ApplyErrors()
	}
	s.countRequests(&l)
	return l
}

// countRequests sums the request counters by outcome into l.Requests, status routes
// excluded (statusRoutes).
func (s *Server) countRequests(l *cluster.Local) {
	out := &l.Requests
	m := s.metrics.series.counters.Load()
	if m == nil {
		return
	}
	var pb dto.Metric
	for k, c := range *m {
		if statusRoutes[k.route] {
			continue
		}
		pb.Reset()
		if c.Write(&pb) != nil {
			continue
		}
		n := int64(pb.GetCounter().GetValue())
		out.Total += n
		switch {
		case k.status == http.StatusTooManyRequests:
			out.RateLimited += n
		case k.status >= 500:
			out.ServerErrors += n
		case k.status >= 400:
			out.ClientErrors += n
		}
	}
}
