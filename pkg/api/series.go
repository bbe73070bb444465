package api

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesKey names one lockstep_http_requests_total series.
type seriesKey struct {
	route, method string
	status        int
}

// seriesCache holds the curried request counter of every (route, method, status) and the
// latency observer of every route seen so far, so that the request path finds them with one
// plain map read: no lock, no label lookup in the vectors, no key string built (a
// sync.Map would box the struct key: an allocation per request). The maps are copy-on-write:
// the first request of a new series copies them under mu (routes × methods × statuses is
// small and fixed by the route table).
type seriesCache struct {
	counters atomic.Pointer[map[seriesKey]prometheus.Counter]
	hists    atomic.Pointer[map[string]prometheus.Observer]
	mu       sync.Mutex
}

func (sc *seriesCache) counter(vec *prometheus.CounterVec, k seriesKey) prometheus.Counter {
	if m := sc.counters.Load(); m != nil {
		if c, ok := (*m)[k]; ok {
			return c
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	old := sc.counters.Load()
	if old != nil {
		if c, ok := (*old)[k]; ok {
			return c
		}
	}
	next := make(map[seriesKey]prometheus.Counter, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	c := vec.WithLabelValues(k.route, k.method, strconv.Itoa(k.status))
	next[k] = c
	sc.counters.Store(&next)
	return c
}

func (sc *seriesCache) hist(vec *prometheus.HistogramVec, route string) prometheus.Observer {
	if m := sc.hists.Load(); m != nil {
		if h, ok := (*m)[route]; ok {
			return h
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	old := sc.hists.Load()
	next := map[string]prometheus.Observer{}
	if old != nil {
		if h, ok := (*old)[route]; ok {
			return h
		}
		for k, v := range *old {
			next[k] = v
		}
	}
	h := vec.WithLabelValues(route)
	next[route] = h
	sc.hists.Store(&next)
	return h
}

func lenOf[K comparable, V any](m *map[K]V) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
