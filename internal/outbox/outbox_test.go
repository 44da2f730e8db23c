package outbox

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"board/internal/apijson"
	"board/internal/embedded"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

var quiet = slog.New(slog.DiscardHandler)

// Test timing: everything SPEC §5.2 counts in seconds runs here in tens of milliseconds.
var (
	testCoordinator = CoordinatorConfig{Ping: 30 * time.Millisecond, DeadAfter: 200 * time.Millisecond}
	testRelay       = RelayConfig{TopicPrefix: "test-", PollInterval: 50 * time.Millisecond, MinAge: 100 * time.Millisecond,
		AckTimeout: 2 * time.Second}
)

// ids is the tests' one event id generator, as a process has one.
var ids = func() *snowflake.Generator {
	g, err := snowflake.New(3, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// harness is one database, one Redis, one broker with the event topics, shared by the relays of a test.
type harness struct {
	t        *testing.T
	db       *sqldb.DB
	rdb      redis.UniversalClient
	prefix   string // Redis key prefix
	dir      string // broker data directory
	addr     string // broker address, kept across restarts
	broker   *embedded.Kafka
	producer *kgo.Client
}

// run calls fn once per SQL backend, with a fresh harness.
func run(t *testing.T, fn func(t *testing.T, h *harness)) {
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) { fn(t, newHarness(t, db)) })
}

// newHarness returns a harness over db with a Redis key prefix and a broker of its own.
func newHarness(t *testing.T, db *sqldb.DB) *harness {
	h := &harness{t: t, db: db, dir: t.TempDir()}
	r := redisclienttest.Real(t)
	h.rdb, h.prefix = r.Client, r.Prefix
	h.startBroker("127.0.0.1:0")
	producer, err := kafka.NewProducer([]string{h.addr}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	h.producer = producer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, producer, event.Topics(testRelay.TopicPrefix), 3); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) startBroker(addr string) {
	broker, err := embedded.StartKafka(addr, h.dir, embedded.DefaultKafkaRetention, quiet)
	if err != nil {
		h.t.Fatal(err)
	}
	h.broker, h.addr = broker, broker.Addrs()[0]
	h.t.Cleanup(broker.Close)
}

// relay starts a relay (an instance of service "article") over the harness and returns its outbox and a stop func
// that shuts it down the way a process does.
func (h *harness) relay(cfg RelayConfig, coord CoordinatorConfig) (*Outbox, *Relay, func()) {
	return h.measuredRelay(cfg, coord, nil)
}

// measuredRelay is relay with metrics, for tests that watch what the relay did.
func (h *harness) measuredRelay(cfg RelayConfig, coord CoordinatorConfig, metrics *Metrics) (*Outbox, *Relay, func()) {
	r := NewRelay(h.db, h.producer, NewCoordinator(h.rdb, h.prefix, "article", DefaultShards, coord, quiet, metrics), cfg, quiet,
		metrics)
	ob := New(h.db, DefaultShards, ids, time.Now, metrics, r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	h.t.Cleanup(stop)
	return ob, r, stop
}

// capture records the ids of the events ob commits, in front of whatever ob hands them to (its relay, if any).
func capture(ob *Outbox) func() []int64 {
	var mu sync.Mutex
	var got []int64
	next := ob.onCommit
	ob.onCommit = func(msgs []Message) {
		mu.Lock()
		for _, m := range msgs {
			got = append(got, m.ID)
		}
		mu.Unlock()
		if next != nil {
			next(msgs)
		}
	}
	return func() []int64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// write commits n events through ob from 10 goroutines at once, keys spread over every shard.
func write(t *testing.T, ob *Outbox, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 10 {
		wg.Go(func() {
			for i := w; i < n; i += 10 {
				errs <- ob.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
					return emit(event.ArticleCreated, int64(i%7), event.Article{ArticleID: apijson.ID(i), BoardID: apijson.ID(i % 7)})
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// consume reads the article topic from the start until every id in want arrived, and returns how many times each
// event id arrived.
func (h *harness) consume(want []int64, within time.Duration) map[int64]int {
	h.t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(h.addr), kgo.ConsumeTopics(event.ArticleCreated.Topic(testRelay.TopicPrefix)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		h.t.Fatal(err)
	}
	defer client.Close()
	seen := map[int64]int{}
	missing := func() (n int) {
		for _, id := range want {
			if seen[id] == 0 {
				n++
			}
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for missing() > 0 && ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			env, err := event.Decode(rec.Value)
			if err != nil {
				h.t.Errorf("undecodable record: %v", err)
				return
			}
			seen[int64(env.EventID)]++
		})
	}
	if n := missing(); n > 0 {
		h.t.Fatalf("%d of %d events never arrived", n, len(want))
	}
	return seen
}

// checkExactly fails unless the events that arrived are exactly want, each once.
func checkExactly(t *testing.T, seen map[int64]int, want []int64) {
	t.Helper()
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("event %d arrived %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct events arrived, want %d", len(seen), len(want))
	}
}

// checkAtLeastOnce fails unless every event in want arrived and nothing else did; it returns the duplicates.
func checkAtLeastOnce(t *testing.T, seen map[int64]int, want []int64) (duplicates int) {
	t.Helper()
	for _, id := range want {
		duplicates += seen[id] - 1
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct events arrived, want %d", len(seen), len(want))
	}
	return duplicates
}

// rowsLeft counts the outbox rows.
func (h *harness) rowsLeft() int {
	var n int
	if err := h.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM outbox").Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// waitEmpty waits until the relays deleted every row.
func (h *harness) waitEmpty(within time.Duration) {
	h.t.Helper()
	polltest.Until(h.t, within, func() (bool, string) {
		n := h.rowsLeft()
		return n == 0, "outbox still holds " + strconv.Itoa(n) + " rows"
	})
}

// noPoll keeps the poller away (rows never get old enough), to see the fast path alone.
var noPoll = RelayConfig{TopicPrefix: testRelay.TopicPrefix, PollInterval: time.Hour, MinAge: time.Hour}

func TestFastPathPublishesEveryWriteOnce(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		ob, _, _ := h.relay(noPoll, testCoordinator)
		written := capture(ob)
		write(t, ob, 1000)
		want := written()
		if len(want) != 1000 {
			t.Fatalf("%d events committed, want 1000", len(want))
		}
		checkExactly(t, h.consume(want, 20*time.Second), want)
		h.waitEmpty(5 * time.Second)
	})
}

func TestRecordShape(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		ob, _, _ := h.relay(noPoll, testCoordinator)
		written := capture(ob)
		payload := event.Article{ArticleID: 77, Title: "t", BoardID: 123456789012, BoardArticleCount: 5, ArticleVersion: 1}
		if err := ob.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
			return emit(event.ArticleCreated, 123456789012, payload)
		}); err != nil {
			t.Fatal(err)
		}
		rec := firstRecord(t, h.addr, "test-article")
		id := strconv.FormatInt(written()[0], 10)
		headers := map[string]string{}
		for _, hd := range rec.Headers {
			headers[hd.Key] = string(hd.Value)
		}
		if string(rec.Key) != "123456789012" || headers[event.HeaderType] != "ARTICLE_CREATED" || headers[event.HeaderEventID] != id {
			t.Errorf("record key %q, headers %v; want key 123456789012, type ARTICLE_CREATED, event id %s", rec.Key, headers, id)
		}
		env, err := event.Decode(rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		got, err := event.Payload[event.Article](env)
		if err != nil || got != payload || env.EventID.String() != id {
			t.Errorf("envelope %s: payload %+v (%v), want %+v with event id %s", rec.Value, got, err, payload, id)
		}
	})
}

// A block's row is keyed (and sharded) by the blocker, its record by the pair: the block topic is compacted per pair.
func TestBlockRecordKeyedByPair(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		ob, _, _ := h.relay(noPoll, testCoordinator)
		if err := ob.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
			return emit(event.UserBlocked, 11, event.Block{UserID: 11, BlockedUserID: 22, Blocked: true, BlockVersion: 1})
		}); err != nil {
			t.Fatal(err)
		}
		if rec := firstRecord(t, h.addr, "test-block"); string(rec.Key) != event.BlockKey(11, 22) {
			t.Errorf("record key %q, want %q", rec.Key, event.BlockKey(11, 22))
		}
	})
}

// TestRecordCarriesCreatedAt: the record of an event says when its row was written (kafka.HeaderCreatedAt, to the
// millisecond), whichever path publishes it. The rows are a minute old, so that the produce time cannot pass for it.
func TestRecordCarriesCreatedAt(t *testing.T) {
	t.Parallel()
	minuteAgo := func() time.Time { return time.Now().Add(-time.Minute) }
	emitOne := func(t *testing.T, ob *Outbox) {
		t.Helper()
		if err := ob.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
			return emit(event.ArticleCreated, 5, event.Article{ArticleID: 1, BoardID: 5})
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		publish func(t *testing.T, h *harness) (createdAt time.Time)
	}{
		{"fast path", func(t *testing.T, h *harness) time.Time {
			r := NewRelay(h.db, h.producer, NewCoordinator(h.rdb, h.prefix, "article", DefaultShards, testCoordinator, quiet, nil),
				noPoll, quiet, nil)
			ob := New(h.db, DefaultShards, ids, minuteAgo, nil, r)
			var createdAt time.Time
			next := ob.onCommit
			ob.onCommit = func(msgs []Message) {
				createdAt = msgs[0].CreatedAt // the value the row was written with, read before the relay gets it
				next(msgs)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.Run(ctx)
			}()
			t.Cleanup(func() { cancel(); <-done })
			emitOne(t, ob)
			return createdAt
		}},
		{"poller", func(t *testing.T, h *harness) time.Time {
			emitOne(t, New(h.db, DefaultShards, ids, minuteAgo, nil, nil)) // no relay yet: the row waits in the table
			var createdAt time.Time
			if err := h.db.QueryRowContext(context.Background(), "SELECT created_at FROM outbox").Scan(&createdAt); err != nil {
				t.Fatal(err)
			}
			h.relay(testRelay, testCoordinator)
			return createdAt
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run(t, func(t *testing.T, h *harness) {
				createdAt := tc.publish(t, h)
				rec := firstRecord(t, h.addr, "test-article")
				var stamp string
				for _, hd := range rec.Headers {
					if hd.Key == kafka.HeaderCreatedAt {
						stamp = string(hd.Value)
					}
				}
				if want := strconv.FormatInt(createdAt.UnixMilli(), 10); stamp != want {
					t.Errorf("%s header %q, want the row's created_at %v in Unix milliseconds, %s",
						kafka.HeaderCreatedAt, stamp, createdAt, want)
				}
			})
		})
	}
}

func TestBrokerOutageLosesNothing(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		ob, _, _ := h.relay(testRelay, testCoordinator)
		written := capture(ob)
		h.broker.Close()
		write(t, ob, 1000) // every write commits although nothing can be published
		if n := h.rowsLeft(); n != 1000 {
			t.Errorf("%d rows wait in the outbox during the outage, want 1000", n)
		}
		h.startBroker(h.addr) // the same address and log directory: the broker is back
		want := written()
		checkAtLeastOnce(t, h.consume(want, 30*time.Second), want)
		h.waitEmpty(10 * time.Second)
	})
}

func TestFullQueueFallsBackToThePoller(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		cfg := testRelay
		cfg.QueueSize = 1
		ob, _, _ := h.relay(cfg, testCoordinator)
		written := capture(ob)
		write(t, ob, 1000)
		want := written()
		checkAtLeastOnce(t, h.consume(want, 20*time.Second), want)
		h.waitEmpty(10 * time.Second)
	})
}

func TestRestartedRelayPublishesWaitingRows(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		writer := New(h.db, DefaultShards, ids, time.Now, nil, nil) // no relay: as if it crashed after commit
		written := capture(writer)
		write(t, writer, 300)
		if n := h.rowsLeft(); n != 300 {
			t.Fatalf("%d rows waiting, want 300", n)
		}
		h.relay(testRelay, testCoordinator)
		want := written()
		// At least once: a poll round that outwaits its acknowledgement bound leaves rows for the next one.
		checkAtLeastOnce(t, h.consume(want, 20*time.Second), want)
		h.waitEmpty(5 * time.Second)
	})
}

// recordsOnTopic counts the records the broker holds on the article topic: the sum of its partitions' end offsets.
func (h *harness) recordsOnTopic() int64 {
	h.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = event.ArticleCreated.Topic(testRelay.TopicPrefix)
	for p := range int32(3) { // the partitions run creates
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1 // -1: the end of the log
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), h.producer)
	if err != nil {
		h.t.Fatal(err)
	}
	var n int64
	for _, p := range resp.Topics[0].Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			h.t.Fatalf("end offset of %s/%d: %v", rt.Topic, p.Partition, err)
		}
		n += p.Offset
	}
	return n
}

// holdOutbox makes every delete from the outbox wait, as a busy database does, until release is called: another
// transaction locks all the rows (on SQLite, holding the one write connection is enough).
func (h *harness) holdOutbox() (release func()) {
	return sqldbtest.HoldLock(h.t, h.db, "SELECT outbox_id FROM outbox"+h.db.ForUpdate())
}

// gathered returns the sum of the samples of the metric name in reg and how many series it has.
func gathered(t *testing.T, reg *prometheus.Registry, name string) (sum float64, series int) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			series++
		}
	}
	return sum, series
}

// TestShutdownDeletesWhatWasAcknowledged stops a relay while its deletes of acknowledged rows wait for the database.
// Shutdown must let them finish rather than cancel them: the outbox ends empty, and the relay that starts next
// publishes nothing a second time.
func TestShutdownDeletesWhatWasAcknowledged(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		const n = 200
		// Rows a minute old, written with no relay: the first poll round publishes them all, and no fast path runs.
		writer := New(h.db, DefaultShards, ids, func() time.Time { return time.Now().Add(-time.Minute) }, nil, nil)
		write(t, writer, n)
		// One poll round, at start; a delete may wait far longer than this test takes.
		cfg := RelayConfig{TopicPrefix: testRelay.TopicPrefix, PollInterval: time.Hour, AckTimeout: 10 * time.Second,
			DeleteTimeout: time.Minute}

		release := h.holdOutbox()
		reg := prometheus.NewRegistry()
		_, r, stop := h.measuredRelay(cfg, testCoordinator, NewMetricVecs(reg).For("article"))
		waitFor(t, "the broker to acknowledge every row and the relay to start deleting them", 20*time.Second, func() bool {
			published, _ := gathered(t, reg, "board_outbox_events_published_total")
			r.mu.Lock()
			defer r.mu.Unlock()
			return published == n && len(r.acked) == 0
		})
		stopped := make(chan struct{})
		go func() {
			stop()
			close(stopped)
		}()
		// A delete cancelled by the shutdown fails at once and the relay stops; a delete that outlives it waits for the
		// lock. Either way, the rows are released only after shutdown began.
		select {
		case <-stopped:
		case <-time.After(500 * time.Millisecond):
		}
		release()
		<-stopped
		if left := h.rowsLeft(); left != 0 {
			t.Errorf("%d acknowledged rows left in the outbox after a clean stop, want 0", left)
		}

		reg = prometheus.NewRegistry()
		_, _, stop = h.measuredRelay(cfg, testCoordinator, NewMetricVecs(reg).For("article"))
		waitFor(t, "the next relay's first poll round", 20*time.Second, func() bool {
			_, shards := gathered(t, reg, "board_outbox_backlog") // observed at the end of a round
			return shards == DefaultShards
		})
		stop()
		if records := h.recordsOnTopic(); records != n {
			t.Errorf("the broker holds %d records of %d events: a restart after a clean stop published some again", records, n)
		}
	})
}

// firstRecord reads topic from the start on the broker at addr and returns its first record, failing the test if
// none arrives within ten seconds.
func firstRecord(t *testing.T, addr, topic string) *kgo.Record {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rec *kgo.Record
	for rec == nil && ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) { rec = r })
	}
	if rec == nil {
		t.Fatal("no record arrived")
	}
	return rec
}

// An event id that cannot be issued (the node lease lapsed, say, while the process was stopped) fails the write
// with 503 ID_UNAVAILABLE, not a 500, and writes nothing.
func TestEventIDUnavailable(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		lapsed, err := snowflake.New(4, nil)
		if err != nil {
			t.Fatal(err)
		}
		lapsed.ExtendUntil(time.Now().Add(-time.Second))
		err = New(db, DefaultShards, lapsed, time.Now, nil, nil).Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
			return emit(event.ArticleDeleted, 1, map[string]string{"articleId": "1"})
		})
		if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "ID_UNAVAILABLE" {
			t.Errorf("Transact = %v, want 503 ID_UNAVAILABLE", err)
		}
		if n := (&harness{t: t, db: db}).rowsLeft(); n != 0 {
			t.Errorf("%d outbox rows written", n)
		}
	})
}

// TestPollReadsOneRange: the poll query starts each batch at its cursor in the (shard_key, created_at) index, rather
// than reading the shard from its start over the rows published before it, on every engine.
func TestPollReadsOneRange(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		if db.Vitess() {
			t.Skip("vtgate explains its own plan, not the shards'")
		}
		ctx := context.Background()
		writer := New(db, DefaultShards, ids, time.Now, nil, nil)
		for i := range 200 { // all in shard 0, enough that MariaDB's planner weighs its choices
			if err := writer.Transact(ctx, func(_ *sql.Tx, emit Emit) error {
				return emit(event.ArticleCreated, int64(i%2*DefaultShards), event.Article{ArticleID: apijson.ID(i)})
			}); err != nil {
				t.Fatal(err)
			}
		}
		// A cursor three quarters into the shard, where a walk from the shard's start reads 150 rows for nothing.
		read, err := oldest(ctx, db, 0, time.Now(), position{}, 150)
		if err != nil || len(read) != 150 {
			t.Fatalf("oldest: %d rows, %v", len(read), err)
		}
		last := read[len(read)-1]
		query, args := oldestQuery(db, 0, time.Now(), position{last.CreatedAt, last.ID}, 100)
		if db.Dialect == sqldb.SQLite {
			// e.g. "SEARCH outbox USING INDEX idx_shard_key_created_at (shard_key=? AND created_at>? AND created_at<?)"
			var plan []string
			rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var id, parent, unused int
				var detail string
				if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			if len(plan) != 1 || !strings.Contains(plan[0], "idx_shard_key_created_at (shard_key=? AND created_at>?") {
				t.Errorf("plan %q, want one search of idx_shard_key_created_at from the cursor on", plan)
			}
			return
		}
		rows, err := db.QueryContext(ctx, "EXPLAIN "+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		columns, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			values := make([]sql.NullString, len(columns))
			dest := make([]any, len(values))
			for i := range values {
				dest[i] = &values[i]
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			plan := map[string]string{}
			for i, c := range columns {
				plan[c] = values[i].String
			}
			if plan["type"] != "range" || plan["key"] != "idx_shard_key_created_at" {
				t.Errorf("plan %v, want a range of idx_shard_key_created_at", plan)
			}
		}
	})
}

// TestPolledBatchesKeepKeyOrder: a backlog polled in many batches, every shard at once, reaches the broker with each
// key's events in outbox order, and leaves the outbox empty.
func TestPolledBatchesKeepKeyOrder(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		writer := New(h.db, DefaultShards, ids, time.Now, nil, nil) // no relay: the rows wait for the poller
		written := capture(writer)
		for i := range 600 {
			if err := writer.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
				return emit(event.ArticleCreated, int64(i%9), event.Article{ArticleID: apijson.ID(i), BoardID: apijson.ID(i % 9)})
			}); err != nil {
				t.Fatal(err)
			}
		}
		cfg := testRelay
		cfg.BatchSize = 7 // batches that end inside a key's run of events
		h.relay(cfg, testCoordinator)
		want := written()
		byKey := map[string][]int64{}
		seen := map[int64]bool{}
		client, err := kgo.NewClient(kgo.SeedBrokers(h.addr), kgo.ConsumeTopics(event.ArticleCreated.Topic(testRelay.TopicPrefix)),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for len(seen) < len(want) && ctx.Err() == nil {
			client.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				env, err := event.Decode(rec.Value)
				if err != nil {
					t.Fatal(err)
				}
				id := int64(env.EventID)
				if !seen[id] { // a duplicate (a round that outwaited its acknowledgements) is no reordering
					seen[id] = true
					byKey[string(rec.Key)] = append(byKey[string(rec.Key)], id)
				}
			})
		}
		if len(seen) != len(want) {
			t.Fatalf("%d of %d events arrived", len(seen), len(want))
		}
		for key, got := range byKey {
			if !slices.IsSorted(got) { // one writer: outbox order is id order
				t.Errorf("key %s: events arrived as %v, want outbox order", key, got)
			}
		}
		h.waitEmpty(10 * time.Second)
	})
}

// TestFailedPublishDeletesNothing: in a polled batch whose one record the producer refuses, the broker's other
// acknowledgements are deleted and the refused row stays in the table, counted as a failure.
func TestFailedPublishDeletesNothing(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		// A producer whose batches cannot hold the big row: franz-go fails it at once with MESSAGE_TOO_LARGE.
		producer, err := kafka.NewProducer([]string{h.addr}, time.Second, kgo.ProducerBatchMaxBytes(16<<10))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(producer.Close)
		h.producer = producer
		writer := New(h.db, DefaultShards, ids, time.Now, nil, nil)
		big := capture(writer)
		emitOne := func(title string) {
			if err := writer.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
				return emit(event.ArticleCreated, 4, event.Article{ArticleID: 1, Title: title, BoardID: 4})
			}); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 {
			emitOne("small")
		}
		emitOne(strings.Repeat("x", 32<<10))
		bigID := big()[5]
		for range 5 {
			emitOne("small")
		}
		cfg := testRelay
		cfg.MinAge = time.Nanosecond
		reg := prometheus.NewRegistry()
		h.measuredRelay(cfg, testCoordinator, NewMetricVecs(reg).For("article"))
		waitFor(t, "the ten small rows to be published and deleted", 20*time.Second, func() bool {
			return h.rowsLeft() == 1
		})
		var left int64
		if err := h.db.QueryRowContext(context.Background(), "SELECT outbox_id FROM outbox").Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != bigID {
			t.Errorf("row %d left, want the refused row %d", left, bigID)
		}
		if failures, _ := gathered(t, reg, "board_outbox_publish_failures_total"); failures < 1 {
			t.Errorf("%v publish failures counted, want at least 1", failures)
		}
	})
}

// TestManyEventsInOneTransaction: the events of a transaction are written at its end, several statements' worth
// here, every one in the order emitted and none when the transaction fails after emitting.
func TestManyEventsInOneTransaction(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ids, err := snowflake.New(5, nil)
		if err != nil {
			t.Fatal(err)
		}
		ob := New(db, DefaultShards, ids, time.Now, nil, nil)
		const n = 2*insertRows + 7
		failed := errors.New("the transaction's own work failed")
		err = ob.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
			for i := range n {
				if err := emit(event.ArticleLiked, int64(i+1), map[string]int{"n": i}); err != nil {
					return err
				}
			}
			return failed
		})
		h := &harness{t: t, db: db}
		if !errors.Is(err, failed) || h.rowsLeft() != 0 {
			t.Fatalf("a failed transaction: %v, %d rows written; want its error and none", err, h.rowsLeft())
		}
		var want []int64
		err = ob.Transact(context.Background(), func(_ *sql.Tx, emit Emit) error {
			want = want[:0]
			for i := range n {
				if err := emit(event.ArticleLiked, int64(i+1), map[string]int{"n": i}); err != nil {
					return err
				}
				want = append(want, int64(i+1))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(context.Background(), "SELECT record_key FROM outbox ORDER BY outbox_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []int64
		for rows.Next() {
			var k int64
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			got = append(got, k)
		}
		if !slices.Equal(got, want) {
			t.Errorf("rows by id hold keys %v..., want 1..%d in order (%d rows)", got[:min(5, len(got))], n, len(got))
		}
	})
}

func TestPadded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []int64 }{
		{[]int64{7}, []int64{7}},
		{[]int64{1, 2, 3}, []int64{1, 2, 3, 3}},
		{[]int64{1, 2, 3, 4, 5}, []int64{1, 2, 3, 4, 5, 5, 5, 5}},
	} {
		if got := padded(slices.Clone(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("padded(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
