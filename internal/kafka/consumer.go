package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"board/internal/event"
	"board/internal/fault"
)

// Handler applies one event. It must tolerate duplicates and out-of-order events (see the package doc). What
// follows an error is onFailure's decision: retried up to MaxAttempts calls then dead-lettered, dead-lettered at
// once, or, for a dependency that is down, retried until it succeeds.
type Handler func(ctx context.Context, env event.Envelope) error

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Brokers     []string
	Group       string
	Topics      []string
	Handlers    map[event.Type]Handler // records of other types are skipped (and committed)
	MaxAttempts int                    // failed handler calls per record before dead-lettering (default 5); stalls do not count
	Backoff     time.Duration          // first retry delay, doubling, capped at 5s, with jitter (default 100ms)
	Logger      *slog.Logger           // default slog.Default()
	Metrics     *Metrics               // may be nil
	Now         func() time.Time       // the clock of board_event_age_seconds (default time.Now)
	Opts        []kgo.Opt              // extra client options, applied last (tests: short session timeouts etc.)
	// Flush, if set, is called after each batch of records is handled and before its offsets are committed: handlers
	// that buffer their writes make them durable here, once per batch. A failed Flush is retried with backoff like a
	// dependency that is down; if Run's context ends first, the batch's offsets are not committed and its records are
	// delivered again.
	Flush func(context.Context) error
	// Concurrent lets a batch's partitions be handled at once, a goroutine each, instead of one after another; the
	// records of one partition stay in order, one at a time. For handlers that may run concurrently for different
	// keys, and whose work is mostly waiting (a SQL commit each): they then wait side by side.
	Concurrent bool
}

// Headers a dead-letter record carries besides the original record's headers.
const (
	HeaderDLTError           = "dlt-error"            // the error text
	HeaderDLTOriginTopic     = "dlt-origin-topic"     // the topic the record was consumed from
	HeaderDLTOriginPartition = "dlt-origin-partition" // its partition, decimal
	HeaderDLTOriginOffset    = "dlt-origin-offset"    // its offset, decimal
	HeaderDLTAttempts        = "dlt-attempts"         // handler calls made, decimal (0: the value could not be decoded)
	HeaderDLTFailedAt        = "dlt-failed-at"        // when it was given up on, RFC 3339 UTC
)

const (
	defaultMaxAttempts = 5
	defaultBackoff     = 100 * time.Millisecond
	maxBackoff         = 5 * time.Second
	// maxPollRecords bounds a batch, and so how long a rebalance may wait for this member to finish it.
	maxPollRecords = 100
	// dltAttemptTimeout bounds one attempt to produce a dead letter; failed attempts are retried.
	dltAttemptTimeout = 10 * time.Second
	// commitTimeout bounds an offset commit, also the last one after Run's context is done.
	commitTimeout = 10 * time.Second
	// leaveTimeout bounds leaving the group at shutdown (a dead broker must not hold Run).
	leaveTimeout = 5 * time.Second
	// maxErrorHeader bounds the dlt-error header.
	maxErrorHeader = 4 << 10
	// stallLogEvery spaces the warnings of a record stalled on a dependency that is down: the first failed call
	// is logged, then every stallLogEvery-th. Once the backoff is capped (2.5-5 s a wait) that is about one line
	// every 40 s per stalled partition, however long the outage lasts.
	stallLogEvery = 10
)

// Consumer runs the consume-handle-commit loop of one consumer group member. See the package doc for its guarantees.
type Consumer struct {
	cl          *kgo.Client
	group       string
	handlers    map[event.Type]Handler
	maxAttempts int
	backoff     time.Duration
	log         *slog.Logger
	metrics     *Metrics
	now         func() time.Time
	flush       func(context.Context) error
	concurrent  bool
	ran         atomic.Bool

	mu sync.Mutex
	// pending holds, per partition, the offset after the last record handled (or skipped, or dead-lettered) and not
	// committed yet: the offset to commit.
	pending map[string]map[int32]kgo.EpochOffset
}

// NewConsumer checks cfg and creates the group client; the member joins the group right away. Run must be called
// exactly once: it is what closes the client.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	switch {
	case len(cfg.Brokers) == 0:
		return nil, errors.New("kafka consumer: no brokers")
	case cfg.Group == "":
		return nil, errors.New("kafka consumer: no group")
	case len(cfg.Topics) == 0:
		return nil, errors.New("kafka consumer: no topics")
	case len(cfg.Handlers) == 0:
		return nil, errors.New("kafka consumer: no handlers")
	case cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("kafka consumer: MaxAttempts %d is negative", cfg.MaxAttempts)
	case cfg.Backoff < 0:
		return nil, fmt.Errorf("kafka consumer: Backoff %v is negative", cfg.Backoff)
	}
	for t, h := range cfg.Handlers {
		if h == nil {
			return nil, fmt.Errorf("kafka consumer: nil handler for %s", t)
		}
	}
	c := &Consumer{
		group:       cfg.Group,
		handlers:    maps.Clone(cfg.Handlers),
		maxAttempts: cfg.MaxAttempts,
		backoff:     cfg.Backoff,
		log:         cfg.Logger,
		metrics:     cfg.Metrics,
		now:         cfg.Now,
		flush:       cfg.Flush,
		concurrent:  cfg.Concurrent,
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = defaultMaxAttempts
	}
	if c.backoff == 0 {
		c.backoff = defaultBackoff
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.log = c.log.With("group", cfg.Group)
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		// A group without commits starts at the oldest record: nothing produced before the first start is skipped.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
		// The same client produces the dead letters: acks=all, and bounded attempts that a shutdown can cancel
		// even while a request is in flight (a duplicate dead letter is harmless, a hung shutdown is not).
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(dltAttemptTimeout),
		kgo.AllowIdempotentProduceCancellation(),
		Logger(c.log),
	}
	cl, err := kgo.NewClient(append(opts, cfg.Opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	c.cl = cl
	return c, nil
}

// Run consumes until ctx is done, then commits what was handled, leaves the group and returns nil, or returns the
// fatal error that stopped it (an authorization failure). It closes the client in every case.
func (c *Consumer) Run(ctx context.Context) error {
	if !c.ran.CompareAndSwap(false, true) {
		return errors.New("kafka consumer: Run called twice")
	}
	defer c.shutdown()
	idle := 0 // consecutive polls that brought errors and no records
	for {
		fs := c.cl.PollRecords(ctx, maxPollRecords)
		if ctx.Err() != nil {
			return nil // whatever this poll returned was not handled and is not committed
		}
		if err := c.fetchErrors(fs); err != nil {
			return err
		}
		stopped := !c.processBatch(ctx, fs)
		if !c.flushBatch(ctx) {
			return nil
		}
		// Commit before allowing a rebalance: a partition leaves this member only with its handled records
		// committed. A failed commit stays pending and is retried after the next batch or at revocation.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		if err := c.commitPending(cctx); err != nil {
			c.log.Warn("kafka consumer: commit failed; retried with the next batch", "err", err)
		}
		cancel()
		c.cl.AllowRebalance()
		if stopped {
			return nil
		}
		if fs.NumRecords() == 0 && len(fs.Errors()) > 0 {
			idle++
			if !sleep(ctx, c.delay(idle)) {
				return nil
			}
		} else {
			idle = 0
		}
	}
}

// flushBatch calls Flush until it succeeds, and reports whether it did. When ctx ends first, it forgets every
// pending offset: the records handled since the last Flush are not durable, and they are delivered again (along with
// any older ones whose commit had failed, which the handlers tolerate as duplicates).
func (c *Consumer) flushBatch(ctx context.Context) bool {
	if c.flush == nil {
		return true
	}
	for try := 1; ; try++ {
		// Even when ctx has ended (a shutdown in the middle of a batch), the records handled so far get one bounded
		// Flush, so that their offsets can be committed.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		err := c.flush(fctx)
		cancel()
		if err == nil {
			return true
		}
		c.log.Warn("kafka consumer: flush failed; the batch is not committed until it succeeds", "try", try, "err", err)
		if ctx.Err() != nil || !sleep(ctx, c.delay(try)) {
			c.mu.Lock()
			c.pending = nil
			c.mu.Unlock()
			return false
		}
	}
}

// fetchErrors logs the errors of a poll and returns the first fatal one.
func (c *Consumer) fetchErrors(fs kgo.Fetches) error {
	var fatal error
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case fatal == nil && isFatal(err):
			fatal = fmt.Errorf("kafka consumer: %s/%d: %w", topic, partition, err)
		default:
			c.log.Warn("kafka consumer: fetch error", "topic", topic, "partition", partition, "err", err)
		}
	})
	return fatal
}

// isFatal reports whether a fetch error will not go away by polling again.
func isFatal(err error) bool {
	return errors.Is(err, kgo.ErrClientClosed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed)
}

// processBatch works through a poll's partitions, at once when the consumer is concurrent. It returns false when
// ctx ended the work.
func (c *Consumer) processBatch(ctx context.Context, fs kgo.Fetches) bool {
	if !c.concurrent {
		ok := true
		fs.EachPartition(func(p kgo.FetchTopicPartition) { ok = ok && c.processPartition(ctx, p) })
		return ok
	}
	var wg sync.WaitGroup
	var stopped atomic.Bool
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		wg.Go(func() {
			if !c.processPartition(ctx, p) {
				stopped.Store(true)
			}
		})
	})
	wg.Wait()
	return !stopped.Load()
}

// processPartition works through one partition's records in order. It returns false when ctx ended the work; the
// record it was on and those after it are then neither handled nor committed.
func (c *Consumer) processPartition(ctx context.Context, p kgo.FetchTopicPartition) bool {
	for _, r := range p.Records {
		if !c.process(ctx, r) {
			return false
		}
		c.markDone(r)
		c.metrics.setLag(c.group, r.Topic, r.Partition, p.HighWatermark-(r.Offset+1))
	}
	return true
}

// process handles, skips or dead-letters one record. It returns false, having done none of these, only when ctx is
// done.
func (c *Consumer) process(ctx context.Context, r *kgo.Record) bool {
	env, err := event.Decode(r.Value)
	if err != nil {
		return c.deadLetter(ctx, r, err, 0)
	}
	h := c.handlers[env.Type]
	if h == nil {
		c.log.Debug("kafka consumer: no handler, skipped", "topic", r.Topic, "partition", r.Partition,
			"offset", r.Offset, "type", env.Type)
		return true
	}
	failures, stalls := 0, 0 // failed calls counting toward MaxAttempts, and those that did not (stalls)
	for call := 1; ; call++ {
		err := callHandler(ctx, h, env)
		if err == nil {
			c.metrics.incConsumed(c.group, r.Topic)
			c.metrics.observeEventAge(c.group, r.Topic, c.now().Sub(eventTime(r)))
			if stalls > 0 {
				c.log.Info("kafka consumer: handled after a stall", "topic", r.Topic, "partition", r.Partition,
					"offset", r.Offset, "type", env.Type, "event_id", env.EventID, "calls", call)
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		switch onFailure(err) {
		case deadLetterAtOnce:
			return c.deadLetter(ctx, r, err, call)
		case retryUpToMax:
			failures++
			if failures >= c.maxAttempts {
				return c.deadLetter(ctx, r, err, call)
			}
			c.log.Warn("kafka consumer: handler failed; retrying", "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "type", env.Type, "event_id", env.EventID, "attempt", failures, "err", err)
		case stallUntilUp:
			stalls++
			if stalls == 1 || stalls%stallLogEvery == 0 {
				c.log.Warn("kafka consumer: a dependency is down; the partition stalls on this record until it is back",
					"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "type", env.Type,
					"event_id", env.EventID, "calls", call, "err", err)
			}
		}
		c.metrics.incRetried(c.group, r.Topic)
		if !sleep(ctx, c.delay(call)) {
			return false
		}
	}
}

// failureAction is what a failed handler call leads to.
type failureAction int

const (
	// retryUpToMax: call again after a backoff; after MaxAttempts such failures, dead-letter the record.
	retryUpToMax failureAction = iota
	// deadLetterAtOnce: calling again cannot change the answer.
	deadLetterAtOnce
	// stallUntilUp: the event is fine but a dependency is down. Call again after a backoff, without limit, until
	// the call succeeds or Run's context ends; the record is never dead-lettered, which would skip it.
	stallUntilUp
)

// onFailure is the one place that decides what a handler error leads to:
//   - deadLetterAtOnce when the event is malformed (event.ErrMalformed, also what event.Decode returns) or the
//     handler says it breaks a rule (fault.Invalid). This wins over the rest: the handler said the event is bad.
//   - stallUntilUp when a dependency is down: fault kind Unavailable, or an error fault.IsDependencyDown
//     recognises (a network error, a refused or reset connection, a bad driver connection, a deadline exceeded).
//   - retryUpToMax for everything else (a conflict, a missing row, a bug that a deploy may fix, a panic).
func onFailure(err error) failureAction {
	switch kind := fault.KindOf(err); {
	case errors.Is(err, event.ErrMalformed), kind == fault.Invalid:
		return deadLetterAtOnce
	case kind == fault.Unavailable, fault.IsDependencyDown(err):
		return stallUntilUp
	default:
		return retryUpToMax
	}
}

// callHandler calls h, turning a panic into an error so that one bad event cannot crash the service.
func callHandler(ctx context.Context, h Handler, env event.Envelope) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, env)
}

// deadLetter produces r to its topic's dead-letter topic, retrying with backoff until it is acknowledged (true) or
// ctx is done (false).
func (c *Consumer) deadLetter(ctx context.Context, r *kgo.Record, cause error, attempts int) bool {
	failedAt := time.Now().UTC().Format(time.RFC3339)
	for try := 1; ; try++ {
		pctx, cancel := context.WithTimeout(ctx, dltAttemptTimeout)
		err := c.cl.ProduceSync(pctx, dltRecord(r, cause, attempts, failedAt)).FirstErr()
		cancel()
		if err == nil {
			c.metrics.incDeadLettered(c.group, r.Topic)
			c.log.Error("kafka consumer: record dead-lettered", "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "attempts", attempts, "err", cause)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.log.Error("kafka consumer: dead-letter produce failed; retrying", "topic", r.Topic,
			"partition", r.Partition, "offset", r.Offset, "try", try, "err", err)
		if !sleep(ctx, c.delay(try)) {
			return false
		}
	}
}

// dltRecord builds the dead letter of r: same key and value, r's headers (less any dlt-* ones, which this record's
// own replace) plus the dlt-* headers.
func dltRecord(r *kgo.Record, cause error, attempts int, failedAt string) *kgo.Record {
	msg := cause.Error()
	if len(msg) > maxErrorHeader {
		msg = msg[:maxErrorHeader]
	}
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+6)
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, "dlt-") {
			hs = append(hs, h)
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLTError, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderDLTOriginTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderDLTOriginPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderDLTOriginOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderDLTAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderDLTFailedAt, Value: []byte(failedAt)},
	)
	return &kgo.Record{Topic: event.DeadLetterTopic(r.Topic), Key: r.Key, Value: r.Value, Headers: hs}
}

// delay is the wait before retry n (1-based): Backoff doubled n-1 times, capped at maxBackoff, then drawn uniformly
// from its upper half so that members failing together do not retry in step.
func (c *Consumer) delay(n int) time.Duration {
	d := maxBackoff
	if n <= 32 {
		d = min(c.backoff<<(n-1), maxBackoff)
		if d <= 0 { // overflow
			d = maxBackoff
		}
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx is done, reporting whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// markDone records that r was handled (or skipped, or dead-lettered): its partition may be committed past it.
func (c *Consumer) markDone(r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = make(map[string]map[int32]kgo.EpochOffset)
	}
	tp := c.pending[r.Topic]
	if tp == nil {
		tp = make(map[int32]kgo.EpochOffset)
		c.pending[r.Topic] = tp
	}
	tp[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
}

// commitPending commits the pending offsets; those committed leave pending.
func (c *Consumer) commitPending(ctx context.Context) error {
	c.mu.Lock()
	offsets := make(map[string]map[int32]kgo.EpochOffset, len(c.pending))
	for t, ps := range c.pending {
		offsets[t] = maps.Clone(ps)
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return nil
	}
	var errs []error
	committed := make(map[string][]int32)
	c.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err))
					continue
				}
				committed[t.Topic] = append(committed[t.Topic], p.Partition)
			}
		}
	})
	c.mu.Lock()
	for t, ps := range committed {
		for _, p := range ps {
			if c.pending[t][p] == offsets[t][p] { // nothing newer was marked meanwhile
				delete(c.pending[t], p)
			}
		}
		if len(c.pending[t]) == 0 {
			delete(c.pending, t)
		}
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}

// onRevoked runs when partitions leave this member in a rebalance or at shutdown. With BlockRebalanceOnPoll it runs
// between batches, after the batch commit, so there is normally nothing left; whatever is, is committed now. Then the
// revoked partitions are forgotten: a later commit must not rewind the next owner's.
func (c *Consumer) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if err := c.commitPending(cctx); err != nil {
		c.log.Warn("kafka consumer: commit at revocation failed; those records will be delivered again", "err", err)
	}
	c.forget(revoked)
}

// onLost runs when this member was thrown out of the group: commits would be rejected, so the pending offsets of
// the lost partitions are dropped and their records are delivered again to the next owner.
func (c *Consumer) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.log.Warn("kafka consumer: partitions lost; uncommitted records will be delivered again", "partitions", lost)
	c.forget(lost)
}

func (c *Consumer) forget(tps map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range tps {
		for _, p := range ps {
			delete(c.pending[t], p)
			c.metrics.deleteLag(c.group, t, p)
		}
		if len(c.pending[t]) == 0 {
			delete(c.pending, t)
		}
	}
}

// shutdown commits what was handled, leaves the group (bounded, so a dead broker cannot hold it) and closes the
// client.
func (c *Consumer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if err := c.commitPending(ctx); err != nil {
		c.log.Warn("kafka consumer: final commit failed; those records will be delivered again", "err", err)
	}
	c.cl.AllowRebalance()
	lctx, lcancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer lcancel()
	if err := c.cl.LeaveGroupContext(lctx); err != nil {
		c.log.Warn("kafka consumer: leaving the group", "err", err)
	}
	c.cl.Close()
}
