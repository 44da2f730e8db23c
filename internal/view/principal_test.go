package view

import (
	"net/http"
	"strings"
	"testing"

	"board/internal/httpio/httpiotest"
)

// TestRoutesViewAsOneself checks who counts (see the package doc): a view is the signed-in reader's own, nobody
// else's, and a signed-out reader's counts nothing; none of the refused views takes a dedupe lock, so the user's own
// view still counts afterwards.
func TestRoutesViewAsOneself(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, e env) {
		h := handler(e.service(Config{}))
		const user, other, moderator = 7, 8, 9
		wantCount := func(want string) {
			t.Helper()
			wantBody(t, httpiotest.Call(h, "GET", countPath(article), ""), want)
		}

		wantCount("0")
		// Signed out: 401 with a Bearer challenge. A bad path is still a 400 first.
		r := httpiotest.Call(h, "POST", viewPath(article, user), "")
		httpiotest.WantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
		if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", got)
		}
		httpiotest.WantError(t, httpiotest.Call(h, "POST", "/v1/article-views/articles/1/users/x", ""), http.StatusBadRequest, "INVALID_USER_ID")
		// As another user, moderators included: 403.
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "POST", viewPath(article, user), ""), http.StatusForbidden, "FORBIDDEN")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.AsModerator(h, moderator), "POST", viewPath(article, user), ""), http.StatusForbidden, "FORBIDDEN")
		wantCount("0")
		if n := e.origin.Calls(); n != 0 {
			t.Errorf("refused views made %d article lookups, want none", n)
		}

		// The user's own view counts, once; the other user's own counts too.
		wantBody(t, httpiotest.Call(httpiotest.As(h, user), "POST", viewPath(article, user), ""), "1")
		wantBody(t, httpiotest.Call(httpiotest.As(h, user), "POST", viewPath(article, user), ""), "1")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, user), "POST", viewPath(article, other), ""), http.StatusForbidden, "FORBIDDEN")
		wantCount("1")
		wantBody(t, httpiotest.Call(httpiotest.As(h, other), "POST", viewPath(article, other), ""), "2")
		wantCount("2")
	})
}
