package article

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// wantUnauthenticated checks a 401 answer as SPEC §2.1 words it.
func wantUnauthenticated(t *testing.T, what string, r httpiotest.Reply) {
	t.Helper()
	httpiotest.WantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("%s: WWW-Authenticate = %q, want a Bearer challenge", what, got)
	}
}

// TestRoutesWhoMayWrite checks SPEC §2.1 on the article routes: writes need a principal, create writes as it, and
// only the writer or a moderator update or delete.
func TestRoutesWhoMayWrite(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := testHandler(t, db)
		const writer, other, moderator = 9, 10, 11
		get := func(path string) any {
			t.Helper()
			r := httpiotest.Call(h, "GET", path, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			return httpiotest.DecodeJSON(t, r.Body)
		}

		// A writerId left out is the acting user; one naming the acting user is fine; anyone else is 403.
		r := httpiotest.Call(httpiotest.As(h, writer), "POST", "/v1/articles", `{"title":"t","content":"c","boardId":7}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		created := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		if got := created["writerId"]; got != strconv.Itoa(writer) {
			t.Errorf("writerId left out: written by %v, want %d", got, writer)
		}
		path := "/v1/articles/" + created["articleId"].(string)
		r = httpiotest.Call(httpiotest.As(h, writer), "POST", "/v1/articles", fmt.Sprintf(`{"title":"t","content":"c","boardId":7,"writerId":"%d"}`, writer))
		httpiotest.WantStatus(t, r, http.StatusCreated)
		r = httpiotest.Call(httpiotest.As(h, other), "POST", "/v1/articles", fmt.Sprintf(`{"title":"t","content":"c","boardId":7,"writerId":%d}`, writer))
		httpiotest.WantError(t, r, http.StatusForbidden, "FORBIDDEN")
		// Moderators write as themselves too.
		r = httpiotest.Call(httpiotest.AsModerator(h, moderator), "POST", "/v1/articles", fmt.Sprintf(`{"title":"t","content":"c","boardId":7,"writerId":%d}`, writer))
		httpiotest.WantError(t, r, http.StatusForbidden, "FORBIDDEN")
		// Bad input is a 400 whoever sends it, before the writerId is weighed.
		r = httpiotest.Call(httpiotest.As(h, other), "POST", "/v1/articles", fmt.Sprintf(`{"title":"","content":"c","boardId":7,"writerId":%d}`, writer))
		httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_TITLE")

		// Without a principal (a route the guard mistakenly left open) every write fails closed.
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/articles", `{"title":"t","content":"c","boardId":7}`},
			{"POST", "/v1/articles", fmt.Sprintf(`{"title":"t","content":"c","boardId":7,"writerId":%d}`, writer)},
			{"PUT", path, `{"title":"x","content":"x"}`},
			{"PUT", "/v1/articles/1", `{"title":"x","content":"x"}`}, // missing: still 401, not 404
			{"DELETE", path, ""},
		} {
			wantUnauthenticated(t, c.method+" "+c.path, httpiotest.Call(h, c.method, c.path, c.body))
		}

		// Someone else's article: 403, and it is unchanged.
		before := get(path)
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "PUT", path, `{"title":"x","content":"x"}`), http.StatusForbidden, "FORBIDDEN")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "DELETE", path, ""), http.StatusForbidden, "FORBIDDEN")
		if diff := cmp.Diff(before, get(path)); diff != "" {
			t.Errorf("after another user's PUT and DELETE (-before +after):\n%s", diff)
		}
		// Bad input before ownership; a missing article before ownership.
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "PUT", path, `{"title":" ","content":"x"}`), http.StatusBadRequest, "INVALID_TITLE")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "PUT", "/v1/articles/1", `{"title":"x","content":"x"}`), http.StatusNotFound, "ARTICLE_NOT_FOUND")
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(h, other), "DELETE", "/v1/articles/1", ""), http.StatusNotFound, "ARTICLE_NOT_FOUND")

		// The writer updates it; a moderator updates it (keeping its writer) and deletes it.
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, writer), "PUT", path, `{"title":"by writer","content":"x"}`), http.StatusOK)
		r = httpiotest.Call(httpiotest.AsModerator(h, moderator), "PUT", path, `{"title":"by moderator","content":"x"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		if got := httpiotest.DecodeJSON(t, r.Body).(map[string]any); got["title"] != "by moderator" || got["writerId"] != strconv.Itoa(writer) {
			t.Errorf("after a moderator's PUT: title %v, writerId %v; want by moderator, %d", got["title"], got["writerId"], writer)
		}
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.AsModerator(h, moderator), "DELETE", path, ""), http.StatusNoContent)
		httpiotest.WantError(t, httpiotest.Call(h, "GET", path, ""), http.StatusNotFound, "ARTICLE_NOT_FOUND")

		// The writer deletes their own.
		r = httpiotest.Call(httpiotest.As(h, other), "POST", "/v1/articles", `{"title":"t","content":"c","boardId":7}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		own := "/v1/articles/" + httpiotest.DecodeJSON(t, r.Body).(map[string]any)["articleId"].(string)
		httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, other), "DELETE", own, ""), http.StatusNoContent)
		if got := strings.TrimSpace(httpiotest.Call(h, "GET", "/v1/articles/boards/7/count", "").Body); got != "1" {
			t.Errorf("board count = %s, want 1 (the writer's second article)", got)
		}
	})
}
