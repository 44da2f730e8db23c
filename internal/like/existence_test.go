package like

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/existence/existencetest"
	"board/internal/httpio/httpiotest"
	"board/internal/outbox"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// strategyPaths are the like paths' suffixes: the default strategy's and each strategy's own.
var strategyPaths = []string{"", "/pessimistic-lock-1", "/pessimistic-lock-2", "/optimistic-lock"}

// countRow reads an article's count row; ok is false when it has none.
func countRow(t *testing.T, db *sqldb.DB, articleID int64) (count, version int64, ok bool) {
	t.Helper()
	err := db.QueryRowContext(context.Background(), "SELECT like_count, version FROM article_like_count WHERE article_id = ?", articleID).
		Scan(&count, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return count, version, true
}

// queuedPurges counts the articles waiting for a purge.
func queuedPurges(t *testing.T, db *sqldb.DB) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article_purge").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// seedLikes stores likes of an article by users 1..n and its count row (n likes at version n) directly, many rows
// per INSERT in one transaction: the service would take minutes for 100,000.
func seedLikes(t *testing.T, db *sqldb.DB, articleID int64, n int) {
	t.Helper()
	const rowsPerInsert = 500
	err := db.Transact(context.Background(), func(tx *sql.Tx) error {
		for first := 1; first <= n; first += rowsPerInsert {
			last := min(first+rowsPerInsert-1, n)
			values := make([]string, 0, last-first+1)
			args := make([]any, 0, 4*(last-first+1))
			for user := first; user <= last; user++ {
				values = append(values, "(?, ?, ?, ?)")
				args = append(args, articleID*1_000_000+int64(user), articleID, user, t0ms)
			}
			if _, err := tx.Exec("INSERT INTO article_like (article_like_id, article_id, user_id, created_at) VALUES "+
				strings.Join(values, ", "), args...); err != nil {
				return err
			}
		}
		_, err := tx.Exec("INSERT INTO article_like_count (article_id, like_count, version) VALUES (?, ?, ?)", articleID, n, n)
		return err
	})
	if err != nil {
		t.Fatalf("seed %d likes of article %d: %v", n, articleID, err)
	}
}

// wantPurged checks that nothing of an article is left and that no purge is queued.
func wantPurged(t *testing.T, db *sqldb.DB, articleID int64) {
	t.Helper()
	if n := likeRows(t, db, articleID); n != 0 {
		t.Errorf("article %d: %d like rows left after its purge, want none", articleID, n)
	}
	if count, version, ok := countRow(t, db, articleID); ok {
		t.Errorf("article %d: count row (%d at version %d) left after its purge, want none", articleID, count, version)
	}
	if n := queuedPurges(t, db); n != 0 {
		t.Errorf("%d purges still queued, want none", n)
	}
}

// TestRoutesRefuseArticlesTheArticleServiceDoesNotHave: a like or unlike of an article that never existed is
// 404 ARTICLE_NOT_FOUND through every path, and writes nothing.
func TestRoutesRefuseArticlesTheArticleServiceDoesNotHave(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, env := testHandler(t, db, "")
		for i, suffix := range strategyPaths {
			t.Run("path"+suffix, func(t *testing.T) {
				article := int64(60 + i)
				env.origin.Remove(article)
				wantError(t, "like", httpiotest.Call(httpiotest.As(h, 1), "POST", likePath(article, 1)+suffix, ""), 404, "ARTICLE_NOT_FOUND")
				wantError(t, "unlike", httpiotest.Call(httpiotest.As(h, 1), "DELETE", likePath(article, 1)+suffix, ""), 404, "ARTICLE_NOT_FOUND")
				if _, _, ok := countRow(t, db, article); ok || likeRows(t, db, article) != 0 || len(outboxOf(t, db, article)) != 0 {
					t.Errorf("refused writes left a count row (%v), %d like rows, %d events; want none", ok,
						likeRows(t, db, article), len(outboxOf(t, db, article)))
				}
			})
		}
	})
}

// TestRoutesLookUpANewArticleOnce: the first like of an article created a moment ago, before its ARTICLE_CREATED
// reached the service, looks it up at the article service once; the 50 likes after it look nothing up.
func TestRoutesLookUpANewArticleOnce(t *testing.T) {
	// Not in parallel: its 50 likes at once fill its MySQL database's pool of 50 connections, and two such tests
	// beside another package's would pass MariaDB's default max_connections (151).
	const moreLikes = 50
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, env := testHandler(t, db, "")
		for i, suffix := range strategyPaths {
			t.Run("path"+suffix, func(t *testing.T) {
				article := int64(70 + i)
				before := env.origin.Calls()
				if r := httpiotest.Call(httpiotest.As(h, 1), "POST", likePath(article, 1)+suffix, ""); r.Status != 201 {
					t.Fatalf("first like: status %d, want 201; body %s", r.Status, r.Body)
				}
				if got := env.origin.Calls() - before; got != 1 {
					t.Fatalf("first like of a new article made %d lookups, want 1", got)
				}
				statuses := map[int]int{}
				var mu sync.Mutex
				var wg sync.WaitGroup
				for user := range int64(moreLikes) {
					wg.Go(func() {
						r := httpiotest.Call(httpiotest.As(h, user+2), "POST", likePath(article, user+2)+suffix, "")
						mu.Lock()
						defer mu.Unlock()
						statuses[r.Status]++
					})
				}
				wg.Wait()
				if diff := cmp.Diff(map[int]int{201: moreLikes}, statuses); diff != "" {
					t.Errorf("likes of the known article: statuses (-want +got):\n%s", diff)
				}
				if got := env.origin.Calls() - before; got != 1 {
					t.Errorf("%d likes of a known article made %d more lookups, want none", moreLikes, got-1)
				}
				if n, _ := env.svc.count(context.Background(), article); n != moreLikes+1 {
					t.Errorf("count = %d, want %d", n, moreLikes+1)
				}
			})
		}
	})
}

// TestRoutesWhileTheArticleServiceIsDown: a like of an article the service does not know yet cannot be decided and
// is 503 ARTICLE_SERVICE_UNAVAILABLE, writing nothing; likes and unlikes of a known article go on without it.
func TestRoutesWhileTheArticleServiceIsDown(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, env := testHandler(t, db, "")
		const known, unknown = int64(40), int64(41)
		if r := httpiotest.Call(httpiotest.As(h, 1), "POST", likePath(known, 1), ""); r.Status != 201 {
			t.Fatalf("like while the article service is up: status %d; body %s", r.Status, r.Body)
		}
		env.origin.SetDown(true)
		wantError(t, "like of an unknown article", httpiotest.Call(httpiotest.As(h, 1), "POST", likePath(unknown, 1), ""), 503, "ARTICLE_SERVICE_UNAVAILABLE")
		if _, _, ok := countRow(t, db, unknown); ok || likeRows(t, db, unknown) != 0 {
			t.Errorf("a like that could not be decided left a count row (%v) or %d like rows", ok, likeRows(t, db, unknown))
		}
		for _, suffix := range strategyPaths {
			if r := httpiotest.Call(httpiotest.As(h, 2), "POST", likePath(known, 2)+suffix, ""); r.Status != 201 {
				t.Errorf("like of a known article through %q: status %d, want 201; body %s", suffix, r.Status, r.Body)
			}
			if r := httpiotest.Call(httpiotest.As(h, 2), "DELETE", likePath(known, 2)+suffix, ""); r.Status != 204 {
				t.Errorf("unlike of a known article through %q: status %d, want 204; body %s", suffix, r.Status, r.Body)
			}
		}
	})
}

// TestRoutesRefuseDeletedArticles: once ARTICLE_DELETED is applied, likes and unlikes of the article are 404
// ARTICLE_NOT_FOUND through every path, with no lookup and no event, whether the service knew the article before or
// heard of it first from its delete; an ARTICLE_CREATED or ARTICLE_UPDATED arriving after the delete changes nothing.
func TestRoutesRefuseDeletedArticles(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, env := testHandler(t, db, "")
		for i, suffix := range strategyPaths {
			t.Run("path"+suffix, func(t *testing.T) {
				liked, neverSeen := int64(80+i), int64(90+i)
				if r := httpiotest.Call(httpiotest.As(h, 1), "POST", likePath(liked, 1)+suffix, ""); r.Status != 201 {
					t.Fatalf("like before the delete: status %d; body %s", r.Status, r.Body)
				}
				existencetest.Apply(t, env.articles, existencetest.Deleted(liked, 2))
				existencetest.Apply(t, env.articles, existencetest.Deleted(neverSeen, 2))
				before := env.origin.Calls()
				refused := func(after string) {
					t.Helper()
					for _, article := range []int64{liked, neverSeen} {
						what := fmt.Sprintf("article %d, after %s:", article, after)
						wantError(t, what+" like", httpiotest.Call(httpiotest.As(h, 2), "POST", likePath(article, 2)+suffix, ""), 404, "ARTICLE_NOT_FOUND")
						wantError(t, what+" unlike", httpiotest.Call(httpiotest.As(h, 1), "DELETE", likePath(article, 1)+suffix, ""), 404, "ARTICLE_NOT_FOUND")
					}
					if got := env.origin.Calls() - before; got != 0 {
						t.Errorf("after %s: writes on deleted articles made %d lookups, want none", after, got)
					}
					if n := len(outboxOf(t, db, liked)) + len(outboxOf(t, db, neverSeen)); n != 1 {
						t.Errorf("after %s: %d events, want only the like before the delete", after, n)
					}
				}
				refused("ARTICLE_DELETED")
				for _, article := range []int64{liked, neverSeen} {
					existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
					existencetest.Apply(t, env.articles, existencetest.Updated(article, 3))
				}
				refused("ARTICLE_CREATED and ARTICLE_UPDATED after ARTICLE_DELETED")
			})
		}
	})
}

// TestPurgeBatches purges an article of 1,234 likes one batch at a time: each batch removes purgeBatchSize likes and
// takes them off the count, whose version moves on; the batch that finds fewer left removes them with the count row
// and reports done; run again, it finds nothing to do. (With a multiple of purgeBatchSize, the batch that finds
// none left does; the other purge tests have that.) The neighbouring articles lose nothing, and
// a live article is not purged.
func TestPurgeBatches(t *testing.T) {
	t.Parallel()
	const likes = 1234
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		const purged, before, after = int64(501), int64(500), int64(502)
		for _, article := range []int64{before, purged, after} {
			existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
			seedLikes(t, db, article, likes)
		}
		if _, err := env.svc.store.Purge(ctx, purged); err == nil || likeRows(t, db, purged) != likes {
			t.Fatalf("purge of a live article: %v, %d likes left; want an error and all %d", err, likeRows(t, db, purged), likes)
		}
		if _, err := env.svc.store.Purge(ctx, 999); err == nil {
			t.Error("purge of an article never heard of: no error")
		}
		existencetest.Apply(t, env.articles, existencetest.Deleted(purged, 2))

		left, version := int64(likes), int64(likes)
		for batch := 1; ; batch++ {
			done, err := env.svc.store.Purge(ctx, purged)
			if err != nil {
				t.Fatalf("batch %d: %v", batch, err)
			}
			last := left < purgeBatchSize
			left -= min(left, purgeBatchSize)
			if rows := likeRows(t, db, purged); rows != left {
				t.Fatalf("after batch %d: %d likes left, want %d", batch, rows, left)
			}
			if last {
				if !done {
					t.Fatalf("batch %d took the last likes but did not report done", batch)
				}
				if _, _, ok := countRow(t, db, purged); ok {
					t.Fatalf("batch %d reported done with the count row still there", batch)
				}
				if want := likes/purgeBatchSize + 1; batch != want {
					t.Errorf("done after %d batches, want %d", batch, want)
				}
				break
			}
			if done {
				t.Fatalf("batch %d reported done with %d likes left", batch, left)
			}
			// The count is the recount of what is left, and a new version of it.
			version++
			if count, v, ok := countRow(t, db, purged); !ok || count != left || v != version {
				t.Fatalf("after batch %d: count row %d at version %d (present %v), want %d at %d", batch, count, v, ok, left, version)
			}
		}
		if done, err := env.svc.store.Purge(ctx, purged); !done || err != nil {
			t.Errorf("purge of an article purged already: done %v, %v; want done", done, err)
		}
		for _, article := range []int64{before, after} {
			if count, _, _ := countRow(t, db, article); count != likes || likeRows(t, db, article) != likes {
				t.Errorf("neighbour %d: count %d, %d rows; want %d each", article, count, likeRows(t, db, article), likes)
			}
		}
	})
}

// TestPurgeWhileOtherArticlesAreLiked purges an article of 100,000 likes while other goroutines keep liking other
// articles (its neighbours in the index) through the service: the purge removes everything, the other likes all
// succeed and are counted exactly, and some of them commit between the purge's first and last batches — the purge
// never holds the database for itself for longer than a batch.
func TestPurgeWhileOtherArticlesAreLiked(t *testing.T) {
	t.Parallel()
	const seeded, likers = 100_000, 8
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		const purged = int64(9000)
		others := []int64{purged - 2, purged - 1, purged + 1, purged + 2}
		for _, article := range append([]int64{purged}, others...) {
			existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
		}
		start := time.Now()
		seedLikes(t, db, purged, seeded)
		t.Logf("%s: seeded %d likes in %s", db.Dialect, seeded, time.Since(start).Round(time.Millisecond))
		existencetest.Apply(t, env.articles, existencetest.Deleted(purged, 2))

		var (
			completed atomic.Int64 // other likes committed so far
			liked     = make([]atomic.Int64, len(others))
			stop      = make(chan struct{})
			going     = make(chan struct{})
			startOnce sync.Once
			mu        sync.Mutex
			longest   time.Duration
			likeErrs  []error
			wg        sync.WaitGroup
		)
		for w := range likers {
			wg.Go(func() {
				slot := w % len(others)
				for n := int64(1); ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					begin := time.Now()
					_, err := env.svc.Like(ctx, "", others[slot], int64(w)*1_000_000+n)
					took := time.Since(begin)
					mu.Lock()
					longest = max(longest, took)
					if err != nil {
						likeErrs = append(likeErrs, err)
					}
					mu.Unlock()
					if err != nil {
						return
					}
					liked[slot].Add(1)
					completed.Add(1)
					startOnce.Do(func() { close(going) })
				}
			})
		}
		<-going

		// Only PurgeQueued's goroutine runs purge: these need no lock.
		var batches int
		var afterFirstBatch, beforeLastBatch int64
		purge := func(ctx context.Context, articleID int64) (bool, error) {
			beforeLastBatch = completed.Load()
			done, err := env.svc.store.Purge(ctx, articleID)
			if batches++; batches == 1 {
				afterFirstBatch = completed.Load()
			}
			return done, err
		}
		start = time.Now()
		err := env.articles.PurgeQueued(ctx, purge)
		elapsed := time.Since(start)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("purge: %v", err)
		}
		for _, err := range likeErrs {
			t.Errorf("like of another article during the purge: %v", err)
		}
		wantPurged(t, db, purged)
		if want := seeded/purgeBatchSize + 1; batches != want {
			t.Errorf("%d batches, want %d", batches, want)
		}
		for slot, article := range others {
			want := liked[slot].Load()
			if count, _, _ := countRow(t, db, article); count != want || likeRows(t, db, article) != want {
				t.Errorf("article %d: count %d, %d rows; want the %d likes that succeeded", article, count, likeRows(t, db, article), want)
			}
		}
		during := beforeLastBatch - afterFirstBatch
		if during <= 0 {
			t.Errorf("no like of another article committed between the purge's first and last batches")
		}
		stats := env.articles.PurgeStats()
		t.Logf("%s: purged %d likes in %d batches in %s, longest batch %s; %d likes of other articles meanwhile (%d between the first and last batches), the slowest took %s",
			db.Dialect, seeded, stats.Batches, elapsed.Round(time.Millisecond), stats.LongestBatch.Round(time.Microsecond),
			completed.Load(), during, longest.Round(time.Microsecond))
	})
}

// TestPurgeResumesAfterARestart cuts a purge off after three batches, as a process that stops; a new registry over
// the same database (the restarted process) finds the purge still queued and finishes it.
func TestPurgeResumesAfterARestart(t *testing.T) {
	t.Parallel()
	const likes, cutAfter = 5000, 3
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		env := newTestEnv(t, db, "")
		const article = int64(7000)
		existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
		seedLikes(t, db, article, likes)
		existencetest.Apply(t, env.articles, existencetest.Deleted(article, 2))

		ctx, stopProcess := context.WithCancel(context.Background())
		defer stopProcess()
		batches := 0
		cutOff := func(ctx context.Context, articleID int64) (bool, error) {
			done, err := env.svc.store.Purge(ctx, articleID)
			if batches++; batches == cutAfter {
				stopProcess()
			}
			return done, err
		}
		if err := env.articles.PurgeQueued(ctx, cutOff); err == nil {
			t.Fatal("a purge cut off reported no error")
		}
		left := int64(likes - cutAfter*purgeBatchSize)
		if count, version, _ := countRow(t, db, article); likeRows(t, db, article) != left || count != left || version != likes+cutAfter {
			t.Fatalf("after the cut: %d rows, count %d at version %d; want %d, %d at %d", likeRows(t, db, article), count, version,
				left, left, likes+cutAfter)
		}
		if n := queuedPurges(t, db); n != 1 {
			t.Fatalf("%d purges queued after the cut, want 1", n)
		}

		restarted := env.origin.Registry("like", db)
		store := NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil), restarted, nil)
		if err := restarted.PurgeQueued(context.Background(), store.Purge); err != nil {
			t.Fatalf("purge after the restart: %v", err)
		}
		wantPurged(t, db, article)
		if got, want := restarted.PurgeStats().Batches, left/purgeBatchSize+1; got != want {
			t.Errorf("the restarted purge took %d batches, want %d", got, want)
		}
	})
}

// TestLikesRaceTheDeleteOfTheirArticle likes one article from many goroutines (and unlikes some of its earlier likes)
// through each strategy's path while ARTICLE_DELETED is applied and the purge runs: whichever commits first, every
// answer is a success or 404 ARTICLE_NOT_FOUND, and once the queue is purged again nothing of the article is left.
// Even rounds start with likes, so a count row exists; odd rounds start with none, so the first likes race the
// delete to create it.
func TestLikesRaceTheDeleteOfTheirArticle(t *testing.T) {
	t.Parallel()
	const rounds, likers, likesEach, earlier = 5, 20, 2, 5
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		h, env := testHandler(t, db, "")
		for i, suffix := range strategyPaths[1:] {
			t.Run("path"+suffix, func(t *testing.T) {
				allOutcomes := map[string]int{}
				for round := range rounds {
					article := int64(20_000 + 100*i + round)
					existencetest.Apply(t, env.articles, existencetest.Created(article, 1))
					var earlierLikes int64
					if round%2 == 0 {
						earlierLikes = earlier
						for user := range earlierLikes {
							if r := httpiotest.Call(httpiotest.As(h, user+1), "POST", likePath(article, user+1)+suffix, ""); r.Status != 201 {
								t.Fatalf("like before the race: status %d; body %s", r.Status, r.Body)
							}
						}
					}

					var (
						mu        sync.Mutex
						outcomes  = map[string]int{}
						firstLike = make(chan struct{})
						likedOnce sync.Once
						wg        sync.WaitGroup
					)
					record := func(what string, r httpiotest.Reply, success int) {
						outcome := fmt.Sprintf("%s %d", what, r.Status)
						switch {
						case r.Status == success:
							if success == http.StatusCreated {
								likedOnce.Do(func() { close(firstLike) })
							}
						case r.Status == 404 && strings.Contains(r.Body, `"ARTICLE_NOT_FOUND"`):
							outcome += " ARTICLE_NOT_FOUND"
						default:
							outcome += " " + r.Body
						}
						mu.Lock()
						defer mu.Unlock()
						outcomes[outcome]++
					}
					for w := range int64(likers) {
						wg.Go(func() {
							if w < earlierLikes {
								record("unlike", httpiotest.Call(httpiotest.As(h, w+1), "DELETE", likePath(article, w+1)+suffix, ""), http.StatusNoContent)
							}
							for n := range int64(likesEach) {
								user := 1000 + w*likesEach + n
								record("like", httpiotest.Call(httpiotest.As(h, user), "POST", likePath(article, user)+suffix, ""), http.StatusCreated)
							}
						})
					}
					var deleteErr, purgeErr error
					deleted := make(chan struct{})
					go func() {
						defer close(deleted)
						<-firstLike // the delete comes while likes are committing
						deletion := existencetest.Deleted(article, 2)
						if deleteErr = env.articles.Handlers()[event.ArticleDeleted](ctx, deletion); deleteErr == nil {
							purgeErr = env.articles.PurgeQueued(ctx, env.svc.store.Purge)
						}
					}()
					wg.Wait()
					likedOnce.Do(func() { close(firstLike) }) // no like succeeded: the delete goes ahead regardless
					<-deleted
					if deleteErr != nil || purgeErr != nil {
						t.Fatalf("round %d: delete %v, purge %v", round, deleteErr, purgeErr)
					}
					if err := env.articles.PurgeQueued(ctx, env.svc.store.Purge); err != nil {
						t.Fatalf("round %d: purge after the race: %v", round, err)
					}
					wantPurged(t, db, article)
					for outcome := range outcomes {
						switch outcome {
						case "like 201", "like 404 ARTICLE_NOT_FOUND", "unlike 204", "unlike 404 ARTICLE_NOT_FOUND":
						default:
							t.Errorf("round %d: %d answers %q, want only successes and 404 ARTICLE_NOT_FOUND", round, outcomes[outcome], outcome)
						}
					}
					for outcome, n := range outcomes {
						allOutcomes[outcome] += n
					}
				}
				t.Logf("%s on %s, %d rounds: %v", suffix, db.Dialect, rounds, allOutcomes)
			})
		}
	})
}
