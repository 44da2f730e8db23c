package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	testTopic = "posts"
	testGroup = "indexer"
)

func startKafka(t *testing.T, dir string) *Kafka {
	t.Helper()
	k, err := StartKafka("127.0.0.1:0", dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKafkaClient(t *testing.T, k *Kafka, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func groupClient(t *testing.T, k *Kafka) *kgo.Client {
	return newKafkaClient(t, k,
		kgo.ConsumerGroup(testGroup),
		kgo.ConsumeTopics(testTopic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
}

// poll collects records until it has n or d has passed.
func poll(t *testing.T, cl *kgo.Client, n int, d time.Duration) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Fatalf("fetch %s/%d: %v", topic, p, err)
			}
		})
		recs = append(recs, fs.Records()...)
	}
	return recs
}

func TestKafkaSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	k := startKafka(t, dir)

	admin := newKafkaClient(t, k)
	createTopic(t, admin, testTopic, 3)
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: testTopic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := admin.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	admin.Close()

	consumer := groupClient(t, k)
	if got := poll(t, consumer, 100, 10*time.Second); len(got) != 100 {
		t.Fatalf("consumed %d records, want 100", len(got))
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	k.Close()

	k = startKafka(t, dir)
	defer k.Close()
	cl := newKafkaClient(t, k)
	defer cl.Close()
	if n := partitions(t, cl, testTopic); n != 3 {
		t.Fatalf("topic has %d partitions after restart, want 3", n)
	}
	if n := committedTotal(t, cl, testGroup); n != 100 {
		t.Errorf("group's committed offsets sum to %d after restart, want 100", n)
	}
	reader := newKafkaClient(t, k, kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer reader.Close()
	keys := map[string]bool{}
	for _, r := range poll(t, reader, 100, 10*time.Second) {
		keys[string(r.Key)] = true
	}
	if len(keys) != 100 {
		t.Errorf("read %d distinct records after restart, want 100", len(keys))
	}

	consumer = groupClient(t, k)
	defer consumer.Close()
	if got := poll(t, consumer, 1, time.Second); len(got) != 0 {
		t.Fatalf("group resumed with %d old records, want none", len(got))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Key: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := poll(t, consumer, 1, 10*time.Second)
	got = append(got, poll(t, consumer, 1, 200*time.Millisecond)...) // anything else that would come along
	if len(got) != 1 || string(got[0].Key) != "new" {
		t.Errorf("group got %d records after the new one was produced, want only it", len(got))
	}
}

func TestKafkaRejectsWildcardHost(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		if k, err := StartKafka(addr, t.TempDir(), testLogger(t)); err == nil {
			k.Close()
			t.Errorf("StartKafka(%q) succeeded; clients could not dial the advertised address", addr)
		}
	}
}

func createTopic(t *testing.T, cl *kgo.Client, topic string, parts int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func partitions(t *testing.T, cl *kgo.Client, topic string) int {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("metadata %s: %v", topic, err)
	}
	return len(resp.Topics[0].Partitions)
}

func committedTotal(t *testing.T, cl *kgo.Client, group string) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("offset fetch %s: %v", group, err)
	}
	var total int64
	for _, topic := range resp.Topics {
		for _, p := range topic.Partitions {
			total += p.Offset
		}
	}
	return total
}
