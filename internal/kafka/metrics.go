package kafka

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the consumer loop's Prometheus series. One Metrics serves every consumer of a process (the group label
// tells them apart); create it once per registry.
type Metrics struct {
	consumed     *prometheus.CounterVec
	retried      *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	eventAge     *prometheus.HistogramVec
}

// NewMetrics creates the series and registers them with reg (nil: not registered).
//   - board_events_consumed_total{group,topic}: records a handler handled successfully.
//   - board_events_retried_total{group,topic}: handler calls repeated after a failure.
//   - board_events_dead_lettered_total{group,topic}: records produced to the dead-letter topic.
//   - board_consumer_lag{group,topic,partition}: the partition's high watermark in the last fetch minus the next
//     offset to consume; removed when the partition is revoked or lost.
//   - board_event_age_seconds{group,topic}: histogram, for each record a handler applied successfully, of the time
//     from the event's commit to the handler's return (ConsumerConfig.Now): how far behind the events the
//     consumer's state is. The commit time is the record's HeaderCreatedAt, which the outbox relay sets, or the
//     record's timestamp for a record without it. Buckets from 1 ms to 60 s, exponential (20, about 1.8x apart).
//     A commit time ahead of the consumer's clock counts as 0.
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
		eventAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "board_event_age_seconds",
			Help:    "Time from an event's commit to the end of its successful handling by a consumer.",
			Buckets: prometheus.ExponentialBucketsRange(0.001, 60, 20),
		}, []string{"group", "topic"}),
	}
	if reg != nil {
		reg.MustRegister(m.consumed, m.retried, m.deadLettered, m.lag, m.eventAge)
	}
	return m
}

// The methods below accept a nil *Metrics, so the loop needs no checks.

func (m *Metrics) incConsumed(group, topic string) {
	if m != nil {
		m.consumed.WithLabelValues(group, topic).Inc()
	}
}

func (m *Metrics) observeEventAge(group, topic string, age time.Duration) {
	if m != nil {
		m.eventAge.WithLabelValues(group, topic).Observe(max(age, 0).Seconds())
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
