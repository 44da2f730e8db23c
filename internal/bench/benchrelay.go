package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/kafka"
	"board/internal/outbox"
	"board/internal/progress"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

func benchRelay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench relay", `Usage: board bench relay [flags]

Fills the outbox of a scratch database (relay_bench, on the configured SQL engine) with a backlog of events, then
times one relay — coordinator, poller, broker acknowledgements and deletes — draining it into Kafka (the configured
brokers, or the embedded one). Prints events per second, beside the floor: the same records produced from memory.

With --relay vstream (behind vtgate, with --vtgate-grpc-addr) the stream relay is measured after the polling one in
the same run: the drain of a backlog written while it was stopped, then for both the time from a write's commit to
its record reaching a consumer at --rate writes/s, and, with --vitess-vars, the SQL statements each relay sent.
Fails when the stream relay drains slower than the polling one or its p99 passes --max-p99.`, stderr)
	cfg.EngineFlags(fs)
	events := fs.Int("events", 100_000, "backlog size")
	batch := fs.Int("batch", 100, "rows per poll query (SPEC: 100)")
	rate := fs.Int("rate", 500, "writes per second while the latency is measured")
	duration := fs.Duration("duration", 10*time.Second, "how long the latency is measured, per relay")
	vars := fs.String("vitess-vars", "", "vtgate's /debug/vars URL (vtcombo's HTTP port: scripts/vitess's port - 3), to count the relays' statements")
	maxP99 := fs.Duration("max-p99", 50*time.Millisecond, "the stream relay's write-to-publish p99 target")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	if err := e.StartRedis(ctx); err != nil {
		return err
	}
	if err := e.StartKafka(ctx); err != nil {
		return err
	}
	db, _, ids, err := toolDatabase(ctx, e, "relay_bench", outbox.Migrate)
	if err != nil {
		return err
	}
	b := &relayBench{e: e, db: db, ids: ids, batch: *batch, vars: *vars, stdout: stdout, stderr: stderr}

	floor, err := b.floor(ctx, *events)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "floor: %d records produced from memory to kafka %v: %.0f events/s\n", *events, e.KafkaBrokers, floor)
	kinds := []string{app.RelayPoll}
	if cfg.Relay == app.RelayVStream {
		if !db.Vitess() || cfg.VTGateGRPCAddr == "" {
			return errors.New("--relay vstream needs --mysql-dsn naming a vtgate and --vtgate-grpc-addr")
		}
		kinds = append(kinds, app.RelayVStream)
	}
	results := map[string]relayResult{}
	for _, kind := range kinds {
		res, err := b.run(ctx, kind, *events, *rate, *duration)
		if err != nil {
			return fmt.Errorf("%s relay: %w", kind, err)
		}
		results[kind] = res
		fmt.Fprintf(stdout, "relayed %d events from %s to kafka %v in %s: %.0f events/s (%s relay, batch %d)%s\n", *events,
			db.Dialect, e.KafkaBrokers, res.drain.Round(time.Millisecond), float64(*events)/res.drain.Seconds(), kind,
			*batch, res.drainSQL)
		fmt.Fprintf(stdout, "%s relay at %d writes/s for %s: write to consumer p50 %s, p99 %s, max %s (%d events)%s\n", kind,
			*rate, *duration, res.p50, res.p99, res.max, res.n, res.liveSQL)
	}
	vs, ok := results[app.RelayVStream]
	if !ok {
		return nil
	}
	poll := results[app.RelayPoll]
	ratio := poll.drain.Seconds() / vs.drain.Seconds()
	fmt.Fprintf(stdout, "stream relay drains at %.2fx the polling relay's rate\n", ratio)
	var failed []string
	if ratio < 1 {
		failed = append(failed, fmt.Sprintf("the stream relay drained at %.2fx the polling relay, below 1x", ratio))
	}
	if vs.p99 > *maxP99 {
		failed = append(failed, fmt.Sprintf("the stream relay's p99 %s is above %s", vs.p99, *maxP99))
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

type relayBench struct {
	e              *app.Engines
	db             *sqldb.DB
	ids            *snowflake.Generator
	batch          int
	vars           string
	stdout, stderr io.Writer
}

type relayResult struct {
	drain             time.Duration
	p50, p99, max     time.Duration
	n                 int
	drainSQL, liveSQL string // the statements the relay sent, when --vitess-vars is given
}

// relay builds a relay of kind. A polling relay runs as a service does (fast path, polls every 10 s) when fast, else
// it polls as fast as it can, as the backlog's drain does. A stream relay always runs as a service does: its
// poller is only a safety net for rows a minute old.
func (b *relayBench) relay(kind string, fast bool, metrics *outbox.Metrics) (*outbox.Relay, error) {
	cfg := b.e.Config
	coord := outbox.NewCoordinator(b.e.Redis, cfg.RedisPrefix+"bench:", "relay-bench", cfg.OutboxShards,
		outbox.CoordinatorConfig{}, b.e.Logger, nil)
	rc := outbox.RelayConfig{TopicPrefix: cfg.TopicPrefix, BatchSize: b.batch}
	if kind == app.RelayPoll {
		if !fast {
			rc.PollInterval, rc.MinAge = 10*time.Millisecond, time.Nanosecond
		}
		return outbox.NewRelay(b.db, b.e.Producer, coord, rc, b.e.Logger, metrics), nil
	}
	return outbox.NewVStreamRelay(b.db, b.e.Producer, coord, b.e.Redis, rc, outbox.VStreamConfig{Addr: cfg.VTGateGRPCAddr,
		Keyspace: b.db.Name, Shards: cfg.OutboxShards, PositionKey: b.positionKey()}, b.e.Logger, metrics)
}

func (b *relayBench) positionKey() string {
	return b.e.Config.RedisPrefix + "bench:outbox-vstream::relay-bench::position"
}

// start runs relay until the returned stop is called.
func start(ctx context.Context, relay *outbox.Relay) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay.Run(runCtx)
	}()
	return func() { cancel(); <-done }
}

func (b *relayBench) run(ctx context.Context, kind string, events, rate int, duration time.Duration) (relayResult, error) {
	var res relayResult
	plain := outbox.New(b.db, b.e.Config.OutboxShards, b.ids, time.Now, nil, nil)
	if kind == app.RelayVStream {
		// The stream relay resumes from its saved position: save one now, so that the backlog written next is what it
		// finds after a stop, as after an outage.
		if err := b.e.Redis.Del(ctx, b.positionKey()).Err(); err != nil {
			return res, err
		}
		if err := b.primeStream(ctx); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(b.stdout, "filling the outbox of %s %s with %d events\n", b.db.Dialect, b.db.Name, events)
	if err := fillOutbox(ctx, plain, events); err != nil {
		return res, err
	}
	// The progress comes from the relay's own counter: a COUNT(*) of the outbox as often would take a core of the
	// database that the drain competes for.
	reg := prometheus.NewRegistry()
	relay, err := b.relay(kind, false, outbox.NewMetricVecs(reg).For("relay-bench"))
	if err != nil {
		return res, err
	}
	before := b.statements(ctx)
	bar := progress.Start(b.stderr, "events", int64(events))
	began := time.Now()
	stop := start(ctx, relay)
	probes, err := b.waitDrained(ctx, func() bool {
		n := publishedEvents(reg)
		bar.Set(min(n, int64(events)))
		return n >= int64(events)
	})
	res.drain = time.Since(began)
	bar.Finish()
	stop()
	if err != nil {
		return res, err
	}
	res.drainSQL = b.statementRate(ctx, before, res.drain, probes)

	relay, err = b.relay(kind, true, nil)
	if err != nil {
		return res, err
	}
	ob := outbox.New(b.db, b.e.Config.OutboxShards, b.ids, time.Now, nil, relay)
	stop = start(ctx, relay)
	defer stop()
	lat, err := measureLatency(ctx, b.e, ob, rate, duration, func() func() string {
		before := b.statements(ctx)
		began := time.Now()
		return func() string { return b.statementRate(ctx, before, time.Since(began), 0) }
	}, &res)
	if err != nil {
		return res, err
	}
	slices.Sort(lat)
	res.n = len(lat)
	res.p50, res.p99, res.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	return res, nil
}

// primeStream runs the stream relay until it has saved a position and published what the table held.
func (b *relayBench) primeStream(ctx context.Context) error {
	relay, err := b.relay(app.RelayVStream, true, nil)
	if err != nil {
		return err
	}
	stop := start(ctx, relay)
	defer stop()
	deadline := time.Now().Add(time.Minute)
	for b.e.Redis.Exists(ctx, b.positionKey()).Val() == 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("the stream relay saved no position within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = b.waitDrained(ctx, func() bool { return true })
	return err
}

// waitDrained waits until the outbox holds no row and published says all were acknowledged; it returns how many
// queries it made of the table.
func (b *relayBench) waitDrained(ctx context.Context, published func() bool) (int, error) {
	probes := 0
	for ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		// A look at the first row, cheap at any size.
		var id int64
		probes++
		err := b.db.QueryRowContext(ctx, "SELECT outbox_id FROM outbox LIMIT 1").Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if published() {
				return probes, nil
			}
		case err != nil:
			return probes, err
		default:
			published()
		}
	}
	return probes, errors.New("interrupted before the outbox was drained")
}

// statements reads vtgate's count of SELECTs and DELETEs of the bench's outbox table; nil without --vitess-vars.
func (b *relayBench) statements(ctx context.Context) map[string]float64 {
	if b.vars == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.vars, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(b.stderr, "cannot read %s: %v\n", b.vars, err)
		return nil
	}
	defer resp.Body.Close()
	var v struct {
		QueryExecutionsByTable map[string]float64
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		fmt.Fprintf(b.stderr, "cannot read %s: %v\n", b.vars, err)
		return nil
	}
	out := map[string]float64{}
	for _, op := range []string{"SELECT", "DELETE"} {
		// Keyed by statement type and keyspace_table.
		out[op] = v.QueryExecutionsByTable[op+"."+b.db.Name+"_outbox"]
	}
	return out
}

// statementRate says how many statements per second the relay sent vtgate since before, less the bench's own probes.
func (b *relayBench) statementRate(ctx context.Context, before map[string]float64, elapsed time.Duration, probes int) string {
	after := b.statements(ctx)
	if before == nil || after == nil {
		return ""
	}
	selects, deletes := after["SELECT"]-before["SELECT"]-float64(probes), after["DELETE"]-before["DELETE"]
	return fmt.Sprintf("; SQL: %.1f SELECT/s, %.1f DELETE/s", selects/elapsed.Seconds(), deletes/elapsed.Seconds())
}

// measureLatency writes one event per transaction at rate for duration through ob, whose relay runs, and returns
// for each how long after its commit a consumer read its record. sqlWindow starts counting the relay's statements
// and returns what it says of them when called again.
func measureLatency(ctx context.Context, e *app.Engines, ob *outbox.Outbox, rate int, duration time.Duration,
	sqlWindow func() func() string, res *relayResult) ([]time.Duration, error) {
	consumer, err := kgo.NewClient(kgo.SeedBrokers(e.KafkaBrokers...),
		kgo.ConsumeTopics(event.ArticleCreated.Topic(e.Config.TopicPrefix)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	// The topic holds earlier runs' events, which the consumer may meet while it looks for the end: this run's
	// article ids start at a base of its own.
	base := time.Now().UnixNano()
	var mu sync.Mutex
	arrived := map[int64]time.Time{}
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for consumeCtx.Err() == nil {
			fetches := consumer.PollFetches(consumeCtx)
			now := time.Now()
			fetches.EachRecord(func(rec *kgo.Record) {
				env, err := event.Decode(rec.Value)
				if err != nil {
					return
				}
				a, err := event.Payload[event.Article](env)
				if err != nil {
					return
				}
				seq := int64(a.ArticleID) - base
				mu.Lock()
				if _, ok := arrived[seq]; !ok {
					arrived[seq] = now
				}
				mu.Unlock()
			})
		}
	}()
	write := func(seq int64) (time.Time, error) {
		err := ob.Transact(ctx, func(_ *sql.Tx, emit outbox.Emit) error {
			return emit(event.ArticleCreated, seq%100, event.Article{ArticleID: apijson.ID(base + seq), Title: "latency",
				BoardID: apijson.ID(seq % 100)})
		})
		return time.Now(), err
	}
	has := func(seq int64) bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := arrived[seq]
		return ok
	}
	// Warm-up: one event until the consumer reads it, so that relay and consumer are both running. Its sequence
	// numbers are far above the measured ones.
	deadline := time.Now().Add(time.Minute)
	for seq := int64(1 << 40); ; seq++ {
		if time.Now().After(deadline) {
			return nil, errors.New("no warm-up event reached the consumer within a minute")
		}
		if _, err := write(seq); err != nil {
			return nil, err
		}
		for wait := time.Now().Add(time.Second); !has(seq) && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
		if has(seq) {
			break
		}
	}

	endSQL := sqlWindow()
	n := int(float64(rate) * duration.Seconds())
	if n < 100 {
		return nil, fmt.Errorf("%d writes/s for %s is %d events: too few for a p99", rate, duration, n)
	}
	committed := make([]time.Time, n)
	tokens := make(chan int64)
	var writers sync.WaitGroup
	var writeErr error
	var errOnce sync.Once
	for range 16 {
		writers.Go(func() {
			for seq := range tokens {
				at, err := write(seq)
				if err != nil {
					errOnce.Do(func() { writeErr = err })
					continue
				}
				committed[seq] = at
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range committed {
		<-tick.C
		tokens <- int64(i)
	}
	tick.Stop()
	close(tokens)
	writers.Wait()
	if writeErr != nil {
		return nil, writeErr
	}
	for wait := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := 0
		for i := range committed {
			if _, ok := arrived[int64(i)]; ok {
				n++
			}
		}
		mu.Unlock()
		if n == len(committed) {
			break
		}
		if time.Now().After(wait) {
			return nil, fmt.Errorf("%d of %d events never reached the consumer", len(committed)-n, len(committed))
		}
	}
	res.liveSQL = endSQL()
	stopConsuming()
	<-consumed
	lat := make([]time.Duration, len(committed))
	for i, at := range committed {
		lat[i] = max(arrived[int64(i)].Sub(at), 0) // a record can be read before its writer sees the commit return
	}
	return lat, nil
}

// floor produces n records of the bench's events from memory and returns the rate the broker acknowledged them at:
// what no relay can beat.
func (b *relayBench) floor(ctx context.Context, n int) (float64, error) {
	value, err := event.Encode(1, event.ArticleCreated, []byte(`{"articleId":"1","title":"benchmark","boardId":"1"}`))
	if err != nil {
		return 0, err
	}
	topic := event.ArticleCreated.Topic(b.e.Config.TopicPrefix)
	var wg sync.WaitGroup
	var failed error
	var once sync.Once
	began := time.Now()
	for i := range n {
		wg.Add(1)
		rec := kafka.EventRecord(topic, int64(i%100), int64(i), event.ArticleCreated, value)
		b.e.Producer.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				once.Do(func() { failed = err })
			}
			wg.Done()
		})
	}
	wg.Wait()
	if failed != nil {
		return 0, failed
	}
	return float64(n) / time.Since(began).Seconds(), nil
}

// publishedEvents reads the relay's count of events the broker acknowledged from reg.
func publishedEvents(reg *prometheus.Registry) int64 {
	families, _ := reg.Gather()
	var n float64
	for _, f := range families {
		if f.GetName() == "board_outbox_events_published_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int64(n)
}

// fillOutbox writes n article events through the outbox, as a producer's transactions do, 500 per transaction. A
// transaction's events are of one board, as a producer's are of one row's shard key: behind Vitess a transaction
// must stay on one shard.
func fillOutbox(ctx context.Context, ob *outbox.Outbox, n int) error {
	const perTransaction = 500
	for first := 0; first < n; first += perTransaction {
		board := int64(first / perTransaction % 100)
		err := ob.Transact(ctx, func(_ *sql.Tx, emit outbox.Emit) error {
			for i := first; i < min(first+perTransaction, n); i++ {
				payload := map[string]any{"articleId": strconv.Itoa(i), "title": "benchmark", "boardId": strconv.FormatInt(board, 10)}
				if err := emit(event.ArticleCreated, board, payload); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
