package comment

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// httpWriter is the writer of a comment as written on the wire.
func httpWriter(c map[string]any) int64 {
	id, err := strconv.ParseInt(c["writerId"].(string), 10, 64)
	if err != nil {
		panic(err)
	}
	return id
}

// asWriterOf serves every request to h as the writer of comment c.
func asWriterOf(h http.Handler, c map[string]any) http.Handler {
	return httpiotest.As(h, httpWriter(c))
}

// TestHTTPWhoMayWrite checks SPEC §2.1 on both versions' routes: writes need a principal, a comment is written as
// it, and only its writer or a moderator deletes it.
func TestHTTPWhoMayWrite(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := httpHandler(t, db)
		const writer, other, moderator = 9, 10, 11
		for _, version := range []string{"v1", "v2"} {
			t.Run(version, func(t *testing.T) {
				create := "/" + version + "/comments"
				item := func(c map[string]any) string { return create + "/" + c["commentId"].(string) }
				article := int64(1)
				if version == "v2" {
					article = 2
				}
				parentKey := "parentCommentId"
				parentOf := func(c map[string]any) string { return c["commentId"].(string) }
				if version == "v2" {
					parentKey, parentOf = "parentPath", func(c map[string]any) string { return c["path"].(string) }
				}
				post := func(h http.Handler, body string) httpiotest.Reply { return httpiotest.Call(h, "POST", create, body) }
				count := func() string { t.Helper(); return httpCount(t, h, article) }

				// A writerId left out is the acting user.
				r := post(httpiotest.As(h, writer), fmt.Sprintf(`{"articleId":%d,"content":"root"}`, article))
				httpiotest.WantStatus(t, r, http.StatusCreated)
				root := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
				if got := httpWriter(root); got != writer {
					t.Errorf("writerId left out: written by %d, want %d", got, writer)
				}
				// Naming anybody else is 403, moderators included, and writes nothing.
				for _, by := range []http.Handler{httpiotest.As(h, other), httpiotest.AsModerator(h, moderator)} {
					r = post(by, httpBody(article, writer, "as the writer", parentKey, parentOf(root)))
					httpiotest.WantError(t, r, http.StatusForbidden, "FORBIDDEN")
				}
				// Bad input is a 400 whoever sends it, before the writerId is weighed.
				r = post(httpiotest.As(h, other), fmt.Sprintf(`{"articleId":%d,"content":" ","writerId":%d}`, article, writer))
				httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_CONTENT")
				if n := count(); n != "1" {
					t.Errorf("count after refused creates = %s, want 1", n)
				}

				// Without a principal every write fails closed, a delete of a missing comment too.
				for _, c := range []struct{ method, target, body string }{
					{"POST", create, fmt.Sprintf(`{"articleId":%d,"content":"c"}`, article)},
					{"POST", create, httpBody(article, writer, "c", "", "")},
					{"DELETE", item(root), ""},
					{"DELETE", create + "/12345", ""},
				} {
					r := httpiotest.Call(h, c.method, c.target, c.body)
					httpiotest.WantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
					if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
						t.Errorf("%s %s: WWW-Authenticate = %q, want a Bearer challenge", c.method, c.target, got)
					}
				}

				// Another user's reply, then: the writer of the root may not delete it; 404 comes before 403.
				var reply map[string]any
				if version == "v1" {
					reply = httpPostV1(t, h, article, other, root["commentId"].(string), "reply")
				} else {
					reply = httpPostV2(t, h, article, other, root["path"].(string), "reply")
				}
				httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, writer), "DELETE", item(reply), ""), http.StatusForbidden, "FORBIDDEN")
				httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "DELETE", item(root), ""), http.StatusForbidden, "FORBIDDEN")
				httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "DELETE", create+"/12345", ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
				httpWantJSON(t, "root after another user's delete", any(root), httpGet(t, h, item(root)))
				httpWantJSON(t, "reply after another user's delete", any(reply), httpGet(t, h, item(reply)))

				// The writer deletes the root, which has a reply: marked deleted, still theirs, still only theirs.
				httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, writer), "DELETE", item(root), ""), http.StatusNoContent)
				httpWantJSON(t, "root deleted by its writer", any(httpDeleted(root)), httpGet(t, h, item(root)))
				httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "DELETE", item(root), ""), http.StatusForbidden, "FORBIDDEN")
				httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, writer), "DELETE", item(root), ""), http.StatusNoContent) // again: no change

				// A moderator deletes the reply, which takes the marked root with it.
				httpiotest.WantStatus(t, httpiotest.Call(httpiotest.AsModerator(h, moderator), "DELETE", item(reply), ""), http.StatusNoContent)
				httpiotest.WantError(t, httpiotest.Call(h, "GET", item(reply), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
				httpiotest.WantError(t, httpiotest.Call(h, "GET", item(root), ""), http.StatusNotFound, "COMMENT_NOT_FOUND")
				if n := count(); n != "0" {
					t.Errorf("count at the end = %s, want 0", n)
				}
			})
		}
	})
}
