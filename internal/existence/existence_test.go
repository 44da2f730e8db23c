package existence_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// ceiling bounds every wait of these tests: far past anything that should take long, it only turns a hang into a
// failure.
const ceiling = 10 * time.Second

// clock is a Config.Now the test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newRegistry returns a registry over db that looks articles up at originURL, with cfg's other settings.
func newRegistry(db *sqldb.DB, originURL string, cfg existence.Config) *existence.Registry {
	cfg.Service = "test"
	cfg.Origin = originURL
	return existence.New(db, cfg)
}

// requiring returns a write for Registry.Write: a transaction that only calls Require, counting its runs.
func requiring(db *sqldb.DB, reg *existence.Registry, articleID int64, runs *atomic.Int64) func() error {
	return func() error {
		runs.Add(1)
		return db.Transact(context.Background(), func(tx *sql.Tx) error {
			return reg.Require(context.Background(), tx, articleID)
		})
	}
}

// require runs Require alone in a transaction.
func require(db *sqldb.DB, reg *existence.Registry, articleID int64) error {
	return db.Transact(context.Background(), func(tx *sql.Tx) error {
		return reg.Require(context.Background(), tx, articleID)
	})
}

func wantFault(t *testing.T, what string, err error, kind fault.Kind, code string) {
	t.Helper()
	if fe, ok := fault.As(err); !ok || fe.Kind != kind || fe.Code != code {
		t.Fatalf("%s: %v, want a fault of kind %d with code %s", what, err, kind, code)
	}
}

// existenceRow reads an article's row; found is false when there is none.
func existenceRow(t *testing.T, db *sqldb.DB, articleID int64) (found, deleted bool, version int64) {
	t.Helper()
	err := db.QueryRowContext(context.Background(),
		"SELECT deleted, article_version FROM article_existence WHERE article_id = ?", articleID).Scan(&deleted, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return true, deleted, version
}

func wantLive(t *testing.T, db *sqldb.DB, articleID, version int64) {
	t.Helper()
	if found, deleted, v := existenceRow(t, db, articleID); !found || deleted || v != version {
		t.Fatalf("article %d: found %v, deleted %v, version %d; want live at version %d", articleID, found, deleted, v, version)
	}
}

// gatedOrigin is an article service whose answers (200, ETag "1") wait until the test opens its gate. It counts the
// requests it had and the most it held at once.
type gatedOrigin struct {
	URL                          string
	gate                         chan struct{}
	arrived                      chan struct{} // a token per request, as it arrives
	calls, inFlight, maxInFlight atomic.Int64
	openOnce                     sync.Once
}

func newGatedOrigin(t *testing.T) *gatedOrigin {
	o := &gatedOrigin{gate: make(chan struct{}), arrived: make(chan struct{}, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.calls.Add(1)
		n := o.inFlight.Add(1)
		// Counted out before the answer leaves: the client frees its slot only once it has the answer.
		defer o.inFlight.Add(-1)
		// Raise maxInFlight to n, unless another request raised it higher.
		for m := o.maxInFlight.Load(); n > m && !o.maxInFlight.CompareAndSwap(m, n); m = o.maxInFlight.Load() {
		}
		select {
		case o.arrived <- struct{}{}:
		default:
		}
		select {
		case <-o.gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("ETag", `"1"`)
		_, _ = w.Write([]byte(`{}`)) // a client gone by now is no concern here
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(o.open) // runs first: a request still held would keep srv.Close waiting
	o.URL = srv.URL
	return o
}

// open lets every request, held or to come, have its answer.
func (o *gatedOrigin) open() { o.openOnce.Do(func() { close(o.gate) }) }

// awaitArrivals waits until n more requests have arrived.
func (o *gatedOrigin) awaitArrivals(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-o.arrived:
		case <-time.After(ceiling):
			t.Fatalf("the origin had %d requests; waited for %d", o.calls.Load(), n)
		}
	}
}

// within runs call and returns its error, failing the test if it has not returned after ceiling.
func within(t *testing.T, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- call() }()
	select {
	case err := <-done:
		t.Logf("%s returned in %v", what, time.Since(start).Round(time.Millisecond))
		return err
	case <-time.After(ceiling):
		t.Fatalf("%s has not returned after %v", what, ceiling)
		return nil
	}
}

func TestRequire(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := existencetest.NewOrigin(t)
		reg := origin.Registry("test", db)
		existencetest.Apply(t, reg, existencetest.Created(1, 1))
		existencetest.Apply(t, reg, existencetest.Created(2, 1))
		existencetest.Apply(t, reg, existencetest.Deleted(2, 2))

		if err := require(db, reg, 1); err != nil {
			t.Errorf("a live article: %v", err)
		}
		wantFault(t, "a deleted article", require(db, reg, 2), fault.NotFound, "ARTICLE_NOT_FOUND")
		if err := require(db, reg, 3); !errors.Is(err, existence.ErrUnknown) {
			t.Errorf("an article never heard of: %v, want ErrUnknown", err)
		}
		if origin.Calls() != 0 {
			t.Errorf("Require made %d lookups; it never asks the article service", origin.Calls())
		}
	})
}

func TestWrite(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		origin := existencetest.NewOrigin(t)
		reg := origin.Registry("test", db)

		t.Run("known live", func(t *testing.T) {
			existencetest.Apply(t, reg, existencetest.Created(10, 4))
			var runs atomic.Int64
			if err := reg.Write(ctx, 10, requiring(db, reg, 10, &runs)); err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 1 || origin.Calls() != 0 {
				t.Errorf("write ran %d times after %d lookups; want once, with no lookup", runs.Load(), origin.Calls())
			}
		})

		t.Run("unknown, the origin has it", func(t *testing.T) {
			var runs atomic.Int64
			calls := origin.Calls()
			if err := reg.Write(ctx, 20, requiring(db, reg, 20, &runs)); err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 2 || origin.Calls()-calls != 1 || reg.Lookups() != 1 {
				t.Errorf("write ran %d times after %d lookups (registry counts %d); want twice, after one",
					runs.Load(), origin.Calls()-calls, reg.Lookups())
			}
			wantLive(t, db, 20, 1) // the origin's ETag
			runs.Store(0)
			if err := reg.Write(ctx, 20, requiring(db, reg, 20, &runs)); err != nil || runs.Load() != 1 || origin.Calls()-calls != 1 {
				t.Errorf("the next write: %v, ran %d times, %d lookups in all; want once, no new lookup",
					err, runs.Load(), origin.Calls()-calls)
			}
		})

		t.Run("unknown, the origin has it not", func(t *testing.T) {
			origin.Remove(30)
			var runs atomic.Int64
			wantFault(t, "write", reg.Write(ctx, 30, requiring(db, reg, 30, &runs)), fault.NotFound, "ARTICLE_NOT_FOUND")
			if runs.Load() != 1 {
				t.Errorf("write ran %d times; want once", runs.Load())
			}
			if found, _, _ := existenceRow(t, db, 30); found {
				t.Error("a 404 left a row")
			}
		})

		t.Run("origin down", func(t *testing.T) {
			origin.SetDown(true)
			var runs atomic.Int64
			wantFault(t, "write", reg.Write(ctx, 40, requiring(db, reg, 40, &runs)),
				fault.Unavailable, "ARTICLE_SERVICE_UNAVAILABLE")
			if runs.Load() != 1 {
				t.Errorf("write ran %d times; want once", runs.Load())
			}
			origin.SetDown(false)
			if err := reg.Write(ctx, 40, requiring(db, reg, 40, &runs)); err != nil {
				t.Errorf("once the origin is back: %v", err)
			}
		})
	})
}

func TestWriteGivesUpOnAnOriginThatNeverAnswers(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		reg := newRegistry(db, "http://"+sqldbtest.SilentServer(t), existence.Config{LookupTimeout: 200 * time.Millisecond})
		var runs atomic.Int64
		err := within(t, "a write on an unknown article", func() error {
			return reg.Write(context.Background(), 1, requiring(db, reg, 1, &runs))
		})
		wantFault(t, "write", err, fault.Unavailable, "ARTICLE_SERVICE_UNAVAILABLE")
	})
}

func TestACallerThatLeavesLetsTheSharedLookupGoOn(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := newGatedOrigin(t)
		reg := newRegistry(db, origin.URL, existence.Config{LookupTimeout: ceiling})
		ctx, cancel := context.WithCancel(context.Background())
		var runs atomic.Int64
		left := make(chan error, 1)
		go func() { left <- reg.Write(ctx, 1, requiring(db, reg, 1, &runs)) }()
		origin.awaitArrivals(t, 1)
		cancel()
		err := within(t, "the write whose caller left", func() error { return <-left })
		wantFault(t, "write", err, fault.Unavailable, "ARTICLE_SERVICE_UNAVAILABLE")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("write: %v, want it to keep context.Canceled as its cause", err)
		}

		origin.open()
		if err := reg.Write(context.Background(), 1, requiring(db, reg, 1, &runs)); err != nil {
			t.Fatal(err)
		}
		if origin.calls.Load() != 1 {
			t.Errorf("%d lookups; the first should have gone on for the next write", origin.calls.Load())
		}
		wantLive(t, db, 1, 1)
	})
}

func TestConcurrentLookupsOfOneArticleAreOne(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := newGatedOrigin(t)
		reg := newRegistry(db, origin.URL, existence.Config{LookupTimeout: ceiling})
		const writers = 100
		var runs, unknown atomic.Int64
		write := requiring(db, reg, 1, &runs)
		errs := make(chan error, writers)
		for range writers {
			go func() {
				errs <- reg.Write(context.Background(), 1, func() error {
					err := write()
					if errors.Is(err, existence.ErrUnknown) {
						unknown.Add(1)
					}
					return err
				})
			}()
		}
		// Every writer has found the article unknown before the origin answers, so none can find its row instead.
		origin.awaitArrivals(t, 1)
		deadline := time.Now().Add(ceiling)
		for unknown.Load() < writers && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		origin.open()
		for range writers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if unknown.Load() != writers || origin.calls.Load() != 1 {
			t.Errorf("%d writers found the article unknown, and the origin had %d lookups; want %d and 1",
				unknown.Load(), origin.calls.Load(), writers)
		}
	})
}

// A write that read the article as unknown just before a lookup of it recorded it live joins no flight any more;
// it must not look the article up once more.
func TestAWriteThatJustMissedALookupMakesNoOther(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := existencetest.NewOrigin(t)
		reg := origin.Registry("test", db)
		var runs atomic.Int64
		if err := reg.Write(context.Background(), 1, requiring(db, reg, 1, &runs)); err != nil {
			t.Fatal(err)
		}
		write := requiring(db, reg, 1, &runs)
		readBeforeTheRecord := true
		err := reg.Write(context.Background(), 1, func() error {
			if readBeforeTheRecord {
				readBeforeTheRecord = false
				return existence.ErrUnknown
			}
			return write()
		})
		if err != nil || origin.Calls() != 1 {
			t.Errorf("the write that just missed the lookup: %v, after %d lookups in all; want 1", err, origin.Calls())
		}
	})
}

func TestLookupsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := newGatedOrigin(t)
		reg := newRegistry(db, origin.URL, existence.Config{LookupTimeout: ceiling, MaxLookups: 2})
		const articles = 10
		errs := make(chan error, articles)
		for id := int64(1); id <= articles; id++ {
			go func() {
				var runs atomic.Int64
				errs <- reg.Write(context.Background(), id, requiring(db, reg, id, &runs))
			}()
		}
		origin.awaitArrivals(t, 2)
		time.Sleep(100 * time.Millisecond) // time for more to arrive, were they let through
		origin.open()
		for range articles {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if most := origin.maxInFlight.Load(); most != 2 || origin.calls.Load() != articles {
			t.Errorf("%d lookups, at most %d at once; want %d, at most 2", origin.calls.Load(), most, articles)
		}
	})
}

func TestAMissingArticleIsRemembered(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		now := newClock()
		origin := existencetest.NewOrigin(t)
		reg := newRegistry(db, origin.URL, existence.Config{NotFoundTTL: time.Minute, Now: now.Now})
		var runs atomic.Int64
		write := func(id int64) error { return reg.Write(ctx, id, requiring(db, reg, id, &runs)) }
		wantLookups := func(what string, want int64) {
			t.Helper()
			if got := origin.Calls(); got != want {
				t.Errorf("%s: %d lookups in all, want %d", what, got, want)
			}
		}

		old := snowflake.Compose(now.Now().Add(-time.Hour), 1, 0)
		origin.Remove(old)
		wantFault(t, "an old missing article", write(old), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantLookups("the first write", 1)
		now.Add(time.Minute - time.Second)
		wantFault(t, "again within NotFoundTTL", write(old), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantFault(t, "checked within NotFoundTTL", reg.Check(ctx, old), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantLookups("within NotFoundTTL", 1)
		now.Add(2 * time.Second)
		wantFault(t, "again after NotFoundTTL", write(old), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantLookups("after NotFoundTTL", 2)

		// Its ARTICLE_CREATED may still be on the way: a 404 for an id issued a moment ago is not remembered.
		recent := snowflake.Compose(now.Now(), 1, 0)
		origin.Remove(recent)
		wantFault(t, "a recent missing article", write(recent), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantFault(t, "again", write(recent), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantLookups("a recent id", 4)

		existencetest.Apply(t, reg, existencetest.Created(old, 1))
		if err := write(old); err != nil {
			t.Errorf("a write after the article's ARTICLE_CREATED: %v", err)
		}
		if err := reg.Check(ctx, old); err != nil {
			t.Errorf("a check after the article's ARTICLE_CREATED: %v", err)
		}
		wantLookups("after ARTICLE_CREATED", 4)
	})
}

// An id whose Snowflake time lies beyond the clock skew has not been issued: it is refused without asking, so a
// flood of made-up ids from the future cannot take the lookup slots from new articles.
func TestAnIDFromTheFutureIsRefusedWithoutALookup(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		origin := existencetest.NewOrigin(t)
		reg := newRegistry(db, origin.URL, existence.Config{})
		var runs atomic.Int64
		future := snowflake.Compose(time.Now().Add(time.Hour), 1, 0)
		err := reg.Write(context.Background(), future, requiring(db, reg, future, &runs))
		wantFault(t, "a write on an id from an hour ahead", err, fault.NotFound, "ARTICLE_NOT_FOUND")
		wantFault(t, "a view of it", reg.Check(context.Background(), future), fault.NotFound, "ARTICLE_NOT_FOUND")
		if origin.Calls() != 0 {
			t.Errorf("%d lookups of an id from the future, want none", origin.Calls())
		}
	})
}

func TestCheck(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		origin := existencetest.NewOrigin(t)
		reg := origin.Registry("test", db)
		other := origin.Registry("test", db) // another instance of the service, on the same database

		t.Run("live", func(t *testing.T) {
			existencetest.Apply(t, other, existencetest.Created(1, 1))
			if err := reg.Check(ctx, 1); err != nil {
				t.Fatal(err)
			}
			// The answer is remembered: the row is not read again (nor is the article looked up).
			if _, err := db.ExecContext(ctx, "UPDATE article_existence SET deleted = TRUE WHERE article_id = 1"); err != nil {
				t.Fatal(err)
			}
			if err := reg.Check(ctx, 1); err != nil {
				t.Errorf("checked again: %v, want the remembered live answer", err)
			}
			if origin.Calls() != 0 {
				t.Errorf("%d lookups for an article known live", origin.Calls())
			}
		})

		t.Run("live, then deleted here", func(t *testing.T) {
			existencetest.Apply(t, reg, existencetest.Created(5, 1))
			if err := reg.Check(ctx, 5); err != nil {
				t.Fatal(err)
			}
			existencetest.Apply(t, reg, existencetest.Deleted(5, 2))
			wantFault(t, "check after the delete", reg.Check(ctx, 5), fault.NotFound, "ARTICLE_NOT_FOUND")
		})

		t.Run("deleted", func(t *testing.T) {
			existencetest.Apply(t, other, existencetest.Deleted(2, 1))
			wantFault(t, "check", reg.Check(ctx, 2), fault.NotFound, "ARTICLE_NOT_FOUND")
			if origin.Calls() != 0 {
				t.Errorf("%d lookups for an article known deleted", origin.Calls())
			}
		})

		t.Run("unknown", func(t *testing.T) {
			for range 2 {
				if err := reg.Check(ctx, 3); err != nil {
					t.Fatal(err)
				}
			}
			if origin.Calls() != 1 {
				t.Errorf("%d lookups for an article unknown, checked twice; want 1", origin.Calls())
			}
			wantLive(t, db, 3, 1)
			origin.Remove(4)
			wantFault(t, "check of an article the origin has not", reg.Check(ctx, 4), fault.NotFound, "ARTICLE_NOT_FOUND")
		})
	})
}

// A row that a lookup recorded and a read then does not find (seen once through Vitess, unexplained:
// docs/integrity.md) is a 503 that says the lookup was not made again, and the retry asks and records afresh.
func TestACheckThatFindsNoRowAfterALookupRecordedIt(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		origin := existencetest.NewOrigin(t)
		reg := origin.Registry("test", db)
		var runs atomic.Int64
		// A write looks the article up and records it; the registry remembers that it did.
		if err := reg.Write(ctx, 1, requiring(db, reg, 1, &runs)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM article_existence WHERE article_id = 1"); err != nil {
			t.Fatal(err)
		}
		err := reg.Check(ctx, 1)
		wantFault(t, "the check", err, fault.Unavailable, "DATABASE_UNAVAILABLE")
		if !strings.Contains(err.Error(), "not asked again") || origin.Calls() != 1 {
			t.Errorf("the check: %v after %d lookups; want one lookup, trusted and not made again", err, origin.Calls())
		}
		if err := reg.Check(ctx, 1); err != nil {
			t.Fatalf("the retry: %v", err)
		}
		if origin.Calls() != 2 {
			t.Errorf("%d lookups; the retry should have asked again", origin.Calls())
		}
		wantLive(t, db, 1, 1)
	})
}

// A delete recorded while a check's lookup was out wins over the lookup's 200.
func TestACheckWhoseArticleIsDeletedDuringItsLookup(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		origin := newGatedOrigin(t)
		reg := newRegistry(db, origin.URL, existence.Config{LookupTimeout: ceiling})
		checked := make(chan error, 1)
		go func() { checked <- reg.Check(ctx, 1) }()
		origin.awaitArrivals(t, 1)
		existencetest.Apply(t, reg, existencetest.Deleted(1, 2))
		origin.open()
		wantFault(t, "the check", within(t, "the check", func() error { return <-checked }), fault.NotFound, "ARTICLE_NOT_FOUND")
		wantFault(t, "the next check", reg.Check(ctx, 1), fault.NotFound, "ARTICLE_NOT_FOUND")
	})
}

// On MariaDB, Require's shared lock is what keeps a delete from being recorded between a write's check and its
// commit. (SQLite has one writer at a time: the delete waits for the write transaction regardless.)
func TestADeleteWaitsForAWriteThatRequiredTheArticle(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, existence.Migrate, func(t *testing.T, db *sqldb.DB) {
		if db.Dialect != sqldb.MySQL {
			t.Skip("SQLite's single writer serializes the write and the delete")
		}
		ctx := context.Background()
		origin := existencetest.NewOrigin(t)
		reg := origin.Registry("test", db)
		existencetest.Apply(t, reg, existencetest.Created(1, 1))

		required, commit, written := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		var commitOnce sync.Once
		release := func() { commitOnce.Do(func() { close(commit) }) }
		t.Cleanup(release) // a failed test must not leave the transaction open
		go func() {
			written <- db.Transact(ctx, func(tx *sql.Tx) error {
				if err := reg.Require(ctx, tx, 1); err != nil {
					return err
				}
				close(required)
				<-commit
				return nil
			})
		}()
		select {
		case <-required:
		case err := <-written:
			t.Fatalf("the write: %v", err)
		}

		deleted := make(chan error, 1)
		go func() { deleted <- reg.Handlers()[existencetest.Deleted(1, 2).Type](ctx, existencetest.Deleted(1, 2)) }()
		select {
		case err := <-deleted:
			t.Fatalf("the delete was recorded (%v) while a write that required the article was open", err)
		case <-time.After(200 * time.Millisecond):
		}
		release()
		if err := within(t, "the write", func() error { return <-written }); err != nil {
			t.Fatal(err)
		}
		if err := within(t, "the delete", func() error { return <-deleted }); err != nil {
			t.Fatal(err)
		}
		wantFault(t, "a write after the delete", require(db, reg, 1), fault.NotFound, "ARTICLE_NOT_FOUND")
	})
}
