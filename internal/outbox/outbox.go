// Package outbox is the transactional outbox shared by every producer service: events are written to an outbox
// table in the same transaction as the change they describe, then a relay publishes them to Kafka and deletes them
// once the broker has acknowledged them. docs/messaging.md describes the guarantees.
package outbox

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the outbox table in a producer's database.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "outbox", migrations)
}

// DefaultShards is the logical shard count (SPEC §5.2); it is fixed per deployment because rows carry it.
const DefaultShards = 4

// IDGenerator issues event ids.
type IDGenerator interface {
	Next() (int64, error)
}

// Message is one outbox row.
type Message struct {
	ID        int64
	Type      event.Type
	Key       int64 // the record key: boardId for article events, articleId otherwise
	Payload   []byte
	CreatedAt time.Time
}

// Outbox writes events into a producer's database.
type Outbox struct {
	db       *sqldb.DB
	shards   int
	ids      IDGenerator
	now      func() time.Time
	metrics  *Metrics
	onCommit func([]Message) // the relay's fast path; nil without a relay
}

// New returns the outbox of db with the given logical shard count. relay, the relay that publishes db's outbox, is
// handed each transaction's events as soon as it commits (its fast path); with a nil relay the events only wait in
// the table, for a relay's poller (tools and tests write so). A relay that follows the change stream has no fast path.
func New(db *sqldb.DB, shards int, ids IDGenerator, now func() time.Time, metrics *Metrics, relay *Relay) *Outbox {
	o := &Outbox{db: db, shards: shards, ids: ids, now: now, metrics: metrics}
	if relay != nil && relay.tail == nil {
		o.onCommit = relay.enqueue
	}
	return o
}

// Emit records an event inside the transaction Transact runs; payload is one of the event package's payloads.
type Emit func(t event.Type, key int64, payload any) error

// Transact runs fn in a transaction in which emit writes events to the outbox. Only when the transaction commits
// are the events handed to the relay for publishing.
func (o *Outbox) Transact(ctx context.Context, fn func(tx *sql.Tx, emit Emit) error) error {
	var written []Message
	err := o.db.Transact(ctx, func(tx *sql.Tx) error {
		written = written[:0] // Transact may run fn again after a deadlock
		err := fn(tx, func(t event.Type, key int64, payload any) error {
			m, err := o.message(t, key, payload)
			written = append(written, m)
			return err
		})
		if err != nil {
			return err
		}
		return insert(ctx, tx, written, o.shardOf)
	})
	if err != nil {
		return err
	}
	o.metrics.written(len(written))
	if o.onCommit != nil && len(written) > 0 {
		o.onCommit(written)
	}
	return nil
}

func (o *Outbox) message(t event.Type, key int64, payload any) (Message, error) {
	if !t.Known() {
		return Message{}, fmt.Errorf("outbox: unknown event type %q", t)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return Message{}, fmt.Errorf("outbox: encode %s payload: %w", t, err)
	}
	id, err := o.ids.Next()
	if err != nil {
		return Message{}, snowflake.Unavailable(err)
	}
	return Message{ID: id, Type: t, Key: key, Payload: body, CreatedAt: apijson.Millis(o.now())}, nil
}

// insertRows bounds the rows of one INSERT, far below every engine's limit on placeholders (SQLite's 32,766).
const insertRows = 200

// insert writes a transaction's events at its end, insertRows to a statement: a transaction that carries many
// events (the likes of a hot article, which share one) makes one round trip for them rather than one each.
func insert(ctx context.Context, tx *sql.Tx, ms []Message, shardOf func(int64) int) error {
	for len(ms) > 0 {
		n := min(len(ms), insertRows)
		var q strings.Builder
		q.WriteString("INSERT INTO outbox (outbox_id, shard_key, event_type, record_key, payload, created_at) VALUES ")
		args := make([]any, 0, 6*n)
		for i, m := range ms[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?, ?)")
			args = append(args, m.ID, shardOf(m.Key), string(m.Type), m.Key, m.Payload, m.CreatedAt)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		ms = ms[n:]
	}
	return nil
}

func (o *Outbox) shardOf(key int64) int {
	s := int(key % int64(o.shards))
	if s < 0 {
		s += o.shards
	}
	return s
}

// position is a place in a shard's (created_at, outbox_id) order.
type position struct {
	createdAt time.Time
	id        int64
}

// oldest returns up to limit rows of a shard of db's outbox created at or before cutoff and after position from,
// oldest first.
func oldest(ctx context.Context, db *sqldb.DB, shard int, cutoff time.Time, from position, limit int) ([]Message, error) {
	query, args := oldestQuery(db, shard, cutoff, from, limit)
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		var t string
		if err := rows.Scan(&m.ID, &t, &m.Key, &m.Payload, &m.CreatedAt); err != nil {
			return nil, err
		}
		m.Type = event.Type(t)
		out = append(out, m)
	}
	return out, rows.Err()
}

// oldestQuery is oldest's query and its arguments. The index and the cursor are in the forms each engine walks as
// one range from position from (sqldb.DB.After): otherwise both read the shard's index from its start, rows already
// published but not yet deleted included, at every batch.
func oldestQuery(db *sqldb.DB, shard int, cutoff time.Time, from position, limit int) (string, []any) {
	after, afterArgs := db.After("created_at", "outbox_id", from.createdAt, from.id)
	return `SELECT outbox_id, event_type, record_key, payload, created_at FROM outbox` +
			db.ForceIndex("idx_shard_key_created_at") + ` WHERE shard_key = ? AND created_at <= ? AND ` + after + `
		ORDER BY created_at, outbox_id LIMIT ?`,
		append(append([]any{shard, cutoff}, afterArgs...), limit)
}

// published is an outbox row the broker has acknowledged: its id and its record key, the outbox's shard key.
type published struct{ id, key int64 }

// remove deletes published rows of db's outbox in one statement. Behind Vitess the record keys route the delete to
// the shards that hold the rows, and the MULTI_SHARD_AUTOCOMMIT directive lets it commit on each shard by itself (the
// rows are independent: a delete that fails on one shard leaves its rows to be published again). Elsewhere the
// primary key alone finds the rows.
func remove(ctx context.Context, db *sqldb.DB, rows []published) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	if db.Dialect == sqldb.SQLite {
		ids = padded(ids)
	}
	inIDs, args := sqldb.In("outbox_id", ids)
	if !db.Vitess() {
		_, err := db.ExecContext(ctx, "DELETE FROM outbox WHERE "+inIDs, args...)
		return err
	}
	keys, seen := make([]int64, 0, len(rows)), map[int64]bool{}
	for _, r := range rows {
		if !seen[r.key] {
			seen[r.key] = true
			keys = append(keys, r.key)
		}
	}
	inKeys, keyArgs := sqldb.In("record_key", keys)
	_, err := db.ExecContext(ctx, "DELETE /*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ FROM outbox WHERE "+inKeys+" AND "+inIDs,
		append(keyArgs, args...)...)
	return err
}

// padded lengthens a non-empty list to the next power of two by repeating its last value, which an IN list ignores.
// On SQLite, sqldb keeps a bounded number of statement texts prepared, shared with the service's own statements:
// deletes of any size then take a dozen of them, not one per size.
func padded(values []int64) []int64 {
	n := 1
	for n < len(values) {
		n *= 2
	}
	for len(values) < n {
		values = append(values, values[len(values)-1])
	}
	return values
}

// backlog reports, per shard in shards, how many rows of db's outbox wait and when the oldest was written.
func backlog(ctx context.Context, db *sqldb.DB, shards []int) (map[int]int64, map[int]time.Time, error) {
	counts, firsts := map[int]int64{}, map[int]time.Time{}
	for _, s := range shards {
		// One shard at a time keeps every read on the (shard_key, created_at) index. The oldest row is read as a
		// column, not as MIN(), so that SQLite hands back a typed time.
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE shard_key = ?", s).Scan(&n); err != nil {
			return nil, nil, err
		}
		counts[s] = n
		var first time.Time
		err := db.QueryRowContext(ctx, "SELECT created_at FROM outbox WHERE shard_key = ? ORDER BY created_at LIMIT 1", s).
			Scan(&first)
		switch {
		case err == nil:
			firsts[s] = first
		case !errors.Is(err, sql.ErrNoRows):
			return nil, nil, err
		}
	}
	return counts, firsts, nil
}
