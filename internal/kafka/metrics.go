package kafka

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the consumer loop's Prometheus series. One Metrics serves every consumer of a process (the group label
// tells them apart); create it once per registry.
type Metrics struct {
	consumed     *prometheus.CounterVec
	retried      *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	lag          *prometheus.GaugeVec
}

// NewMetrics creates the series and registers them with reg (nil: not registered).
//   - board_events_consumed_total{group,topic}: records a handler handled successfully.
//   - board_events_retried_total{group,topic}: handler calls repeated after a failure.
//   - board_events_dead_lettered_total{group,topic}: records produced to the dead-letter topic.
//   - board_consumer_lag{group,topic,partition}: the partition's high watermark in the last fetch minus the next
//     offset to consume; removed when the partition is revoked or lost.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "board_events_consumed_total",
			Help: "Event records handled successfully by a consumer.",
		}, []string{"group", "topic"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "board_events_retried_total",
			Help: "Event handler calls repeated after a failure.",
		}, []string{"group", "topic"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "board_events_dead_lettered_total",
			Help: "Event records sent to the dead-letter topic.",
		}, []string{"group", "topic"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "board_consumer_lag",
			Help: "High watermark of the last fetch minus the next offset to consume.",
		}, []string{"group", "topic", "partition"}),
	}
	if reg != nil {
		reg.MustRegister(m.consumed, m.retried, m.deadLettered, m.lag)
	}
	return m
}

// The methods below accept a nil *Metrics, so the loop needs no checks.

func (m *Metrics) incConsumed(group, topic string) {
	if m != nil {
		m.consumed.WithLabelValues(group, topic).Inc()
	}
}

func (m *Metrics) incRetried(group, topic string) {
	if m != nil {
		m.retried.WithLabelValues(group, topic).Inc()
	}
}

func (m *Metrics) incDeadLettered(group, topic string) {
	if m != nil {
		m.deadLettered.WithLabelValues(group, topic).Inc()
	}
}

func (m *Metrics) setLag(group, topic string, partition int32, lag int64) {
	if m != nil {
		m.lag.WithLabelValues(group, topic, strconv.Itoa(int(partition))).Set(float64(max(lag, 0)))
	}
}

func (m *Metrics) deleteLag(group, topic string, partition int32) {
	if m != nil {
		m.lag.DeleteLabelValues(group, topic, strconv.Itoa(int(partition)))
	}
}
