package notification

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
)

type wireBookmark struct {
	TargetType string `json:"targetType"`
	TargetID   string `json:"targetId"`
	ArticleID  string `json:"articleId"`
	CreatedAt  string `json:"createdAt"`
	Title      string `json:"title"`
	Excerpt    string `json:"excerpt"`
}

type bookmarkPage struct {
	Bookmarks  []wireBookmark `json:"bookmarks"`
	NextCursor string         `json:"nextCursor"`
}

// bookmark PUTs user's bookmark of a target and returns it.
func (f *fixture) bookmark(user int64, target string) wireBookmark {
	f.t.Helper()
	r := f.call(user, "PUT", "/v1/bookmarks/"+target, "")
	httpiotest.WantStatus(f.t, r, http.StatusOK)
	var b wireBookmark
	decode(f.t, r.Body, &b)
	return b
}

// bookmarks GETs all of user's bookmarks through pages of pageSize, as "type/id title|excerpt", newest first.
func (f *fixture) bookmarks(user int64, pageSize int) []string {
	f.t.Helper()
	var out []string
	for cursor, pages := "", 0; ; pages++ {
		r := f.call(user, "GET", fmt.Sprintf("/v1/bookmarks?pageSize=%d&cursor=%s", pageSize, cursor), "")
		httpiotest.WantStatus(f.t, r, http.StatusOK)
		var p bookmarkPage
		decode(f.t, r.Body, &p)
		// A page is short only where many gone targets end its reading early (bookmarkRounds).
		if len(p.Bookmarks) > pageSize {
			f.t.Fatalf("a page of %d: %s", pageSize, r.Body)
		}
		for _, b := range p.Bookmarks {
			if !httpiotest.TimeFormat.MatchString(b.CreatedAt) {
				f.t.Errorf("createdAt %q", b.CreatedAt)
			}
			out = append(out, b.TargetType+"/"+b.TargetID+" "+b.Title+"|"+b.Excerpt)
		}
		if p.NextCursor == "" {
			return out
		}
		if pages > 100 {
			f.t.Fatal("the pages do not end")
		}
		cursor = p.NextCursor
	}
}

func articleWithText(id, writer int64, title, text string) event.Article {
	a := articleEvent(id, writer, title)
	a.Content, a.ContentText = text, text
	return a
}

func commentWithText(id, articleID, writer int64, path, text string) event.Comment {
	c := commentV2(id, articleID, writer, path)
	c.Content, c.ContentText = text, text
	return c
}

func wantList(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Bookmarks of articles and comments: a second PUT keeps the first bookmark, the list pages newest first through
// its cursor with each target's title and excerpt, DELETE removes one (again: nothing), and nobody sees another's.
func TestBookmarks(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		for i := int64(1); i <= 4; i++ {
			f.deliver(event.ArticleCreated, articleWithText(i, author, fmt.Sprintf("Title %d", i), fmt.Sprintf("Text  of\n article %d", i)))
		}
		f.deliver(event.CommentCreated, commentWithText(11, 1, replier, "00000", "A comment"))

		first := f.bookmark(other, "article/1")
		if first.TargetType != "article" || first.TargetID != "1" || first.ArticleID != "1" || !httpiotest.TimeFormat.MatchString(first.CreatedAt) {
			t.Errorf("PUT article/1: %+v", first)
		}
		time.Sleep(2 * time.Millisecond) // a later createdAt, were a second bookmark made
		if again := f.bookmark(other, "article/1"); again != first {
			t.Errorf("PUT article/1 again: %+v, want %+v", again, first)
		}
		if c := f.bookmark(other, "comment/11"); c.TargetType != "comment" || c.TargetID != "11" || c.ArticleID != "1" {
			t.Errorf("PUT comment/11: %+v", c)
		}
		for _, a := range []string{"article/2", "article/3", "article/4"} {
			f.bookmark(other, a)
		}
		f.bookmark(replier, "article/2")

		want := []string{"article/4 Title 4|Text of article 4", "article/3 Title 3|Text of article 3",
			"article/2 Title 2|Text of article 2", "comment/11 Title 1|A comment", "article/1 Title 1|Text of article 1"}
		for _, size := range []int{1, 2, 5, 100} {
			wantList(t, fmt.Sprintf("pages of %d", size), f.bookmarks(other, size), want...)
		}
		wantList(t, "replier's", f.bookmarks(replier, 20), "article/2 Title 2|Text of article 2")

		r := f.call(other, "GET", "/v1/bookmarks/comment/11", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		var got wireBookmark
		decode(t, r.Body, &got)
		if got.TargetID != "11" || got.ArticleID != "1" {
			t.Errorf("GET comment/11: %s", r.Body)
		}
		httpiotest.WantError(t, f.call(replier, "GET", "/v1/bookmarks/comment/11", ""), http.StatusNotFound, "BOOKMARK_NOT_FOUND")
		httpiotest.WantError(t, f.call(other, "GET", "/v1/bookmarks/article/11", ""), http.StatusNotFound, "BOOKMARK_NOT_FOUND")

		for range 2 {
			httpiotest.WantStatus(t, f.call(other, "DELETE", "/v1/bookmarks/article/3", ""), http.StatusNoContent)
		}
		httpiotest.WantStatus(t, f.call(other, "DELETE", "/v1/bookmarks/article/999", ""), http.StatusNoContent)
		httpiotest.WantError(t, f.call(other, "GET", "/v1/bookmarks/article/3", ""), http.StatusNotFound, "BOOKMARK_NOT_FOUND")
		wantList(t, "after the delete", f.bookmarks(other, 2), want[0], want[2], want[3], want[4])

		// A cursor is good only for its own list.
		r = f.call(other, "GET", "/v1/bookmarks?pageSize=1", "")
		var p bookmarkPage
		decode(t, r.Body, &p)
		httpiotest.WantError(t, f.call(replier, "GET", "/v1/bookmarks?cursor="+p.NextCursor, ""), http.StatusBadRequest, "INVALID_CURSOR")

		// An edit reaches the excerpt.
		f.deliver(event.CommentUpdated, commentWithText(11, 1, replier, "00000", "Edited"))
		f.deliver(event.ArticleUpdated, articleWithText(2, author, "Title 2b", "New text"))
		wantList(t, "after the edits", f.bookmarks(other, 100), want[0], "article/2 Title 2b|New text", "comment/11 Title 1|Edited", want[4])
	})
}

// A bookmark whose target is deleted or hidden drops out of the list, and the list reads on past it; a restored
// target comes back. A comment drops out with its article.
func TestBookmarksOfTargetsGone(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		for i := int64(1); i <= 4; i++ {
			f.deliver(event.ArticleCreated, articleWithText(i, author, fmt.Sprintf("T%d", i), "x"))
		}
		f.deliver(event.CommentCreated, commentWithText(11, 1, replier, "00000", "on 1"))
		f.deliver(event.CommentCreated, commentWithText(21, 2, replier, "00000", "on 2"))
		f.deliver(event.CommentCreated, commentWithText(22, 2, replier, "00001", "also on 2"))
		for _, target := range []string{"article/1", "comment/11", "article/2", "comment/21", "comment/22", "article/3", "article/4"} {
			f.bookmark(other, target)
		}
		all := []string{"article/4 T4|x", "article/3 T3|x", "comment/22 T2|also on 2", "comment/21 T2|on 2", "article/2 T2|x",
			"comment/11 T1|on 1", "article/1 T1|x"}
		wantList(t, "all", f.bookmarks(other, 2), all...)

		f.deliver(event.ArticleDeleted, articleEvent(1, author, "T1"))
		hide := func(hidden event.Hidden) event.ArticleModeration {
			return event.ArticleModeration{ArticleID: 2, BoardID: 1, WriterID: author, Hidden: hidden, Action: event.ActionHide,
				ModeratorID: mod, ModeratedAt: apijson.Time(t0)}
		}
		f.deliver(event.ArticleModerated, hide(event.Removed))
		f.deliver(event.CommentModerated, event.CommentModeration{CommentID: 11, ArticleID: 1, BoardID: 1, WriterID: replier,
			Hidden: event.Removed, Action: event.ActionHide, ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		for _, size := range []int{1, 2, 3} {
			wantList(t, fmt.Sprintf("after the delete and the hide, pages of %d", size), f.bookmarks(other, size), all[0], all[1])
		}

		f.deliver(event.ArticleModerated, hide(event.Visible))
		f.deliver(event.CommentModerated, event.CommentModeration{CommentID: 22, ArticleID: 2, BoardID: 1, WriterID: replier,
			Hidden: event.Pending, Action: event.ActionHide, ModeratedAt: apijson.Time(t0)})
		wantList(t, "after the restore and a comment's hide", f.bookmarks(other, 1), all[0], all[1], all[3], all[4])

		// Gone or hidden is not found for a new bookmark, and neither is what never was.
		for _, target := range []string{"article/1", "comment/11", "comment/22", "article/404", "comment/404"} {
			httpiotest.WantError(t, f.call(other, "PUT", "/v1/bookmarks/"+target, ""), http.StatusNotFound, "TARGET_NOT_FOUND")
		}
		f.deliver(event.ArticleModerated, hide(event.Removed))
		httpiotest.WantError(t, f.call(replier, "PUT", "/v1/bookmarks/article/2", ""), http.StatusNotFound, "TARGET_NOT_FOUND")
		httpiotest.WantError(t, f.call(replier, "PUT", "/v1/bookmarks/comment/21", ""), http.StatusNotFound, "TARGET_NOT_FOUND")
	})
}

// An article no event has told of yet is looked up at the article service; bad input is 400, no token 401.
func TestBookmarkTargetsAndInput(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.origin.add(7, author, "Looked up")
		if got := f.bookmark(other, "article/7"); got.ArticleID != "7" {
			t.Errorf("PUT a looked-up article: %+v", got)
		}
		wantList(t, "a looked-up article", f.bookmarks(other, 20), "article/7 Looked up|")

		f.origin.status.Store(http.StatusServiceUnavailable)
		httpiotest.WantError(t, f.call(other, "PUT", "/v1/bookmarks/article/8", ""), http.StatusServiceUnavailable, "ARTICLE_SERVICE_UNAVAILABLE")
		f.origin.status.Store(0)

		for target, code := range map[string]string{"board/7": "INVALID_TARGET_TYPE", "Article/7": "INVALID_TARGET_TYPE",
			"article/x": "INVALID_TARGET_ID", "article/-1": "INVALID_TARGET_ID"} {
			for _, method := range []string{"PUT", "GET", "DELETE"} {
				httpiotest.WantError(t, f.call(other, method, "/v1/bookmarks/"+target, ""), http.StatusBadRequest, code)
			}
		}
		for _, q := range []string{"pageSize=0", "pageSize=101", "pageSize=x"} {
			httpiotest.WantError(t, f.call(other, "GET", "/v1/bookmarks?"+q, ""), http.StatusBadRequest, "INVALID_PAGE_SIZE")
		}
		for _, c := range []string{"x", "!!", cursor(other, 0), cursor(other, -5)} {
			httpiotest.WantError(t, f.call(other, "GET", "/v1/bookmarks?cursor="+c, ""), http.StatusBadRequest, "INVALID_CURSOR")
		}
		for _, method := range []string{"PUT", "GET", "DELETE"} {
			httpiotest.WantError(t, f.call(0, method, "/v1/bookmarks/article/7", ""), http.StatusUnauthorized, "UNAUTHENTICATED")
		}
		httpiotest.WantError(t, f.call(0, "GET", "/v1/bookmarks", ""), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}

func TestRefExcerpt(t *testing.T) {
	long := strings.Repeat("é", excerptRunes-2) + " abc"
	for in, want := range map[string]string{
		"":                                "",
		"  one\n\ttwo  ":                  "one two",
		long:                              strings.Repeat("é", excerptRunes-2) + " a…",
		strings.Repeat("a", excerptRunes): strings.Repeat("a", excerptRunes),
		strings.Repeat("é", excerptRunes-1) + " b": strings.Repeat("é", excerptRunes-1) + "…",
	} {
		if got := refExcerpt(in); got != want {
			t.Errorf("refExcerpt(%q) = %q, want %q", in, got, want)
		}
	}
}

// commentOrigin fakes the comment service's GET /v2/comments/{id} and /v1/comments/{id}.
func commentOrigin(t *testing.T, status *atomic.Int64, comments map[string]map[string]any) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := status.Load(); s != 0 {
			http.Error(w, `{"code":"DATABASE_UNAVAILABLE","message":"down"}`, int(s))
			return
		}
		c, ok := comments[r.URL.Path]
		if !ok {
			http.Error(w, `{"code":"COMMENT_NOT_FOUND","message":"no such comment"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A comment no event has told of yet is looked up at the comment service, v2 and v1; its create, read later, still
// notifies.
func TestBookmarkOfACommentLookedUp(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		var status atomic.Int64
		origin := commentOrigin(t, &status, map[string]map[string]any{
			"/v2/comments/31": {"commentId": "31", "articleId": "1", "writerId": fmt.Sprint(replier), "path": "00000", "contentText": "Looked up"},
			"/v1/comments/32": {"commentId": "32", "articleId": "1", "writerId": fmt.Sprint(replier), "parentCommentId": "32", "contentText": "v1"},
			"/v2/comments/33": {"commentId": "33", "articleId": "1", "writerId": fmt.Sprint(replier), "path": "00001", "deleted": true},
			"/v2/comments/34": {"commentId": "34", "articleId": "1", "writerId": fmt.Sprint(replier), "path": "00002", "hidden": "removed"},
		})
		f := newFixture(t, db, b, Config{CommentOrigin: origin})
		f.deliver(event.ArticleCreated, articleWithText(1, author, "T1", "x"))
		for _, id := range []string{"31", "32"} {
			if got := f.bookmark(other, "comment/"+id); got.ArticleID != "1" {
				t.Errorf("PUT comment/%s: %+v", id, got)
			}
		}
		for _, id := range []string{"33", "34", "35"} {
			httpiotest.WantError(t, f.call(other, "PUT", "/v1/bookmarks/comment/"+id, ""), http.StatusNotFound, "TARGET_NOT_FOUND")
		}
		wantList(t, "looked-up comments", f.bookmarks(other, 20), "comment/32 T1|v1", "comment/31 T1|Looked up")

		f.deliver(event.CommentCreated, commentWithText(31, 1, replier, "00000", "Looked up"))
		if got := briefs(f.list(author)); len(got) != 1 || got[0].Kind != ArticleComment || got[0].Comment != "31" {
			t.Errorf("the article's writer after the looked-up comment's create: %+v", got)
		}

		status.Store(http.StatusServiceUnavailable)
		httpiotest.WantError(t, f.call(other, "PUT", "/v1/bookmarks/comment/36", ""), http.StatusServiceUnavailable, "COMMENT_SERVICE_UNAVAILABLE")
	})
}

// TestBookmarksPastManyGone: a list reads past gone targets for bookmarkRounds batches at most, then answers a short
// page with a cursor that goes on from there, and the pages still reach every bookmark that shows.
func TestBookmarksPastManyGone(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		const gone = 40 // more than bookmarkRounds batches of a page of 1 (2 bookmarks each) read
		for i := int64(1); i <= gone+1; i++ {
			f.deliver(event.ArticleCreated, articleWithText(i, author, fmt.Sprintf("Title %d", i), "x"))
			f.bookmark(other, fmt.Sprintf("article/%d", i))
		}
		for i := int64(2); i <= gone+1; i++ {
			f.deliver(event.ArticleDeleted, articleWithText(i, author, fmt.Sprintf("Title %d", i), "x"))
		}
		r := f.call(other, "GET", "/v1/bookmarks?pageSize=1", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		var first bookmarkPage
		decode(t, r.Body, &first)
		if len(first.Bookmarks) != 0 || first.NextCursor == "" {
			t.Errorf("the first page past %d gone targets: %s, want none and a cursor", gone, r.Body)
		}
		wantList(t, "pages of 1", f.bookmarks(other, 1), "article/1 Title 1|x")
	})
}
