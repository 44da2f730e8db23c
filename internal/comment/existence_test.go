package comment

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"board/internal/existence"
	"board/internal/existence/existencetest"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// articlesFixture is the comment service with an article service and a record of articles the test controls.
type articlesFixture struct {
	h      http.Handler
	svc    *Service
	store  *Store
	origin *existencetest.Origin
	reg    *existence.Registry
}

func newArticlesFixture(t testing.TB, db *sqldb.DB) articlesFixture {
	t.Helper()
	origin := existencetest.NewOrigin(t)
	reg := testRegistry(origin, db)
	svc, store, _ := newTestService(db, reg)
	return articlesFixture{h: httpiotest.Handler("comment", Routes(svc, httpiotest.Logger)), svc: svc, store: store,
		origin: origin, reg: reg}
}

// wantCalls checks how many lookups the article service has had.
func (f articlesFixture) wantCalls(t testing.TB, want int64, when string) {
	t.Helper()
	if n := f.origin.Calls(); n != want {
		t.Errorf("%s: %d lookups at the article service, want %d", when, n, want)
	}
}

// left returns what the database still holds of an article: its comments of both versions, and its count row's
// count (-1 when there is no count row).
func left(t testing.TB, db *sqldb.DB, articleID int64) (comments, count int64) {
	t.Helper()
	ctx := context.Background()
	if err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM comment WHERE article_id = ?) +
		(SELECT COUNT(*) FROM comment_v2 WHERE article_id = ?)`, articleID, articleID).Scan(&comments); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(comment_count), -1) FROM article_comment_count
		WHERE article_id = ?`, articleID).Scan(&count); err != nil {
		t.Fatal(err)
	}
	return comments, count
}

// wantNothingLeft checks that an article has neither comments nor a count row.
func wantNothingLeft(t testing.TB, db *sqldb.DB, articleID int64) {
	t.Helper()
	if comments, count := left(t, db, articleID); comments != 0 || count != -1 {
		t.Errorf("article %d: %d comments and count row %d left, want none (-1: no row)", articleID, comments, count)
	}
}

// wantQueued checks how many purges are queued.
func wantQueued(t testing.TB, db *sqldb.DB, want int64) {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article_purge").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%d purges queued, want %d", n, want)
	}
}

// seedArticle stores v1 and v2 comments (multiples of 5) of an article as a bulk load does, with ids from
// firstSeedID: v1 roots with four replies each, v2 roots each with a reply line three deep and a second reply.
func seedArticle(t testing.TB, store *Store, articleID, firstSeedID int64, v1, v2 int) {
	t.Helper()
	const chunkSize = 2000
	ctx := context.Background()
	id := firstSeedID
	var chunk []Comment
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		if err := store.SeedChunk(ctx, articleID, chunk); err != nil {
			t.Fatal(err)
		}
		chunk = chunk[:0]
	}
	add := func(c Comment) {
		c.ID, c.CreatedAt = id, t0ms
		id++
		if chunk = append(chunk, c); len(chunk) == chunkSize {
			flush()
		}
	}
	for range v1 / 5 {
		root := id
		for range 5 {
			add(Comment{ParentID: root})
		}
	}
	flush()
	for k := range int64(v2 / 5) {
		root := Segment(k)
		line := root + Segment(0)
		for _, p := range []string{root, line, line + Segment(0), line + Segment(0) + Segment(0), root + Segment(1)} {
			add(Comment{Path: p})
		}
	}
	flush()
}

// TestHTTPWriteOnMissingArticle: the article service has no such article, so no write takes place.
func TestHTTPWriteOnMissingArticle(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const missing = 404
		f.origin.Remove(missing)
		for _, req := range []struct{ target, body string }{
			{"/v1/comments", httpBody(missing, 1, "root", "", "")},
			{"/v1/comments", httpBody(missing, 1, "reply", "parentCommentId", "12345")},
			{"/v2/comments", httpBody(missing, 1, "root", "", "")},
			{"/v2/comments", httpBody(missing, 1, "reply", "parentPath", "00000")},
		} {
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, 1), "POST", req.target, req.body), http.StatusNotFound, "ARTICLE_NOT_FOUND")
		}
		f.wantCalls(t, 1, "four writes on a missing article") // its 404 is remembered
		for _, version := range []string{"v1", "v2"} {
			r := httpiotest.Call(httpiotest.As(f.h, 1), "DELETE", "/"+version+"/comments/12345", "")
			httpiotest.WantError(t, r, http.StatusNotFound, "COMMENT_NOT_FOUND")
		}
		wantNothingLeft(t, db, missing)
		if events := outboxEvents(t, db); len(events) != 0 {
			t.Errorf("refused writes left events: %v", events)
		}
	})
}

// TestHTTPWriteWhileArticleServiceDown: an unknown article cannot be looked up, so the write is refused as
// unavailable, with nothing written; an article known here takes comments all the same.
func TestHTTPWriteWhileArticleServiceDown(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const known, unknown = 7, 8
		existencetest.Apply(t, f.reg, existencetest.Created(known, 1))
		f.origin.SetDown(true)
		for _, version := range []string{"v1", "v2"} {
			r := httpiotest.Call(httpiotest.As(f.h, 1), "POST", "/"+version+"/comments", httpBody(unknown, 1, "root", "", ""))
			httpiotest.WantError(t, r, http.StatusServiceUnavailable, "ARTICLE_SERVICE_UNAVAILABLE")
		}
		wantNothingLeft(t, db, unknown)
		httpPostV1(t, f.h, known, 1, "", "root")
		httpPostV2(t, f.h, known, 1, "", "root")

		f.origin.SetDown(false)
		httpPostV2(t, f.h, unknown, 1, "", "root")
	})
}

// TestHTTPWriteOnNewArticle: an article created a moment ago, whose ARTICLE_CREATED has not arrived, is looked up
// once; every write after that, and every write on an article the events announced, makes no lookup.
func TestHTTPWriteOnNewArticle(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article = 7
		rootV1 := httpPostV1(t, f.h, article, 1, "", "first")
		f.wantCalls(t, 1, "the first comment on an unknown article")

		rootV2 := httpPostV2(t, f.h, article, 1, "", "v2 root")
		parentPath := rootV2["path"].(string)
		var replies []string
		for i := range 50 {
			switch i % 4 {
			case 0:
				httpPostV1(t, f.h, article, 1, "", "root")
			case 1:
				replies = append(replies, httpPostV1(t, f.h, article, 1, rootV1["commentId"].(string), "reply")["commentId"].(string))
			case 2:
				httpPostV2(t, f.h, article, 1, "", "root")
			case 3:
				c := httpPostV2(t, f.h, article, 1, parentPath, "reply")
				if p := c["path"].(string); depth(p) < MaxDepth {
					parentPath = p
				}
			}
		}
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(f.h, 1), "DELETE", "/v1/comments/"+replies[0], ""), http.StatusNoContent)
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(f.h, 1), "DELETE", "/v2/comments/"+rootV2["commentId"].(string), ""),
			http.StatusNoContent)
		f.wantCalls(t, 1, "50 comments and 2 deletes more")

		existencetest.Apply(t, f.reg, existencetest.Created(8, 1))
		httpPostV1(t, f.h, 8, 1, "", "on an announced article")
		httpPostV2(t, f.h, 8, 1, "", "on an announced article")
		f.wantCalls(t, 1, "comments on an article ARTICLE_CREATED announced")
		if n := httpCount(t, f.h, article); n != "51" {
			t.Errorf("count = %s, want 51", n)
		}
	})
}

// TestHTTPWriteOnDeletedArticle: once ARTICLE_DELETED is applied, every write on the article is ARTICLE_NOT_FOUND,
// without a lookup, before the purge, while it runs and after it: a delete of a comment it removed already is
// COMMENT_NOT_FOUND, as there is nothing left to tell its article by.
func TestHTTPWriteOnDeletedArticle(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		f := newArticlesFixture(t, db)
		const article = 7
		existencetest.Apply(t, f.reg, existencetest.Created(article, 1))
		// 500 older v1 comments: the purge walks v1 from the largest parent, so its first batch takes the newer root
		// and reply below and 498 of these, and leaves two of these and the v2 comment.
		seedArticle(t, f.store, article, 1000, purgeBatchSize, 0)
		root := httpPostV1(t, f.h, article, 1, "", "root")["commentId"].(string)
		reply := httpPostV1(t, f.h, article, 1, root, "reply")["commentId"].(string)
		rootV2 := httpPostV2(t, f.h, article, 1, "", "v2 root")["commentId"].(string)

		existencetest.Apply(t, f.reg, existencetest.Deleted(article, 2))
		refused := func(when string) {
			t.Helper()
			for _, req := range []struct{ method, target, body string }{
				{"POST", "/v1/comments", httpBody(article, 1, "root", "", "")},
				{"POST", "/v1/comments", httpBody(article, 1, "reply", "parentCommentId", "1000")},
				{"POST", "/v2/comments", httpBody(article, 1, "root", "", "")},
				{"POST", "/v2/comments", httpBody(article, 1, "reply", "parentPath", "00000")},
				{"DELETE", "/v1/comments/1000", ""},
				{"DELETE", "/v2/comments/" + rootV2, ""},
			} {
				r := httpiotest.Call(httpiotest.As(f.h, 1), req.method, req.target, req.body)
				if r.Status != http.StatusNotFound || httpiotest.ErrorCode(t, r) != "ARTICLE_NOT_FOUND" {
					t.Errorf("%s: %s %s %s = %d %s, want 404 ARTICLE_NOT_FOUND", when, req.method, req.target, req.body,
						r.Status, r.Body)
				}
			}
		}
		refused("before the purge")
		for _, id := range []string{root, reply} {
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, 1), "DELETE", "/v1/comments/"+id, ""), http.StatusNotFound, "ARTICLE_NOT_FOUND")
		}

		done, err := f.store.Purge(ctx, article)
		if err != nil || done {
			t.Fatalf("first batch: done %v, %v; want more to do", done, err)
		}
		if comments, count := left(t, db, article); comments != 3 || count != 3 {
			t.Errorf("after one batch: %d comments, count %d; want 3, 3", comments, count)
		}
		refused("halfway through the purge")
		for _, id := range []string{root, reply} {
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, 1), "DELETE", "/v1/comments/"+id, ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
		}

		if err := f.reg.PurgeQueued(ctx, f.store.Purge); err != nil {
			t.Fatal(err)
		}
		wantNothingLeft(t, db, article)
		wantQueued(t, db, 0)
		for _, req := range []struct{ target, body string }{
			{"/v1/comments", httpBody(article, 1, "root", "", "")},
			{"/v2/comments", httpBody(article, 1, "root", "", "")},
		} {
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, 1), "POST", req.target, req.body), http.StatusNotFound, "ARTICLE_NOT_FOUND")
		}
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, 1), "DELETE", "/v2/comments/"+rootV2, ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
		if n := httpCount(t, f.h, article); n != "0" {
			t.Errorf("count after the purge = %s, want 0", n)
		}
		f.wantCalls(t, 0, "writes on an announced, then deleted article")
	})
}

// TestHTTPCreatedAfterDeleted: an ARTICLE_CREATED or ARTICLE_UPDATED that arrives after the article's
// ARTICLE_DELETED does not let comments in again.
func TestHTTPCreatedAfterDeleted(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article = 7
		existencetest.Apply(t, f.reg, existencetest.Deleted(article, 2))
		existencetest.Apply(t, f.reg, existencetest.Created(article, 1))
		existencetest.Apply(t, f.reg, existencetest.Updated(article, 3))
		for _, req := range []struct{ target, body string }{
			{"/v1/comments", httpBody(article, 1, "root", "", "")},
			{"/v2/comments", httpBody(article, 1, "root", "", "")},
		} {
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, 1), "POST", req.target, req.body), http.StatusNotFound, "ARTICLE_NOT_FOUND")
		}
		f.wantCalls(t, 0, "writes on a deleted article") // the article service has it: it is not asked
		wantNothingLeft(t, db, article)
	})
}

// TestPurgeWhileOtherArticlesWrite purges an article of 100,000 comments while other articles take comments: the
// purge removes everything of it and nothing else, and the other articles' writes go on between its batches.
func TestPurgeWhileOtherArticlesWrite(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		f := newArticlesFixture(t, db)
		const purged, writers = 7, 4
		for a := range int64(writers + 1) {
			existencetest.Apply(t, f.reg, existencetest.Created(purged+a, 1))
		}
		seedStart := time.Now()
		seedArticle(t, f.store, purged, 1, 50_000, 50_000)
		t.Logf("seeded 100,000 comments in %v", time.Since(seedStart).Round(time.Millisecond))
		existencetest.Apply(t, f.reg, existencetest.Deleted(purged, 2))

		// Each writer comments on an article of its own, as roots and replies of both versions, until the purge ends.
		type write struct {
			at   time.Time
			took time.Duration
		}
		writes := make([][]write, writers)
		stop := make(chan struct{})
		var ready, wg sync.WaitGroup
		ready.Add(writers)
		for w := range writers {
			articleID := int64(purged + 1 + w)
			wg.Go(func() {
				var rootV1 Comment
				for i := 0; ; i++ {
					start := time.Now()
					var c Comment
					var err error
					switch i % 4 {
					case 0:
						c, err = f.svc.Create(ctx, articleID, 1, 0, "root")
					case 1:
						c, err = f.svc.Create(ctx, articleID, 1, rootV1.ID, "reply")
					case 2:
						c, err = f.svc.CreateV2(ctx, articleID, 1, "", "root")
					case 3:
						c, err = f.svc.CreateV2(ctx, articleID, 1, "00000", "reply")
					}
					if err != nil {
						t.Errorf("article %d, write %d: %v", articleID, i, err)
					}
					if i == 0 {
						rootV1 = c
						ready.Done()
					}
					writes[w] = append(writes[w], write{time.Now(), time.Since(start)})
					if err != nil {
						return
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			})
		}
		ready.Wait()

		var batches [][2]time.Time // start and end of each batch
		purge := func(ctx context.Context, articleID int64) (bool, error) {
			start := time.Now()
			done, err := f.store.Purge(ctx, articleID)
			batches = append(batches, [2]time.Time{start, time.Now()})
			return done, err
		}
		err := f.reg.PurgeQueued(ctx, purge)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}

		wantNothingLeft(t, db, purged)
		wantQueued(t, db, 0)
		firstEnd, lastStart := batches[0][1], batches[len(batches)-1][0]
		var total, between int
		var longest time.Duration
		for w, ws := range writes {
			articleID := int64(purged + 1 + w)
			if comments, count := left(t, db, articleID); comments != int64(len(ws)) || count != comments {
				t.Errorf("article %d: %d writes, %d comments, count %d; want all three equal", articleID, len(ws), comments, count)
			}
			for _, x := range ws {
				total++
				if x.at.After(firstEnd) && x.at.Before(lastStart) {
					between++
				}
				longest = max(longest, x.took)
			}
		}
		if between == 0 {
			t.Errorf("none of %d writes on other articles completed between the purge's first and last batch", total)
		}
		stats := f.reg.PurgeStats()
		t.Logf("purge: %d batches in %v, longest batch %v; other articles: %d writes, %d between the first and last batch, longest %v",
			stats.Batches, batches[len(batches)-1][1].Sub(batches[0][0]).Round(time.Millisecond),
			stats.LongestBatch.Round(time.Microsecond), total, between, longest.Round(time.Microsecond))
	})
}

// TestPurgeResumesAfterRestart cuts a purge off after a few batches and runs the queue again from a new registry,
// as a restarted process does: the purge finishes.
func TestPurgeResumesAfterRestart(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article = 7
		existencetest.Apply(t, f.reg, existencetest.Created(article, 1))
		seedArticle(t, f.store, article, 1, 3000, 3000)
		existencetest.Apply(t, f.reg, existencetest.Deleted(article, 2))

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		batches := 0
		cutOff := func(ctx context.Context, articleID int64) (bool, error) {
			done, err := f.store.Purge(ctx, articleID)
			if batches++; batches == 3 {
				cancel()
			}
			return done, err
		}
		if err := f.reg.PurgeQueued(ctx, cutOff); err == nil {
			t.Fatal("a purge cut off after 3 of 13 batches reported no error")
		}
		if comments, count := left(t, db, article); comments != 6000-3*purgeBatchSize || count != comments {
			t.Errorf("after 3 batches: %d comments, count %d; want %d, the same", comments, count, 6000-3*purgeBatchSize)
		}
		wantQueued(t, db, 1)

		restarted := testRegistry(existencetest.NewOrigin(t), db)
		_, store, _ := newTestService(db, restarted)
		if err := restarted.PurgeQueued(context.Background(), store.Purge); err != nil {
			t.Fatal(err)
		}
		wantNothingLeft(t, db, article)
		wantQueued(t, db, 0)
		if stats := restarted.PurgeStats(); stats.Articles != 1 || stats.Batches != 10 {
			t.Errorf("restarted purge: %+v, want 1 article in 10 batches", stats)
		}
	})
}

// TestHTTPWritesRaceArticleDelete writes on an article from many clients (comments of both versions, roots and
// replies, and deletes of them) while its ARTICLE_DELETED is applied and its purge runs: every request succeeds or
// is refused as the API says, none succeeds once the delete is recorded, and when the purge has run nothing of the
// article is left, whichever write committed last.
func TestHTTPWritesRaceArticleDelete(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const rounds, clients, createdFirst = 5, 8, 40
		for round := range int64(rounds) {
			article := 100 + round
			existencetest.Apply(t, f.reg, existencetest.Created(article, 1))
			seedArticle(t, f.store, article, 1_000_000*(round+1), 600, 600) // a purge of a few batches

			purgeCtx, stopPurges := context.WithCancel(context.Background())
			purges := make(chan struct{})
			go func() {
				defer close(purges)
				f.reg.RunPurges(purgeCtx, f.store.Purge)
			}()

			var created atomic.Int64
			var deleted atomic.Bool
			statuses := make([]map[string]int, clients)
			var wg sync.WaitGroup
			for c := range clients {
				statuses[c] = map[string]int{}
				wg.Go(func() {
					// The client replies to its latest comments, and deletes each fifth request the comment it
					// created last, which a later reply may find deleted or gone.
					var parentID, parentPath, lastCreated string
					// It goes on until it has been refused three times since the delete was recorded.
					for i, refusals := c, 0; refusals < 3; i++ {
						method, target, body := "POST", "/v1/comments", httpBody(article, 1, "root", "", "")
						reply := false
						switch i % 5 {
						case 1:
							if parentID != "" {
								body, reply = httpBody(article, 1, "reply", "parentCommentId", parentID), true
							}
						case 2:
							target, body = "/v2/comments", httpBody(article, 1, "root", "", "")
						case 3:
							target, body = "/v2/comments", httpBody(article, 1, "root", "", "")
							if parentPath != "" {
								body, reply = httpBody(article, 1, "reply", "parentPath", parentPath), true
							}
						case 4:
							if lastCreated != "" {
								method, target, body, lastCreated = "DELETE", lastCreated, "", ""
							}
						}
						afterDelete := deleted.Load()
						r := httpiotest.Call(httpiotest.As(f.h, 1), method, target, body)
						code := ""
						if r.Status >= 400 {
							code = httpiotest.ErrorCode(t, r)
						}
						statuses[c][strings.TrimSpace(fmt.Sprintf("%s %d %s", method, r.Status, code))]++
						switch {
						case r.Status < 300 && afterDelete:
							t.Errorf("%s %s %s: %d after the article's delete was recorded", method, target, body, r.Status)
						case r.Status == http.StatusNoContent:
						case r.Status == http.StatusCreated:
							created.Add(1)
							comment := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
							path, v2 := comment["path"].(string)
							switch {
							case v2:
								lastCreated = "/v2/comments/" + comment["commentId"].(string)
								if depth(path) < MaxDepth {
									parentPath = path
								}
							case !reply:
								lastCreated = "/v1/comments/" + comment["commentId"].(string)
								parentID = comment["commentId"].(string)
							default:
								lastCreated = "/v1/comments/" + comment["commentId"].(string)
							}
						case r.Status == http.StatusNotFound && code == "ARTICLE_NOT_FOUND":
							if afterDelete {
								refusals++
							}
						case method == "DELETE" && r.Status == http.StatusNotFound && code == "COMMENT_NOT_FOUND":
							// purged between the request's start and its read of the comment's article
						case reply && (r.Status == http.StatusNotFound && code == "PARENT_COMMENT_NOT_FOUND" ||
							r.Status == http.StatusBadRequest && code == "PARENT_COMMENT_DELETED"):
							if target == "/v1/comments" {
								parentID = ""
							} else {
								parentPath = ""
							}
						default:
							t.Errorf("%s %s %s: %d %s", method, target, body, r.Status, r.Body)
							return
						}
					}
				})
			}
			for created.Load() < createdFirst && !t.Failed() {
				time.Sleep(time.Millisecond)
			}
			existencetest.Apply(t, f.reg, existencetest.Deleted(article, 2))
			deleted.Store(true)
			wg.Wait()
			stopPurges()
			<-purges

			if err := f.reg.PurgeQueued(context.Background(), f.store.Purge); err != nil {
				t.Fatal(err)
			}
			wantNothingLeft(t, db, article)
			wantQueued(t, db, 0)
			all := map[string]int{}
			for _, s := range statuses {
				for k, n := range s {
					all[k] += n
				}
			}
			var summary []string
			for _, k := range slices.Sorted(maps.Keys(all)) {
				summary = append(summary, fmt.Sprintf("%s: %d", k, all[k]))
			}
			t.Logf("round %d: %v", round, summary)
		}
		f.wantCalls(t, 0, "writes on announced articles")
	})
}

// BenchmarkCreateWarmArticle creates v2 root comments on one article the service knows live: the cost of a write
// with its existence check (one shared-locked read by primary key) and no lookup.
func BenchmarkCreateWarmArticle(b *testing.B) {
	run := func(b *testing.B, db *sqldb.DB) {
		origin := existencetest.NewOrigin(b)
		reg := testRegistry(origin, db)
		svc, _, _ := newTestService(db, reg)
		existencetest.Apply(b, reg, existencetest.Created(7, 1))
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := svc.CreateV2(ctx, 7, 9, "", "benchmark"); err != nil {
				b.Fatal(err)
			}
		}
		if n := origin.Calls(); n != 0 {
			b.Errorf("%d lookups on a known article", n)
		}
	}
	b.Run("sqlite", func(b *testing.B) { run(b, sqldbtest.OpenSQLite(b, Migrate)) })
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		b.Run("mysql", func(b *testing.B) { run(b, sqldbtest.OpenMySQL(b, Migrate)) })
	}
}
