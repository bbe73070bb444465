package api

import "github.com/prometheus/client_golang/prometheus"

// routerCollector exports the router's counters (pkg/router Stats) at scrape time.
type routerCollector struct{ s *Server }

var (
	descRouterCalls     = prometheus.NewDesc("lockstep_router_calls_total", "Routing attempts by outcome: routed (given a deployment), no_deployments (every deployment cooling down or at its cap: 429).", []string{"outcome"}, nil)
	descRouterRT        = prometheus.NewDesc("lockstep_router_lease_round_trips_total", "Database round trips taken to lease deployment rpm/tpm units (caps and usage-based-routing-v2), by kind (rpm, tpm).", []string{"kind"}, nil)
	descRouterCooldowns = prometheus.NewDesc("lockstep_router_cooldowns_total", "Deployment cooldowns applied on this replica (decided here or read from gateway.deployment_cooldowns).", nil, nil)
	descRouterReads     = prometheus.NewDesc("lockstep_router_cooldown_reads_total", "Reads of gateway.deployment_cooldowns on the cluster tick, by outcome (ok, error).", []string{"outcome"}, nil)
	descRouterPubErrs   = prometheus.NewDesc("lockstep_router_cooldown_publish_errors_total", "Cooldown events that could not be written to gateway.deployment_cooldowns.", nil, nil)
)

func (rc *routerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRouterCalls, descRouterRT, descRouterCooldowns, descRouterReads, descRouterPubErrs} {
		ch <- d
	}
}

func (rc *routerCollector) Collect(ch chan<- prometheus.Metric) {
	if rc.s.Router == nil {
		return
	}
	st := rc.s.Router.Stats()
	ch <- prometheus.MustNewConstMetric(descRouterCalls, prometheus.CounterValue, float64(st.Routed), "routed")
	ch <- prometheus.MustNewConstMetric(descRouterCalls, prometheus.CounterValue, float64(st.NoDeployments), "no_deployments")
	for _, kind := range []string{"rpm", "tpm"} {
		ch <- prometheus.MustNewConstMetric(descRouterRT, prometheus.CounterValue, float64(st.RoundTrips[kind]), kind)
	}
	ch <- prometheus.MustNewConstMetric(descRouterCooldowns, prometheus.CounterValue, float64(st.Cooldowns))
	ch <- prometheus.MustNewConstMetric(descRouterReads, prometheus.CounterValue, float64(st.Ticks-st.TickErrors), "ok")
	ch <- prometheus.MustNewConstMetric(descRouterReads, prometheus.CounterValue, float64(st.TickErrors), "error")
	ch <- prometheus.MustNewConstMetric(descRouterPubErrs, prometheus.CounterValue, float64(st.PublishErrors))
}
