package outbox

import (
	"context"
	"testing"
	"time"

	binlogdatapb "vitess.io/vitess/go/vt/proto/binlogdata"
	querypb "vitess.io/vitess/go/vt/proto/query"

	"board/internal/event"
	"board/internal/sqldb/sqldbtest"
)

func vgtid(gtid string) *binlogdatapb.VGtid {
	return &binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Keyspace: "k", Shard: "-80", Gtid: gtid}}}
}

// The position moves only past batches the broker acknowledged, however the partitions' answers are ordered, and a
// failed batch holds it back for good: the stream is opened again from there.
func TestProgressWaitsForEveryEarlierBatch(t *testing.T) {
	p := newProgress()
	a := p.add()
	p1 := vgtid("1")
	p.mark(p1)
	b := p.add()
	p2 := vgtid("2")
	p.mark(p2)
	if got := p.position(); got != nil {
		t.Fatalf("position with nothing acknowledged = %v, want none", got)
	}
	p.answered(b, false)
	if got := p.position(); got != nil {
		t.Fatalf("position with only the second batch acknowledged = %v, want none", got)
	}
	p.answered(a, false)
	if got := p.position(); got != p2 {
		t.Fatalf("position with both acknowledged = %v, want %v", got, p2)
	}
	p3 := vgtid("3") // a position with no rows before it: a transaction on another table, a delete
	p.mark(p3)
	if got := p.position(); got != p3 {
		t.Fatalf("position after an empty mark = %v, want %v", got, p3)
	}
	c := p.add()
	p.mark(vgtid("4"))
	p.answered(c, true)
	if got := p.position(); got != p3 || !p.hasFailed() {
		t.Fatalf("after a failed batch: position %v, failed %v; want %v, true", got, p.hasFailed(), p3)
	}
}

func row(values ...string) *querypb.Row {
	r := &querypb.Row{}
	for _, v := range values {
		if v == "NULL" {
			r.Lengths = append(r.Lengths, -1)
			continue
		}
		r.Lengths = append(r.Lengths, int64(len(v)))
		r.Values = append(r.Values, v...)
	}
	return r
}

// The decoder keeps the outbox's inserts, in any column order its FIELD event gives, skips the relay's own
// deletes, and ends at the batch's last position.
func TestDecodeKeepsInsertsOnly(t *testing.T) {
	fields := []*querypb.Field{{Name: "shard_key"}, {Name: "payload"}, {Name: "outbox_id"}, {Name: "created_at"},
		{Name: "record_key"}, {Name: "event_type"}}
	inserted := row("2", `{"articleId":"7"}`, "42", "2026-11-28 23:50:01.123", "6", "ARTICLE_CREATED")
	events := []*binlogdatapb.VEvent{
		{Type: binlogdatapb.VEventType_BEGIN, Keyspace: "k", Shard: "-80"},
		{Type: binlogdatapb.VEventType_FIELD, Keyspace: "k", Shard: "-80",
			FieldEvent: &binlogdatapb.FieldEvent{TableName: "k.outbox", Fields: fields}},
		{Type: binlogdatapb.VEventType_ROW, Keyspace: "k", Shard: "-80", RowEvent: &binlogdatapb.RowEvent{
			TableName: "k.outbox", RowChanges: []*binlogdatapb.RowChange{{After: inserted}, {Before: inserted}}}},
		{Type: binlogdatapb.VEventType_VGTID, Vgtid: vgtid("MariaDB/0-1-7")},
		{Type: binlogdatapb.VEventType_COMMIT, Keyspace: "k", Shard: "-80"},
	}
	d := newDecoder()
	msgs, position, err := d.decode(events)
	if err != nil {
		t.Fatal(err)
	}
	want := Message{ID: 42, Type: event.ArticleCreated, Key: 6, Payload: []byte(`{"articleId":"7"}`),
		CreatedAt: time.Date(2026, 11, 28, 23, 50, 1, 123e6, time.UTC)}
	if len(msgs) != 1 || msgs[0].ID != want.ID || msgs[0].Type != want.Type || msgs[0].Key != want.Key ||
		string(msgs[0].Payload) != string(want.Payload) || !msgs[0].CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("decoded %+v, want [%+v]", msgs, want)
	}
	if position.ShardGtids[0].Gtid != "MariaDB/0-1-7" {
		t.Errorf("position = %v, want the batch's VGTID", position)
	}

	// Another shard's rows need that shard's FIELD event: a stream without it is broken, not silently empty.
	_, _, err = d.decode([]*binlogdatapb.VEvent{{Type: binlogdatapb.VEventType_ROW, Keyspace: "k", Shard: "80-",
		RowEvent: &binlogdatapb.RowEvent{TableName: "k.outbox", RowChanges: []*binlogdatapb.RowChange{{After: inserted}}}}})
	if err == nil {
		t.Error("a row before its shard's fields decoded without error")
	}
}

func TestValuesSplitsARowWithNulls(t *testing.T) {
	got := values(row("a", "NULL", "", "bcd"))
	if len(got) != 4 || string(got[0]) != "a" || got[1] != nil || got[2] == nil || len(got[2]) != 0 || string(got[3]) != "bcd" {
		t.Fatalf("values = %q", got)
	}
}

// A position that still says "current" for a shard would skip that shard's rows at the next start.
func TestResolved(t *testing.T) {
	for _, c := range []struct {
		v    *binlogdatapb.VGtid
		want bool
	}{
		{vgtid("MariaDB/0-1-7"), true},
		{vgtid("current"), false},
		{vgtid(""), false},
		{&binlogdatapb.VGtid{}, false},
		{&binlogdatapb.VGtid{ShardGtids: []*binlogdatapb.ShardGtid{{Shard: "-80", Gtid: "MariaDB/0-1-7"},
			{Shard: "80-", Gtid: "current"}}}, false},
	} {
		if got := resolved(c.v); got != c.want {
			t.Errorf("resolved(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// A stream relay's delete that fails is tried again with the next one: the stream does not bring those rows back,
// and the table must not keep them until the poller's safety net, a minute later.
func TestStreamRelayRetriesAFailedDelete(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	write(t, New(db, DefaultShards, ids, time.Now, nil, nil), 3)
	r := NewRelay(db, nil, nil, testRelay, quiet, nil)
	r.tail = &tail{}
	rows, err := db.QueryContext(context.Background(), "SELECT outbox_id, record_key FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p published
		if err := rows.Scan(&p.id, &p.key); err != nil {
			t.Fatal(err)
		}
		r.acked = append(r.acked, p)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	exec := func(q string) {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	exec("ALTER TABLE outbox RENAME TO outbox_away") // every DELETE fails
	r.deleteAcked(context.Background())
	exec("ALTER TABLE outbox_away RENAME TO outbox")
	if len(r.acked) != 3 {
		t.Fatalf("after a failed delete %d rows wait to be deleted, want 3", len(r.acked))
	}
	r.deleteAcked(context.Background())
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM outbox").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the retry the outbox holds %d rows (%v), want none", n, err)
	}
}

// Under a backlog a stream relay's deleter takes one statement's worth of rows and tells another deleter of the
// rest at once, so that the deletes run side by side.
func TestTakeAckedLeavesTheRestToAnotherDeleter(t *testing.T) {
	r := NewRelay(nil, nil, nil, testRelay, quiet, nil)
	for i := range deleteBatch + 5 {
		r.acked = append(r.acked, published{id: int64(i)})
	}
	if got := r.takeAcked(deleteBatch); len(got) != deleteBatch || got[0].id != 0 {
		t.Fatalf("took %d rows, want the first %d", len(got), deleteBatch)
	}
	select {
	case <-r.ackedCh:
	default:
		t.Error("no deleter was told of the rows left")
	}
	if got := r.takeAcked(deleteBatch); len(got) != 5 || got[0].id != deleteBatch || len(r.acked) != 0 {
		t.Fatalf("the second deleter took %d rows from %d, leaving %d; want the last 5, none left", len(got), got[0].id,
			len(r.acked))
	}
}
