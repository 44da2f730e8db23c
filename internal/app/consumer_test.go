package app

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"board/internal/embedded"
	"board/internal/event"
	"board/internal/kafka"
)

// TestReplayLock checks how a replay keeps other instances off the state it clears: a second replay is refused
// while one holds the lock, an instance without --replay waits for the lock, and a replay with a live member in
// the group changes nothing.
func TestReplayLock(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	broker, err := embedded.StartKafka("127.0.0.1:0", t.TempDir(), embedded.DefaultKafkaRetention, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	producer, err := kafka.NewProducer(broker.Addrs(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	ctx := context.Background()
	topics := event.Topics("board-")
	if err := kafka.EnsureTopics(ctx, producer, topics, 1); err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	e := &Engines{Config: &Config{RedisPrefix: "t:"}, Logger: logger, Redis: rdb, KafkaBrokers: broker.Addrs()}
	const lock, group = "t:replay::hot-article", "board-hot-article"
	clears := 0
	clear := func(context.Context) (int, error) { clears++; return 0, nil }

	// Another instance holds the lock: refused, nothing cleared, its lock left alone.
	if err := mr.Set(lock, "other"); err != nil {
		t.Fatal(err)
	}
	if err := replay(ctx, e, lock, group, topics, clear); err == nil || !strings.Contains(err.Error(), "another instance is replaying") {
		t.Errorf("replay under another's lock: %v", err)
	}
	if clears != 0 || !mr.Exists(lock) {
		t.Errorf("after a refused replay: %d clears, lock held %v; want 0 and true", clears, mr.Exists(lock))
	}
	// An instance without --replay waits while the lock is held, and goes on once it is gone.
	wctx, cancel := context.WithTimeout(ctx, 3*replayLockPoll)
	err = waitForReplay(wctx, e, lock)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waitForReplay under the lock = %v, want the context's deadline", err)
	}
	mr.Del(lock)
	if err := waitForReplay(ctx, e, lock); err != nil {
		t.Errorf("waitForReplay without a lock: %v", err)
	}

	// A replay: the state is cleared once and the lock released.
	if err := replay(ctx, e, lock, group, topics, clear); err != nil {
		t.Fatal(err)
	}
	if clears != 1 || mr.Exists(lock) {
		t.Errorf("after a replay: %d clears, lock held %v; want 1 and false", clears, mr.Exists(lock))
	}

	// A member of the group is running: the reset is refused, nothing is cleared, the lock is released.
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: broker.Addrs(), Group: group, Topics: topics,
		Handlers: map[event.Type]kafka.Handler{event.ArticleViewed: func(context.Context, event.Envelope) error { return nil }},
		Logger:   logger})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("consumer: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		clears = 0 // a replay that ran before the member joined did clear; only the refused one counts
		err = replay(ctx, e, lock, group, topics, clear)
		if errors.Is(err, kafka.ErrGroupNotEmpty) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the member is still joining
	}
	if !errors.Is(err, kafka.ErrGroupNotEmpty) {
		t.Errorf("replay with a live member = %v, want ErrGroupNotEmpty", err)
	}
	if clears != 0 || mr.Exists(lock) {
		t.Errorf("after a refused reset: %d clears, lock held %v; want 0 and false", clears, mr.Exists(lock))
	}
}
