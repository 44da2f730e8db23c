package article

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// testHandler is the article service's whole port over db, with a fake clock and fake ids.
func testHandler(t testing.TB, db *sqldb.DB) (http.Handler, *snowflaketest.Clock) {
	t.Helper()
	svc, _, clock := newTestService(db)
	return httpiotest.Handler("article", Routes(svc, httpiotest.Logger)), clock
}

// articleMap is the exact JSON object an article is written as, its content a paragraph of plain words.
func articleMap(id int64, title, content string, board, writer int64, created, modified string) map[string]any {
	return map[string]any{"articleId": strconv.FormatInt(id, 10), "title": title, "content": content,
		"contentHtml": "<p>" + content + "</p>\n", "contentText": content,
		"boardId": strconv.FormatInt(board, 10), "writerId": strconv.FormatInt(writer, 10),
		"createdAt": created, "modifiedAt": modified}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, clock := testHandler(t, db)
		const created = "2026-01-02T03:04:05.006Z"
		id := int64(firstID)

		// Create, with ids as a number and as a string, and unknown fields.
		r := httpiotest.Call(httpiotest.As(h, 9), "POST", "/v1/articles", `{"title":"hello","content":"world","writerId":"9","boardId":7,"extra":{"x":[1]}}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		want := articleMap(id, "hello", "world", 7, 9, created, created)
		if diff := cmp.Diff(any(want), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("POST (-want +got):\n%s", diff)
		}
		if !httpiotest.TimeFormat.MatchString(want["createdAt"].(string)) {
			t.Fatalf("bad test time %s", want["createdAt"])
		}

		r = httpiotest.Call(h, "GET", "/v1/articles/"+strconv.FormatInt(id, 10), "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if diff := cmp.Diff(any(want), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("GET (-want +got):\n%s", diff)
		}

		clock.Add(time.Second)
		r = httpiotest.Call(httpiotest.As(h, 9), "PUT", "/v1/articles/"+strconv.FormatInt(id, 10), `{"title":"가나다","content":"new","boardId":"999","more":1}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		want = articleMap(id, "가나다", "new", 7, 9, created, "2026-01-02T03:04:06.006Z")
		if diff := cmp.Diff(any(want), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("PUT (-want +got):\n%s", diff)
		}
		r = httpiotest.Call(h, "GET", "/v1/articles/"+strconv.FormatInt(id, 10), "")
		if diff := cmp.Diff(any(want), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("GET after PUT (-want +got):\n%s", diff)
		}

		// Two more on board 7, one on board 8.
		for _, body := range []string{
			`{"title":"b","content":"c","writerId":1,"boardId":"7"}`,
			`{"title":"c","content":"c","writerId":1,"boardId":8}`,
			`{"boardId":7,"writerId":"1","content":"c","title":"d"}`,
		} {
			httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, 1), "POST", "/v1/articles", body), http.StatusCreated)
		}

		r = httpiotest.Call(h, "GET", "/v1/articles?boardId=7&page=1&pageSize=2", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		got := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		if diff := cmp.Diff([]string{"articleCount", "articles"}, sortedKeys(got)); diff != "" {
			t.Errorf("list keys (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(json.Number("3"), got["articleCount"]); diff != "" {
			t.Errorf("articleCount (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{strconv.FormatInt(id+3, 10), strconv.FormatInt(id+1, 10)}, ids(t, got["articles"])); diff != "" {
			t.Errorf("page 1 ids (-want +got):\n%s", diff)
		}
		r = httpiotest.Call(h, "GET", "/v1/articles?boardId=7&page=2&pageSize=2", "")
		if diff := cmp.Diff([]string{strconv.FormatInt(id, 10)}, ids(t, httpiotest.DecodeJSON(t, r.Body).(map[string]any)["articles"])); diff != "" {
			t.Errorf("page 2 ids (-want +got):\n%s", diff)
		}
		// Defaults: page 1, 30 per page.
		r = httpiotest.Call(h, "GET", "/v1/articles?boardId=7", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if n := len(httpiotest.DecodeJSON(t, r.Body).(map[string]any)["articles"].([]any)); n != 3 {
			t.Errorf("default page: %d articles, want 3", n)
		}
		// Full shape of a listed article.
		r = httpiotest.Call(h, "GET", "/v1/articles?boardId=7&page=2&pageSize=2", "")
		if diff := cmp.Diff(any(map[string]any{"articles": []any{want}, "articleCount": json.Number("3")}), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("list page (-want +got):\n%s", diff)
		}

		r = httpiotest.Call(h, "GET", "/v1/articles/infinite-scroll?boardId=7&pageSize=2", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if diff := cmp.Diff([]string{strconv.FormatInt(id+3, 10), strconv.FormatInt(id+1, 10)}, ids(t, httpiotest.DecodeJSON(t, r.Body))); diff != "" {
			t.Errorf("scroll ids (-want +got):\n%s", diff)
		}
		r = httpiotest.Call(h, "GET", fmt.Sprintf("/v1/articles/infinite-scroll?boardId=7&pageSize=2&lastArticleId=%d", id+1), "")
		if diff := cmp.Diff(any([]any{want}), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("scroll after cursor (-want +got):\n%s", diff)
		}
		r = httpiotest.Call(h, "GET", "/v1/articles/infinite-scroll?boardId=7&lastArticleId=", "")
		if n := len(httpiotest.DecodeJSON(t, r.Body).([]any)); n != 3 {
			t.Errorf("scroll with empty cursor: %d articles, want 3", n)
		}

		for _, tc := range []struct{ path, want string }{
			{"/v1/articles/boards/7/count", "3"},
			{"/v1/articles/boards/8/count", "1"},
			{"/v1/articles/boards/12345/count", "0"},
		} {
			r = httpiotest.Call(h, "GET", tc.path, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if got := strings.TrimSpace(r.Body); got != tc.want {
				t.Errorf("%s = %q, want %s", tc.path, got, tc.want)
			}
		}

		// Empty lists are [] and never null.
		for _, tc := range []struct{ path, want string }{
			{"/v1/articles?boardId=12345", `{"articles":[],"articleCount":0}`},
			{"/v1/articles?boardId=7&page=99", `{"articles":[],"articleCount":3}`},
			{"/v1/articles/infinite-scroll?boardId=12345", `[]`},
			{fmt.Sprintf("/v1/articles/infinite-scroll?boardId=7&lastArticleId=%d", id), `[]`},
		} {
			r = httpiotest.Call(h, "GET", tc.path, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if diff := cmp.Diff(tc.want, strings.TrimSpace(r.Body)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.path, diff)
			}
		}

		r = httpiotest.Call(httpiotest.As(h, 9), "DELETE", "/v1/articles/"+strconv.FormatInt(id, 10), "")
		httpiotest.WantStatus(t, r, http.StatusNoContent)
		if r.Body != "" {
			t.Errorf("204 with body %q", r.Body)
		}
		r = httpiotest.Call(h, "GET", "/v1/articles/"+strconv.FormatInt(id, 10), "")
		httpiotest.WantStatus(t, r, http.StatusNotFound)
		if code := httpiotest.ErrorCode(t, r); code != "ARTICLE_NOT_FOUND" {
			t.Errorf("code = %q, want ARTICLE_NOT_FOUND", code)
		}
		if got := strings.TrimSpace(httpiotest.Call(h, "GET", "/v1/articles/boards/7/count", "").Body); got != "2" {
			t.Errorf("count after delete = %s, want 2", got)
		}
	})
}

// TestRoutesETag checks that GET of an article and of a board's count carry, as their ETag, the versions that the
// latest event of that article and that board carried.
func TestRoutesETag(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := testHandler(t, db)
		get := func(path string) httpiotest.Reply { return httpiotest.Call(h, "GET", path, "") }
		quoted := func(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` } // the format, spelled out
		countPath := func(board int64) string { return fmt.Sprintf("/v1/articles/boards/%d/count", board) }

		r := get(countPath(7))
		httpiotest.WantStatus(t, r, http.StatusOK)
		if got := r.Header.Get("ETag"); got != `"0"` {
			t.Errorf("ETag of a board without articles = %q, want %q", got, `"0"`)
		}

		a, b := strconv.FormatInt(firstID, 10), strconv.FormatInt(firstID+1, 10)
		for _, step := range []struct {
			method, path, body  string
			status              int
			articleVersion      int64 // of the changed article
			board, boardVersion int64
		}{
			{"POST", "/v1/articles", `{"title":"a","content":"c","writerId":1,"boardId":7}`, http.StatusCreated, 1, 7, 1},
			{"POST", "/v1/articles", `{"title":"b","content":"c","writerId":1,"boardId":7}`, http.StatusCreated, 1, 7, 2},
			{"PUT", "/v1/articles/" + a, `{"title":"a2","content":"c"}`, http.StatusOK, 2, 7, 2},
			{"PUT", "/v1/articles/" + a, `{"title":"a3","content":"c"}`, http.StatusOK, 3, 7, 2},
			{"DELETE", "/v1/articles/" + b, "", http.StatusNoContent, 2, 7, 3},
			{"POST", "/v1/articles", `{"title":"c","content":"c","writerId":1,"boardId":8}`, http.StatusCreated, 1, 8, 1},
		} {
			httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(h, 1), step.method, step.path, step.body), step.status)
			events := outboxRows(t, db)
			env := events[len(events)-1]
			p, err := event.Payload[event.Article](env)
			if err != nil {
				t.Fatal(err)
			}
			if p.ArticleVersion != step.articleVersion || int64(p.BoardID) != step.board || p.BoardArticleCountVersion != step.boardVersion {
				t.Fatalf("%s %s: event versions article %d, board %d: %d; want %d, %d: %d", step.method, step.path,
					p.ArticleVersion, p.BoardID, p.BoardArticleCountVersion, step.articleVersion, step.board, step.boardVersion)
			}

			article := fmt.Sprintf("/v1/articles/%d", p.ArticleID)
			r := get(article)
			if env.Type == event.ArticleDeleted {
				httpiotest.WantStatus(t, r, http.StatusNotFound)
				if got := r.Header.Get("ETag"); got != "" {
					t.Errorf("GET %s of a deleted article: ETag %q, want none", article, got)
				}
			} else {
				httpiotest.WantStatus(t, r, http.StatusOK)
				if got, want := r.Header.Get("ETag"), quoted(p.ArticleVersion); got != want {
					t.Errorf("after %s %s: GET %s ETag = %q, want %q (the event's articleVersion)", step.method, step.path, article, got, want)
				}
			}
			r = get(countPath(step.board))
			httpiotest.WantStatus(t, r, http.StatusOK)
			if got, want := r.Header.Get("ETag"), quoted(p.BoardArticleCountVersion); got != want {
				t.Errorf("after %s %s: GET %s ETag = %q, want %q (the event's boardArticleCountVersion)", step.method, step.path,
					countPath(step.board), got, want)
			}
		}
		// Another board's events leave a board's version alone.
		if got := get(countPath(7)).Header.Get("ETag"); got != `"3"` {
			t.Errorf("ETag of board 7 = %q, want %q", got, `"3"`)
		}
	})
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	if len(out) == 2 && out[0] > out[1] {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// ids returns the articleId of each article in a decoded JSON array, checking that each is a string.
func ids(t *testing.T, v any) []string {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a JSON array", v)
	}
	out := []string{}
	for _, a := range arr {
		id, ok := a.(map[string]any)["articleId"].(string)
		if !ok {
			t.Fatalf("articleId of %v is not a string", a)
		}
		out = append(out, id)
	}
	return out
}

func TestRoutesBadInput(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		anyone, _ := testHandler(t, db)
		h := httpiotest.As(anyone, 1) // the writer of every article here: bad input is a 400 whoever sends it
		r := httpiotest.Call(h, "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1,"boardId":1}`)
		httpiotest.WantStatus(t, r, http.StatusCreated)
		existing := "/v1/articles/" + httpiotest.DecodeJSON(t, r.Body).(map[string]any)["articleId"].(string)

		body := func(title, content string) string {
			b, _ := json.Marshal(map[string]any{"title": title, "content": content, "writerId": 1, "boardId": 1})
			return string(b)
		}
		for _, tc := range []struct {
			name, method, path, body string
			status                   int
			code                     string
		}{
			{"malformed json", "POST", "/v1/articles", `{"title":`, 400, "INVALID_JSON"},
			{"not json", "POST", "/v1/articles", `hello`, 400, "INVALID_JSON"},
			{"empty body", "POST", "/v1/articles", ``, 400, "INVALID_JSON"},
			{"trailing garbage", "POST", "/v1/articles", body("t", "c") + `x`, 400, "INVALID_JSON"},
			{"two objects", "POST", "/v1/articles", body("t", "c") + body("t", "c"), 400, "INVALID_JSON"},
			{"array body", "POST", "/v1/articles", `[]`, 400, "INVALID_JSON"},
			{"null body", "POST", "/v1/articles", `null`, 400, "MISSING_FIELD"},
			{"title number", "POST", "/v1/articles", `{"title":1,"content":"c","writerId":1,"boardId":1}`, 400, "INVALID_JSON"},
			{"content object", "POST", "/v1/articles", `{"title":"t","content":{},"writerId":1,"boardId":1}`, 400, "INVALID_JSON"},
			{"writerId bool", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":true,"boardId":1}`, 400, "INVALID_JSON"},
			{"boardId float", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1,"boardId":1.5}`, 400, "INVALID_JSON"},
			{"boardId garbage", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1,"boardId":"x"}`, 400, "INVALID_JSON"},
			{"boardId negative", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1,"boardId":-1}`, 400, "INVALID_JSON"},
			{"boardId overflow", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1,"boardId":"9223372036854775808"}`, 400, "INVALID_JSON"},
			{"missing title", "POST", "/v1/articles", `{"content":"c","writerId":1,"boardId":1}`, 400, "MISSING_FIELD"},
			{"missing content", "POST", "/v1/articles", `{"title":"t","writerId":1,"boardId":1}`, 400, "MISSING_FIELD"},
			{"missing boardId", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1}`, 400, "MISSING_FIELD"},
			{"null title", "POST", "/v1/articles", `{"title":null,"content":"c","writerId":1,"boardId":1}`, 400, "MISSING_FIELD"},
			{"empty object", "POST", "/v1/articles", `{}`, 400, "MISSING_FIELD"},
			{"writerId 0", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":0,"boardId":1}`, 400, "INVALID_ID"},
			{"writerId \"0\"", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":"0","boardId":1}`, 400, "INVALID_ID"},
			{"writerId bad string", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":"1x","boardId":1}`, 400, "INVALID_JSON"},
			{"boardId 0", "POST", "/v1/articles", `{"title":"t","content":"c","writerId":1,"boardId":"0"}`, 400, "INVALID_ID"},
			{"empty title", "POST", "/v1/articles", body("", "c"), 400, "INVALID_TITLE"},
			{"blank title", "POST", "/v1/articles", body(" \t ", "c"), 400, "INVALID_TITLE"},
			{"101-char title", "POST", "/v1/articles", body(strings.Repeat("a", 101), "c"), 400, "INVALID_TITLE"},
			{"101 multi-byte title", "POST", "/v1/articles", body(strings.Repeat("가", 101), "c"), 400, "INVALID_TITLE"},
			{"empty content", "POST", "/v1/articles", body("t", ""), 400, "INVALID_CONTENT"},
			{"3001-char content", "POST", "/v1/articles", body("t", strings.Repeat("a", 3001)), 400, "INVALID_CONTENT"},
			{"body over 64 KiB", "POST", "/v1/articles", body("t", strings.Repeat("a", 70_000)), 413, "BODY_TOO_LARGE"},

			{"put malformed", "PUT", existing, `{`, 400, "INVALID_JSON"},
			{"put empty body", "PUT", existing, ``, 400, "INVALID_JSON"},
			{"put missing title", "PUT", existing, `{"content":"c"}`, 400, "MISSING_FIELD"},
			{"put missing content", "PUT", existing, `{"title":"t"}`, 400, "MISSING_FIELD"},
			{"put blank title", "PUT", existing, `{"title":"  ","content":"c"}`, 400, "INVALID_TITLE"},
			{"put 3001-char content", "PUT", existing, body("t", strings.Repeat("가", 3001)), 400, "INVALID_CONTENT"},
			{"put over 64 KiB", "PUT", existing, body("t", strings.Repeat("a", 70_000)), 413, "BODY_TOO_LARGE"},
			{"put missing article", "PUT", "/v1/articles/1", body("t", "c"), 404, "ARTICLE_NOT_FOUND"},
			{"put bad id", "PUT", "/v1/articles/x", body("t", "c"), 400, "INVALID_ARTICLE_ID"},

			{"get missing", "GET", "/v1/articles/1", ``, 404, "ARTICLE_NOT_FOUND"},
			{"get id 0", "GET", "/v1/articles/0", ``, 404, "ARTICLE_NOT_FOUND"},
			{"get non-numeric id", "GET", "/v1/articles/abc", ``, 400, "INVALID_ARTICLE_ID"},
			{"get negative id", "GET", "/v1/articles/-1", ``, 400, "INVALID_ARTICLE_ID"},
			{"get overflowing id", "GET", "/v1/articles/9223372036854775808", ``, 400, "INVALID_ARTICLE_ID"},
			{"get float id", "GET", "/v1/articles/1.0", ``, 400, "INVALID_ARTICLE_ID"},
			{"get escaped space id", "GET", "/v1/articles/%201", ``, 400, "INVALID_ARTICLE_ID"},
			{"delete missing", "DELETE", "/v1/articles/1", ``, 404, "ARTICLE_NOT_FOUND"},
			{"delete bad id", "DELETE", "/v1/articles/-5", ``, 400, "INVALID_ARTICLE_ID"},

			{"list missing boardId", "GET", "/v1/articles", ``, 400, "MISSING_BOARD_ID"},
			{"list empty boardId", "GET", "/v1/articles?boardId=", ``, 400, "MISSING_BOARD_ID"},
			{"list bad boardId", "GET", "/v1/articles?boardId=x", ``, 400, "INVALID_BOARD_ID"},
			{"list negative boardId", "GET", "/v1/articles?boardId=-1", ``, 400, "INVALID_BOARD_ID"},
			{"list pageSize 0", "GET", "/v1/articles?boardId=1&pageSize=0", ``, 400, "INVALID_PAGE_SIZE"},
			{"list pageSize 101", "GET", "/v1/articles?boardId=1&pageSize=101", ``, 400, "INVALID_PAGE_SIZE"},
			{"list pageSize x", "GET", "/v1/articles?boardId=1&pageSize=x", ``, 400, "INVALID_PAGE_SIZE"},
			{"list page 0", "GET", "/v1/articles?boardId=1&page=0", ``, 400, "INVALID_PAGE"},
			{"list page -1", "GET", "/v1/articles?boardId=1&page=-1", ``, 400, "INVALID_PAGE"},
			{"list page huge", "GET", "/v1/articles?boardId=1&page=9223372036854775807", ``, 400, "INVALID_PAGE"},
			{"scroll missing boardId", "GET", "/v1/articles/infinite-scroll?pageSize=5", ``, 400, "MISSING_BOARD_ID"},
			{"scroll pageSize 0", "GET", "/v1/articles/infinite-scroll?boardId=1&pageSize=0", ``, 400, "INVALID_PAGE_SIZE"},
			{"scroll pageSize 101", "GET", "/v1/articles/infinite-scroll?boardId=1&pageSize=101", ``, 400, "INVALID_PAGE_SIZE"},
			{"scroll pageSize x", "GET", "/v1/articles/infinite-scroll?boardId=1&pageSize=x", ``, 400, "INVALID_PAGE_SIZE"},
			{"scroll lastArticleId abc", "GET", "/v1/articles/infinite-scroll?boardId=1&lastArticleId=abc", ``, 400, "INVALID_LAST_ARTICLE_ID"},
			{"scroll lastArticleId -1", "GET", "/v1/articles/infinite-scroll?boardId=1&lastArticleId=-1", ``, 400, "INVALID_LAST_ARTICLE_ID"},
			{"count bad boardId", "GET", "/v1/articles/boards/x/count", ``, 400, "INVALID_BOARD_ID"},
			{"count overflowing boardId", "GET", "/v1/articles/boards/99999999999999999999/count", ``, 400, "INVALID_BOARD_ID"},

			{"unknown route", "GET", "/v2/nothing", ``, 404, "NOT_FOUND"},
			{"unknown sub-route", "GET", "/v1/articles/1/comments", ``, 404, "NOT_FOUND"},
			{"wrong method on item", "POST", "/v1/articles/1", `{}`, 405, "METHOD_NOT_ALLOWED"},
			{"wrong method on collection", "DELETE", "/v1/articles", ``, 405, "METHOD_NOT_ALLOWED"},
			{"wrong method on count", "POST", "/v1/articles/boards/1/count", ``, 405, "METHOD_NOT_ALLOWED"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := httpiotest.Call(h, tc.method, tc.path, tc.body)
				if r.Status != tc.status {
					t.Errorf("status = %d, want %d; body %s", r.Status, tc.status, r.Body)
				}
				if r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
				}
				if code := httpiotest.ErrorCode(t, r); code != tc.code {
					t.Errorf("code = %q, want %q", code, tc.code)
				}
				if r.Status == http.StatusMethodNotAllowed && r.Header.Get("Allow") == "" {
					t.Error("405 without an Allow header")
				}
			})
		}

		if got := httpiotest.Call(h, "PATCH", existing, `{}`).Header.Get("Allow"); got != "DELETE, GET, HEAD, PUT" {
			t.Errorf("Allow = %q, want DELETE, GET, HEAD, PUT", got)
		}
		// Nothing above changed the board.
		if got := strings.TrimSpace(httpiotest.Call(h, "GET", "/v1/articles/boards/1/count", "").Body); got != "1" {
			t.Errorf("board count after bad input = %s, want 1", got)
		}
		// 100 multi-byte characters are a valid title.
		httpiotest.WantStatus(t, httpiotest.Call(h, "POST", "/v1/articles", body(strings.Repeat("가", 100), strings.Repeat("나", 3000))), http.StatusCreated)
	})
}

func FuzzCreateArticle(f *testing.F) {
	for _, s := range []string{
		`{"title":"t","content":"c","writerId":1,"boardId":1}`,
		`{"title":"가","content":"c","writerId":"1","boardId":"2","x":[]}`,
		`{"title":"t","content":"c","writerId":0,"boardId":1}`,
		`{"title":"","content":"c","writerId":1,"boardId":1}`,
		`{"title":"t\u0000","content":"c\ud800","writerId":1,"boardId":1}`,
		`{"title":"t","content":"c","writerId":1e3,"boardId":-1}`,
		`{"title":"t","content":"c","boardId":1}`,
		`{"title":"t","content":"c","writerId":2,"boardId":1}`,
		`{"title":"t"}`,
		`{`, ``, `null`, `[]`, `"x"`, `{}{}`,
	} {
		f.Add([]byte(s))
	}
	anyone, _ := testHandler(f, sqldbtest.OpenSQLite(f, Migrate))
	h := httpiotest.As(anyone, 1)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/articles", bytes.NewReader(body)))
		r := httpiotest.Reply{Status: rec.Code, Header: rec.Header(), Body: rec.Body.String()}
		switch {
		case r.Status >= 500:
			t.Fatalf("body %q: status %d %s", body, r.Status, r.Body)
		case r.Status >= 400:
			httpiotest.ErrorCode(t, r)
		case r.Status == http.StatusCreated:
			// What was created reads back the same.
			created := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
			got := httpiotest.Call(h, "GET", "/v1/articles/"+created["articleId"].(string), "")
			if diff := cmp.Diff(any(created), httpiotest.DecodeJSON(t, got.Body)); diff != "" {
				t.Fatalf("body %q: read back (-created +read):\n%s", body, diff)
			}
		default:
			t.Fatalf("body %q: status %d", body, r.Status)
		}
	})
}
