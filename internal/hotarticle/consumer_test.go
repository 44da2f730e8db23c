package hotarticle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/embedded"
	"board/internal/event"
	"board/internal/kafka"
	"board/internal/snowflake"
)

// TestConsumerWaitsOutRedis runs the real consumer loop on the embedded broker and stops Redis halfway through the
// stream: nothing is dead-lettered or skipped, and once Redis is back the day's list is what every event adds up to.
func TestConsumerWaitsOutRedis(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	broker, err := embedded.StartKafka("127.0.0.1:0", t.TempDir(), embedded.DefaultKafkaRetention, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	producer, err := kafka.NewProducer(broker.Addrs(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	ctx := context.Background()
	topics := event.Topics("t-")
	if err := kafka.EnsureTopics(ctx, producer, topics, 3); err != nil {
		t.Fatal(err)
	}

	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), DialTimeout: 100 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	now := time.Now()
	svc := NewService(rdb, Config{Location: time.UTC, Now: func() time.Time { return now }})
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: broker.Addrs(), Group: "t-hot-article", Topics: topics,
		Handlers: svc.Handlers(), Backoff: 10 * time.Millisecond, MaxAttempts: 2, Logger: logger,
		Opts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	var eventID int64
	produce := func(t event.Type, key int64, payload any) {
		body, err := json.Marshal(payload)
		if err != nil {
			panic(err)
		}
		eventID++
		value, err := event.Encode(eventID, t, body)
		if err != nil {
			panic(err)
		}
		if err := producer.ProduceSync(ctx, kafka.EventRecord(t.Topic("t-"), key, eventID, t, value)).FirstErr(); err != nil {
			panic(err)
		}
	}
	var want []HotArticle
	ids := make([]int64, 12)
	for i := range ids {
		ids[i] = snowflake.Compose(now.Add(-time.Duration(i)*time.Second), 1, 0)
		created := snowflake.Timestamp(ids[i])
		produce(event.ArticleCreated, 1, event.Article{ArticleID: apijson.ID(ids[i]), Title: fmt.Sprint("a", i),
			CreatedAt: apijson.Time(created), ArticleVersion: 1})
		if i == 6 {
			mr.Close() // the rest of the stream arrives while Redis is down
		}
		produce(event.ArticleLiked, ids[i], event.Like{ArticleID: apijson.ID(ids[i]), ArticleLikeCount: int64(i),
			ArticleLikeCountVersion: 1})
		want = append(want, HotArticle{ArticleID: ids[i], Title: fmt.Sprint("a", i), CreatedAt: created,
			Score: Score(int64(i), 0, 0), LikeCount: int64(i)})
	}
	time.Sleep(300 * time.Millisecond) // let the consumer run into the outage and retry through it
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	// Best first: the highest likes are the oldest articles here.
	want = want[2:]
	for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
		want[i], want[j] = want[j], want[i]
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := svc.Day(ctx, now.UTC().Format("20060102"))
		diff := cmp.Diff(want, got)
		if err == nil && diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the day's list (-want +got), err %v:\n%s", err, diff)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dlt := newReader(t, broker.Addrs(), event.DeadLetterTopic("t-article"), event.DeadLetterTopic("t-like"))
	fctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if n := dlt.PollFetches(fctx).NumRecords(); n != 0 {
		t.Errorf("%d records were dead-lettered while Redis was down", n)
	}
}

func newReader(t *testing.T, brokers []string, topics ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
