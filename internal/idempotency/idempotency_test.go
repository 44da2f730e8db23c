package idempotency

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

func TestFromRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		values  []string
		wantKey bool
		wantErr bool
	}{
		{name: "none"},
		{name: "one character", values: []string{"a"}, wantKey: true},
		{name: "255 characters", values: []string{strings.Repeat("k", 255)}, wantKey: true},
		{name: "visible ASCII", values: []string{"!~0aZ-_.:/"}, wantKey: true},
		{name: "empty", values: []string{""}, wantErr: true},
		{name: "256 characters", values: []string{strings.Repeat("k", 256)}, wantErr: true},
		{name: "a space", values: []string{"a b"}, wantErr: true},
		{name: "a tab", values: []string{"a\tb"}, wantErr: true},
		{name: "not ASCII", values: []string{"clé"}, wantErr: true},
		{name: "two headers", values: []string{"a", "b"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/things", nil)
			for _, v := range tc.values {
				r.Header.Add(Header, v)
			}
			k, err := FromRequest(r, map[string]string{"a": "b"})
			if tc.wantErr {
				if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || fe.Code != "INVALID_IDEMPOTENCY_KEY" {
					t.Fatalf("FromRequest = %v, %v; want 400 INVALID_IDEMPOTENCY_KEY", k, err)
				}
				return
			}
			if err != nil || (k != nil) != tc.wantKey {
				t.Fatalf("FromRequest = %v, %v; want a key: %v", k, err, tc.wantKey)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	key := func(method, path string, in any) string {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set(Header, "k")
		k, err := FromRequest(r, in)
		if err != nil {
			t.Fatal(err)
		}
		return string(k.fingerprint)
	}
	base := key("POST", "/v1/a", map[string]int{"x": 1})
	if key("POST", "/v1/a", map[string]int{"x": 1}) != base {
		t.Error("the same request has another fingerprint")
	}
	for name, other := range map[string]string{
		"another body":   key("POST", "/v1/a", map[string]int{"x": 2}),
		"another path":   key("POST", "/v1/b", map[string]int{"x": 1}),
		"another method": key("PUT", "/v1/a", map[string]int{"x": 1}),
	} {
		if other == base {
			t.Errorf("%s has the same fingerprint", name)
		}
	}
}

// fixture is a Store with a clock of the test's and a write that counts what it commits.
type fixture struct {
	db      *sqldb.DB
	store   *Store
	clock   atomic.Int64 // unix milliseconds
	commits atomic.Int64
}

func newFixture(t *testing.T, db *sqldb.DB) *fixture {
	f := &fixture{db: db}
	f.clock.Store(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixMilli())
	f.store = New(db, func() time.Time { return time.UnixMilli(f.clock.Load()).UTC() })
	return f
}

func (f *fixture) advance(d time.Duration) { f.clock.Add(d.Milliseconds()) }

// write is a write on shard 7 answering with the number of commits so far, so that a second write shows.
func (f *fixture) write(ctx context.Context, w *Write) (any, error) {
	var n int64
	err := f.db.Transact(ctx, func(tx *sql.Tx) error {
		if err := w.Claim(ctx, tx, 7); err != nil {
			return err
		}
		n = f.commits.Load() + 1
		return w.Record(ctx, tx, map[string]int64{"write": n})
	})
	if err != nil {
		return nil, err
	}
	f.commits.Add(1)
	return map[string]int64{"write": n}, nil
}

type result struct {
	status   int
	body     string
	replayed string
}

// post serves one request of user with key (none when empty) and body.
func (f *fixture) post(t *testing.T, user int64, path, key, body string) result {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, nil)
	if key != "" {
		r.Header.Set(Header, key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r = r.WithContext(ctx)
	rec := httptest.NewRecorder()
	k, err := FromRequest(r, body)
	if err == nil {
		err = f.store.Serve(rec, r, user, k, http.StatusCreated, func(w *Write) (any, error) { return f.write(ctx, w) })
	}
	if err != nil {
		fe, ok := fault.As(err)
		if !ok {
			t.Fatalf("Serve: %v", err)
		}
		return result{status: map[fault.Kind]int{fault.Invalid: 400, fault.Conflict: 409}[fe.Kind], body: fe.Code}
	}
	return result{rec.Code, rec.Body.String(), rec.Header().Get(ReplayedHeader)}
}

func (f *fixture) records(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM idempotency_key").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestServe(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		first := f.post(t, 1, "/v1/a", "k1", "body")
		if want := (result{201, `{"write":1}` + "\n", ""}); first != want {
			t.Fatalf("first answer %+v, want %+v", first, want)
		}
		again := f.post(t, 1, "/v1/a", "k1", "body")
		if want := (result{201, first.body, "true"}); again != want {
			t.Errorf("replay %+v, want %+v", again, want)
		}
		if got := f.commits.Load(); got != 1 {
			t.Errorf("%d writes after a replay, want 1", got)
		}
		for name, r := range map[string]result{
			"another body":     f.post(t, 1, "/v1/a", "k1", "other"),
			"another endpoint": f.post(t, 1, "/v1/b", "k1", "body"),
		} {
			if want := (result{409, "IDEMPOTENCY_KEY_REUSED", ""}); r != want {
				t.Errorf("%s: %+v, want %+v", name, r, want)
			}
		}
		if r := f.post(t, 2, "/v1/a", "k1", "body"); r.status != 201 || r.replayed != "" || f.commits.Load() != 2 {
			t.Errorf("another user's key: %+v after %d writes; want a write of its own", r, f.commits.Load())
		}
		for range 2 {
			if r := f.post(t, 1, "/v1/a", "", "body"); r.status != 201 || r.replayed != "" {
				t.Errorf("without a key: %+v", r)
			}
		}
		if got, records := f.commits.Load(), f.records(t); got != 4 || records != 2 {
			t.Errorf("%d writes and %d records after two writes without a key, want 4 and 2", got, records)
		}
		if r := f.post(t, 1, "/v1/a", "bad key", "body"); r != (result{400, "INVALID_IDEMPOTENCY_KEY", ""}) {
			t.Errorf("a bad key: %+v", r)
		}
	})
}

func TestExpiredKeyIsFresh(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		first := f.post(t, 1, "/v1/a", "k", "body")
		f.advance(TTL - time.Millisecond)
		if r := f.post(t, 1, "/v1/a", "k", "body"); r.body != first.body || r.replayed != "true" {
			t.Errorf("a moment before expiry: %+v, want the replay of %+v", r, first)
		}
		f.advance(time.Millisecond)
		if r := f.post(t, 1, "/v1/a", "k", "other"); r.status != 201 || r.replayed != "" || f.commits.Load() != 2 {
			t.Errorf("at expiry, with another body: %+v after %d writes, want a second write", r, f.commits.Load())
		}
		if n := f.records(t); n != 1 {
			t.Errorf("%d records, want 1: the expired one replaced", n)
		}
	})
}

func TestFailedWriteRecordsNothing(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		refused := fault.Invalidf("NOPE", "refused")
		ctx := context.Background()
		k := &Key{key: "k", fingerprint: []byte("fp")}
		_, err := f.store.do(ctx, 1, k, 201, func(w *Write) error {
			return f.db.Transact(ctx, func(tx *sql.Tx) error {
				if err := w.Claim(ctx, tx, 7); err != nil {
					return err
				}
				return refused
			})
		})
		if err != refused { //nolint:errorlint // the very error the write returned
			t.Fatalf("do = %v, want the write's error", err)
		}
		if n := f.records(t); n != 0 {
			t.Fatalf("%d records after a failed write, want 0", n)
		}
		if r := f.post(t, 1, "/v1/a", "k", "body"); r.status != 201 || f.commits.Load() != 1 {
			t.Errorf("retry: %+v after %d writes, want one write", r, f.commits.Load())
		}
	})
}

// TestRetriedTransactionWritesOnce: the claim is part of the transaction Transact retries after a deadlock, so the
// attempt that lost took its claim with it.
func TestRetriedTransactionWritesOnce(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		attempts := 0
		ans, err := f.store.do(ctx, 1, &Key{key: "k", fingerprint: []byte("fp")}, 201, func(w *Write) error {
			return f.db.Transact(ctx, func(tx *sql.Tx) error {
				attempts++
				if err := w.Claim(ctx, tx, 7); err != nil {
					return err
				}
				if attempts == 1 {
					return &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
				}
				return w.Record(ctx, tx, "done")
			})
		})
		if err != nil || ans.Status != 201 || string(ans.Body) != "\"done\"\n" || attempts != 2 {
			t.Fatalf("do = %+v, %v after %d attempts; want the second attempt's answer", ans, err, attempts)
		}
		if n := f.records(t); n != 1 {
			t.Errorf("%d records, want 1", n)
		}
	})
}

func TestConcurrentSameKeyWritesOnce(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		const n = 20
		results := make([]result, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				results[i] = f.post(t, 1, "/v1/a", "same", "body")
			})
		}
		close(start)
		wg.Wait()
		if got := f.commits.Load(); got != 1 {
			t.Errorf("%d writes, want 1", got)
		}
		replays := 0
		for _, r := range results {
			if r.status != 201 || r.body != `{"write":1}`+"\n" {
				t.Errorf("answer %+v, want 201 with the first write's body", r)
			}
			if r.replayed == "true" {
				replays++
			}
		}
		if replays != n-1 {
			t.Errorf("%d replays, want %d", replays, n-1)
		}
	})
}

func TestPurge(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		const old = purgeBatch + 30
		for i := range old {
			f.post(t, int64(i+1), "/v1/a", "k", "body")
		}
		f.advance(TTL)
		f.post(t, 1, "/v1/a", "live", "body")
		n, err := f.store.purge(ctx)
		if err != nil || n != purgeBatch {
			t.Fatalf("first purge = %d, %v; want a full batch of %d", n, err, purgeBatch)
		}
		if n, err = f.store.purge(ctx); err != nil || n != old-purgeBatch {
			t.Fatalf("second purge = %d, %v; want the %d left", n, err, old-purgeBatch)
		}
		if n := f.records(t); n != 1 {
			t.Errorf("%d records left, want the live one", n)
		}
		if r := f.post(t, 1, "/v1/a", "live", "body"); r.replayed != "true" {
			t.Errorf("the live key after the purge: %+v, want a replay", r)
		}
	})
}

// TestConcurrentKeyReuse: one key sent at once with different requests, whose writes would land on different
// shards: one is made, and every other is a 409, never a failure of the server's.
func TestConcurrentKeyReuse(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const n = 12
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				_, errs[i] = f.store.do(ctx, 1, &Key{key: "k", fingerprint: []byte{byte(i)}}, 201, func(w *Write) error {
					err := f.db.Transact(ctx, func(tx *sql.Tx) error {
						if err := w.Claim(ctx, tx, int64(i+1)); err != nil {
							return err
						}
						return w.Record(ctx, tx, i)
					})
					if err == nil {
						f.commits.Add(1)
					}
					return err
				})
			})
		}
		close(start)
		wg.Wait()
		made := 0
		for i, err := range errs {
			switch fe, _ := fault.As(err); {
			case err == nil:
				made++
			case fe == nil || fe.Kind != fault.Conflict:
				t.Errorf("request %d: %v, want a 409 or a write", i, err)
			}
		}
		if made != 1 || f.commits.Load() != 1 {
			t.Errorf("%d answered as written, %d writes; want 1 and 1", made, f.commits.Load())
		}
	})
}
