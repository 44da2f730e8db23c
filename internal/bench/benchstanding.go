package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/event"
	"board/internal/kafka"
	"board/internal/progress"
	"board/internal/standing"
)

func benchStanding(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := app.Default()
	fs := app.NewFlagSet("bench standing", `Usage: board bench standing [flags]

Publishes a ban for each of --users users to scratch compacted ban and role topics (the configured brokers, or the
embedded one), then times what every board process does at start: read both topics whole into its table of users'
standing (internal/standing) until it has caught up. Beside it, the floor: a bare client reading the same records
without decoding or applying them. Prints both, and the table's lookups per second.`, stderr)
	cfg.EngineFlags(fs)
	users := fs.Int("users", 200_000, "banned users")
	if err := app.Parse(fs, args, getenv); err != nil {
		return err
	}
	if *users < 1 {
		return errors.New("--users must be at least 1")
	}
	e := app.NewEngines(&cfg, cfg.NewLogger(stderr))
	defer e.Close()
	if err := e.StartKafka(ctx); err != nil {
		return err
	}
	prefix := fmt.Sprintf("bench-standing-%d-", rand.Uint32()) // topics of this run alone
	topics := event.CompactedTopics(prefix)
	if err := kafka.EnsureCompactedTopics(ctx, e.Producer, topics, int32(cfg.TopicPartitions)); err != nil {
		return err
	}
	if err := publishBans(ctx, e.Producer, prefix, *users, stderr); err != nil {
		return err
	}

	floor, err := readWhole(ctx, e.KafkaBrokers, topics, *users)
	if err != nil {
		return err
	}
	start := time.Now()
	table, err := standing.New(standing.Config{Brokers: e.KafkaBrokers, TopicPrefix: prefix, Logger: e.Logger})
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go table.Run(runCtx)
	select {
	case <-table.CaughtUp():
	case <-ctx.Done():
		return ctx.Err()
	}
	caughtUp := time.Since(start)

	start = time.Now()
	for u := 1; u <= *users; u++ {
		_, ban, err := table.Lookup(int64(u))
		if err != nil {
			return fmt.Errorf("user %d: %w", u, err)
		}
		if ban == nil {
			return fmt.Errorf("user %d is not banned; want the ban published", u)
		}
	}
	lookups := time.Since(start)
	fmt.Fprintf(stdout, "%d banned users on %v, %d partitions per topic\n", *users, e.KafkaBrokers, cfg.TopicPartitions)
	fmt.Fprintf(stdout, "  floor: a bare client reads the records       %s (%.0f records/s)\n", floor.Round(time.Millisecond), rate(*users, floor))
	fmt.Fprintf(stdout, "  the standing table reads them and catches up  %s (%.0f records/s, %.2fx the floor)\n",
		caughtUp.Round(time.Millisecond), rate(*users, caughtUp), caughtUp.Seconds()/floor.Seconds())
	fmt.Fprintf(stdout, "  lookups, as each write's guard makes one      %.0f/s\n", rate(*users, lookups))
	return nil
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

// publishBans publishes a USER_BANNED of users 1..n under prefix, as the moderation service's relay would.
func publishBans(ctx context.Context, producer *kgo.Client, prefix string, n int, stderr io.Writer) error {
	const batch = 10_000
	bar := progress.Start(stderr, "bans published", int64(n))
	defer bar.Finish()
	for first := 1; first <= n; first += batch {
		recs := make([]*kgo.Record, 0, batch)
		for u := first; u < min(first+batch, n+1); u++ {
			payload, err := json.Marshal(event.Ban{UserID: apijson.ID(u), Banned: true, Reason: "spam " + strconv.Itoa(u), BanVersion: 1})
			if err != nil {
				return err
			}
			value, err := event.Encode(int64(u), event.UserBanned, payload)
			if err != nil {
				return err
			}
			recs = append(recs, kafka.EventRecord(event.UserBanned.Topic(prefix), int64(u), int64(u), event.UserBanned, value))
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		bar.Add(int64(len(recs)))
	}
	return nil
}

// readWhole times a bare client reading n records of topics from their start: the floor of the table's catch-up.
func readWhole(ctx context.Context, brokers, topics []string, n int) (time.Duration, error) {
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	for read := 0; read < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := fs.Err0(); err != nil {
			return 0, err
		}
		read += fs.NumRecords()
	}
	return time.Since(start), nil
}
