package httpio

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the per-route request counters and latency histograms shared by every service port.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the HTTP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "board_http_requests_total",
			Help: "HTTP requests answered, by service, route pattern and status code.",
		}, []string{"service", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "board_http_request_duration_seconds",
			Help:    "HTTP request latency, by service and route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"service", "route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// routeTable holds one port's metric handles by route pattern, so that a request finds its route's counter and
// histogram with one map lookup instead of hashing its label values in the metric vectors.
type routeTable struct {
	metrics *Metrics
	service string
	routes  cowMap[string, *routeMetrics]
}

// routeMetrics are the handles of one route: the histogram's, and the counter's of each status code it answered.
type routeMetrics struct {
	latency  prometheus.Observer
	requests *prometheus.CounterVec // curried with the service and the route: the code is left
	codes    cowMap[int, prometheus.Counter]
}

func (t *routeTable) route(pattern string) *routeMetrics {
	return t.routes.get(pattern, func() *routeMetrics {
		labels := prometheus.Labels{"service": t.service, "route": pattern}
		return &routeMetrics{latency: t.metrics.latency.With(labels), requests: t.metrics.requests.MustCurryWith(labels)}
	})
}

// count records one answer of the route, and its latency if timed.
func (m *routeMetrics) count(status int, elapsed time.Duration, timed bool) {
	m.codes.get(status, func() prometheus.Counter { return m.requests.WithLabelValues(strconv.Itoa(status)) }).Inc()
	if timed {
		m.latency.Observe(elapsed.Seconds())
	}
}

// cowMap is a map read on every request and written a few times in the life of a process (once for each route and
// code): a read is an atomic load and a lookup, with no lock for the cores to contend on; a write copies the map.
type cowMap[K comparable, V any] struct {
	mu sync.Mutex // serializes writes
	m  atomic.Pointer[map[K]V]
}

// get returns the value of k, storing what create returns if there is none yet.
func (c *cowMap[K, V]) get(k K, create func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if v, ok := old[k]; ok {
		return v
	}
	v := create()
	next := make(map[K]V, len(old)+1)
	maps.Copy(next, old)
	next[k] = v
	c.m.Store(&next)
	return v
}
