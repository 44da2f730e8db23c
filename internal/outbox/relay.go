package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/event"
	"board/internal/kafka"
	"board/internal/sqldb"
)

// RelayConfig sets a relay's limits and timing; zero values take the defaults noted.
type RelayConfig struct {
	TopicPrefix  string        // e.g. "board-"
	QueueSize    int           // events waiting for the fast path; beyond it the poller takes over (10,000)
	PollInterval time.Duration // how often owned shards are polled (10 s)
	MinAge       time.Duration // rows younger than this are left to the fast path (10 s)
	BatchSize    int           // rows per poll query (100)
	FlushTimeout time.Duration // how long shutdown waits for the broker to acknowledge what was sent (5 s)
	// DeleteTimeout bounds one round of deletes of acknowledged rows, all its batches (5 s). Shutdown does not
	// cancel a delete: what the broker acknowledged must leave the table, or the next start publishes it again.
	DeleteTimeout time.Duration
	// AckTimeout bounds how long a poll round waits for the broker (30 s). franz-go's idempotent producer never
	// times out a record already sent on a connection that died: it waits for the broker, so the round must not.
	AckTimeout time.Duration
}

func (c *RelayConfig) defaults() {
	if c.QueueSize == 0 {
		c.QueueSize = 10_000
	}
	if c.PollInterval == 0 {
		c.PollInterval = 10 * time.Second
	}
	if c.MinAge == 0 {
		c.MinAge = 10 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.FlushTimeout == 0 {
		c.FlushTimeout = 5 * time.Second
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 30 * time.Second
	}
	if c.DeleteTimeout == 0 {
		c.DeleteTimeout = 5 * time.Second
	}
}

// Relay publishes one service's outbox to Kafka two ways:
//   - the fast path: events handed over right after their transaction commits are queued and sent by one
//     dispatcher in commit order (franz-go pipelines them per partition, so the order of one key is kept); when the
//     queue is full the event is simply left in the table;
//   - the poller: every PollInterval it publishes rows older than MinAge from the shards this instance owns,
//     oldest first, BatchSize at a time, so nothing the fast path missed (full queue, broker down, crash) is lost.
//
// A row is deleted only after the broker acknowledged it, so delivery is at least once.
type Relay struct {
	db      *sqldb.DB // holds the outbox table
	now     func() time.Time
	client  *kgo.Client
	coord   *Coordinator
	cfg     RelayConfig
	logger  *slog.Logger
	metrics *Metrics
	queue   chan Message
	tail    *tail // set when the relay follows the change stream (NewVStreamRelay) instead of a fast path

	mu      sync.Mutex
	acked   []published   // published by the fast path, waiting to be deleted
	ackedCh chan struct{} // signals that acked grew
}

// NewRelay returns a relay of the outbox table in db, publishing through client the shards coord assigns to this
// instance. Its fast path takes the events of the Outbox it is handed to (New); the poller reads the table.
func NewRelay(db *sqldb.DB, client *kgo.Client, coord *Coordinator, cfg RelayConfig, logger *slog.Logger, metrics *Metrics) *Relay {
	cfg.defaults()
	return &Relay{db: db, now: time.Now, client: client, coord: coord, cfg: cfg, logger: logger, metrics: metrics,
		queue: make(chan Message, cfg.QueueSize), ackedCh: make(chan struct{}, 1)}
}

// enqueue hands committed events to the fast path without ever blocking the request that wrote them; the Outbox the
// relay was handed to calls it after each commit.
func (r *Relay) enqueue(msgs []Message) {
	for _, m := range msgs {
		select {
		case r.queue <- m:
		default: // full: the poller publishes it once it is MinAge old
		}
	}
}

// Run relays until ctx is done, then flushes what it sent, deletes what was acknowledged and leaves the coordinator.
func (r *Relay) Run(ctx context.Context) {
	coordCtx, stopCoord := context.WithCancel(context.WithoutCancel(ctx))
	coordDone := make(chan struct{})
	if _, err := r.coord.heartbeat(ctx); err != nil {
		r.logger.Warn("relay coordinator: first heartbeat failed", "err", err)
	}
	go func() {
		defer close(coordDone)
		r.coord.Run(coordCtx)
	}()
	deleteCtx, stopDeleting := context.WithCancel(context.WithoutCancel(ctx))
	deleterDone := make(chan struct{})
	go func() {
		defer close(deleterDone)
		var deleters sync.WaitGroup
		for range r.deleters() {
			deleters.Go(func() { r.deleteLoop(deleteCtx) })
		}
		deleters.Wait()
	}()

	var wg sync.WaitGroup
	if r.tail != nil {
		wg.Go(func() { r.tailLoop(ctx) })
	} else {
		wg.Go(func() { r.dispatch(ctx) })
	}
	wg.Go(func() { r.pollLoop(ctx) })
	wg.Wait()

	flushCtx, cancel := context.WithTimeout(context.Background(), r.cfg.FlushTimeout)
	defer cancel()
	if err := r.client.Flush(flushCtx); err != nil {
		r.logger.Warn("relay: broker did not acknowledge everything before shutdown; the poller will resend it", "err", err)
	}
	stopDeleting()
	<-deleterDone
	r.deleteAcked(ctx)
	stopCoord()
	<-coordDone
}

// dispatch sends fast-path events until ctx is done, then sends what is still queued. It takes whatever is queued
// at once as one batch, so that a burst of commits costs one acknowledgement hand-off, not one per event.
func (r *Relay) dispatch(ctx context.Context) {
	batch := make([]Message, 0, dispatchBatch)
	take := func() {
		for len(batch) < dispatchBatch {
			select {
			case m := <-r.queue:
				batch = append(batch, m)
			default:
				return
			}
		}
	}
	for {
		select {
		case m := <-r.queue:
			batch = append(batch[:0], m)
			take()
			r.publish(batch, "commit", nil)
		case <-ctx.Done():
			for {
				batch = batch[:0]
				if take(); len(batch) == 0 {
					return
				}
				r.publish(batch, "commit", nil)
			}
		}
	}
}

// dispatchBatch bounds how many queued fast-path events are handed to the producer as one batch.
const dispatchBatch = 500

// publish hands msgs to the producer in order, without waiting. Once the broker has answered for all of them, the
// rows it acknowledged are queued for deletion in one hand-off, and done, if not nil, learns whether any failed.
// msgs may be reused once publish returns.
func (r *Relay) publish(msgs []Message, path string, done func(failed bool)) {
	b := &inFlight{r: r, path: path, done: done, rows: make([]published, len(msgs)),
		records: make([]*kgo.Record, len(msgs))}
	b.pending.Store(int64(len(msgs)) + 1) // + 1 until every record is handed over, so the batch cannot end early
	for i, m := range msgs {
		b.rows[i] = published{id: m.ID, key: m.Key}
		rec, err := r.record(m)
		if err != nil {
			r.logger.Error("relay: cannot encode outbox row; it stays in the table", "outbox_id", m.ID, "err", err)
			b.fail(i, err)
			b.answered()
			continue
		}
		b.records[i] = rec
		// Not the caller's context: shutdown must not abort records already handed to the client.
		r.client.Produce(context.Background(), rec, b.promise)
	}
	b.answered()
}

// inFlight is a batch of records handed to the producer and not all answered yet.
type inFlight struct {
	r       *Relay
	path    string
	done    func(failed bool)
	rows    []published
	records []*kgo.Record
	pending atomic.Int64

	mu       sync.Mutex // franz-go calls promises one at a time, but publish may fail a row as well
	failed   []bool     // by index into rows; nil while none failed
	failures int
	err      error // the first failure
}

func (b *inFlight) promise(rec *kgo.Record, err error) {
	if err != nil {
		// Rare: look the record up rather than give every record a promise of its own.
		b.fail(slices.Index(b.records, rec), err)
	}
	b.answered()
}

func (b *inFlight) fail(i int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed, b.err = make([]bool, len(b.rows)), err
	}
	b.failed[i] = true
	b.failures++
}

// answered counts one answer; the last one queues the acknowledged rows for deletion in one hand-off.
func (b *inFlight) answered() {
	if b.pending.Add(-1) > 0 {
		return
	}
	acked := b.rows
	if b.failures > 0 {
		acked = make([]published, 0, len(b.rows)-b.failures)
		for i, row := range b.rows {
			if !b.failed[i] {
				acked = append(acked, row)
			}
		}
	}
	r := b.r
	r.metrics.failed(b.failures)
	r.metrics.publishedBy(b.path, len(acked))
	if b.failures > 0 && b.path == "commit" {
		r.logger.Warn("relay: publish failed; the poller will retry", "rows", b.failures, "err", b.err)
	}
	if len(acked) > 0 {
		r.mu.Lock()
		r.acked = append(r.acked, acked...)
		r.mu.Unlock()
		select {
		case r.ackedCh <- struct{}{}:
		default:
		}
	}
	if b.done != nil {
		b.done(b.failures > 0)
	}
}

// record builds the record of m, for both paths: it carries the time m's transaction wrote it
// (kafka.HeaderCreatedAt), from which consumers measure the event's age.
func (r *Relay) record(m Message) (*kgo.Record, error) {
	value, err := event.Encode(m.ID, m.Type, m.Payload)
	if err != nil {
		return nil, err
	}
	rec := kafka.EventRecord(m.Type.Topic(r.cfg.TopicPrefix), m.Key, m.ID, m.Type, value)
	if m.Type == event.UserBlocked || m.Type == event.UserUnblocked {
		// The block topic is compacted per pair: keyed by the blocker alone (the row's key, its shard), compaction
		// would keep only each blocker's latest block.
		var b event.Block
		if err := json.Unmarshal(m.Payload, &b); err != nil {
			return nil, fmt.Errorf("outbox row %d: %w", m.ID, err)
		}
		rec.Key = []byte(event.BlockKey(int64(b.UserID), int64(b.BlockedUserID)))
	}
	kafka.SetCreatedAt(rec, m.CreatedAt)
	return rec, nil
}

// deleteLoop deletes acknowledged rows in batches: whatever was acknowledged while the last delete ran.
func (r *Relay) deleteLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ackedCh:
			if r.tail == nil {
				r.deleteAcked(ctx)
				continue
			}
			// No fast path or poll round re-reads a stream relay's rows soon: a pause gathers more of them into each
			// DELETE, the relay's only steady SQL. Under a backlog each deleter takes one statement's worth, so that
			// the deleters run at once.
			sleep(ctx, tailDeleteDelay)
			r.deleteRows(ctx, r.takeAcked(deleteBatch))
		}
	}
}

// deleteBatch bounds one DELETE's IN list. Each DELETE is a commit, the dearest step of the drain, so under a backlog
// the deleter takes many batches' rows at once; the bound keeps the statement well within every engine's limits
// (SQLite's bound parameters, MariaDB's range optimizer memory, vtgate's bind variables).
const deleteBatch = 2000

// deleters is how many DELETEs of acknowledged rows run at once. A MariaDB DELETE spends much of its time waiting
// (for its commit's log flush, for a core): four at once drained a 100,000-row backlog about a quarter faster than
// one in bench relay, and their commits share flushes. SQLite has one writer, which would only queue them.
func (r *Relay) deleters() int {
	if r.db.Dialect == sqldb.MySQL {
		return 4
	}
	return 1
}

// deleteAcked deletes the rows acknowledged so far under a deadline of its own, never cancelled with ctx: the ids
// leave r.acked here, so a delete cut short by shutdown would leave their rows to be published again.
func (r *Relay) deleteAcked(ctx context.Context) {
	r.deleteRows(ctx, r.takeAcked(0))
}

// takeAcked takes up to limit acknowledged rows (0: all) off r.acked; what it leaves is signalled to another deleter.
func (r *Relay) takeAcked(limit int) []published {
	r.mu.Lock()
	defer r.mu.Unlock()
	rows := r.acked
	if limit == 0 || len(rows) <= limit {
		r.acked = nil
		return rows
	}
	r.acked = rows[limit:]
	select {
	case r.ackedCh <- struct{}{}:
	default:
	}
	return rows[:limit]
}

// deleteRows deletes rows, deleteBatch to a statement, under a deadline of its own (see deleteAcked).
func (r *Relay) deleteRows(ctx context.Context, rows []published) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DeleteTimeout)
	defer cancel()
	for len(rows) > 0 {
		n := min(len(rows), deleteBatch)
		if err := remove(ctx, r.db, rows[:n]); err != nil {
			// The rows stay; the poller publishes them again, which consumers tolerate.
			r.logger.Warn("relay: cannot delete published rows", "rows", len(rows), "err", err)
			if r.tail != nil {
				// The stream does not bring them again, and the poller only once they are a minute old: the next
				// acknowledgement's delete takes them along.
				r.mu.Lock()
				r.acked = append(r.acked, rows...)
				r.mu.Unlock()
			}
			return
		}
		rows = rows[n:]
	}
}

func (r *Relay) pollLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		r.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll publishes the owned shards' rows older than MinAge, each shard oldest first and all shards at once (a key's
// rows are all in one shard, so its order holds), until none are left or the broker fails.
func (r *Relay) poll(ctx context.Context) {
	owned := r.coord.Owned()
	cutoff := r.now().Add(-r.cfg.MinAge)
	var wg sync.WaitGroup
	for _, shard := range owned {
		wg.Go(func() { r.pollShard(ctx, shard, cutoff) })
	}
	wg.Wait()
	r.deleteAcked(ctx) // before the next round reads the shards again
	if counts, firsts, err := backlog(ctx, r.db, owned); err == nil {
		r.metrics.observeBacklog(counts, firsts, r.now())
	}
}

// pollShard walks a shard's rows up to cutoff in batches. It reads the next batch while the broker acknowledges the
// previous ones (franz-go bounds how many records are in flight), and stops at the first failed publish: the rest
// waits for the next round.
func (r *Relay) pollShard(ctx context.Context, shard int, cutoff time.Time) {
	var inFlight sync.WaitGroup
	var failed atomic.Bool
	from := position{}
	for ctx.Err() == nil && !failed.Load() {
		msgs, err := oldest(ctx, r.db, shard, cutoff, from, r.cfg.BatchSize)
		if err != nil {
			r.logger.Warn("relay: cannot read the outbox", "shard", shard, "err", err)
			break
		}
		if len(msgs) > 0 {
			inFlight.Add(1)
			r.publish(msgs, "poll", func(f bool) {
				if f {
					failed.Store(true)
				}
				inFlight.Done()
			})
		}
		if len(msgs) < r.cfg.BatchSize {
			break
		}
		last := msgs[len(msgs)-1]
		from = position{last.CreatedAt, last.ID}
	}
	acked := make(chan struct{})
	go func() {
		inFlight.Wait()
		close(acked)
	}()
	select {
	case <-acked:
	case <-time.After(r.cfg.AckTimeout):
		failed.Store(true) // the unacknowledged rows stay in the table for a later round
	case <-ctx.Done():
		return
	}
	if failed.Load() {
		r.logger.Warn("relay: the broker did not acknowledge every polled row; the rest waits for the next poll", "shard", shard)
	}
}
