// Package compacted reads whole compacted topics into a process: the records that are each key's latest state (a
// user's ban or role, a pair's block), kept by Kafka for good rather than for a retention time. Each process builds
// its own table from them (internal/standing, internal/blocks).
//
// A Reader is not a consumer group: every instance reads every partition of its topics from the earliest offset at
// start, then keeps following them with a short fetch wait, so that a record published reaches it within a fraction
// of a second. It tells its table when it has read up to the end offsets the topics had when it started: until then,
// the table does not know all it should, and says so.
package compacted

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/event"
	"board/internal/kafka"
)

// Config configures a Reader; zero values take the defaults noted.
type Config struct {
	Brokers []string
	Topics  []string
	// FetchMaxWait is how long the broker holds a fetch open waiting for records (150 ms): with it, how late a
	// record reaches this instance at most, beyond its publishing.
	FetchMaxWait time.Duration
	Logger       *slog.Logger // slog.Default()
	Opts         []kgo.Opt    // extra client options, applied last
}

// Reader reads its topics into a table.
type Reader struct {
	cfg Config
	cl  *kgo.Client
}

// listTimeout bounds one listing of the topics' offsets; retryWait spaces the listings that failed.
const (
	listTimeout = 5 * time.Second
	retryWait   = time.Second
)

// New returns a reader of cfg.Topics and its client; Run reads.
func New(cfg Config) (*Reader, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("compacted: no brokers")
	}
	if cfg.FetchMaxWait <= 0 {
		cfg.FetchMaxWait = 150 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		// No group: every instance reads every partition, from the start.
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		kafka.Logger(cfg.Logger),
	}
	cl, err := kgo.NewClient(append(opts, cfg.Opts...)...)
	if err != nil {
		return nil, fmt.Errorf("compacted: %w", err)
	}
	return &Reader{cfg: cfg, cl: cl}, nil
}

// Run hands every event of the topics to apply until ctx ends, then closes the reader's client. An event apply
// refuses (or that cannot be decoded) is logged and skipped. Run first lists where the topics end, retrying until
// the broker answers, and calls caughtUp once it has read up to there.
func (r *Reader) Run(ctx context.Context, apply func(event.Envelope) error, caughtUp func(took time.Duration)) {
	defer r.cl.Close()
	start := time.Now()
	left, ok := r.ends(ctx)
	if !ok {
		return
	}
	if len(left) == 0 {
		caughtUp(time.Since(start))
	}
	for {
		fs := r.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.cfg.Logger.Warn("compacted topic: fetch error", "topic", topic, "partition", partition, "err", err)
			}
		})
		if errors.Is(fs.Err0(), kgo.ErrClientClosed) {
			return
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, rec := range p.Records {
				r.apply(apply, rec)
			}
			if n := len(p.Records); n > 0 {
				if end, ok := left[tp{p.Topic, p.Partition}]; ok && p.Records[n-1].Offset+1 >= end {
					delete(left, tp{p.Topic, p.Partition})
					if len(left) == 0 {
						caughtUp(time.Since(start))
					}
				}
			}
		})
	}
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// ends returns, for each partition of the topics that holds records, the offset after its last record at this
// moment. It retries until the broker answers; false when ctx ended first.
func (r *Reader) ends(ctx context.Context) (map[tp]int64, bool) {
	adm := kadm.NewClient(r.cl)
	for {
		lctx, cancel := context.WithTimeout(ctx, listTimeout)
		starts, err := adm.ListStartOffsets(lctx, r.cfg.Topics...)
		if err == nil {
			err = starts.Error()
		}
		var ends kadm.ListedOffsets
		if err == nil {
			ends, err = adm.ListEndOffsets(lctx, r.cfg.Topics...)
		}
		if err == nil {
			err = ends.Error()
		}
		cancel()
		if err == nil {
			left := map[tp]int64{}
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := starts.Lookup(o.Topic, o.Partition); !ok || o.Offset > s.Offset {
					left[tp{o.Topic, o.Partition}] = o.Offset
				}
			})
			return left, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		r.cfg.Logger.Warn("compacted topic: cannot list the ends of the topics; retrying", "topics", r.cfg.Topics, "err", err)
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(retryWait):
		}
	}
}

// apply applies one record. A record that cannot be decoded or applied is logged and skipped: reading it again would
// not help, and the rest of the table must not wait for it.
func (r *Reader) apply(apply func(event.Envelope) error, rec *kgo.Record) {
	env, err := event.Decode(rec.Value)
	if err == nil {
		err = apply(env)
	}
	if err != nil {
		r.cfg.Logger.Error("compacted topic: skipping a record that cannot be applied", "topic", rec.Topic,
			"partition", rec.Partition, "offset", rec.Offset, "err", err)
	}
}
