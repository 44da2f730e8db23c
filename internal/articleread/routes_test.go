package articleread

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/article"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
)

// TestRoutesAnswers: the three reads answer the article service's Article plus the three counts, ids as strings,
// times in RFC 3339 UTC with milliseconds, and defaults page 1, pageSize 30.
func TestRoutesAnswers(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		var ids []int64
		for range 35 {
			ids = append(ids, e.uncachedArticle(3))
		}
		e.applyNew(t, 0)
		api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
		newest := ids[len(ids)-1]
		wantRead, _ := e.truth.want(newest)
		want := decoded(t, wantRead)

		r := httpiotest.Call(api, http.MethodGet, "/v1/articles/"+strconv.FormatInt(newest, 10), "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		got := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		wantJSON := map[string]any{
			"articleId": strconv.FormatInt(newest, 10), "title": want.Title, "content": want.Content, "contentHtml": want.ContentHTML,
			"contentText": want.ContentText,
			"boardId":     "3",
			"writerId":    strconv.FormatInt(int64(want.WriterID), 10), "createdAt": got["createdAt"],
			"modifiedAt": got["modifiedAt"], "hidden": "", "removedReason": "", "locked": false, "pinned": false,
			"articleCommentCount": json.Number("1"),
			"articleLikeCount":    json.Number("2"), "articleViewCount": json.Number("321"),
		}
		if diff := cmp.Diff(wantJSON, got); diff != "" {
			t.Errorf("GET article (-want +got):\n%s", diff)
		}
		for _, field := range []string{"createdAt", "modifiedAt"} {
			if s, _ := got[field].(string); !httpiotest.TimeFormat.MatchString(s) {
				t.Errorf("%s = %q, want RFC 3339 UTC with milliseconds", field, s)
			}
		}

		r = httpiotest.Call(api, http.MethodGet, "/v1/articles?boardId=3", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		var page struct {
			Articles     []map[string]any `json:"articles"`
			ArticleCount json.Number      `json:"articleCount"`
		}
		if err := json.Unmarshal([]byte(r.Body), &page); err != nil {
			t.Fatalf("list body %s: %v", r.Body, err)
		}
		if len(page.Articles) != 30 || page.ArticleCount != "35" {
			t.Errorf("default page: %d articles, count %s; want 30 of 35", len(page.Articles), page.ArticleCount)
		}
		if len(page.Articles) > 0 && page.Articles[0]["articleId"] != strconv.FormatInt(newest, 10) {
			t.Errorf("first article %v, want the newest %d", page.Articles[0]["articleId"], newest)
		}

		r = httpiotest.Call(api, http.MethodGet, "/v1/articles/infinite-scroll?boardId=3&pageSize=3&lastArticleId="+
			strconv.FormatInt(ids[3], 10), "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		var scroll []map[string]any
		if err := json.Unmarshal([]byte(r.Body), &scroll); err != nil {
			t.Fatalf("scroll body %s: %v", r.Body, err)
		}
		var gotIDs []any
		for _, a := range scroll {
			gotIDs = append(gotIDs, a["articleId"])
		}
		wantIDs := []any{strconv.FormatInt(ids[2], 10), strconv.FormatInt(ids[1], 10), strconv.FormatInt(ids[0], 10)}
		if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
			t.Errorf("scroll ids (-want +got):\n%s", diff)
		}

		r = httpiotest.Call(api, http.MethodGet, "/v1/articles/infinite-scroll?boardId=3&lastArticleId="+
			strconv.FormatInt(ids[0], 10), "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if r.Body != "[]" && r.Body != "[]\n" {
			t.Errorf("scroll past the oldest = %s, want []", r.Body)
		}
		r = httpiotest.Call(api, http.MethodGet, "/v1/articles?boardId=77&page=3", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if diff := cmp.Diff(`{"articles":[],"articleCount":0}`, trimNewline(r.Body)); diff != "" {
			t.Errorf("page of an empty board (-want +got):\n%s", diff)
		}
	})
}

func trimNewline(s string) string {
	if len(s) > 0 && s[len(s)-1] == '\n' {
		return s[:len(s)-1]
	}
	return s
}

// TestRoutesRejectLikeArticleService: bad ids and page parameters are 400s with the very codes the article
// service answers them with.
func TestRoutesRejectLikeArticleService(t *testing.T) {
	t.Parallel()
	targets := []string{
		"/v1/articles?boardId=1&pageSize=0",
		"/v1/articles?boardId=1&pageSize=101",
		"/v1/articles?boardId=1&pageSize=x",
		"/v1/articles?boardId=1&page=0",
		"/v1/articles?boardId=1&page=-1",
		"/v1/articles?boardId=1&page=2147483648",
		"/v1/articles?page=1&pageSize=10",
		"/v1/articles?boardId=abc",
		"/v1/articles?boardId=-1",
		"/v1/articles?boardId=01",
		"/v1/articles?boardId=99999999999999999999",
		"/v1/articles/infinite-scroll?boardId=1&pageSize=0",
		"/v1/articles/infinite-scroll?boardId=1&pageSize=101",
		"/v1/articles/infinite-scroll?pageSize=5",
		"/v1/articles/infinite-scroll?boardId=abc",
		"/v1/articles/infinite-scroll?boardId=1&lastArticleId=abc",
		"/v1/articles/infinite-scroll?boardId=1&lastArticleId=-3",
		"/v1/articles/abc",
		"/v1/articles/-5",
		"/v1/articles/99999999999999999999",
	}
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
		// The article service's own routes: input is checked before its service is used, so none is needed.
		reference := httpiotest.Handler("article", article.Routes(&article.Service{}, httpiotest.Logger))
		for _, target := range targets {
			want := httpiotest.Call(reference, http.MethodGet, target, "")
			if want.Status != http.StatusBadRequest {
				t.Fatalf("article service answers %s with %d, not 400: the reference is wrong", target, want.Status)
			}
			got := httpiotest.Call(api, http.MethodGet, target, "")
			httpiotest.WantError(t, got, http.StatusBadRequest, httpiotest.ErrorCode(t, want))
		}
		if calls := e.origin.allCalls(); len(calls) != 0 {
			t.Errorf("bad requests reached the origins: %v", calls)
		}
	})
}

// TestSplicedAnswers checks that an answer spliced from the stored wire form reads byte for byte as encoding/json
// writes the same article, moderation state and counts, escapes included, and its summary the same less its
// content with its excerpt; a hidden article's title and content are its placeholder and nothing.
func TestSplicedAnswers(t *testing.T) {
	a := Article{ArticleID: 7, Title: `<b>"quoted" & 'x'</b>`, Content: "line\nbreak\u2028é\x01",
		ContentHTML: "<p>line\nbreak\u2028é</p>\n", ContentText: "line\nbreak\u2028é", BoardID: 2, WriterID: 3,
		CreatedAt: apijson.Time(time.UnixMilli(1_700_000_000_123)), ModifiedAt: apijson.Time(time.UnixMilli(1_700_000_000_456))}
	stored, err := encodeArticle(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod            Moderation
		title, content string
	}{
		{Moderation{}, a.Title, a.Content},
		{Moderation{Locked: true, Pinned: true, Version: 3}, a.Title, a.Content},
		{Moderation{Hidden: event.Removed, RemovedReason: `spam "<x>"`, Locked: true, Version: 4}, "[removed]", ""},
		{Moderation{Hidden: event.Pending, RemovedReason: "reported", Version: 1}, "[hidden pending review]", ""},
	} {
		read := ArticleRead{Article: stored, Moderation: tc.mod, CommentCount: 4, LikeCount: 5, ViewCount: 6}
		shown := a
		shown.Title, shown.Content = tc.title, tc.content
		if tc.content == "" {
			shown.ContentHTML, shown.ContentText = "", ""
		}
		want, err := json.Marshal(struct {
			Article
			Moderation
			ArticleCommentCount int64 `json:"articleCommentCount"`
			ArticleLikeCount    int64 `json:"articleLikeCount"`
			ArticleViewCount    int64 `json:"articleViewCount"`
		}{shown, tc.mod, 4, 5, 6})
		if err != nil {
			t.Fatal(err)
		}
		if got := read.appendJSON(nil); string(got) != string(want) {
			t.Errorf("spliced %s\nwant    %s", got, want)
		}
		want, err = json.Marshal(struct {
			ArticleID  apijson.ID   `json:"articleId"`
			Title      string       `json:"title"`
			Excerpt    string       `json:"excerpt"`
			BoardID    apijson.ID   `json:"boardId"`
			WriterID   apijson.ID   `json:"writerId"`
			CreatedAt  apijson.Time `json:"createdAt"`
			ModifiedAt apijson.Time `json:"modifiedAt"`
			Moderation
			ArticleCommentCount int64 `json:"articleCommentCount"`
			ArticleLikeCount    int64 `json:"articleLikeCount"`
			ArticleViewCount    int64 `json:"articleViewCount"`
		}{shown.ArticleID, shown.Title, strings.Join(strings.Fields(shown.ContentText), " "), shown.BoardID, shown.WriterID,
			shown.CreatedAt, shown.ModifiedAt, tc.mod, 4, 5, 6})
		if err != nil {
			t.Fatal(err)
		}
		if got := read.appendSummaryJSON(nil); string(got) != string(want) {
			t.Errorf("summary %s\nwant    %s", got, want)
		}
	}
	if got := stored.id(); got != 7 {
		t.Errorf("id() of %s = %d, want 7", stored, got)
	}
}

// TestSummaryAnswers: ?view=summary answers each article of a page and of a scroll as the full answer has it, less
// content, contentHtml and contentText, plus the excerpt of contentText; "full" is the default; another view is a 400.
func TestSummaryAnswers(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		for range 5 {
			e.uncachedArticle(3)
		}
		e.applyNew(t, 0)
		api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
		for _, target := range []string{"/v1/articles?boardId=3&pageSize=4", "/v1/articles/infinite-scroll?boardId=3&pageSize=4"} {
			articles := func(view string) []map[string]any {
				r := httpiotest.Call(api, http.MethodGet, target+view, "")
				httpiotest.WantStatus(t, r, http.StatusOK)
				var as []map[string]any
				if strings.HasPrefix(r.Body, "[") {
					if err := json.Unmarshal([]byte(r.Body), &as); err != nil {
						t.Fatal(err)
					}
					return as
				}
				var page struct{ Articles []map[string]any }
				if err := json.Unmarshal([]byte(r.Body), &page); err != nil {
					t.Fatal(err)
				}
				return page.Articles
			}
			full, defaults, summary := articles("&view=full"), articles(""), articles("&view=summary")
			if diff := cmp.Diff(defaults, full); diff != "" {
				t.Errorf("%s: view=full differs from the default (-default +full):\n%s", target, diff)
			}
			if len(full) != 4 {
				t.Fatalf("%s: %d articles, want 4", target, len(full))
			}
			for _, a := range full {
				text := a["contentText"].(string)
				delete(a, "content")
				delete(a, "contentHtml")
				delete(a, "contentText")
				a["excerpt"] = string(appendExcerpt(nil, mustQuote(t, text)))
			}
			for _, a := range summary {
				raw, _ := json.Marshal(a["excerpt"])
				a["excerpt"] = string(raw)
			}
			if diff := cmp.Diff(full, summary); diff != "" {
				t.Errorf("%s: summary (-want +got):\n%s", target, diff)
			}
			r := httpiotest.Call(api, http.MethodGet, target+"&view=short", "")
			httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_VIEW")
		}
	})
}

func mustQuote(t *testing.T, s string) string {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestExcerpt: an excerpt is the text with its whitespace made single spaces, whole up to excerptRunes, else cut
// at a word before the bound with an ellipsis (at the bound when a word is longer than half of it).
func TestExcerpt(t *testing.T) {
	word := strings.Repeat("가", 9) // nine runes of three bytes
	long := strings.Repeat(word+" ", 30)
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", ""},
		{"short", "  Hello,\n\n  world\t! ", "Hello, world !"},
		{"exactly the bound", strings.Repeat("a", excerptRunes), strings.Repeat("a", excerptRunes)},
		{"the bound and trailing space", strings.Repeat("a", excerptRunes) + " \n", strings.Repeat("a", excerptRunes)},
		{"one past, no space", strings.Repeat("a", excerptRunes+1), strings.Repeat("a", excerptRunes-1) + "…"},
		{"the bound, then a word", strings.Repeat("a", excerptRunes) + " b", strings.Repeat("a", excerptRunes-1) + "…"},
		{"at a word", long, strings.TrimSuffix(strings.Repeat(word+" ", 19), " ") + "…"},
		{"punctuation before the cut", strings.Repeat("abcdefg, ", 30), strings.TrimSuffix(strings.Repeat("abcdefg, ", 22), ", ") + "…"},
		{"escapes", "<b>\"x\"</b> & \u2028y\b\f\\z\x01 😀\u00a0é", "<b>\"x\"</b> & y\b \\z\x01 😀 é"},
		{"escapes count as one rune", strings.Repeat("<&", excerptRunes), strings.Repeat("<&", excerptRunes/2-1) + "<…"},
	} {
		got := appendExcerpt(nil, mustQuote(t, tc.text))
		if want := mustQuote(t, tc.want); string(got) != want {
			t.Errorf("%s: appendExcerpt = %s, want %s", tc.name, got, want)
		}
		var s string
		if err := json.Unmarshal(got, &s); err != nil || utf8.RuneCountInString(s) > excerptRunes {
			t.Errorf("%s: %s is not a JSON string of at most %d runes (%v)", tc.name, got, excerptRunes, err)
		}
	}
}
