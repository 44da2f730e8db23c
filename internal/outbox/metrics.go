package outbox

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics describe one service's outbox and relay: the process's collectors, labelled with the service.
type Metrics struct {
	service string
	*MetricVecs
}

// MetricVecs are the collectors shared by every service of a process; register them once.
type MetricVecs struct {
	written, published, failures *prometheus.CounterVec
	backlog, oldestAge, owned    *prometheus.GaugeVec
}

// NewMetricVecs registers the outbox metrics with reg.
func NewMetricVecs(reg prometheus.Registerer) *MetricVecs {
	v := &MetricVecs{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "board_outbox_events_written_total",
			Help: "Events written to the outbox in committed transactions."}, []string{"service"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "board_outbox_events_published_total",
			Help: "Outbox events acknowledged by the broker, by path: commit (right after commit), poll, or vstream (the change stream)."}, []string{"service", "path"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "board_outbox_publish_failures_total",
			Help: "Outbox events the broker did not acknowledge (they stay for the poller)."}, []string{"service"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "board_outbox_backlog",
			Help: "Rows waiting in the outbox, per shard this instance owns."}, []string{"service", "shard"}),
		oldestAge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "board_outbox_oldest_age_seconds",
			Help: "Age of the oldest waiting row, per shard this instance owns (0 when empty)."}, []string{"service", "shard"}),
		owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "board_outbox_shards_owned",
			Help: "Logical outbox shards this instance polls."}, []string{"service"}),
	}
	reg.MustRegister(v.written, v.published, v.failures, v.backlog, v.oldestAge, v.owned)
	return v
}

// For returns the metrics of one service.
func (v *MetricVecs) For(service string) *Metrics {
	return &Metrics{service: service, MetricVecs: v}
}

// The methods below accept a nil receiver, so tests and tools can run without metrics.

func (m *Metrics) written(n int) {
	if m != nil {
		m.MetricVecs.written.WithLabelValues(m.service).Add(float64(n))
	}
}

func (m *Metrics) publishedBy(path string, n int) {
	if m != nil {
		m.published.WithLabelValues(m.service, path).Add(float64(n))
	}
}

func (m *Metrics) failed(n int) {
	if m != nil {
		m.failures.WithLabelValues(m.service).Add(float64(n))
	}
}

func (m *Metrics) shardsOwned(n int) {
	if m != nil {
		m.owned.WithLabelValues(m.service).Set(float64(n))
	}
}

func (m *Metrics) observeBacklog(counts map[int]int64, oldest map[int]time.Time, now time.Time) {
	if m == nil {
		return
	}
	m.backlog.DeletePartialMatch(prometheus.Labels{"service": m.service})
	m.oldestAge.DeletePartialMatch(prometheus.Labels{"service": m.service})
	for shard, n := range counts {
		label := strconv.Itoa(shard)
		m.backlog.WithLabelValues(m.service, label).Set(float64(n))
		age := 0.0
		if t, ok := oldest[shard]; ok {
			age = now.Sub(t).Seconds()
		}
		m.oldestAge.WithLabelValues(m.service, label).Set(age)
	}
}
