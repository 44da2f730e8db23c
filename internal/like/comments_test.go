package like

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// commentOrigin answers the comment service's GET /v2/comments/{id} and /v1/comments/{id} for lookups: 200 with the
// comment's article for the comments it was given (v2 ones on the v2 path only, v1 ones on v1), 404 for any other;
// 503 for all while it is down.
type commentOrigin struct {
	url   string
	mu    sync.Mutex
	has   map[string]map[int64]int64 // version -> comment -> article
	calls atomic.Int64
	down  atomic.Bool
}

func newCommentOrigin(t testing.TB) *commentOrigin {
	o := &commentOrigin{has: map[string]map[int64]int64{"v1": {}, "v2": {}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{version}/comments/{id}", func(w http.ResponseWriter, r *http.Request) {
		o.calls.Add(1)
		if o.down.Load() {
			http.Error(w, `{"code":"DATABASE_UNAVAILABLE","message":"down"}`, http.StatusServiceUnavailable)
			return
		}
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		o.mu.Lock()
		article, ok := o.has[r.PathValue("version")][id]
		o.mu.Unlock()
		if !ok {
			http.Error(w, `{"code":"COMMENT_NOT_FOUND","message":"no such comment"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"commentId": apijson.ID(id), "articleId": apijson.ID(article)})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

// add makes the origin have a comment of article, of API version v1 or v2.
func (o *commentOrigin) add(version string, commentID, articleID int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.has[version][commentID] = articleID
}

// commentEvent is a COMMENT_CREATED or COMMENT_DELETED of a comment of an article.
func commentEvent(typ event.Type, commentID, articleID int64) event.Envelope {
	payload, err := json.Marshal(event.Comment{CommentID: apijson.ID(commentID), ArticleID: apijson.ID(articleID),
		Deleted: typ == event.CommentDeleted})
	if err != nil {
		panic(err)
	}
	return event.Envelope{EventID: apijson.ID(commentID), Type: typ, Payload: payload}
}

// applyComment has the service's record of comments apply env.
func (e testEnv) applyComment(t testing.TB, env event.Envelope) {
	t.Helper()
	if err := e.comments.Handlers()[env.Type](context.Background(), env); err != nil {
		t.Fatalf("apply %s: %v", env.Type, err)
	}
}

// comment records a live comment of an article from its COMMENT_CREATED, and returns it as a target.
func (e testEnv) comment(t testing.TB, commentID, articleID int64) target {
	t.Helper()
	e.applyComment(t, commentEvent(event.CommentCreated, commentID, articleID))
	return target{article: articleID, comment: commentID}
}

// likeOf likes tg, an article or a comment, through svc's API for it.
func likeOf(ctx context.Context, svc *Service, st Strategy, tg target, user int64) (Like, error) {
	if tg.comment != 0 {
		return svc.LikeComment(ctx, st, tg.comment, user)
	}
	return svc.Like(ctx, st, tg.article, user)
}

// unlikeOf unlikes tg, an article or a comment, through svc's API for it.
func unlikeOf(ctx context.Context, svc *Service, st Strategy, tg target, user int64) error {
	if tg.comment != 0 {
		return svc.UnlikeComment(ctx, st, tg.comment, user)
	}
	return svc.Unlike(ctx, st, tg.article, user)
}

func commentLikePath(comment, user int64) string {
	return fmt.Sprintf("/v1/comment-likes/comments/%d/users/%d", comment, user)
}

func commentLikeMap(id, comment, article, user int64) map[string]any {
	return map[string]any{"commentLikeId": strconv.FormatInt(id, 10), "commentId": strconv.FormatInt(comment, 10),
		"articleId": strconv.FormatInt(article, 10), "userId": strconv.FormatInt(user, 10), "createdAt": "2026-01-02T03:04:05.006Z"}
}

// TestCommentRoutes runs a comment's likes through every path: the answers of SPEC §3.13, the count with its ETag,
// the events in the outbox under the article's key, and who may write.
func TestCommentRoutes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, env := testHandler(t, db, PessimisticLock2)
		id := int64(firstID)
		for i, suffix := range strategyPaths {
			t.Run("path"+suffix, func(t *testing.T) {
				article, comment, user := int64(10+i), int64(110+i), int64(77)
				env.comment(t, comment, article)
				path, countPath := commentLikePath(comment, user), fmt.Sprintf("/v1/comment-likes/comments/%d/count", comment)
				wantCount := func(what, n, version string) {
					t.Helper()
					r := httpiotest.Call(h, "GET", countPath, "")
					wantReply(t, what, r, 200, json.Number(n))
					if got := r.Header.Get("ETag"); got != strconv.Quote(version) {
						t.Errorf("%s: ETag %s, want %q", what, got, version)
					}
				}

				wantCount("count before", "0", "0")
				wantError(t, "get before", httpiotest.Call(h, "GET", path, ""), 404, "LIKE_NOT_FOUND")
				wantError(t, "unlike before", httpiotest.Call(httpiotest.As(h, user), "DELETE", path+suffix, ""), 404, "LIKE_NOT_FOUND")
				wantError(t, "like as another", httpiotest.Call(httpiotest.As(h, user+1), "POST", path+suffix, ""), 403, "FORBIDDEN")
				wantError(t, "like without a token", httpiotest.Call(h, "POST", path+suffix, ""), 401, "UNAUTHENTICATED")
				wantError(t, "like of comment 0", httpiotest.Call(httpiotest.As(h, user), "POST", commentLikePath(0, user)+suffix, ""), 400, "INVALID_COMMENT_ID")

				want := commentLikeMap(id, comment, article, user)
				wantReply(t, "like", httpiotest.Call(httpiotest.As(h, user), "POST", path+suffix, ""), 201, any(want))
				id++
				wantReply(t, "get", httpiotest.Call(h, "GET", path, ""), 200, any(want))
				wantError(t, "second like", httpiotest.Call(httpiotest.As(h, user), "POST", path+suffix, ""), 409, "ALREADY_LIKED")
				id++ // the refused like took an id
				wantCount("count", "1", "1")
				wantReply(t, "unlike", httpiotest.Call(httpiotest.As(h, user), "DELETE", path+suffix, ""), 204, nil)
				wantError(t, "second unlike", httpiotest.Call(httpiotest.As(h, user), "DELETE", path+suffix, ""), 404, "LIKE_NOT_FOUND")
				wantError(t, "get after unlike", httpiotest.Call(h, "GET", path, ""), 404, "LIKE_NOT_FOUND")
				wantCount("count after", "0", "2")

				events := outboxOf(t, db, article)
				types := map[event.Type]int{}
				for _, e := range events {
					types[e.Type]++
				}
				if len(events) != 2 || types[event.CommentLiked] != 1 || types[event.CommentUnliked] != 1 {
					t.Fatalf("events %+v, want a COMMENT_LIKED and a COMMENT_UNLIKED", events)
				}
				for _, e := range events {
					c, wantCount := e.Comment, int64(1)
					if e.Type == event.CommentUnliked {
						wantCount = 0
					}
					if int64(c.CommentID) != comment || int64(c.ArticleID) != article || int64(c.UserID) != user ||
						int64(c.CommentLikeID) != id-2 || c.CommentLikeCount != wantCount || c.CommentLikeCountVersion != 2-wantCount {
						t.Errorf("%s: payload %+v", e.Type, c)
					}
				}
				// The article's own likes are another count.
				wantReply(t, "article's count", httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-likes/articles/%d/count", article), ""), 200, json.Number("0"))
			})
		}
	})
}

// TestCommentsThatDoNotExist: a like or unlike of a comment the comment service does not have, or one recorded
// deleted (a COMMENT_DELETED, soft delete included, before or after its COMMENT_CREATED), is 404 COMMENT_NOT_FOUND
// and writes nothing; so is one of a comment whose article is deleted.
func TestCommentsThatDoNotExist(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		const article, liked, deletedFirst, unknown = 50, 51, 52, 53
		tg := env.comment(t, liked, article)
		if _, err := env.svc.LikeComment(ctx, "", liked, 1); err != nil {
			t.Fatal(err)
		}
		env.applyComment(t, commentEvent(event.CommentDeleted, liked, article))
		env.applyComment(t, commentEvent(event.CommentDeleted, deletedFirst, article))
		env.applyComment(t, commentEvent(event.CommentCreated, deletedFirst, article)) // late: changes nothing
		for _, st := range Strategies {
			for _, comment := range []int64{liked, deletedFirst, unknown} {
				what := fmt.Sprintf("%s, comment %d", st, comment)
				_, err := env.svc.LikeComment(ctx, st, comment, 2)
				wantKind(t, err, fault.NotFound, "COMMENT_NOT_FOUND", what+": like")
				wantKind(t, env.svc.UnlikeComment(ctx, st, comment, 1), fault.NotFound, "COMMENT_NOT_FOUND", what+": unlike")
			}
		}
		if n := len(outboxOf(t, db, article)); n != 1 || rowsOf(t, db, tg) != 1 {
			t.Errorf("%d events, %d like rows; want only the like before the delete", n, rowsOf(t, db, tg))
		}

		// A live comment of a deleted article: its article's record refuses it.
		other := env.comment(t, 61, 60)
		existencetest.Apply(t, env.articles, existencetest.Deleted(60, 2))
		_, err := likeOf(ctx, env.svc, "", other, 1)
		wantKind(t, err, fault.NotFound, "ARTICLE_NOT_FOUND", "like of a comment of a deleted article")
	})
}

// TestCommentLookedUpOnce: a comment whose COMMENT_CREATED has not arrived is looked up at the comment service once
// (v2, then v1), and its likes go to its article; later likes ask nothing, and neither do likes of a comment found
// missing a moment ago.
func TestCommentLookedUpOnce(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		env.commentOrigin.add("v2", 71, 70)
		env.commentOrigin.add("v1", 72, 70)
		for _, comment := range []int64{71, 72} {
			for user := int64(1); user <= 3; user++ {
				if l, err := env.svc.LikeComment(ctx, "", comment, user); err != nil || l.ArticleID != 70 {
					t.Fatalf("like of comment %d: %+v, %v", comment, l, err)
				}
			}
		}
		// v2 for 71; v2 then v1 for 72.
		if got := env.commentOrigin.calls.Load(); got != 3 {
			t.Errorf("%d lookups, want 3", got)
		}
		if n := len(outboxOf(t, db, 70)); n != 6 {
			t.Errorf("%d events under article 70, want 6", n)
		}
		// One the comment service does not have is asked for once (v2, then v1) and then answered as missing for a
		// while, however often it is asked for.
		for range 3 {
			_, err := env.svc.LikeComment(ctx, "", 79, 1)
			wantKind(t, err, fault.NotFound, "COMMENT_NOT_FOUND", "like of a comment no one has")
		}
		if got := env.commentOrigin.calls.Load(); got != 3+2 {
			t.Errorf("%d lookups after three likes of a missing comment, want 5", got)
		}
	})
}

// TestLikesWhileTheCommentServiceIsDown: a like of a comment not heard of yet is a 503 while the comment service
// cannot answer, and writes nothing; known comments are liked all the same; once it answers, the like goes through.
func TestLikesWhileTheCommentServiceIsDown(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		known := env.comment(t, 91, 90)
		env.commentOrigin.add("v2", 92, 90)
		env.commentOrigin.down.Store(true)
		_, err := env.svc.LikeComment(ctx, "", 92, 1)
		wantKind(t, err, fault.Unavailable, "COMMENT_SERVICE_UNAVAILABLE", "like of an unknown comment, its service down")
		if _, err := likeOf(ctx, env.svc, "", known, 1); err != nil {
			t.Errorf("like of a known comment, its service down: %v", err)
		}
		if n := len(outboxOf(t, db, 90)); n != 1 {
			t.Errorf("%d events, want the known comment's like only", n)
		}
		env.commentOrigin.down.Store(false)
		if _, err := env.svc.LikeComment(ctx, "", 92, 1); err != nil {
			t.Errorf("like once the comment service is back: %v", err)
		}
	})
}

// TestPurgeRemovesCommentLikes: the purge of a deleted article removes its comments' likes and count rows, a comment
// at a time and in batches, then its own likes, and reports done only then. Other articles' comments lose nothing.
func TestPurgeRemovesCommentLikes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		const purged, kept = 80, 81
		first, second, neighbour := env.comment(t, 801, purged), env.comment(t, 802, purged), env.comment(t, 811, kept)
		likes := map[target]int{first: purgeBatchSize + 1, second: 3, neighbour: 2, {article: purged}: 2}
		for tg, n := range likes {
			errs := concurrently(n, 20, func(u int) error { _, err := likeOf(ctx, env.svc, "", tg, int64(u+1)); return err })
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		existencetest.Apply(t, env.articles, existencetest.Deleted(purged, 2))
		batches := 0
		for done := false; !done; batches++ {
			var err error
			if done, err = env.svc.store.Purge(ctx, purged); err != nil {
				t.Fatal(err)
			}
			if batches > 10 {
				t.Fatal("purge not done after 10 batches")
			}
		}
		if batches != 4 { // two of the first comment, one of the second, one of the article
			t.Errorf("purge took %d batches, want 4", batches)
		}
		for _, tg := range []target{first, second, {article: purged}} {
			if n, v, err := env.svc.store.count(ctx, tg); n != 0 || v != 0 || err != nil || rowsOf(t, db, tg) != 0 {
				t.Errorf("%s after the purge: count %d at version %d (%v), %d rows; want nothing", tg, n, v, err, rowsOf(t, db, tg))
			}
		}
		if n, _, _ := env.svc.store.count(ctx, neighbour); n != 2 || rowsOf(t, db, neighbour) != 2 {
			t.Errorf("neighbour: count %d, %d rows; want 2", n, rowsOf(t, db, neighbour))
		}
	})
}
