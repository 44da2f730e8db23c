package view

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/httpio/httpiotest"
	"board/internal/outbox"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// eventIDs issues the tests' event ids: one generator for the package, as one process has one.
var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(3, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// article is above 2^53, so a float64 on the way would lose digits.
const article = 1<<55 + 7 // issued in April 2024: an id from the future is refused without a lookup

// testStore returns a store over db with a registry of its own that looks articles up at origin, as each instance
// of the service has.
func testStore(db *sqldb.DB, origin *existencetest.Origin) *Store {
	return NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil), origin.Registry("view", db))
}

// env is one combination of backends: a fresh SQL database and a key prefix of its own on a Redis, and an article
// service that has every article unless told otherwise.
type env struct {
	db     *sqldb.DB
	origin *existencetest.Origin
	store  *Store
	redis  redisclienttest.Backend
	prefix string
}

func newEnv(t *testing.T, db *sqldb.DB, b redisclienttest.Backend, prefix string) env {
	origin := existencetest.NewOrigin(t)
	return env{db: db, origin: origin, store: testStore(db, origin), redis: b, prefix: prefix}
}

// run calls fn on every combination of Redis and SQL backends.
func run(t *testing.T, fn func(t *testing.T, e env)) {
	t.Helper()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
			// Both SQL subtests share the Redis backend: each takes a prefix under the backend's own.
			fn(t, newEnv(t, db, b, b.Prefix+string(db.Dialect)+":"))
		})
	})
}

// runRedis calls fn on every Redis backend, over an SQLite database: for tests in which SQL plays no part.
func runRedis(t *testing.T, fn func(t *testing.T, e env)) {
	t.Helper()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		fn(t, newEnv(t, sqldbtest.OpenSQLite(t, Migrate), b, b.Prefix))
	})
}

// service returns a Service (one instance of the view service, with a registry of its own) on e's backends.
func (e env) service(cfg Config) *Service {
	cfg.KeyPrefix = e.prefix
	return NewService(testStore(e.db, e.origin), e.redis.Client, cfg)
}

// handler returns svc's whole port.
func handler(svc *Service) http.Handler {
	return httpiotest.Handler("view", Routes(svc, httpiotest.Logger))
}

// forget deletes every key of e, as a Redis restarted without its data would have.
func (e env) forget(t *testing.T) {
	t.Helper()
	if len(redisclienttest.Keys(t, e.redis.Client, e.prefix+"*")) == 0 {
		t.Fatal("no keys to forget")
	}
	redisclienttest.DeletePrefix(t, e.redis.Client, e.prefix)
}

// mustView views as a user and returns the count the service answered.
func mustView(t *testing.T, svc *Service, articleID, userID int64) int64 {
	t.Helper()
	n, err := svc.View(context.Background(), articleID, userID)
	if err != nil {
		t.Fatalf("View(%d, %d): %v", articleID, userID, err)
	}
	return n
}

// viewUsers views articleID once by each user in [from, to], one after another, and checks each is counted.
func viewUsers(t *testing.T, svc *Service, articleID, from, to, firstCount int64) {
	t.Helper()
	for u := from; u <= to; u++ {
		if got, want := mustView(t, svc, articleID, u), firstCount+u-from; got != want {
			t.Fatalf("view by user %d = %d, want %d", u, got, want)
		}
	}
}

func mustCount(t *testing.T, svc *Service, articleID int64) int64 {
	t.Helper()
	n, err := svc.Count(context.Background(), articleID)
	if err != nil {
		t.Fatalf("Count(%d): %v", articleID, err)
	}
	return n
}

func backupOf(t testing.TB, store *Store, articleID int64) int64 {
	t.Helper()
	n, err := store.Count(context.Background(), articleID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// viewedEvents returns the counts of the ARTICLE_VIEWED events of articleID in the outbox, in the order written,
// checking that every event waiting there is one, keyed by its article.
func viewedEvents(t *testing.T, db *sqldb.DB, articleID int64) []int64 {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT event_type, record_key, payload FROM outbox ORDER BY outbox_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	counts := []int64{}
	for rows.Next() {
		var typ, payload string
		var key int64
		if err := rows.Scan(&typ, &key, &payload); err != nil {
			t.Fatal(err)
		}
		p, err := event.Payload[event.View](event.Envelope{Type: event.Type(typ), Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		if typ != string(event.ArticleViewed) || key != int64(p.ArticleID) {
			t.Fatalf("outbox row %s key %d payload %s, want ARTICLE_VIEWED keyed by its article", typ, key, payload)
		}
		if int64(p.ArticleID) == articleID {
			counts = append(counts, p.ArticleViewCount)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

func wantCounts(t *testing.T, what string, want, got []int64) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// hundreds returns 100, 200, ... up to n.
func hundreds(n int64) []int64 {
	var out []int64
	for c := int64(100); c <= n; c += 100 {
		out = append(out, c)
	}
	return out
}

// inParallel calls fn(i) for i in [0, n) from workers goroutines at once.
func inParallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func TestStoreBackup(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		origin := existencetest.NewOrigin(t)
		store := testStore(db, origin)
		if got := backupOf(t, store, article); got != 0 {
			t.Errorf("backup of a new article = %d, want 0", got)
		}
		// The registry has not heard of the article (counted before it kept its record): the first backup looks
		// it up once and is written, the next ones ask no more.
		for _, tc := range []struct{ backup, want int64 }{
			{100, 100}, // inserts the row
			{300, 300}, // raises it
			{200, 300}, // never lowers it
			{300, 300},
		} {
			if err := store.Backup(ctx, article, tc.backup); err != nil {
				t.Fatal(err)
			}
			if got := backupOf(t, store, article); got != tc.want {
				t.Errorf("after Backup(%d): backup = %d, want %d", tc.backup, got, tc.want)
			}
		}
		wantCounts(t, "events", []int64{100, 300, 200, 300}, viewedEvents(t, db, article))
		if got := origin.Calls(); got != 1 {
			t.Errorf("%d lookups for four backups of one article, want 1", got)
		}

		// An article the article service does not have: refused, nothing written.
		const missing = article + 2
		origin.Remove(missing)
		if err := store.Backup(ctx, missing, 100); fault.KindOf(err) != fault.NotFound {
			t.Errorf("backup of a missing article = %v, want NotFound", err)
		}
		if got := backupOf(t, store, missing); got != 0 {
			t.Errorf("backup of a missing article left %d", got)
		}
		wantCounts(t, "events of a missing article", []int64{}, viewedEvents(t, db, missing))

		// Backups of a new article racing to insert its row: the highest wins.
		const other = article + 1
		inParallel(20, 20, func(i int) {
			if err := store.Backup(ctx, other, int64(i+1)); err != nil {
				t.Error(err)
			}
		})
		if got := backupOf(t, store, other); got != 20 {
			t.Errorf("after 20 racing backups: backup = %d, want 20", got)
		}
		if got := len(viewedEvents(t, db, other)); got != 20 {
			t.Errorf("%d events for 20 backups", got)
		}
	})
}

func TestOneUserCountsOnce(t *testing.T) {
	t.Parallel()
	runRedis(t, func(t *testing.T, e env) {
		h := handler(e.service(Config{}))
		path := fmt.Sprintf("/v1/article-views/articles/%d/users/7", article)
		inParallel(10_000, 32, func(int) {
			if r := httpiotest.Call(httpiotest.As(h, 7), "POST", path, ""); r.Status != http.StatusOK || r.Body != "1\n" {
				t.Errorf("POST = %d %q, want 200 1", r.Status, r.Body)
			}
		})
		wantBody(t, httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-views/articles/%d/count", article), ""), "1")
		// Another user and another article count on their own.
		wantBody(t, httpiotest.Call(httpiotest.As(h, 8), "POST", fmt.Sprintf("/v1/article-views/articles/%d/users/8", article), ""), "2")
		wantBody(t, httpiotest.Call(httpiotest.As(h, 7), "POST", fmt.Sprintf("/v1/article-views/articles/%d/users/7", article+1), ""), "1")
		wantBody(t, httpiotest.Call(httpiotest.As(h, 7), "POST", path, ""), "2")
		wantCounts(t, "events", []int64{}, viewedEvents(t, e.db, article))
	})
}

func TestDistinctUsersConcurrently(t *testing.T) {
	// Not in parallel: its 64 viewers at once fill its MySQL database's pool of 50 connections, and two such tests
	// beside another package's would pass MariaDB's default max_connections (151).
	run(t, func(t *testing.T, e env) {
		h := handler(e.service(Config{}))
		var mu sync.Mutex
		var answers []int64
		inParallel(1000, 64, func(i int) {
			user := int64(1000 + i)
			r := httpiotest.Call(httpiotest.As(h, user), "POST", fmt.Sprintf("/v1/article-views/articles/%d/users/%d", article, user), "")
			n, err := strconv.ParseInt(r.Body[:len(r.Body)-1], 10, 64)
			if r.Status != http.StatusOK || err != nil {
				t.Errorf("POST = %d %q", r.Status, r.Body)
			}
			mu.Lock()
			answers = append(answers, n)
			mu.Unlock()
		})
		// Every view counted, each answering the count it made.
		slices.Sort(answers)
		for i, n := range answers {
			if n != int64(i+1) {
				t.Fatalf("answers sorted: [%d] = %d, want %d", i, n, i+1)
			}
		}
		wantBody(t, httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-views/articles/%d/count", article), ""), "1000")
		if got := backupOf(t, e.store, article); got != 1000 {
			t.Errorf("backup = %d, want 1000", got)
		}
		events := viewedEvents(t, e.db, article)
		slices.Sort(events) // backups of different hundreds commit in any order
		wantCounts(t, "events", hundreds(1000), events)
	})
}

func TestLockExpires(t *testing.T) {
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		ttl := DefaultDedupeTTL
		if e.redis.Mini == nil {
			ttl = 200 * time.Millisecond // a real Redis runs on real time
		}
		svc := e.service(Config{DedupeTTL: ttl})
		if got := mustView(t, svc, article, 7); got != 1 {
			t.Fatalf("first view = %d, want 1", got)
		}
		lock := svc.lockKey(article, 7)
		if pttl, err := e.redis.Client.PTTL(ctx, lock).Result(); err != nil || pttl <= 0 || pttl > ttl {
			t.Fatalf("lock TTL = %v, %v; want in (0, %v]", pttl, err, ttl)
		}
		if e.redis.Mini != nil {
			e.redis.Mini.FastForward(ttl - time.Millisecond)
			if got := mustView(t, svc, article, 7); got != 1 {
				t.Fatalf("view just before the lock expires = %d, want 1", got)
			}
			e.redis.Mini.FastForward(time.Millisecond)
		} else {
			for e.redis.Client.Exists(ctx, lock).Val() != 0 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if got := mustView(t, svc, article, 7); got != 2 {
			t.Fatalf("view after the lock expired = %d, want 2", got)
		}
		if got := mustView(t, svc, article, 7); got != 2 {
			t.Fatalf("view right after that = %d, want 2", got)
		}
	})
}

func TestRestoreAfterRedisLoss(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		viewUsers(t, e.service(Config{}), article, 1, 150, 1) // backed up at 100
		e.forget(t)
		// A restarted instance remembers nothing: it restores from the backup, never from zero.
		svc := e.service(Config{})
		if got := mustCount(t, svc, article); got != 100 {
			t.Errorf("count after the loss = %d, want the backup, 100", got)
		}
		if got := mustView(t, svc, article, 1000); got != 101 {
			t.Errorf("view after the loss = %d, want 101", got)
		}
		// Views restore too, without a read first.
		viewUsers(t, svc, article+1, 1, 100, 1)
		e.forget(t)
		if got := mustView(t, e.service(Config{}), article+1, 1000); got != 101 {
			t.Errorf("first view after the loss = %d, want 101", got)
		}
		// An article without views reads 0 and gets no key.
		if got := mustCount(t, svc, article+2); got != 0 {
			t.Errorf("count of an unseen article = %d, want 0", got)
		}
		if n := e.redis.Client.Exists(context.Background(), svc.countKey(article+2)).Val(); n != 0 {
			t.Error("reading an unseen article's count created its key")
		}
		wantCounts(t, "events", []int64{100}, viewedEvents(t, e.db, article))
	})
}

// Redis back from a crash with a count older than the last backup (an in-process snapshot a second behind): a new
// instance never answers less than the backup, for reads and for views.
func TestCountBehindTheBackupIsRaised(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		svc := e.service(Config{})
		viewUsers(t, svc, article, 1, 150, 1)
		viewUsers(t, svc, article+1, 1, 120, 1)
		if err := svc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		// What Redis held before the last views: counts behind their backups (150 and 120), locks still there.
		for a, count := range map[int64]int64{article: 140, article + 1: 90} {
			if err := e.redis.Client.Set(ctx, svc.countKey(a), count, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		restarted := e.service(Config{})
		if got := mustCount(t, restarted, article); got != 150 {
			t.Errorf("count read after the restart = %d, want the backup, 150", got)
		}
		if got := mustView(t, restarted, article+1, 5); got != 120 {
			t.Errorf("a repeated view after the restart = %d, want the backup, 120", got)
		}
		if got := mustView(t, restarted, article+1, 1000); got != 121 {
			t.Errorf("a new view after the restart = %d, want 121", got)
		}
	})
}

func TestOneInstanceKeepsItsCountOverRedisLoss(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		svc := e.service(Config{})
		viewUsers(t, svc, article, 1, 150, 1)
		viewUsers(t, svc, article+1, 1, 50, 1)
		e.forget(t)
		// The instance backs up what it remembers before restoring: nothing is lost.
		if got := mustCount(t, svc, article); got != 150 {
			t.Errorf("count after the loss = %d, want 150", got)
		}
		if got := mustView(t, svc, article, 1000); got != 151 {
			t.Errorf("view after the loss = %d, want 151", got)
		}
		if got := mustView(t, svc, article+1, 1000); got != 51 {
			t.Errorf("first view of the other article after the loss = %d, want 51", got)
		}
		// Restoring wrote nothing to SQL; the next flush does.
		wantCounts(t, "events before the flush", []int64{100}, viewedEvents(t, e.db, article))
		if err := svc.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, "events", []int64{100, 151}, viewedEvents(t, e.db, article))
		wantCounts(t, "events of the other article", []int64{51}, viewedEvents(t, e.db, article+1))
	})
}

func TestInstancesRestoreAtOnce(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		a, b := e.service(Config{}), e.service(Config{})
		viewUsers(t, a, article, 1, 100, 1) // backed up at 100, nothing left unsaved
		e.forget(t)
		var mu sync.Mutex
		var answers []int64
		inParallel(200, 64, func(i int) {
			svc := a
			if i%2 == 1 {
				svc = b
			}
			n, err := svc.View(context.Background(), article, int64(1000+i))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			answers = append(answers, n)
			mu.Unlock()
		})
		slices.Sort(answers)
		for i, n := range answers {
			if n != int64(101+i) {
				t.Fatalf("answers sorted: [%d] = %d, want %d (one restore of 100, then 200 views)", i, n, 101+i)
			}
		}
		if got := mustCount(t, a, article); got != 300 {
			t.Errorf("count = %d, want 300", got)
		}
		events := viewedEvents(t, e.db, article)
		slices.Sort(events)
		wantCounts(t, "events", []int64{100, 200, 300}, events)
	})
}

func TestBackupRaisesRedis(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		a, b := e.service(Config{}), e.service(Config{})
		viewUsers(t, a, article, 1, 150, 1) // a remembers 150, the backup is 100
		e.forget(t)
		if got := mustView(t, b, article, 1000); got != 101 {
			t.Fatalf("view on the other instance = %d, want 101 (restored from the backup)", got)
		}
		if err := a.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := backupOf(t, e.store, article); got != 150 {
			t.Errorf("backup after the flush = %d, want 150", got)
		}
		if got := mustCount(t, b, article); got != 150 {
			t.Errorf("count after the flush = %d, want at least the backup, 150", got)
		}
		if got := mustView(t, b, article, 1001); got != 151 {
			t.Errorf("next view = %d, want 151", got)
		}
		wantCounts(t, "events", []int64{100, 150}, viewedEvents(t, e.db, article))
	})
}

func TestFlush(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		svc := e.service(Config{})
		viewUsers(t, svc, article, 1, 150, 1)
		viewUsers(t, svc, article+1, 1, 100, 1) // backed up already: nothing to flush
		if err := svc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := backupOf(t, e.store, article); got != 150 {
			t.Errorf("backup after Flush = %d, want 150", got)
		}
		if err := svc.Flush(ctx); err != nil { // nothing new: no event
			t.Fatal(err)
		}
		wantCounts(t, "events", []int64{100, 150}, viewedEvents(t, e.db, article))
		wantCounts(t, "events of the other article", []int64{100}, viewedEvents(t, e.db, article+1))
	})
}

func TestRunFlushesEveryInterval(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		svc := e.service(Config{FlushEvery: time.Second}) // also each view's time to reach Redis after its mark
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- svc.Run(ctx) }()
		viewUsers(t, svc, article, 1, 150, 1)
		for backupOf(t, e.store, article) != 150 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func TestRunFlushesWhenStopped(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		svc := e.service(Config{FlushEvery: time.Hour})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- svc.Run(ctx) }()
		viewUsers(t, svc, article, 1, 150, 1)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if got := backupOf(t, e.store, article); got != 150 {
			t.Errorf("backup after shutdown = %d, want 150", got)
		}
		wantCounts(t, "events", []int64{100, 150}, viewedEvents(t, e.db, article))
		// Redis loses everything while the service is down: the restarted service still continues from 150.
		e.forget(t)
		if got := mustView(t, e.service(Config{}), article, 1000); got != 151 {
			t.Errorf("view after restart and Redis loss = %d, want 151", got)
		}
	})
}

func TestBackupFailureKeepsTheView(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		svc := e.service(Config{})
		viewUsers(t, svc, article, 1, 99, 1)
		rename := func(from, to string) {
			t.Helper()
			if _, err := e.db.ExecContext(ctx, "ALTER TABLE "+from+" RENAME TO "+to); err != nil {
				t.Fatal(err)
			}
		}
		rename("article_view_count", "article_view_count_away")
		// The 100th view cannot be backed up, yet it is counted and answered.
		if got := mustView(t, svc, article, 100); got != 100 {
			t.Errorf("100th view = %d, want 100", got)
		}
		if err := svc.Flush(ctx); err == nil {
			t.Error("Flush with the table gone succeeded")
		}
		rename("article_view_count_away", "article_view_count")
		wantCounts(t, "events while failing", []int64{}, viewedEvents(t, e.db, article))
		if err := svc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := backupOf(t, e.store, article); got != 100 {
			t.Errorf("backup after the retry = %d, want 100", got)
		}
		wantCounts(t, "events", []int64{100}, viewedEvents(t, e.db, article))
	})
}

func TestRedisErrors(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	for _, tc := range []struct {
		reply string
		want  fault.Kind
	}{
		{"LOADING Redis is loading the dataset in memory", fault.Unavailable},
		{"READONLY You can't write against a read only replica.", fault.Unavailable},
		{"OOM command not allowed when used memory > 'maxmemory'.", fault.Unavailable},
		{"CLUSTERDOWN The cluster is down", fault.Unavailable},
		{"TRYAGAIN Multiple keys request during rehashing of slot", fault.Unavailable},
		{"ERR max number of clients reached", fault.Unavailable},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", 0}, // a bug: 500
	} {
		t.Run(tc.reply, func(t *testing.T) {
			b := redisclienttest.Mini(t)
			svc := NewService(testStore(db, existencetest.NewOrigin(t)), quickClient(t, b.Mini.Addr()), Config{KeyPrefix: b.Prefix})
			b.Mini.SetError(tc.reply)
			_, viewErr := svc.View(context.Background(), article, 1)
			_, countErr := svc.Count(context.Background(), article)
			for _, err := range []error{viewErr, countErr} {
				if got := fault.KindOf(err); err == nil || got != tc.want {
					t.Errorf("error %v of kind %d, want kind %d", err, got, tc.want)
				}
			}
		})
	}
	if err := redisFault(errors.New("dial tcp: connection refused")); fault.KindOf(err) != fault.Unavailable {
		t.Errorf("a connection error is %v, want Unavailable", err)
	}
}

// BenchmarkViewWarmArticle measures counted views by distinct users of one article the service knows is live (its
// existence checked from memory), backups included, on the Redis at BOARD_TEST_REDIS_ADDR (miniredis when unset)
// over SQLite. Each view has a request's deadline, as served views have.
func BenchmarkViewWarmArticle(b *testing.B) {
	rb := redisclienttest.Real(b)
	origin := existencetest.NewOrigin(b)
	svc := NewService(testStore(sqldbtest.OpenSQLite(b, Migrate), origin), rb.Client, Config{KeyPrefix: rb.Prefix})
	var users atomic.Int64
	if _, err := svc.View(context.Background(), article, users.Add(1)); err != nil { // the one lookup
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), httpio.DefaultRequestTimeout)
			if _, err := svc.View(ctx, article, users.Add(1)); err != nil {
				b.Error(err)
			}
			cancel()
		}
	})
	b.StopTimer()
	if got := origin.Calls(); got != 1 {
		b.Errorf("%d lookups of a known article, want 1", got)
	}
}
