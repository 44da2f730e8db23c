package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/app"
	"board/internal/event"
	"board/internal/outbox"
	"board/internal/progress"
)

func benchRelay(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench relay", `Usage: board bench relay [flags]

Fills the outbox of a scratch database (relay_bench, on the configured SQL engine) with a backlog of events, then
times one relay — coordinator, poller, broker acknowledgements and deletes — draining it into Kafka (the configured
brokers, or the embedded one). Prints events per second.`, stderr)
	cfg.EngineFlags(fs)
	events := fs.Int("events", 100_000, "backlog size")
	batch := fs.Int("batch", 100, "rows per poll query (SPEC: 100)")
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
	db, ob, _, err := toolDatabase(ctx, e, "relay_bench", outbox.Migrate)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "filling the outbox of %s %s with %d events\n", db.Dialect, db.Name, *events)
	if err := fillOutbox(ctx, ob, *events); err != nil {
		return err
	}

	// The progress comes from the relay's own counter: a COUNT(*) of the outbox as often would take a core of the
	// database that the drain competes for.
	reg := prometheus.NewRegistry()
	metrics := outbox.NewMetricVecs(reg).For("relay-bench")
	coord := outbox.NewCoordinator(e.Redis, cfg.RedisPrefix+"bench:", "relay-bench", cfg.OutboxShards,
		outbox.CoordinatorConfig{}, e.Logger, nil)
	relay := outbox.NewRelay(db, e.Producer, coord, outbox.RelayConfig{TopicPrefix: cfg.TopicPrefix,
		PollInterval: 10 * time.Millisecond, MinAge: time.Nanosecond, BatchSize: *batch}, e.Logger, metrics)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	bar := progress.Start(stderr, "events", int64(*events))
	start := time.Now()
	go func() {
		defer close(done)
		relay.Run(runCtx)
	}()
	// Drained once the outbox holds no row: a look at its first row, cheap at any size.
	drained := false
	for !drained && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		var id int64
		err = db.QueryRowContext(ctx, "SELECT outbox_id FROM outbox LIMIT 1").Scan(&id)
		if drained = errors.Is(err, sql.ErrNoRows); drained {
			err = nil
		} else if err != nil {
			break
		}
		bar.Set(min(publishedEvents(reg), int64(*events)))
	}
	elapsed := time.Since(start)
	bar.Finish()
	stop()
	<-done
	if err != nil {
		return err
	}
	if !drained {
		return errors.New("interrupted before the outbox was drained")
	}
	fmt.Fprintf(stdout, "relayed %d events from %s to kafka %v in %s: %.0f events/s (batch %d)\n", *events, db.Dialect,
		e.KafkaBrokers, elapsed.Round(time.Millisecond), float64(*events)/elapsed.Seconds(), *batch)
	return nil
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
