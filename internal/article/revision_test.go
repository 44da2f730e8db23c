package article

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// TestRevisions checks that every update keeps the title and content it replaced, by whom and when, a moderator's
// edit of someone else's article marked; that they list newest first, a page at a time; that a hidden article's
// show their source only to its writer and moderators; and that a delete takes them with it.
func TestRevisions(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := testHandler(t, db)
		const writer, moderator = 9, 11
		r := httpiotest.Call(httpiotest.As(h, writer), "POST", "/v1/articles", `{"title":"one","content":"first","boardId":7}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		id := httpiotest.DecodeJSON(t, r.Body).(map[string]any)["articleId"].(string)
		revisions := func(h http.Handler, query string) any {
			t.Helper()
			r := httpiotest.Call(h, "GET", "/v1/articles/"+id+"/revisions"+query, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			return httpiotest.DecodeJSON(t, r.Body)
		}
		if diff := cmp.Diff(any([]any{}), revisions(h, "")); diff != "" {
			t.Errorf("revisions of an article never edited (-want +got):\n%s", diff)
		}

		clock.Add(time.Second)
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, writer), "PUT", "/v1/articles/"+id,
			`{"title":"two","content":"second"}`), http.StatusOK)
		clock.Add(time.Second)
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.AsModerator(h, moderator), "PUT", "/v1/articles/"+id,
			`{"title":"three","content":"third"}`), http.StatusOK)
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, 12), "PUT", "/v1/articles/"+id, `{"title":"x","content":"x"}`),
			http.StatusForbidden, "FORBIDDEN")

		second := map[string]any{"revision": jsonNumber(2), "editorId": "11", "title": "two", "content": "second",
			"createdAt": "2026-01-02T03:04:07.006Z", "moderator": true}
		first := map[string]any{"revision": jsonNumber(1), "editorId": "9", "title": "one", "content": "first",
			"createdAt": "2026-01-02T03:04:06.006Z", "moderator": false}
		if diff := cmp.Diff(any([]any{second, first}), revisions(h, "")); diff != "" {
			t.Errorf("revisions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(any([]any{first}), revisions(h, "?pageSize=1&beforeRevision=2")); diff != "" {
			t.Errorf("revisions before 2 (-want +got):\n%s", diff)
		}
		httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v1/articles/"+id+"/revisions?beforeRevision=0", ""),
			http.StatusBadRequest, "INVALID_BEFORE_REVISION")
		httpiotest.WantError(t, httpiotest.Call(h, "GET", "/v1/articles/404/revisions", ""), http.StatusNotFound, "ARTICLE_NOT_FOUND")

		articleID, _ := strconv.ParseInt(id, 10, 64)
		svc, _, _ := newTestService(db)
		if err := svc.Handlers()[event.ArticleModerated](context.Background(), moderated(t, event.ArticleModeration{
			ArticleID: apijson.ID(articleID), BoardID: 7, Hidden: event.Removed, RemovedReason: "spam", ModerationVersion: 1})); err != nil {
			t.Fatal(err)
		}
		hidden := revisions(h, "").([]any)
		if got := hidden[0].(map[string]any); got["content"] != "" || got["title"] != nil {
			t.Errorf("a hidden article's revision reads %v to everyone", got)
		}
		if diff := cmp.Diff(any([]any{second, first}), revisions(httpiotest.As(h, writer), "")); diff != "" {
			t.Errorf("a hidden article's revisions to its writer (-want +got):\n%s", diff)
		}

		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, writer), "DELETE", "/v1/articles/"+id, ""), http.StatusNoContent)
		var left int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article_revision WHERE article_id = ?", articleID).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("%d revisions left after the delete", left)
		}
	})
}

// jsonNumber is n as a decoded body holds it.
func jsonNumber(n int64) any { return json.Number(strconv.FormatInt(n, 10)) }
