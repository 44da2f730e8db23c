package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"board/internal/event"
)

// ProducerLinger is how long a partition's batch waits for more records before it is sent: none. The relay produces
// each event asynchronously right after its transaction commits, so a linger is added to every event's latency,
// and it buys no throughput here because franz-go keeps batching the records that arrive while a request is in
// flight (up to 5 per broker with idempotence). BenchmarkProduce against the embedded broker, per record:
//
//	linger                   lone event (latency)   burst (throughput)
//	0                        42 µs                  467 ns
//	5ms                      5.5 ms                 867 ns
//	10ms (franz-go default)  10.6 ms                1215 ns
//
// Against a remote broker a linger can shave requests off a steady high rate; pass kgo.ProducerLinger to NewProducer
// if the volume ever calls for it.
const ProducerLinger time.Duration = 0

// NewProducer returns a franz-go client for publishing events: idempotent, acks=all (the franz-go defaults, spelt
// out here so that no later option silently weakens them), ProducerLinger, and a RecordDeliveryTimeout so a produce
// to a dead broker fails instead of hanging forever: after deliveryTimeout plus at most one metadata refresh wait
// (franz-go checks the timeout between attempts, and refreshes metadata at most every MetadataMinAge, 5s by
// default). opts come last and may override any of these.
//
// The timeout alone does not bound it: franz-go enforces it on an idempotent producer only for batches it never
// wrote to a connection, and when a broker dies the next produce is typically written to the dead connection before
// the client notices, after which the batch waits for a broker's answer however long that takes (ctx cancellation
// is ignored too). kgo.AllowIdempotentProduceCancellation lifts that: the batch fails at the timeout, the client
// bumps its producer epoch, and a record the caller produces again may be stored twice. The outbox delivers at least
// once anyway and consumers ignore duplicates, so a duplicate is cheap and a relay stuck for the whole outage is not
// (TestProducerFailsWhileBrokerDown). Idempotence still keeps the client's own retries from duplicating or
// reordering records.
func NewProducer(brokers []string, deliveryTimeout time.Duration, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka producer: no brokers")
	}
	if deliveryTimeout <= 0 {
		return nil, errors.New("kafka producer: delivery timeout must be positive")
	}
	base := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()), // acks=all; idempotence is on unless DisableIdempotentWrite is passed
		kgo.ProducerLinger(ProducerLinger),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.AllowIdempotentProduceCancellation(),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	return cl, nil
}

// createTopicsTimeout is how long the broker may take to create topics before it answers.
const createTopicsTimeout = 15 * time.Second

// EnsureTopics creates every topic and its dead-letter topic (event.DeadLetterTopic) that does not exist yet, with
// partitions partitions (-1: the broker's default) and the broker's default replication factor. An existing topic
// is left as it is, whatever its partition count. Idempotent; concurrent callers are fine (TOPIC_ALREADY_EXISTS
// counts as success).
func EnsureTopics(ctx context.Context, client *kgo.Client, topics []string, partitions int32) error {
	return ensureTopics(ctx, client, topics, partitions, nil)
}

// compacted is the configuration of a compacted topic: each key's latest record is kept for good, never deleted for
// its age (retention.ms -1 matters to brokers that apply a retention time to compacted topics too, as kfake does).
var compacted = map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}

// EnsureCompactedTopics is EnsureTopics for topics that keep each key's latest record (event.CompactedTopics): they
// are created with cleanup.policy=compact; their dead-letter topics are plain ones. A topic that exists already is
// left as it is, whatever its policy: call this before EnsureTopics creates it as a plain one.
func EnsureCompactedTopics(ctx context.Context, client *kgo.Client, topics []string, partitions int32) error {
	return ensureTopics(ctx, client, topics, partitions, compacted)
}

// ensureTopics creates topics with the given configuration, and their dead-letter topics without.
func ensureTopics(ctx context.Context, client *kgo.Client, topics []string, partitions int32, configs map[string]string) error {
	if partitions == 0 || partitions < -1 {
		return fmt.Errorf("ensure topics: invalid partition count %d", partitions)
	}
	var names []string
	configured := map[string]bool{}
	for _, t := range topics {
		if t == "" {
			return errors.New("ensure topics: empty topic name")
		}
		configured[t] = true
		for _, name := range []string{t, event.DeadLetterTopic(t)} {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(createTopicsTimeout.Milliseconds())
	for _, name := range names {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = name
		rt.NumPartitions = partitions
		rt.ReplicationFactor = -1
		if configured[name] {
			for k, v := range configs {
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = k, kmsg.StringPtr(v)
				rt.Configs = append(rt.Configs, c)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, client) // franz-go sends it to the controller
	if err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	var errs []error
	for _, rt := range resp.Topics {
		err := kerr.ErrorForCode(rt.ErrorCode)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			continue
		}
		if rt.ErrorMessage != nil && *rt.ErrorMessage != "" {
			err = fmt.Errorf("%w: %s", err, *rt.ErrorMessage)
		}
		errs = append(errs, fmt.Errorf("ensure topics: create %s: %w", rt.Topic, err))
	}
	return errors.Join(errs...)
}

// EventRecord builds the record of one event: the topic, key = the shard key as decimal text (boardId for article
// events, articleId otherwise: the caller passes it), value = the envelope JSON (event.Encode), and the headers
// event.HeaderType and event.HeaderEventID (decimal).
func EventRecord(topic string, key int64, eventID int64, t event.Type, value []byte) *kgo.Record {
	return &kgo.Record{
		Topic: topic,
		Key:   strconv.AppendInt(nil, key, 10),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: event.HeaderType, Value: []byte(t)},
			{Key: event.HeaderEventID, Value: strconv.AppendInt(nil, eventID, 10)},
		},
	}
}

// HeaderCreatedAt is the header of an event record that says when the event was committed (its outbox row written
// in the producing transaction), as decimal Unix milliseconds; consumers measure an event's age from it. It is not
// the record's timestamp, which stays the produce time: franz-go measures RecordDeliveryTimeout from the record's
// timestamp, so a row the relay's poller publishes after an outage would count as timed out before it is even sent,
// and would fail at every round.
const HeaderCreatedAt = "eventCreatedAt"

// SetCreatedAt stamps r with the time its event was committed (HeaderCreatedAt), replacing an earlier stamp.
func SetCreatedAt(r *kgo.Record, createdAt time.Time) {
	value := strconv.AppendInt(nil, createdAt.UnixMilli(), 10)
	for i, h := range r.Headers {
		if h.Key == HeaderCreatedAt {
			r.Headers[i].Value = value
			return
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderCreatedAt, Value: value})
}

// eventTime returns when the event of r was committed: its HeaderCreatedAt, or the record's timestamp when it has
// none that parses (a record from another producer).
func eventTime(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == HeaderCreatedAt {
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return time.UnixMilli(ms)
			}
			break
		}
	}
	return r.Timestamp
}

// Logger returns the option that sends franz-go's warnings and errors to l.
func Logger(l *slog.Logger) kgo.Opt { return kgo.WithLogger(kgoLogger{l}) }

type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	switch level {
	case kgo.LogLevelError:
		lvl = slog.LevelError
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug
	}
	k.l.Log(context.Background(), lvl, "kgo: "+msg, keyvals...)
}
