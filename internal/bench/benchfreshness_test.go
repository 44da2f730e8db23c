package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConsumerMetrics(t *testing.T) {
	const text = `# HELP board_events_consumed_total Event records handled successfully by a consumer.
# TYPE board_events_consumed_total counter
board_events_consumed_total{group="board-hot-article",topic="board-like"} 120
board_events_consumed_total{group="board-hot-article",topic="board-view"} 3
board_events_consumed_total{group="board-article-read",topic="board-like"} 999
board_consumer_lag{group="board-hot-article",partition="0",topic="board-like"} 4
board_consumer_lag{group="board-hot-article",partition="1",topic="board-like"} 1.5e+01
board_event_age_seconds_bucket{group="board-hot-article",topic="board-like",le="0.01"} 10
board_event_age_seconds_bucket{group="board-hot-article",topic="board-like",le="0.1"} 90
board_event_age_seconds_bucket{group="board-hot-article",topic="board-like",le="+Inf"} 100
board_event_age_seconds_count{group="board-hot-article",topic="board-like"} 100
http_requests_total{path="/v1/x/{id}",note="a \"quoted\" } value, with \\ and \n"} 7
`
	got, err := parseConsumerMetrics(strings.NewReader(text), "board-hot-article")
	if err != nil {
		t.Fatal(err)
	}
	want := consumerMetrics{consumed: 123, lag: 19,
		eventAge: histogram{buckets: map[float64]float64{0.01: 10, 0.1: 90, math.Inf(1): 100}, count: 100}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(consumerMetrics{}, histogram{})); diff != "" {
		t.Errorf("parseConsumerMetrics (-want +got):\n%s", diff)
	}

	name, labels, value, err := parseSample(`http_requests_total{path="/v1/x/{id}",note="a \"quoted\" } value, with \\ and \n"} 7 1700000000`)
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"path": "/v1/x/{id}", "note": "a \"quoted\" } value, with \\ and \n"}
	if name != "http_requests_total" || value != 7 || !cmp.Equal(labels, wantLabels) {
		t.Errorf("parseSample = %q %q %v, want http_requests_total %q 7", name, labels, value, wantLabels)
	}
	for _, bad := range []string{`x{a="1"`, `x{a=1} 2`, `x{a="1"}`, `x 1e`} {
		if _, _, _, err := parseSample(bad); err == nil {
			t.Errorf("parseSample(%q) did not fail", bad)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	earlier := histogram{buckets: map[float64]float64{0.01: 5, 0.1: 5, 1: 5, math.Inf(1): 5}, count: 5}
	later := histogram{buckets: map[float64]float64{0.01: 55, 0.1: 95, 1: 104, math.Inf(1): 105}, count: 105}
	d, ok := later.minus(earlier)
	if !ok {
		t.Fatal("minus found no histogram")
	}
	for _, tc := range []struct {
		q    float64
		want string
	}{
		{0.25, (5 * time.Millisecond).String()}, // half way into the first bucket, from 0
		{0.7, (55 * time.Millisecond).String()}, // half way into (0.01, 0.1]
		{0.995, "> 1s"},                         // in the +Inf bucket
	} {
		if got := d.quantile(tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %s, want %s", tc.q, got, tc.want)
		}
	}
	if _, ok := (histogram{}).minus(earlier); ok {
		t.Error("minus of a histogram that is not exported reported one")
	}
}
