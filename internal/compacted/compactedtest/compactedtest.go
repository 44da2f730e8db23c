// Package compactedtest runs, in tests, what a table read from compacted topics needs: a broker with the compacted
// topics, and the table's reader for as long as the test.
package compactedtest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/embedded"
	"board/internal/event"
	"board/internal/kafka"
)

// Prefix is the topic prefix of the tests' broker.
const Prefix = "test-"

// Broker starts a broker with the compacted topics under Prefix (3 partitions each), for the test, and returns its
// addresses and a producer.
func Broker(t *testing.T) ([]string, *kgo.Client) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	k, err := embedded.StartKafka("127.0.0.1:0", t.TempDir(), embedded.DefaultKafkaRetention, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	producer, err := kafka.NewProducer(k.Addrs(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	if err := kafka.EnsureCompactedTopics(context.Background(), producer, event.CompactedTopics(Prefix), 3); err != nil {
		t.Fatal(err)
	}
	return k.Addrs(), producer
}

// Record builds the record of an event as the relays publish it, keyed by key.
func Record(t *testing.T, id int64, typ event.Type, key int64, payload any) *kgo.Record {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	value, err := event.Encode(id, typ, raw)
	if err != nil {
		t.Fatal(err)
	}
	return kafka.EventRecord(typ.Topic(Prefix), key, id, typ, value)
}

// Run runs a table's reader until the test ends, and waits until the table is caught up (at most 10 s).
func Run(t *testing.T, run func(context.Context), caughtUp <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-caughtUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the table did not catch up in 10 s")
	}
}
