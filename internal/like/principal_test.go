package like

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// TestRoutesActAsPathUser checks SPEC §2.1 on every like path: a like or unlike is the acting user's own, nobody's
// else, moderators included, and reads are public.
func TestRoutesActAsPathUser(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := testHandler(t, db, "")
		const user, other, moderator = 7, 8, 9
		for i, suffix := range []string{"", "/pessimistic-lock-1", "/pessimistic-lock-2", "/optimistic-lock"} {
			t.Run("path"+suffix, func(t *testing.T) {
				article := int64(70 + i)
				path := likePath(article, user) + suffix
				countPath := fmt.Sprintf("/v1/article-likes/articles/%d/count", article)
				wantStatus := func(what string, r httpiotest.Reply, status int) {
					t.Helper()
					if r.Status != status {
						t.Fatalf("%s: status = %d, want %d; body %s", what, r.Status, status, r.Body)
					}
				}
				wantCount := func(what, n string) {
					t.Helper()
					wantReply(t, what, httpiotest.Call(h, "GET", countPath, ""), 200, json.Number(n))
				}

				// Another user, or a moderator, may neither like nor unlike for user; nothing is written.
				for _, by := range []struct {
					name string
					h    http.Handler
				}{{"another user", httpiotest.As(h, other)}, {"a moderator", httpiotest.AsModerator(h, moderator)}} {
					wantError(t, by.name+" liking", httpiotest.Call(by.h, "POST", path, ""), 403, "FORBIDDEN")
				}
				wantError(t, "get after refused likes", httpiotest.Call(h, "GET", likePath(article, user), ""), 404, "LIKE_NOT_FOUND")
				wantCount("count after refused likes", "0")

				// Without a principal: 401 with a Bearer challenge; a bad path is still a 400 first.
				for _, method := range []string{"POST", "DELETE"} {
					r := httpiotest.Call(h, method, path, "")
					wantError(t, method+" without a principal", r, 401, "UNAUTHENTICATED")
					if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
						t.Errorf("%s without a principal: WWW-Authenticate = %q, want a Bearer challenge", method, got)
					}
					wantError(t, method+" of a bad path", httpiotest.Call(h, method, likePath(article, 0)+suffix, ""), 400, "INVALID_USER_ID")
				}

				// The user likes; nobody else unlikes it for them; the user does.
				wantStatus("own like", httpiotest.Call(httpiotest.As(h, user), "POST", path, ""), 201)
				wantError(t, "another user unliking", httpiotest.Call(httpiotest.As(h, other), "DELETE", path, ""), 403, "FORBIDDEN")
				wantError(t, "a moderator unliking", httpiotest.Call(httpiotest.AsModerator(h, moderator), "DELETE", path, ""), 403, "FORBIDDEN")
				wantStatus("get after refused unlikes", httpiotest.Call(h, "GET", likePath(article, user), ""), 200)
				wantCount("count after refused unlikes", "1")
				// A moderator likes for themselves like anyone.
				wantStatus("a moderator's own like", httpiotest.Call(httpiotest.AsModerator(h, moderator), "POST", likePath(article, moderator)+suffix, ""), 201)
				wantReply(t, "own unlike", httpiotest.Call(httpiotest.As(h, user), "DELETE", path, ""), 204, nil)
				wantCount("count at the end", "1")
			})
		}
	})
}
