package comment

import (
	"context"
	"testing"
	"time"

	"board/internal/event"
	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
)

// t0 has sub-millisecond digits and a non-UTC zone: stores must keep milliseconds in UTC.
var t0 = time.Date(2026, 1, 2, 12, 4, 5, 6_789_123, time.FixedZone("KST", 9*60*60))

// t0ms is t0 as stored.
var t0ms = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// firstID is above 2^53 so that a float64 on the way would lose digits.
const firstID = 1<<60 + 1

// eventIDs issues the tests' event ids: one generator for the package, as one process has one.
var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(3, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// testService returns a service over db with fake ids (from firstID), a fake clock (at t0) and an article service
// that has every article.
func testService(t testing.TB, db *sqldb.DB) (*Service, *Store, *snowflaketest.Clock) {
	return newTestService(db, testRegistry(existencetest.NewOrigin(t), db))
}

// testRegistry is origin.Registry with a lookup deadline that no test reaches: on SQLite a lookup records its answer
// through the one writer, behind every write queued, and a test must not fail because a busy machine made it wait.
func testRegistry(origin *existencetest.Origin, db *sqldb.DB) *existence.Registry {
	return existence.New(db, existence.Config{Service: "comment", Origin: origin.URL, LookupTimeout: time.Minute})
}

// newTestService is testService with the record of which articles exist that articles keeps.
func newTestService(db *sqldb.DB, articles *existence.Registry) (*Service, *Store, *snowflaketest.Clock) {
	clock := snowflaketest.NewClock(t0)
	store := NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil), articles)
	return NewService(store, snowflaketest.NewIDs(firstID), clock.Now), store, clock
}

func wantKind(t *testing.T, err error, kind fault.Kind, code string) {
	t.Helper()
	fe, ok := fault.As(err)
	if !ok || fe.Kind != kind || fe.Code != code {
		t.Errorf("error = %v, want kind %d code %s", err, kind, code)
	}
}

// outboxEvent is an event as the outbox table holds it.
type outboxEvent struct {
	Type    event.Type
	Payload event.Comment
}

// outboxEvents returns the events waiting in db's outbox, oldest first.
func outboxEvents(t *testing.T, db *sqldb.DB) []outboxEvent {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT event_type, payload FROM outbox ORDER BY outbox_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var typ string
		var body []byte
		if err := rows.Scan(&typ, &body); err != nil {
			t.Fatal(err)
		}
		p, err := event.Payload[event.Comment](event.Envelope{Type: event.Type(typ), Payload: body})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, outboxEvent{event.Type(typ), p})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
