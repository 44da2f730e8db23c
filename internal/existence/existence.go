// Package existence lets the comment, like and view services refuse writes on articles that do not exist, without
// reading the article service's tables and without calling it on every write (docs/integrity.md).
//
// Each of those services keeps, in its own database, one row per article it knows of: live or deleted, with the
// article's version. Its own consumer of the article topic writes the rows (Handlers). An article it has not heard
// of yet — its ARTICLE_CREATED may still be on the way, a millisecond after the article was created — is looked up
// once at the article service, with a deadline, at most MaxLookups at a time, concurrent lookups of one id collapsed
// into one; the answer is remembered: a live article as its row, a missing one in memory for a while.
//
// Writes in an SQL transaction call Require first, inside it: it reads the article's row under a shared lock, so
// the delete cannot be recorded between the check and the commit. Either the write commits first, and the purge
// that follows the delete removes what it wrote; or the delete is recorded first, and the write sees it and is
// refused. Deleted is final: no later event or lookup makes a deleted article live again.
//
// A deleted article is queued for a purge (RunPurges): the service removes its rows of the article in bounded
// batches, each its own short transaction, and the queue entry goes only when nothing is left, so a purge cut off by
// a crash resumes where it stopped.
package existence

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"board/internal/fault"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the existence tables in a service's database.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "existence", migrations)
}

// Defaults; Config fields left zero take them.
const (
	DefaultLookupTimeout = 2 * time.Second
	DefaultMaxLookups    = 32
	DefaultNotFoundTTL   = time.Minute
	DefaultPurgeEvery    = 10 * time.Second
	// liveTTL is how long Check trusts a live answer it remembers. Writes outside SQL keep their own tombstone of a
	// deleted article for much longer than this (see Check).
	liveTTL = time.Minute
	// deletedTTL is how long Check remembers a deleted article; deleted is final, so this only bounds memory.
	deletedTTL = time.Hour
	// maxRemembered bounds the memory of answers; past it, everything is forgotten and asked again.
	maxRemembered = 100_000
	// clockSkew: an id issued less than this long ago, by the article service's clock, may not exist yet on a
	// reader whose clock is ahead, so its 404 is not remembered.
	clockSkew = 10 * time.Second
)

// ErrUnknown is what Require returns for an article the service has not heard of; Write then looks it up.
var ErrUnknown = errors.New("article not known here yet")

// Config configures a Registry.
type Config struct {
	// Service names the service the registry belongs to, in logs.
	Service string
	// Origin is the base URL of the article service, e.g. http://127.0.0.1:9000.
	Origin string
	// Client makes the lookups; nil gets a client of its own.
	Client *http.Client
	// LookupTimeout bounds one lookup at the article service, waiting for a free slot included.
	LookupTimeout time.Duration
	// MaxLookups bounds the lookups in flight at once.
	MaxLookups int
	// NotFoundTTL is how long an article the article service did not have is refused without asking again.
	NotFoundTTL time.Duration
	// PurgeEvery is how often RunPurges looks for queued purges besides those this instance queues itself.
	PurgeEvery time.Duration
	// PurgeBatchSeconds, when set, observes how long each purge batch took, from its start (waiting for a connection
	// and locks included) to its commit: an upper bound of how long it held its locks.
	PurgeBatchSeconds interface{ Observe(float64) }
	Logger            *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Registry is a service's record of which articles exist.
type Registry struct {
	db      *sqldb.DB
	cfg     Config
	client  *http.Client
	lookups chan struct{} // a slot per lookup in flight
	flight  singleflight.Group
	memo    memo
	wake    chan struct{} // a purge was queued by this instance
	calls   atomic.Int64  // lookups made
	stats   purgeStats
}

// New returns the registry of the service whose database is db (prepared by Migrate).
func New(db *sqldb.DB, cfg Config) *Registry {
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	if cfg.MaxLookups <= 0 {
		cfg.MaxLookups = DefaultMaxLookups
	}
	if cfg.NotFoundTTL <= 0 {
		cfg.NotFoundTTL = DefaultNotFoundTTL
	}
	if cfg.PurgeEvery <= 0 {
		cfg.PurgeEvery = DefaultPurgeEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.MaxLookups, IdleConnTimeout: time.Minute}}
	}
	return &Registry{db: db, cfg: cfg, client: client, lookups: make(chan struct{}, cfg.MaxLookups),
		memo: memo{entries: map[int64]memoEntry{}}, wake: make(chan struct{}, 1)}
}

// NotFound is the error of a write on an article that does not exist (SPEC §2: 404).
func NotFound(articleID int64) error {
	return fault.NotFoundf("ARTICLE_NOT_FOUND", "article %d does not exist", articleID)
}

// Require, the first statement of a write transaction, checks that the article is live and keeps it so until the
// transaction ends: the row is read under a shared lock, which recording the delete must wait for. It returns
// NotFound for a deleted article and ErrUnknown for one the service has not heard of.
func (r *Registry) Require(ctx context.Context, tx *sql.Tx, articleID int64) error {
	var deleted bool
	err := tx.QueryRowContext(ctx, "SELECT deleted FROM article_existence WHERE article_id = ?"+r.db.ForShare(), articleID).
		Scan(&deleted)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrUnknown
	case err != nil:
		return err
	case deleted:
		return NotFound(articleID)
	}
	return nil
}

// RequireDeleted, the first statement of a purge batch, checks that the article is recorded as deleted, taking its
// row in the writes' lock order; a purge of a live or unknown article is a wiring mistake and is refused.
func (r *Registry) RequireDeleted(ctx context.Context, tx *sql.Tx, articleID int64) error {
	switch err := r.Require(ctx, tx, articleID); {
	case err == nil:
		return fmt.Errorf("article %d is live: nothing of it is purged", articleID)
	case fault.KindOf(err) != fault.NotFound:
		return fmt.Errorf("article %d is not recorded as deleted: %w", articleID, err)
	}
	return nil
}

// Write runs write, a transaction that calls Require. When the article was unknown, it looks the article up at the
// article service (a 404 there is NotFound) and runs write once more. write must be safe to run twice: an attempt
// that returned ErrUnknown has written nothing.
func (r *Registry) Write(ctx context.Context, articleID int64, write func() error) error {
	err := write()
	if !errors.Is(err, ErrUnknown) {
		return err
	}
	if err := r.lookUp(ctx, articleID); err != nil {
		return err
	}
	if err = write(); errors.Is(err, ErrUnknown) {
		return fmt.Errorf("article %d: recorded live by its lookup but unknown to the write after it", articleID)
	}
	return err
}

// Check answers whether an article is live for a write that does not run in an SQL transaction (a view, counted in
// Redis): nil when live, NotFound when not. It trusts a remembered live answer for a minute, so a caller must keep
// a delete from being undone by a write checked just before it (the view service keeps a tombstone in Redis).
func (r *Registry) Check(ctx context.Context, articleID int64) error {
	switch r.memo.get(articleID, r.cfg.Now()) {
	case stateLive:
		return nil
	case stateDeleted, stateMissing:
		return NotFound(articleID)
	}
	isDeleted, err := r.isDeleted(ctx, articleID)
	if errors.Is(err, sql.ErrNoRows) {
		// Whether lookUp will trust an earlier lookup's record rather than ask, for the error below.
		remembered := r.memo.get(articleID, r.cfg.Now()) == stateRecorded
		if err := r.lookUp(ctx, articleID); err != nil {
			return err
		}
		// The lookup records the article only where it has no row: a delete recorded while it was out stays, and
		// its 200 vouches for nothing.
		if isDeleted, err = r.isDeleted(ctx, articleID); errors.Is(err, sql.ErrNoRows) {
			// A lookup's INSERT returned no error (this one's, or one of the last minute that the memo remembers),
			// rows are never removed, and yet the read finds none. Seen once, through Vitess under the cluster
			// suite's faults; docs/integrity.md ("A lookup's row that a read did not find") says what was ruled
			// out and how. The memo forgets the record, so the caller's retry asks and inserts afresh.
			by := "its lookup"
			if remembered {
				by = "a lookup of the last minute (not asked again)"
			}
			r.memo.put(articleID, stateUnknown, time.Time{})
			return fault.Unavailablef(fmt.Errorf("article %d: recorded live by %s, but the %s database %s reads no row of it",
				articleID, by, r.db.Dialect, r.db.Name),
				"DATABASE_UNAVAILABLE", "the %s database did not keep article %d's record; try again", r.db.Dialect, articleID)
		}
	}
	switch {
	case err != nil:
		return err
	case isDeleted:
		r.memo.put(articleID, stateDeleted, r.cfg.Now().Add(deletedTTL))
		return NotFound(articleID)
	}
	r.memo.put(articleID, stateLive, r.cfg.Now().Add(liveTTL))
	return nil
}

// isDeleted reads the article's row; sql.ErrNoRows when it has none.
func (r *Registry) isDeleted(ctx context.Context, articleID int64) (deleted bool, err error) {
	err = r.db.QueryRowContext(ctx, "SELECT deleted FROM article_existence WHERE article_id = ?", articleID).Scan(&deleted)
	return deleted, err
}

// lookUp asks the article service whether an article exists and records a live one. Concurrent lookups of one id
// share one call, which runs to its own deadline whichever caller gives up first.
func (r *Registry) lookUp(ctx context.Context, articleID int64) error {
	if snowflake.Timestamp(articleID).After(r.cfg.Now().Add(clockSkew)) {
		return NotFound(articleID) // not issued yet, by any clock within the skew: nothing to ask
	}
	switch r.memo.get(articleID, r.cfg.Now()) {
	case stateMissing:
		return NotFound(articleID)
	case stateLive, stateRecorded:
		// It has a row: a lookup recorded it after the caller found it unknown, too late for the caller to join.
		return nil
	}
	done := r.flight.DoChan(strconv.FormatInt(articleID, 10), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LookupTimeout)
		defer cancel()
		return nil, r.fetch(ctx, articleID)
	})
	select {
	case res := <-done:
		return res.Err
	case <-ctx.Done():
		return fault.Unavailablef(ctx.Err(), "ARTICLE_SERVICE_UNAVAILABLE",
			"cannot tell whether article %d exists in time; try again", articleID)
	}
}

// fetch is one lookup: GET the article, within ctx and a free slot.
func (r *Registry) fetch(ctx context.Context, articleID int64) error {
	unavailable := func(err error) error {
		return fault.Unavailablef(err, "ARTICLE_SERVICE_UNAVAILABLE",
			"the article service cannot tell whether article %d exists; try again", articleID)
	}
	select {
	case r.lookups <- struct{}{}:
		defer func() { <-r.lookups }()
	case <-ctx.Done():
		return unavailable(fmt.Errorf("no free lookup slot: %w", ctx.Err()))
	}
	r.calls.Add(1)
	url := strings.TrimSuffix(r.cfg.Origin, "/") + "/v1/articles/" + strconv.FormatInt(articleID, 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return unavailable(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		if now := r.cfg.Now(); snowflake.Timestamp(articleID).Before(now.Add(-clockSkew)) {
			r.memo.put(articleID, stateMissing, now.Add(r.cfg.NotFoundTTL))
		}
		return NotFound(articleID)
	default:
		return unavailable(fmt.Errorf("GET %s: %s", url, resp.Status))
	}
	var version int64 // the ETag is the article's version; an article service without one vouches with 0
	if etag := resp.Header.Get("ETag"); etag != "" {
		if version, err = strconv.ParseInt(strings.Trim(etag, `"`), 10, 64); err != nil {
			return unavailable(fmt.Errorf("GET %s: ETag %q is not a version", url, etag))
		}
	}
	// Insert if absent: a delete recorded meanwhile stays. The insert gets a deadline of its own: on SQLite it
	// queues for the single writer behind the writes in flight, which the answer's time should not be charged.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LookupTimeout)
	defer cancel()
	if _, err = r.db.ExecContext(ctx, "INSERT INTO article_existence (article_id, deleted, article_version) VALUES (?, FALSE, ?)"+
		r.db.OnConflictUpdate("article_id", "deleted = deleted"), articleID, version); err != nil {
		return err
	}
	r.memo.put(articleID, stateRecorded, r.cfg.Now().Add(liveTTL))
	return nil
}

// state is what the memo remembers of an article.
type state int

const (
	stateUnknown state = iota
	stateLive
	stateDeleted
	stateMissing // the article service answered 404
	// stateRecorded: a lookup answered 200 and the article has a row now, live or, if its delete was recorded
	// meanwhile (perhaps by another instance), deleted. Only lookUp trusts it: there is no need to ask again.
	stateRecorded
)

type memoEntry struct {
	state   state
	expires time.Time
}

// memo remembers answers for a while, bounded: when full it forgets everything, which only costs questions again.
type memo struct {
	mu      sync.Mutex
	entries map[int64]memoEntry
}

func (m *memo) get(id int64, now time.Time) state {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[id]
	if !ok || now.After(e.expires) {
		return stateUnknown
	}
	return e.state
}

func (m *memo) put(id int64, s state, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s != stateDeleted && m.entries[id].state == stateDeleted {
		return // deleted is final: an answer read before the delete was recorded must not hide it
	}
	if len(m.entries) >= maxRemembered {
		clear(m.entries)
	}
	m.entries[id] = memoEntry{s, expires}
}

// forgetMissing forgets that the article service did not have id, and nothing else: a deleted mark stays.
func (m *memo) forgetMissing(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries[id].state == stateMissing {
		delete(m.entries, id)
	}
}
