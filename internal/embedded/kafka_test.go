package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	k, err := StartKafka("127.0.0.1:0", dir, DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startKafkaRetaining starts a broker that keeps records for retention and looks for expired ones every
// checkInterval, which StartKafka derives from the retention. The test's cleanup closes it if the test did not.
func startKafkaRetaining(t *testing.T, dir string, retention, checkInterval time.Duration) *Kafka {
	t.Helper()
	k, err := newKafka("127.0.0.1:0", dir, retention, checkInterval, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
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
	t.Parallel()
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
	t.Parallel()
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		if k, err := StartKafka(addr, t.TempDir(), DefaultKafkaRetention, testLogger(t)); err == nil {
			k.Close()
			t.Errorf("StartKafka(%q) succeeded; clients could not dial the advertised address", addr)
		}
	}
}

// The records are stamped in the past rather than waited for: the retention is an hour, and the sweep runs every
// few milliseconds.
func TestKafkaDeletesRecordsPastRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := startKafkaRetaining(t, dir, time.Hour, 10*time.Millisecond)
	cl := newKafkaClient(t, k, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, testTopic, 2)
	var old, live []*kgo.Record
	for i := range 50 {
		live = append(live, &kgo.Record{Topic: testTopic, Partition: 1, Key: fmt.Appendf(nil, "live%d", i)})
		old = append(old, &kgo.Record{Topic: testTopic, Partition: 0, Key: fmt.Appendf(nil, "old%d", i),
			Timestamp: time.Now().Add(-2 * time.Hour)})
	}
	// The live records first, so that the pass that deletes the old ones has seen them.
	produce(t, cl, live...)
	produce(t, cl, old...)

	deadline := time.Now().Add(10 * time.Second)
	for startOffsets(t, cl, testTopic, 2)[0] != 50 {
		if time.Now().After(deadline) {
			t.Fatalf("start offsets are %v 10 s after producing expired records, want 50 for partition 0",
				startOffsets(t, cl, testTopic, 2))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := startOffsets(t, cl, testTopic, 2)[1]; got != 0 {
		t.Errorf("partition 1 starts at %d, want 0: its records are an hour from expiring", got)
	}
	if n := segmentFileBytes(t, dir, testTopic, 0); n != 0 {
		t.Errorf("partition 0 keeps %d bytes of segment files, want none", n)
	}
	if n := segmentFileBytes(t, dir, testTopic, 1); n == 0 {
		t.Error("partition 1 has no segment file left")
	}
	// Partition 0 ends with a live record, which a reader gets only after any older one there.
	marker := &kgo.Record{Topic: testTopic, Partition: 0, Key: []byte("marker")}
	produce(t, cl, marker)
	want := append(slices.Clone(live), marker)
	checkKeys(t, k, want)
	cl.Close()
	k.Close()

	k = startKafkaRetaining(t, dir, time.Hour, 10*time.Millisecond)
	cl = newKafkaClient(t, k)
	defer cl.Close()
	if got := startOffsets(t, cl, testTopic, 2); !slices.Equal(got, []int64{50, 0}) {
		t.Errorf("start offsets after a restart are %v, want [50 0]", got)
	}
	checkKeys(t, k, want)
}

func TestKafkaStartDeletesRecordsThatExpiredWhileStopped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := startKafkaRetaining(t, dir, time.Hour, time.Hour)
	cl := newKafkaClient(t, k)
	createTopic(t, cl, testTopic, 1)
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Topic: testTopic, Key: fmt.Appendf(nil, "k%d", i),
			Timestamp: time.Now().Add(-30 * time.Minute)})
	}
	produce(t, cl, recs...)
	if got := startOffsets(t, cl, testTopic, 1)[0]; got != 0 {
		t.Fatalf("partition starts at %d before the retention was lowered, want 0", got)
	}
	cl.Close()
	k.Close()

	// A lower retention applies from the next start, over the one kfake persisted, and no sweep is due in the test.
	k = startKafkaRetaining(t, dir, 10*time.Minute, time.Hour)
	cl = newKafkaClient(t, k)
	defer cl.Close()
	if got := startOffsets(t, cl, testTopic, 1)[0]; got != 50 {
		t.Errorf("partition starts at %d after a start with a 10-minute retention, want 50", got)
	}
}

func TestKafkaRejectsRetentionBelowASecond(t *testing.T) {
	t.Parallel()
	for _, retention := range []time.Duration{-time.Second, 0, 999 * time.Millisecond} {
		if k, err := StartKafka("127.0.0.1:0", t.TempDir(), retention, testLogger(t)); err == nil {
			k.Close()
			t.Errorf("StartKafka with retention %v succeeded", retention)
		}
	}
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checkKeys reads the topic from its start and checks that it holds the records of want and nothing else.
// Records are read in order per partition, so a record left before one of want would be read in its place.
func checkKeys(t *testing.T, k *Kafka, want []*kgo.Record) {
	t.Helper()
	reader := newKafkaClient(t, k, kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer reader.Close()
	var got, wantKeys []string
	for _, r := range poll(t, reader, len(want), 10*time.Second) {
		got = append(got, string(r.Key))
	}
	for _, r := range want {
		wantKeys = append(wantKeys, string(r.Key))
	}
	slices.Sort(got)
	slices.Sort(wantKeys)
	if !slices.Equal(got, wantKeys) {
		t.Errorf("read %v from the start, want %v", got, wantKeys)
	}
}

// startOffsets lists the log start offset of each of the topic's partitions.
func startOffsets(t *testing.T, cl *kgo.Client, topic string, parts int32) []int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range parts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -2 // -2: the earliest offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("list offsets %s: %v", topic, err)
	}
	offsets := make([]int64, parts)
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("list offsets %s/%d: %v", topic, p.Partition, err)
		}
		offsets[p.Partition] = p.Offset
	}
	return offsets
}

// segmentFileBytes is the size of a partition's segment files, in kfake's layout of the data directory.
func segmentFileBytes(t *testing.T, dir, topic string, partition int32) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "partitions", fmt.Sprintf("%s-%d", topic, partition), "*.dat"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
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
