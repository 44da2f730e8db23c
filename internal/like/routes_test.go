package like

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// testHandler is the like service's whole port over db, with a fixed clock, fake ids and the given default strategy,
// and the service behind it with its record of articles.
func testHandler(t testing.TB, db *sqldb.DB, strategy Strategy) (http.Handler, testEnv) {
	t.Helper()
	env := newTestEnv(t, db, strategy)
	return httpiotest.Handler("like", Routes(env.svc, httpiotest.Logger)), env
}

// wantReply checks an answer's status and exact JSON body, naming the step that made it.
func wantReply(t *testing.T, what string, r httpiotest.Reply, status int, body any) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status = %d, want %d; body %s", what, r.Status, status, r.Body)
	}
	if status == http.StatusNoContent {
		if r.Body != "" {
			t.Errorf("%s: 204 with body %q", what, r.Body)
		}
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: Content-Type = %q, want application/json", what, r.Header.Get("Content-Type"))
	}
	if diff := cmp.Diff(body, httpiotest.DecodeJSON(t, r.Body)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

// wantError checks an error answer's status and code, naming the step that made it.
func wantError(t *testing.T, what string, r httpiotest.Reply, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status = %d, want %d; body %s", what, r.Status, status, r.Body)
	}
	if got := httpiotest.ErrorCode(t, r); got != code {
		t.Errorf("%s: code = %q, want %q", what, got, code)
	}
}

func likeMap(id, article, user int64) map[string]any {
	return map[string]any{"articleLikeId": strconv.FormatInt(id, 10), "articleId": strconv.FormatInt(article, 10),
		"userId": strconv.FormatInt(user, 10), "createdAt": "2026-01-02T03:04:05.006Z"}
}

func likePath(article, user int64) string {
	return fmt.Sprintf("/v1/article-likes/articles/%d/users/%d", article, user)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		// The default is configured, not fixed: the plain paths must use it.
		h, env := testHandler(t, db, PessimisticLock2)
		svc := env.svc
		suffixes := map[string]Strategy{"": PessimisticLock2}
		for _, st := range Strategies {
			suffixes["/"+string(st)] = st
		}
		id := int64(firstID)
		for i, suffix := range []string{"", "/pessimistic-lock-1", "/pessimistic-lock-2", "/optimistic-lock"} {
			t.Run("path"+suffix, func(t *testing.T) {
				article, user := int64(10+i), int64(77)
				st := suffixes[suffix]
				before := svc.Stats(st).Writes

				wantReply(t, "count before", httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-likes/articles/%d/count", article), ""), 200, json.Number("0"))
				wantError(t, "get before", httpiotest.Call(h, "GET", likePath(article, user), ""), 404, "LIKE_NOT_FOUND")
				wantError(t, "unlike before", httpiotest.Call(httpiotest.As(h, user), "DELETE", likePath(article, user)+suffix, ""), 404, "LIKE_NOT_FOUND")

				want := likeMap(id, article, user)
				wantReply(t, "like", httpiotest.Call(httpiotest.As(h, user), "POST", likePath(article, user)+suffix, ""), 201, any(want))
				id++
				wantReply(t, "get", httpiotest.Call(h, "GET", likePath(article, user), ""), 200, any(want))
				wantError(t, "second like", httpiotest.Call(httpiotest.As(h, user), "POST", likePath(article, user)+suffix, ""), 409, "ALREADY_LIKED")
				id++ // the refused like took an id
				wantReply(t, "other user", httpiotest.Call(httpiotest.As(h, user+1), "POST", likePath(article, user+1)+suffix, ""), 201, any(likeMap(id, article, user+1)))
				id++
				wantReply(t, "count", httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-likes/articles/%d/count", article), ""), 200, json.Number("2"))

				wantReply(t, "unlike", httpiotest.Call(httpiotest.As(h, user), "DELETE", likePath(article, user)+suffix, ""), 204, nil)
				wantError(t, "second unlike", httpiotest.Call(httpiotest.As(h, user), "DELETE", likePath(article, user)+suffix, ""), 404, "LIKE_NOT_FOUND")
				wantError(t, "get after unlike", httpiotest.Call(h, "GET", likePath(article, user), ""), 404, "LIKE_NOT_FOUND")
				wantReply(t, "count after", httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-likes/articles/%d/count", article), ""), 200, json.Number("1"))

				// The path picked the strategy: its own counter saw the three writes.
				if got := svc.Stats(st).Writes - before; got != 3 {
					t.Errorf("%s wrote %d times through %q, want 3", st, got, "…"+suffix)
				}
			})
		}
	})
}

// TestRoutesCountETag checks, through every strategy's path, that the count's ETag is the articleLikeCountVersion
// of the article's latest like event, and that refused likes and unlikes move neither.
func TestRoutesCountETag(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := testHandler(t, db, "")
		for i, suffix := range []string{"", "/pessimistic-lock-1", "/pessimistic-lock-2", "/optimistic-lock"} {
			t.Run("path"+suffix, func(t *testing.T) {
				article := int64(30 + i)
				countPath := fmt.Sprintf("/v1/article-likes/articles/%d/count", article)
				// wantVersion checks that the article's events end at version and that the count answers with it.
				wantVersion := func(after string, version int64) {
					t.Helper()
					var latest event.Like // zero: never liked
					for _, e := range outboxOf(t, db, article) {
						if e.Payload.ArticleLikeCountVersion > latest.ArticleLikeCountVersion {
							latest = e.Payload
						}
					}
					if latest.ArticleLikeCountVersion != version {
						t.Fatalf("after %s: latest event carries version %d, want %d", after, latest.ArticleLikeCountVersion, version)
					}
					r := httpiotest.Call(h, "GET", countPath, "")
					wantReply(t, "count after "+after, r, 200, json.Number(strconv.FormatInt(latest.ArticleLikeCount, 10)))
					if got, want := r.Header.Get("ETag"), `"`+strconv.FormatInt(version, 10)+`"`; got != want {
						t.Errorf("after %s: GET %s ETag = %q, want %q (the event's articleLikeCountVersion)", after, countPath, got, want)
					}
				}
				call := func(method string, user int64, status int) {
					t.Helper()
					if r := httpiotest.Call(httpiotest.As(h, user), method, likePath(article, user)+suffix, ""); r.Status != status {
						t.Fatalf("%s like of user %d: status = %d, want %d; body %s", method, user, r.Status, status, r.Body)
					}
				}

				wantVersion("nothing", 0)
				call("DELETE", 1, 404)
				wantVersion("an unlike of an article never liked", 0)
				call("POST", 1, 201)
				wantVersion("a like", 1)
				call("POST", 1, 409)
				wantVersion("a refused like", 1)
				call("POST", 2, 201)
				wantVersion("another user's like", 2)
				call("DELETE", 1, 204)
				wantVersion("an unlike", 3)
				call("DELETE", 1, 404)
				wantVersion("a refused unlike", 3)
				call("DELETE", 2, 204)
				wantVersion("the last unlike", 4) // the count is back to 0, its version is not
			})
		}
	})
}

func TestRoutesRejectBadInput(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	h, env := testHandler(t, db, "")
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/v1/article-likes/articles/abc/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-likes/articles/-1/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-likes/articles/1.5/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-likes/articles/9223372036854775808/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-likes/articles/1/users/x", 400, "INVALID_USER_ID"},
		{"POST", "/v1/article-likes/articles/1/users/%20", 400, "INVALID_USER_ID"},
		{"POST", "/v1/article-likes/articles/0/users/1", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-likes/articles/1/users/0/optimistic-lock", 400, "INVALID_USER_ID"},
		{"DELETE", "/v1/article-likes/articles/1/users/x/pessimistic-lock-2", 400, "INVALID_USER_ID"},
		{"DELETE", "/v1/article-likes/articles/0/users/1", 400, "INVALID_ARTICLE_ID"},
		{"DELETE", "/v1/article-likes/articles/1/users/0/optimistic-lock", 400, "INVALID_USER_ID"},
		{"GET", "/v1/article-likes/articles/x/users/1", 400, "INVALID_ARTICLE_ID"},
		{"GET", "/v1/article-likes/articles/x/count", 400, "INVALID_ARTICLE_ID"},
		{"GET", "/v1/article-likes/articles/-5/count", 400, "INVALID_ARTICLE_ID"},
		{"POST", "/v1/article-likes/articles/1/users/1/no-lock", 404, "NOT_FOUND"},
		{"POST", "/v1/article-likes/articles/1/users", 404, "NOT_FOUND"},
		{"GET", "/v1/article-likes/articles/1/users/1/optimistic-lock", 405, "METHOD_NOT_ALLOWED"},
		{"PUT", "/v1/article-likes/articles/1/users/1", 405, "METHOD_NOT_ALLOWED"},
		{"POST", "/v1/article-likes/articles/1/count", 405, "METHOD_NOT_ALLOWED"},
		{"POST", "/v1/comment-likes/comments/abc/users/1", 400, "INVALID_COMMENT_ID"},
		{"POST", "/v1/comment-likes/comments/0/users/1/pessimistic-lock-1", 400, "INVALID_COMMENT_ID"},
		{"DELETE", "/v1/comment-likes/comments/0/users/1", 400, "INVALID_COMMENT_ID"},
		{"DELETE", "/v1/comment-likes/comments/1/users/0/optimistic-lock", 400, "INVALID_USER_ID"},
		{"GET", "/v1/comment-likes/comments/-1/users/1", 400, "INVALID_COMMENT_ID"},
		{"GET", "/v1/comment-likes/comments/x/count", 400, "INVALID_COMMENT_ID"},
		{"GET", "/v1/comment-likes/comments/0/count", 404, "COMMENT_NOT_FOUND"},
		{"POST", "/v1/comment-likes/comments/1/users/1/no-lock", 404, "NOT_FOUND"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			wantError(t, tc.method+" "+tc.path, httpiotest.Call(h, tc.method, tc.path, ""), tc.status, tc.code)
		})
	}
	wantReply(t, "count of article 0", httpiotest.Call(h, "GET", "/v1/article-likes/articles/0/count", ""), 200, json.Number("0"))
	// Ids are canonical: a leading zero or a sign would give one article two addresses.
	for _, id := range []string{"01", "+1"} {
		wantError(t, "count of article "+id, httpiotest.Call(h, "GET", "/v1/article-likes/articles/"+id+"/count", ""), 400, "INVALID_ARTICLE_ID")
	}
	if n := env.origin.Calls() + env.commentOrigin.calls.Load(); n != 0 {
		t.Errorf("bad requests made %d lookups at the article and comment services, want none", n)
	}
}

// TestRoutesConcurrentDuplicates sends 20 likes by one user at once through each path: one 201, nineteen 409s.
func TestRoutesConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := testHandler(t, db, "")
		for i, suffix := range []string{"", "/pessimistic-lock-1", "/pessimistic-lock-2", "/optimistic-lock"} {
			article := int64(50 + i)
			statuses := map[int]int{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 20 {
				wg.Go(func() {
					r := httpiotest.Call(httpiotest.As(h, 9), "POST", likePath(article, 9)+suffix, "")
					mu.Lock()
					statuses[r.Status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if diff := cmp.Diff(map[int]int{201: 1, 409: 19}, statuses); diff != "" {
				t.Errorf("path %q: statuses (-want +got):\n%s", suffix, diff)
			}
			wantReply(t, "count", httpiotest.Call(h, "GET", fmt.Sprintf("/v1/article-likes/articles/%d/count", article), ""), 200, json.Number("1"))
		}
	})
}
