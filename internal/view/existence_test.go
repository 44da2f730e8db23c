package view

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
)

func viewPath(articleID, userID int64) string {
	return fmt.Sprintf("/v1/article-views/articles/%d/users/%d", articleID, userID)
}

func countPath(articleID int64) string {
	return fmt.Sprintf("/v1/article-views/articles/%d/count", articleID)
}

// applyDeletedAndPurge has svc's registry apply ARTICLE_DELETED of articleID, as the instance's consumer would, and
// runs the purge it queues with svc.
func applyDeletedAndPurge(t *testing.T, svc *Service, articleID int64) {
	t.Helper()
	reg := svc.store.articles
	existencetest.Apply(t, reg, existencetest.Deleted(articleID, 2))
	if err := reg.PurgeQueued(context.Background(), svc.Purge); err != nil {
		t.Fatalf("purge: %v", err)
	}
}

// wantGone checks that nothing of articleID's count is left: no count key in Redis, no backup row in SQL.
func wantGone(t *testing.T, e env, svc *Service, articleID int64) {
	t.Helper()
	if n := e.redis.Client.Exists(context.Background(), svc.countKey(articleID)).Val(); n != 0 {
		t.Error("the count key is there")
	}
	var rows int
	if err := e.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article_view_count WHERE article_id = ?",
		articleID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Error("the backup row is there")
	}
}

func TestViewOfAMissingArticle(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		svc := e.service(Config{})
		h := handler(svc)
		e.origin.Remove(article)
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article, 1), ""), 404, "ARTICLE_NOT_FOUND")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 2), "POST", viewPath(article, 2), ""), 404, "ARTICLE_NOT_FOUND")
		// A read is not checked: the article has no count.
		wantBody(t, httpiotest.Call(h, "GET", countPath(article), ""), "0")
		if keys := redisclienttest.Keys(t, e.redis.Client, e.prefix+"*"); len(keys) != 0 {
			t.Errorf("views of a missing article wrote keys %v", keys)
		}
		wantGone(t, e, svc, article)
		// The article service cannot answer: 503, and nothing counted.
		e.origin.SetDown(true)
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article+1, 1), ""), 503, "ARTICLE_SERVICE_UNAVAILABLE")
		wantGone(t, e, svc, article+1)
	})
}

func TestViewOfANewArticleLooksItUpOnce(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		// Just created: the article service has it, its ARTICLE_CREATED has not reached the registry yet.
		svc := e.service(Config{})
		h := handler(svc)
		wantBody(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article, 1), ""), "1")
		if got := e.origin.Calls(); got != 1 {
			t.Fatalf("%d lookups for the first view, want 1", got)
		}
		for u := int64(2); u <= 51; u++ {
			wantBody(t, httpiotest.Call(httpiotest.As(h, u), "POST", viewPath(article, u), ""), fmt.Sprint(u))
		}
		if got := e.origin.Calls(); got != 1 {
			t.Errorf("%d lookups after 50 more views, want still 1", got)
		}
		// Another instance finds the article in the database the first lookup recorded it in.
		wantBody(t, httpiotest.Call(httpiotest.As(handler(e.service(Config{})), 52), "POST", viewPath(article, 52), ""), "52")
		// An article whose ARTICLE_CREATED arrived first needs no lookup at all.
		existencetest.Apply(t, svc.store.articles, existencetest.Created(article+1, 1))
		wantBody(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article+1, 1), ""), "1")
		if got := e.origin.Calls(); got != 1 {
			t.Errorf("%d lookups in all, want 1", got)
		}
	})
}

func TestViewOfADeletedArticle(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		svc := e.service(Config{})
		h := handler(svc)
		existencetest.Apply(t, svc.store.articles, existencetest.Created(article, 1))
		wantBody(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article, 1), ""), "1")
		existencetest.Apply(t, svc.store.articles, existencetest.Deleted(article, 2))
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 2), "POST", viewPath(article, 2), ""), 404, "ARTICLE_NOT_FOUND")
		// An instance that never saw the article reads the delete from the database, without a lookup.
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(handler(e.service(Config{})), 3), "POST", viewPath(article, 3), ""), 404,
			"ARTICLE_NOT_FOUND")
		if got := e.origin.Calls(); got != 0 {
			t.Errorf("%d lookups, want 0", got)
		}
	})
}

func TestPurge(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		svc := e.service(Config{})
		viewUsers(t, svc, article, 1, 150, 1) // backed up at 100; 150 remembered
		viewUsers(t, svc, article+1, 1, 120, 1)
		applyDeletedAndPurge(t, svc, article)
		if svc.unsaved.get(article) != 0 || svc.floored.has(article) {
			t.Error("the instance still remembers the purged article")
		}

		wantBody(t, httpiotest.Call(handler(svc), "GET", countPath(article), ""), "0")
		wantGone(t, e, svc, article)
		pttl, err := e.redis.Client.PTTL(ctx, svc.tombstoneKey(article)).Result()
		if err != nil || pttl <= 0 || pttl > tombstoneTTL {
			t.Errorf("tombstone TTL = %v, %v; want in (0, %v]", pttl, err, tombstoneTTL)
		}
		// Nothing left to flush of it; the other article is untouched.
		if err := svc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		wantGone(t, e, svc, article)
		if got := mustCount(t, svc, article+1); got != 120 {
			t.Errorf("count of the other article = %d, want 120", got)
		}
		if got := backupOf(t, e.store, article+1); got != 120 {
			t.Errorf("backup of the other article = %d, want 120", got)
		}
		// Idempotent.
		for range 2 {
			if done, err := svc.Purge(ctx, article); !done || err != nil {
				t.Errorf("Purge again = %v, %v; want true, nil", done, err)
			}
		}
		wantGone(t, e, svc, article)
		if got := svc.store.articles.PurgeStats(); got.Articles != 1 || got.Batches != 1 {
			t.Errorf("purge stats %+v, want one article in one batch", got)
		}
		wantCounts(t, "events", []int64{100}, viewedEvents(t, e.db, article))
	})
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// spinUntil yields until cond holds: for counts that goroutines of the test keep raising.
func spinUntil(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// failureLog reports the first few failures of many goroutines, and counts the rest.
type failureLog struct{ n atomic.Int64 }

func (f *failureLog) add(t *testing.T, format string, args ...any) {
	if f.n.Add(1) <= 5 {
		t.Errorf(format, args...)
	}
}

// lockedBuffer is a log sink for a test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An instance that checked the article live before the delete trusts that answer for a minute; its views and its
// remembered count arriving after the purge must not bring the count back.
func TestViewCheckedLiveBeforeThePurge(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var logs lockedBuffer
		consumer := e.service(Config{}) // the instance whose consumer applies the delete and purges
		stale := e.service(Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		h := handler(stale)
		viewUsers(t, stale, article, 1, 105, 1) // checked live (remembered), backed up at 100, 105 unsaved
		applyDeletedAndPurge(t, consumer, article)

		lookups := e.origin.Calls()
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 1000), "POST", viewPath(article, 1000), ""), 404, "ARTICLE_NOT_FOUND")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article, 1), ""), 404, "ARTICLE_NOT_FOUND")
		if e.origin.Calls() != lookups {
			t.Error("the stale instance looked the article up: its remembered answer was not what was tested")
		}
		// A read would restore the count from the 105 the instance remembers: the tombstone refuses it.
		wantBody(t, httpiotest.Call(h, "GET", countPath(article), ""), "0")
		wantGone(t, e, stale, article)
		// Its flush drops the remembered count, quietly, rather than retry it forever.
		if err := stale.Flush(ctx); err != nil {
			t.Errorf("flush of a deleted article's count = %v", err)
		}
		if stale.unsaved.get(article) != 0 {
			t.Error("the flush kept the deleted article's count")
		}
		if err := stale.Flush(ctx); err != nil {
			t.Error(err)
		}
		wantGone(t, e, stale, article)
		wantCounts(t, "events", []int64{100}, viewedEvents(t, e.db, article))
		if out := logs.String(); strings.Contains(out, "level=WARN") || !strings.Contains(out, "level=DEBUG msg=\"dropped the view count of a deleted article\"") {
			t.Errorf("logs:\n%s\nwant the drop at debug and no warning", out)
		}
	})
}

func TestBackupRacingThePurge(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		svc := e.service(Config{})
		mustView(t, svc, article, 1) // known live
		var backups atomic.Int64
		var failures failureLog
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stopped(stop) {
					count := backups.Add(1)
					if err := svc.backup(ctx, article, count); err != nil && fault.KindOf(err) != fault.NotFound {
						failures.add(t, "backup: %v", err)
					}
				}
			})
		}
		spinUntil(func() bool { return backups.Load() >= 20 }) // some backups in before the delete
		applyDeletedAndPurge(t, svc, article)
		close(stop)
		wg.Wait()
		t.Logf("%d backups raced the delete and the purge", backups.Load())
		wantGone(t, e, svc, article)
		if err := svc.store.Backup(ctx, article, 1_000_000); fault.KindOf(err) != fault.NotFound {
			t.Errorf("backup after the purge = %v, want NotFound", err)
		}
		wantGone(t, e, svc, article)
	})
}

func TestCreatedAfterDeleted(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		svc := e.service(Config{})
		h := handler(svc)
		wantBody(t, httpiotest.Call(httpiotest.As(h, 1), "POST", viewPath(article, 1), ""), "1")
		applyDeletedAndPurge(t, svc, article)
		existencetest.Apply(t, svc.store.articles, existencetest.Created(article, 1)) // late, or replayed
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 2), "POST", viewPath(article, 2), ""), 404, "ARTICLE_NOT_FOUND")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(handler(e.service(Config{})), 3), "POST", viewPath(article, 3), ""), 404,
			"ARTICLE_NOT_FOUND")
		wantGone(t, e, svc, article)
	})
}

// Views by many users on two instances while one of them applies the delete and purges: afterwards nothing of the
// count is left, and every request was answered 200 or 404 (404 for every view that started after the purge).
func TestViewsRacingTheDeleteAndThePurge(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		ctx := context.Background()
		cfg := Config{BackupEvery: 10} // backups race the purge too
		consumer, other := e.service(cfg), e.service(cfg)
		handlers := []http.Handler{handler(consumer), handler(other)}
		mustView(t, consumer, article, 0) // both instances remember the article live
		mustView(t, other, article, 0)

		var users, counted, refused atomic.Int64
		var purged atomic.Bool
		var failures failureLog
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for !stopped(stop) {
					afterPurge := purged.Load()
					user := users.Add(1)
					r := httpiotest.Call(httpiotest.As(handlers[w%2], user), "POST", viewPath(article, user), "")
					switch {
					case r.Status == http.StatusOK && !afterPurge:
						counted.Add(1)
					case r.Status == http.StatusNotFound && strings.Contains(r.Body, `"ARTICLE_NOT_FOUND"`):
						refused.Add(1)
					default:
						failures.add(t, "view (started after the purge: %v) = %d %s", afterPurge, r.Status, r.Body)
					}
				}
			})
		}
		spinUntil(func() bool { return users.Load() >= 200 })
		applyDeletedAndPurge(t, consumer, article)
		purged.Store(true)
		target := users.Load() + 200
		spinUntil(func() bool { return users.Load() >= target })
		close(stop)
		wg.Wait()
		t.Logf("%d views counted, %d refused", counted.Load(), refused.Load())
		for _, svc := range []*Service{consumer, other} {
			if err := svc.Flush(ctx); err != nil {
				t.Errorf("flush: %v", err)
			}
		}
		wantGone(t, e, consumer, article)
		wantBody(t, httpiotest.Call(handlers[1], "GET", countPath(article), ""), "0")
		wantGone(t, e, consumer, article)
	})
}
