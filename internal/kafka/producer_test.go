package kafka

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"board/internal/embedded"
	"board/internal/event"
)

func TestEnsureTopics(t *testing.T) {
	t.Parallel()
	k := startKafka(t)
	cl := newClient(t, k.Addrs())
	ctx := context.Background()
	topics := event.Topics("board-")

	// Concurrent first calls, then a repeat: TOPIC_ALREADY_EXISTS is success.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() { errs <- EnsureTopics(ctx, cl, topics, 3) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureTopics: %v", err)
		}
	}
	if err := EnsureTopics(ctx, cl, topics, 3); err != nil {
		t.Fatalf("second EnsureTopics: %v", err)
	}

	meta := kmsg.NewPtrMetadataRequest() // nil Topics: all of them
	resp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int)
	for _, mt := range resp.Topics {
		got[*mt.Topic] = len(mt.Partitions)
	}
	for _, topic := range topics {
		for _, name := range []string{topic, event.DeadLetterTopic(topic)} {
			if got[name] != 3 {
				t.Errorf("topic %s: %d partitions, want 3", name, got[name])
			}
		}
	}
	if len(got) != 2*len(topics) {
		t.Errorf("topics %v, want exactly the %d topics and their dead-letter topics", got, len(topics))
	}

	if err := EnsureTopics(ctx, cl, []string{"x"}, 0); err == nil {
		t.Error("EnsureTopics with 0 partitions: no error")
	}
}

func TestEventRecord(t *testing.T) {
	t.Parallel()
	value := []byte(`{"eventId":"42","type":"ARTICLE_CREATED","payload":{}}`)
	r := EventRecord("board-article", 7, 42, event.ArticleCreated, value)
	if r.Topic != "board-article" || string(r.Key) != "7" || string(r.Value) != string(value) {
		t.Errorf("record %s key %q value %q", r.Topic, r.Key, r.Value)
	}
	want := map[string]string{event.HeaderType: "ARTICLE_CREATED", event.HeaderEventID: "42"}
	if len(r.Headers) != len(want) {
		t.Errorf("headers %v, want %v", r.Headers, want)
	}
	for k, v := range want {
		if got, _ := header(r, k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	big := EventRecord("t", 1<<62, 1<<62+1, event.ArticleViewed, nil)
	if string(big.Key) != "4611686018427387904" {
		t.Errorf("key %q", big.Key)
	}
	if id, _ := header(big, event.HeaderEventID); id != "4611686018427387905" {
		t.Errorf("eventId header %q", id)
	}
}

func TestCreatedAt(t *testing.T) {
	t.Parallel()
	committedAt := time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.UTC)
	producedAt := committedAt.Add(time.Minute)
	r := EventRecord("board-article", 7, 42, event.ArticleCreated, nil)
	r.Timestamp = producedAt
	if got := eventTime(r); !got.Equal(producedAt) {
		t.Errorf("event time without the header = %v, want the record's timestamp %v", got, producedAt)
	}
	SetCreatedAt(r, committedAt.Add(-time.Hour))
	SetCreatedAt(r, committedAt) // replaces the first stamp
	if got, _ := header(r, HeaderCreatedAt); got != "1772366400123" {
		t.Errorf("%s header %q, want the Unix milliseconds 1772366400123", HeaderCreatedAt, got)
	}
	if len(r.Headers) != 3 {
		t.Errorf("headers %v, want eventType, eventId and one %s", r.Headers, HeaderCreatedAt)
	}
	if got, want := eventTime(r), committedAt.Truncate(time.Millisecond); !got.Equal(want) {
		t.Errorf("event time = %v, want the header's %v", got, want)
	}
	r.Headers[2].Value = []byte("yesterday")
	if got := eventTime(r); !got.Equal(producedAt) {
		t.Errorf("event time with a header that does not parse = %v, want the record's timestamp %v", got, producedAt)
	}
}

// TestProducerFailsWhileBrokerDown checks the bounded delivery timeout: with the broker gone a produce fails after
// about deliveryTimeout instead of hanging, and the same client produces again once the broker is back.
func TestProducerFailsWhileBrokerDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k, err := embedded.StartKafka("127.0.0.1:0", dir, embedded.DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	addr := k.Addrs()[0]
	// MetadataMinAge: franz-go refreshes metadata after a dial error at most every 5s by default, which would make
	// this test wait that long twice; the bound checked below holds for the default as well (measured: 6.7s).
	p, err := NewProducer([]string{addr}, time.Second, Logger(testLogger(t)), kgo.MetadataMinAge(200*time.Millisecond))
	if err != nil {
		k.Close()
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	if err := EnsureTopics(ctx, p, []string{"board-view"}, 3); err != nil {
		k.Close()
		t.Fatal(err)
	}
	rec := func(id int64) *kgo.Record {
		return EventRecord("board-view", id, id, event.ArticleViewed, viewEvent(t, id))
	}
	if err := p.ProduceSync(ctx, rec(1)).FirstErr(); err != nil {
		k.Close()
		t.Fatal(err)
	}

	k.Close()
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = p.ProduceSync(pctx, rec(2)).FirstErr()
	cancel()
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("produce with the broker down succeeded")
	}
	t.Logf("produce with the broker down failed after %v: %v", elapsed.Round(time.Millisecond), err)
	// franz-go checks the timeout between attempts only, and the attempt after the first dial error waits for a
	// metadata refresh (at most one per MetadataMinAge).
	if elapsed > 8*time.Second {
		t.Errorf("produce took %v to fail, want about the 1s delivery timeout plus one metadata refresh", elapsed)
	}

	k, err = embedded.StartKafka(addr, dir, embedded.DefaultKafkaRetention, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	// The caller (the relay) produces again until it works; the first tries may time out while the client waits
	// for its next metadata refresh.
	start = time.Now()
	for id := int64(3); ; id++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := p.ProduceSync(pctx, rec(id)).FirstErr()
		cancel()
		if err == nil {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("produce after the broker came back: %v", err)
		}
	}
	t.Logf("produce after restart succeeded after %v", time.Since(start).Round(time.Millisecond))
	recs := readAll(t, []string{addr}, "board-view", 2, 5*time.Second)
	if len(recs) < 2 {
		t.Errorf("read %d records after the restart, want the one from before and the one after", len(recs))
	}
}

// BenchmarkProduce measures the relay's pattern, one asynchronous Produce per event, with franz-go's default 10ms
// linger, 5ms and none (ProducerLinger): latency of a lone event (sequential) and throughput of a burst (parallel).
func BenchmarkProduce(b *testing.B) {
	k, err := embedded.StartKafka("127.0.0.1:0", b.TempDir(), embedded.DefaultKafkaRetention, testLogger(b))
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	for _, linger := range []time.Duration{0, 5 * time.Millisecond, 10 * time.Millisecond} {
		p, err := NewProducer(k.Addrs(), 10*time.Second, kgo.ProducerLinger(linger))
		if err != nil {
			b.Fatal(err)
		}
		if err := EnsureTopics(context.Background(), p, []string{"bench"}, 3); err != nil {
			b.Fatal(err)
		}
		value := []byte(`{"eventId":"1","type":"ARTICLE_VIEWED","payload":{"articleId":"1","articleViewCount":1}}`)
		b.Run("lone/linger="+linger.String(), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				done := make(chan error, 1)
				p.Produce(context.Background(), EventRecord("bench", int64(i), int64(i), event.ArticleViewed, value),
					func(_ *kgo.Record, err error) { done <- err })
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("burst/linger="+linger.String(), func(b *testing.B) {
			var wg sync.WaitGroup
			for i := 0; b.Loop(); i++ {
				wg.Add(1)
				p.Produce(context.Background(), EventRecord("bench", int64(i), int64(i), event.ArticleViewed, value),
					func(_ *kgo.Record, err error) {
						if err != nil {
							b.Error(err)
						}
						wg.Done()
					})
			}
			wg.Wait()
		})
		p.Close()
	}
}
