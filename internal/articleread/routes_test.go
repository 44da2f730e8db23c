package articleread

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

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
// writes the same article, moderation state and counts, escapes included; a hidden article's title and content
// are its placeholder and nothing.
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
	}
	if got := stored.id(); got != 7 {
		t.Errorf("id() of %s = %d, want 7", stored, got)
	}
}
