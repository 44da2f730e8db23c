package kafka

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"board/internal/embedded"
	"board/internal/event"
	"board/internal/polltest"
)

// testWriter passes log lines to the test's output until the test ends; franz-go goroutines may log a little later.
type testWriter struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.w.Write(p)
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{w: t.Output()}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startKafka(t *testing.T) *embedded.Kafka {
	t.Helper()
	k, err := embedded.StartKafka("127.0.0.1:0", t.TempDir(), embedded.DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func newClient(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates one topic without its dead-letter topic.
func createTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// viewEvent is the value of an ARTICLE_VIEWED event with id id.
func viewEvent(t *testing.T, id int64) []byte {
	t.Helper()
	v, err := event.Encode(id, event.ArticleViewed, fmt.Appendf(nil, `{"articleId":"%d","articleViewCount":1}`, id))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// produceViews produces one ARTICLE_VIEWED event per id, keyed by the id.
func produceViews(t *testing.T, cl *kgo.Client, topic string, ids ...int64) {
	t.Helper()
	recs := make([]*kgo.Record, len(ids))
	for i, id := range ids {
		recs[i] = EventRecord(topic, id, id, event.ArticleViewed, viewEvent(t, id))
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// groupOpts makes group changes quick: the defaults (3 s heartbeats) would make every rebalance take seconds.
var groupOpts = []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(500 * time.Millisecond)}

// runConsumer starts c.Run and returns the function that stops it and returns Run's result.
func runConsumer(t *testing.T, cfg ConsumerConfig) (stop func() error) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	cfg.Opts = append(append([]kgo.Opt(nil), groupOpts...), cfg.Opts...)
	c, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	var rerr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case rerr = <-done:
			case <-time.After(15 * time.Second):
				rerr = fmt.Errorf("Run did not return within 15s of cancel")
			}
		})
		return rerr
	}
	t.Cleanup(func() { _ = stop() }) // a test that expects a result calls stop itself
	return stop
}

// readAll reads topic from the start (no group) until it has n records or d has passed.
func readAll(t *testing.T, brokers []string, topic string, n int, d time.Duration) []*kgo.Record {
	t.Helper()
	cl := newClient(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// committed returns the group's committed offsets for topic.
func committed(t *testing.T, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	// An empty partition list asks for nothing on newer versions; name them.
	for p := range endOffsets(t, cl, topic) {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
	}
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int32]int64)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(t *testing.T, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p.Partition
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int32]int64)
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("list offsets %s/%d: %v", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// eventually fails the test if cond is not true within d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	polltest.Until(t, d, func() (bool, string) { return cond(), "waiting for " + what })
}

// series returns the series of name with exactly labels, or nil if there is none.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// metricValue returns the value of the counter or gauge series of name with exactly labels, or -1 if there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := series(t, reg, name, labels)
	switch {
	case m == nil:
		return -1
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// histogramValue returns the sample count and sum of the histogram series of name with exactly labels, and
// whether there is one.
func histogramValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (count uint64, sum float64, ok bool) {
	t.Helper()
	m := series(t, reg, name, labels)
	if m == nil {
		return 0, 0, false
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), true
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// handled is a concurrency-safe record of the event ids a handler saw.
type handled struct {
	mu  sync.Mutex
	ids []int64
}

func (h *handled) add(id int64) {
	h.mu.Lock()
	h.ids = append(h.ids, id)
	h.mu.Unlock()
}

func (h *handled) snapshot() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.ids...)
}

func (h *handled) len() int { return len(h.snapshot()) }

func idOf(env event.Envelope) int64 { return int64(env.EventID) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
