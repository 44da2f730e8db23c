// Package idempotency makes a write safe to send again: a POST that carries an Idempotency-Key header is done once
// per (user, key), and every retry of it within TTL gets the first answer, status and body, byte for byte. The key's
// record commits in the same SQL transaction as the write it guards (Write.Claim and Write.Record, called by the
// service's store inside its Transact), so no crash or lost answer can leave the write without its record, or the
// record without its write. docs/idempotency.md gives the design.
//
// The package is shared by the producer services; each keeps the records in its own database (Migrate), on the shard
// of the rows the write made.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"board/internal/apijson"
	"board/internal/backoff"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the table of keys in a service's database.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "idempotency", migrations)
}

const (
	// Header is the request header that carries the key.
	Header = "Idempotency-Key"
	// ReplayedHeader is set, to "true", on an answer replayed from a record rather than made by this request.
	ReplayedHeader = "Idempotent-Replayed"
	// TTL is how long a key is kept: a key older than that is a fresh key.
	TTL = 24 * time.Hour
	// MaxKeyLen is the longest key accepted.
	MaxKeyLen = 255
)

// Key is a request's Idempotency-Key with the fingerprint of what the request asks.
type Key struct {
	key         string
	fingerprint []byte
}

// FromRequest reads r's Idempotency-Key: nil when r has none; 400 INVALID_IDEMPOTENCY_KEY unless it is one header of
// 1..MaxKeyLen visible ASCII characters. in is the request's body as the handler decoded it (nil for none): with the
// method and path it makes the fingerprint, so that the same key with another body or on another endpoint is told
// apart, and a body that differs only in spacing or unknown fields is the same request.
func FromRequest(r *http.Request, in any) (*Key, error) {
	values := r.Header.Values(Header)
	if len(values) == 0 {
		return nil, nil
	}
	if len(values) > 1 || !valid(values[0]) {
		return nil, fault.Invalidf("INVALID_IDEMPOTENCY_KEY",
			"%s must be one header of 1 to %d visible ASCII characters", Header, MaxKeyLen)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("fingerprint the request: %w", err) // in is the handler's own value: a bug
	}
	h := sha256.New()
	h.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	h.Write(body)
	return &Key{key: values[0], fingerprint: h.Sum(nil)}, nil
}

func valid(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return false
	}
	for i := range len(key) {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Store keeps a service's keys in its database, whose schema Migrate has prepared.
type Store struct {
	db  *sqldb.DB
	now func() time.Time
}

// New returns the store of keys in db; now is injected so that tests control expiry.
func New(db *sqldb.DB, now func() time.Time) *Store { return &Store{db: db, now: now} }

// answer is a write's first answer.
type answer struct {
	Status   int
	Body     []byte
	Replayed bool // read from the record, not made by this request
}

// Write is one keyed write on its way: what its transaction records. A nil *Write (a request without a key)
// records nothing, so a store calls its methods whether or not the request has a key.
type Write struct {
	userKey     string
	fingerprint []byte
	status      int
	now         time.Time
	shardKey    int64
	answer      answer
}

// errClaimed says that another request has recorded the key, or is recording it in a transaction not yet committed.
var errClaimed = errors.New("the idempotency key is taken")

// IsClaimed reports whether err is a write's failure to claim its key because another request had it first.
func IsClaimed(err error) bool { return errors.Is(err, errClaimed) }

// Claim records w's key in tx, on the shard of shardKey, the shard key of the rows the write makes: it comes before
// them, so that a concurrent request with the same key waits on this one's unique key until it commits, and then
// fails (IsClaimed) and is answered from the record. Record must follow in the same transaction.
func (w *Write) Claim(ctx context.Context, tx *sql.Tx, shardKey int64) error {
	if w == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO idempotency_key (user_key, shard_key, fingerprint, status, body, created_at) VALUES (?, ?, ?, 0, ?, ?)",
		w.userKey, shardKey, w.fingerprint, []byte{}, w.now)
	if sqldb.IsDuplicate(err) {
		return fmt.Errorf("%w: %w", errClaimed, err)
	}
	w.shardKey = shardKey
	return err
}

// Record stores v, the write's answer as JSON, with the status the write answers with, on the key Claim recorded in
// tx. It comes after everything the answer shows is written, so that the answer is what the write did.
func (w *Write) Record(ctx context.Context, tx *sql.Tx, v any) error {
	if w == nil {
		return nil
	}
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("idempotency.Record: %w", err) // v is the server's own value: a bug
	}
	body = append(body, '\n') // as httpio.Write answers
	// By shard_key too: behind Vitess the primary vindex routes it to this transaction's shard, where the row is,
	// while the lookup row that would route by user_key alone is not committed yet.
	if _, err := tx.ExecContext(ctx, "UPDATE idempotency_key SET status = ?, body = ? WHERE shard_key = ? AND user_key = ?",
		w.status, body, w.shardKey, w.userKey); err != nil {
		return err
	}
	w.answer = answer{Status: w.status, Body: body}
	return nil
}

// Serve answers a write that succeeds with status. Without a key it answers with the value write returns, as if
// this package did not exist. With one, it answers with the key's record when there is one (the same request) or
// 409 IDEMPOTENCY_KEY_REUSED (another request); otherwise it runs write, whose transaction claims and records the
// key, and answers with what was recorded. A write that fails records nothing, and its retry is a new attempt.
func (s *Store) Serve(w http.ResponseWriter, r *http.Request, user int64, key *Key, status int, write func(*Write) (any, error)) error {
	if key == nil {
		v, err := write(nil)
		if err != nil {
			return err
		}
		httpio.Write(w, status, v)
		return nil
	}
	ans, err := s.do(r.Context(), user, key, status, func(wr *Write) error {
		_, err := write(wr)
		return err
	})
	if err != nil {
		return err
	}
	if ans.Replayed {
		w.Header().Set(ReplayedHeader, "true")
	}
	httpio.WriteRaw(w, ans.Status, ans.Body)
	return nil
}

// claimAttempts bounds how often do tries again after losing its key to a request whose record it cannot read yet.
const claimAttempts = 3

func (s *Store) do(ctx context.Context, user int64, key *Key, status int, write func(*Write) error) (answer, error) {
	userKey := strconv.FormatInt(user, 10) + ":" + key.key
	for attempt := 1; ; attempt++ {
		ans, found, err := s.recorded(ctx, userKey, key.fingerprint)
		if err != nil || found {
			return ans, err
		}
		w := &Write{userKey: userKey, fingerprint: key.fingerprint, status: status, now: apijson.Millis(s.now())}
		werr := write(w)
		if werr == nil {
			return w.answer, nil
		}
		if !IsClaimed(werr) {
			// A concurrent request with the key may have made the write first, so that this one failed on what it did
			// (a like already made): its record, if any, answers.
			if ans, found, err := s.recorded(ctx, userKey, key.fingerprint); found || fault.KindOf(err) == fault.Conflict {
				return ans, err
			}
			return answer{}, werr
		}
		// On MySQL and SQLite the claim waited until the other request committed, and its record is there now; behind
		// Vitess the lookup row commits a moment before the record, which the next attempt reads.
		if attempt == claimAttempts {
			return answer{}, fault.Conflictf("IDEMPOTENCY_KEY_IN_PROGRESS",
				"another request with this %s is in progress; try again", Header)
		}
		if err := backoff.Sleep(ctx, time.Duration(attempt)*10*time.Millisecond); err != nil {
			return answer{}, fault.Unavailablef(err, "TIMEOUT", "the request did not finish in time; try again later")
		}
	}
}

// recorded returns the answer recorded for userKey: found when there is one for the request of fingerprint, 409
// IDEMPOTENCY_KEY_REUSED when it is another request's. An expired record is deleted, and not found.
func (s *Store) recorded(ctx context.Context, userKey string, fingerprint []byte) (ans answer, found bool, err error) {
	var shardKey int64
	var fp []byte
	var createdAt time.Time
	err = s.db.QueryRowContext(ctx, "SELECT shard_key, fingerprint, status, body, created_at FROM idempotency_key WHERE user_key = ?",
		userKey).Scan(&shardKey, &fp, &ans.Status, &ans.Body, &createdAt)
	if errors.Is(err, sql.ErrNoRows) {
		return answer{}, false, nil
	}
	if err != nil {
		return answer{}, false, err
	}
	if cutoff := s.now().Add(-TTL); !createdAt.After(cutoff) {
		_, err := s.db.ExecContext(ctx, "DELETE FROM idempotency_key WHERE shard_key = ? AND user_key = ? AND created_at <= ?",
			shardKey, userKey, apijson.Millis(cutoff))
		return answer{}, false, err
	}
	if !bytes.Equal(fp, fingerprint) {
		return answer{}, false, fault.Conflictf("IDEMPOTENCY_KEY_REUSED",
			"this %s was sent with another request (another body or endpoint) in the last 24 hours", Header)
	}
	ans.Replayed = true
	return ans, true, nil
}

// Purge timing: a batch is a bounded piece of work; records expire by the day, so a pass a minute is plenty.
const (
	purgeBatch    = 100
	purgeInterval = time.Minute
	purgeTimeout  = 10 * time.Second
)

// purge deletes up to purgeBatch expired records, oldest first, and returns how many it deleted. It reads them
// through the index on created_at, so its cost follows the expired records, never the live ones. Each is deleted by
// its own statement, on its own shard behind Vitess (where the lookup row goes with it).
func (s *Store) purge(ctx context.Context) (int, error) {
	cutoff := apijson.Millis(s.now().Add(-TTL))
	rows, err := s.db.QueryContext(ctx, "SELECT shard_key, user_key FROM idempotency_key WHERE created_at <= ? ORDER BY created_at LIMIT ?",
		cutoff, purgeBatch)
	if err != nil {
		return 0, err
	}
	type expired struct {
		shardKey int64
		userKey  string
	}
	var batch []expired
	for rows.Next() {
		var e expired
		if err := rows.Scan(&e.shardKey, &e.userKey); err != nil {
			rows.Close()
			return 0, err
		}
		batch = append(batch, e)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	deleted := 0
	for _, e := range batch {
		// created_at again: a key sent anew since the read is a new record, not this one.
		res, err := s.db.ExecContext(ctx, "DELETE FROM idempotency_key WHERE shard_key = ? AND user_key = ? AND created_at <= ?",
			e.shardKey, e.userKey, cutoff)
		if err != nil {
			return deleted, err
		}
		n, _ := res.RowsAffected() // both drivers report it
		deleted += int(n)
	}
	return deleted, nil
}

// RunPurge purges expired records every purgeInterval, batch after batch while they come full, until ctx ends.
func (s *Store) RunPurge(ctx context.Context, logger *slog.Logger) {
	ticker := time.NewTicker(purgeInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for {
			pctx, cancel := context.WithTimeout(ctx, purgeTimeout)
			n, err := s.purge(pctx)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					logger.Warn("purging expired idempotency keys failed; the next pass tries again", "err", err)
				}
				break
			}
			if n < purgeBatch {
				break
			}
		}
	}
}
