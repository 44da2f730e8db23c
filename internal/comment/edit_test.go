package comment

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"board/internal/event"
	"board/internal/existence/existencetest"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// httpPut edits comment id of version as h's principal.
func httpPut(h http.Handler, version, id, content string) httpiotest.Reply {
	body, err := json.Marshal(map[string]string{"content": content})
	if err != nil {
		panic(err)
	}
	return httpiotest.Call(h, "PUT", "/"+version+"/comments/"+id, string(body))
}

// httpRevisions lists comment id's revisions as h's principal, newest first.
func httpRevisions(t testing.TB, h http.Handler, version, id, query string) []map[string]any {
	t.Helper()
	r := httpiotest.Call(h, "GET", "/"+version+"/comments/"+id+"/revisions"+query, "")
	httpiotest.WantStatus(t, r, http.StatusOK)
	out := []map[string]any{}
	for _, v := range httpiotest.DecodeJSON(t, r.Body).([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

// TestHTTPEdit edits comments of both versions: the writer and a moderator may, each edit keeps what it replaced
// as a revision (a moderator's marked), the comment reads edited with its new modifiedAt, and COMMENT_UPDATED
// carries the new content and a higher commentVersion.
func TestHTTPEdit(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := httpHandler(t, db)
		const article, writer, other, moderator = 7, 9, 10, 11
		for _, version := range []string{"v1", "v2"} {
			var c map[string]any
			if version == "v1" {
				c = httpPostV1(t, h, article, writer, "", "first")
			} else {
				c = httpPostV2(t, h, article, writer, "", "first")
			}
			id := c["commentId"].(string)

			httpiotest.WantError(t, httpPut(httpiotest.As(h, other), version, id, "not yours"), http.StatusForbidden, "FORBIDDEN")
			httpiotest.WantError(t, httpPut(h, version, id, "anonymous"), http.StatusUnauthorized, "UNAUTHENTICATED")
			httpiotest.WantError(t, httpPut(httpiotest.As(h, writer), version, id, " "), http.StatusBadRequest, "INVALID_CONTENT")
			httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, writer), "PUT", "/"+version+"/comments/"+id, `{}`),
				http.StatusBadRequest, "MISSING_FIELD")
			httpiotest.WantError(t, httpPut(httpiotest.As(h, writer), version, "404", "missing"), http.StatusNotFound, "COMMENT_NOT_FOUND")
			if revs := httpRevisions(t, h, version, id, ""); len(revs) != 0 {
				t.Errorf("%s: refused edits kept revisions: %v", version, revs)
			}

			clock.Add(time.Minute)
			r := httpPut(httpiotest.As(h, writer), version, id, "second")
			httpiotest.WantStatus(t, r, http.StatusOK)
			edited := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
			if edited["content"] != "second" || edited["edited"] != true || edited["modifiedAt"] != "2026-01-02T03:05:05.006Z" ||
				edited["createdAt"] != httpCreatedAt {
				t.Errorf("%s: edited = %v", version, edited)
			}
			httpWantJSON(t, version+" GET after the edit", any(edited), httpGet(t, h, "/"+version+"/comments/"+id))
			// The same content again keeps no revision.
			httpiotest.WantStatus(t, httpPut(httpiotest.As(h, writer), version, id, "second"), http.StatusOK)

			clock.Add(time.Minute)
			httpiotest.WantStatus(t, httpPut(httpiotest.AsModerator(h, moderator), version, id, "third"), http.StatusOK)

			revs := httpRevisions(t, h, version, id, "")
			want := []map[string]any{
				{"revision": json.Number("2"), "editorId": httpStr(moderator), "content": "second", "createdAt": "2026-01-02T03:06:05.006Z", "moderator": true},
				{"revision": json.Number("1"), "editorId": httpStr(writer), "content": "first", "createdAt": "2026-01-02T03:05:05.006Z", "moderator": false},
			}
			httpWantJSON(t, version+" revisions", normalize(t, want), normalize(t, revs))
			if page := httpRevisions(t, h, version, id, "?pageSize=1&beforeRevision=2"); len(page) != 1 || page[0]["content"] != "first" {
				t.Errorf("%s: the page before revision 2 = %v, want revision 1", version, page)
			}
			httpiotest.WantError(t, httpiotest.Call(h, "GET", "/"+version+"/comments/"+id+"/revisions?pageSize=0", ""),
				http.StatusBadRequest, "INVALID_PAGE_SIZE")
			clock.Set(t0)
		}

		var updates []event.Comment
		for _, e := range outboxEvents(t, db) {
			if e.Type == event.CommentUpdated {
				updates = append(updates, e.Payload)
			}
		}
		if len(updates) != 4 {
			t.Fatalf("%d COMMENT_UPDATED events, want 4 (two edits of each version)", len(updates))
		}
		for i, u := range updates {
			wantContent, wantVersion := []string{"second", "third"}[i%2], int64(2+i%2)
			if u.Content != wantContent || u.CommentVersion != wantVersion || u.Deleted {
				t.Errorf("COMMENT_UPDATED %d: content %q version %d, want %q %d", i, u.Content, u.CommentVersion, wantContent, wantVersion)
			}
		}
	})
}

// normalize is v through JSON, so that values compare as decoded bodies do.
func normalize(t testing.TB, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return httpiotest.DecodeJSON(t, string(raw))
}

// TestHTTPEditRefused: a comment marked deleted is 409, a locked article's comments are edited by moderators only,
// and a comment of a deleted article is ARTICLE_NOT_FOUND.
func TestHTTPEditRefused(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article, writer, moderator = 5, 9, 11
		asWriter := httpiotest.As(f.h, writer)
		root := httpPostV1(t, f.h, article, writer, "", "root")["commentId"].(string)
		httpPostV1(t, f.h, article, writer, root, "reply")
		httpiotest.WantStatus(t, httpiotest.Call(asWriter, "DELETE", "/v1/comments/"+root, ""), http.StatusNoContent)
		httpiotest.WantError(t, httpPut(asWriter, "v1", root, "back"), http.StatusConflict, "COMMENT_DELETED")
		httpiotest.WantError(t, httpPut(httpiotest.AsModerator(f.h, moderator), "v1", root, "back"), http.StatusConflict, "COMMENT_DELETED")

		v2 := httpPostV2(t, f.h, article, writer, "", "v2")["commentId"].(string)
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, true, 1))
		httpiotest.WantError(t, httpPut(asWriter, "v2", v2, "while locked"), http.StatusForbidden, "LOCKED")
		httpiotest.WantStatus(t, httpPut(httpiotest.AsModerator(f.h, moderator), "v2", v2, "a moderator's note"), http.StatusOK)
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, false, 2))
		httpiotest.WantStatus(t, httpPut(asWriter, "v2", v2, "unlocked"), http.StatusOK)

		existencetest.Apply(t, f.reg, existencetest.Deleted(article, 2))
		httpiotest.WantError(t, httpPut(asWriter, "v2", v2, "after the article"), http.StatusNotFound, "ARTICLE_NOT_FOUND")
	})
}

// TestRevisionsGoWithTheComment: removing a comment, marking it deleted, and purging a deleted article's comments
// each take the comments' revisions with them.
func TestRevisionsGoWithTheComment(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article, purged, writer = 5, 6, 9
		asWriter := httpiotest.As(f.h, writer)
		edit := func(version, id string) {
			t.Helper()
			for i := range 2 {
				httpiotest.WantStatus(t, httpPut(asWriter, version, id, fmt.Sprintf("edit %d", i)), http.StatusOK)
			}
		}
		root := httpPostV1(t, f.h, article, writer, "", "root")["commentId"].(string)
		reply := httpPostV1(t, f.h, article, writer, root, "reply")["commentId"].(string)
		v2 := httpPostV2(t, f.h, article, writer, "", "v2")["commentId"].(string)
		for _, c := range [][2]string{{"v1", root}, {"v1", reply}, {"v2", v2}} {
			edit(c[0], c[1])
		}
		if n := rowsOf(t, db, "comment_revision", article); n != 6 {
			t.Fatalf("%d revisions, want 6", n)
		}
		httpiotest.WantStatus(t, httpiotest.Call(asWriter, "DELETE", "/v1/comments/"+root, ""), http.StatusNoContent) // marked deleted
		if revs := httpRevisions(t, f.h, "v1", root, ""); len(revs) != 0 {
			t.Errorf("a comment marked deleted kept its revisions: %v", revs)
		}
		httpiotest.WantStatus(t, httpiotest.Call(asWriter, "DELETE", "/v2/comments/"+v2, ""), http.StatusNoContent) // removed
		if n := rowsOf(t, db, "comment_revision", article); n != 2 {
			t.Errorf("%d revisions after two deletes, want the reply's 2", n)
		}

		existencetest.Apply(t, f.reg, existencetest.Created(purged, 1))
		for range 3 {
			edit("v2", httpPostV2(t, f.h, purged, writer, "", "c")["commentId"].(string))
		}
		existencetest.Apply(t, f.reg, existencetest.Deleted(purged, 2))
		if err := f.reg.PurgeQueued(context.Background(), f.store.Purge); err != nil {
			t.Fatal(err)
		}
		wantNothingLeft(t, db, purged)
		if n := rowsOf(t, db, "comment_revision", purged); n != 0 {
			t.Errorf("%d revisions of a purged article's comments left", n)
		}
	})
}

// TestHiddenCommentRevisions: a hidden comment's revisions show their content to its writer and moderators only.
func TestHiddenCommentRevisions(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article, writer, moderator = 5, 9, 11
		id := httpPostV2(t, f.h, article, writer, "", "first")["commentId"].(string)
		httpiotest.WantStatus(t, httpPut(httpiotest.As(f.h, writer), "v2", id, "second"), http.StatusOK)
		commentID, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, commentID, event.Removed, "spam", 1))
		for who, h := range map[string]http.Handler{"anonymous": f.h, "another user": httpiotest.As(f.h, 12)} {
			if revs := httpRevisions(t, h, "v2", id, ""); len(revs) != 1 || revs[0]["content"] != "" {
				t.Errorf("%s reads a hidden comment's revisions as %v, want one without content", who, revs)
			}
		}
		for who, h := range map[string]http.Handler{"its writer": httpiotest.As(f.h, writer), "a moderator": httpiotest.AsModerator(f.h, moderator)} {
			if revs := httpRevisions(t, h, "v2", id, ""); len(revs) != 1 || revs[0]["content"] != "first" {
				t.Errorf("%s reads a hidden comment's revisions as %v, want its content", who, revs)
			}
		}
	})
}
