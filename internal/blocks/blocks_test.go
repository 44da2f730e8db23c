package blocks

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"board/internal/apijson"
	"board/internal/compacted/compactedtest"
	"board/internal/event"
	"board/internal/polltest"
)

func block(user, other, version int64, blocked bool) event.Block {
	return event.Block{UserID: apijson.ID(user), BlockedUserID: apijson.ID(other), Blocked: blocked, BlockVersion: version}
}

// The table applies only newer versions of each pair, whatever order they come in; pairs do not touch each other.
func TestTable(t *testing.T) {
	tb := newTable(Config{})
	if tb.Ready(context.Background()) == nil {
		t.Fatal("ready before caught up")
	}
	tb.applyBlock(block(1, 2, 2, true))
	tb.applyBlock(block(1, 2, 1, false)) // older: ignored
	tb.applyBlock(block(1, 2, 2, false)) // a duplicate version: ignored
	tb.applyBlock(block(1, 3, 1, true))
	tb.applyBlock(block(4, 1, 1, true))
	if !tb.Blocks(1, 2) || !tb.Blocks(1, 3) || tb.Blocks(2, 1) || !tb.Blocks(4, 1) {
		t.Errorf("Blocks: 1>2 %v, 1>3 %v, 2>1 %v, 4>1 %v", tb.Blocks(1, 2), tb.Blocks(1, 3), tb.Blocks(2, 1), tb.Blocks(4, 1))
	}
	if got := tb.BlockedBy(1); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("BlockedBy(1) = %v", got)
	}
	tb.applyBlock(block(1, 2, 3, false))
	tb.applyBlock(block(1, 3, 2, false))
	if tb.Blocks(1, 2) || tb.BlockedBy(1) != nil || !tb.Blocks(4, 1) {
		t.Errorf("after the unblocks: 1>2 %v, BlockedBy(1) %v, 4>1 %v", tb.Blocks(1, 2), tb.BlockedBy(1), tb.Blocks(4, 1))
	}
	tb.applyBlock(block(1, 2, 2, true)) // late: the unblock of version 3 stands
	if tb.Blocks(1, 2) {
		t.Error("a late block undid a newer unblock")
	}
	tb.applyBlock(block(1, 2, 4, true))
	if !tb.Blocks(1, 2) {
		t.Error("a block after an unblock did not count")
	}
}

// record builds the record of a block event, as the relay publishes it: keyed by the pair.
func record(t *testing.T, id int64, b event.Block) *kgo.Record {
	t.Helper()
	typ := event.UserUnblocked
	if b.Blocked {
		typ = event.UserBlocked
	}
	rec := compactedtest.Record(t, id, typ, int64(b.UserID), b)
	rec.Key = []byte(event.BlockKey(int64(b.UserID), int64(b.BlockedUserID)))
	return rec
}

func startTable(t *testing.T, brokers []string) *Table {
	t.Helper()
	tb, err := New(Config{Brokers: brokers, TopicPrefix: compactedtest.Prefix, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	compactedtest.Run(t, tb.Run, tb.CaughtUp())
	if err := tb.Ready(context.Background()); err != nil {
		t.Fatalf("caught up but not ready: %v", err)
	}
	return tb
}

// A table started after the events reads them from the start, and is caught up only once it has; one that runs
// learns of a block and an unblock as they are published. Undecodable records are skipped.
func TestReader(t *testing.T) {
	brokers, producer := compactedtest.Broker(t)
	ctx := context.Background()
	running := startTable(t, brokers) // an empty topic: caught up at once

	var recs []*kgo.Record
	for u := int64(1); u <= 50; u++ {
		recs = append(recs, record(t, 1000+u, block(u, 100, 1, true)))
	}
	recs = append(recs,
		record(t, 2001, block(7, 100, 2, false)),
		&kgo.Record{Topic: compactedtest.Prefix + "block", Key: []byte("8:100"), Value: []byte("not json")},
		record(t, 2002, block(8, 101, 1, true)),
	)
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, func() (bool, string) { return running.Blocks(8, 101), "the running table does not see the blocks" })

	late := startTable(t, brokers)
	for _, tb := range []*Table{running, late} {
		for u := int64(1); u <= 50; u++ {
			if tb.Blocks(u, 100) != (u != 7) {
				t.Fatalf("user %d blocks 100: %v", u, tb.Blocks(u, 100))
			}
		}
		if got := tb.BlockedBy(8); !slices.Equal(got, []int64{100, 101}) {
			t.Errorf("BlockedBy(8) = %v", got)
		}
	}

	if err := producer.ProduceSync(ctx, record(t, 3001, block(8, 101, 2, false))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, func() (bool, string) { return !late.Blocks(8, 101), "the unblock did not reach the table" })
}
