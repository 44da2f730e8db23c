package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"board/internal/polltest"
)

// hotOut is one entry of a hot-article list as the API writes it.
type hotOut struct {
	ArticleID, Title, CreatedAt        string
	Score                              int64
	LikeCount, CommentCount, ViewCount int64
}

// TestHotArticlesFromWritesOverHTTP writes through the producers' HTTP APIs of a running board and reads the
// ranking on the hot-article port: likes, an unlike, comments and a comment delete, a hundred views (the backup
// that publishes a view count), a title change and an article delete, until the list equals what the writes add up
// to. Then the group is replayed into an empty Redis and the same list comes back.
func TestHotArticlesFromWritesOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flags := append(testFlags(t, dir), "--hot-article-time-zone", "Asia/Seoul")
	p := startProgram(t, flags)
	type article struct {
		id, title, createdAt   string
		likes, comments, views int64
		deleted                bool
		commentIDs             []string
	}
	var articles []*article
	for i := range 12 {
		var a articleOut
		call(t, "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": fmt.Sprintf("article %d", i),
			"content": "c", "writerId": 1, "boardId": 1}, http.StatusCreated, &a)
		articles = append(articles, &article{id: a.ArticleID, title: a.Title, createdAt: a.CreatedAt})
	}
	like := func(a *article, user int) {
		call(t, "POST", fmt.Sprintf("%s/v1/article-likes/articles/%s/users/%d", p.urls["like"], a.id, user), nil,
			http.StatusCreated, nil)
		a.likes++
	}
	comment := func(a *article) {
		var c struct{ CommentID string }
		call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": a.id, "content": "c", "writerId": 1},
			http.StatusCreated, &c)
		a.commentIDs = append(a.commentIDs, c.CommentID)
		a.comments++
	}
	// Scores rise with the index, so the newest ten lead; then the order is stirred.
	for i, a := range articles {
		for u := range i % 4 {
			like(a, u+1)
		}
		for range i % 3 {
			comment(a)
		}
	}
	a0, a1, a5, a11 := articles[0], articles[1], articles[5], articles[11]
	for u := range 4 { // a0 climbs back from the bottom: the course's trimmed list would have lost it
		like(a0, 100+u)
	}
	for u := range 100 { // the 100th view is backed up and published
		call(t, "POST", fmt.Sprintf("%s/v1/article-views/articles/%s/users/%d", p.urls["view"], a1.id, u+1), nil,
			http.StatusOK, nil)
	}
	a1.views = 100
	call(t, "DELETE", fmt.Sprintf("%s/v1/article-likes/articles/%s/users/1", p.urls["like"], a5.id), nil,
		http.StatusNoContent, nil)
	a5.likes--
	call(t, "DELETE", p.urls["comment"]+"/v2/comments/"+a5.commentIDs[0], nil, http.StatusNoContent, nil)
	a5.comments--
	call(t, "PUT", p.urls["article"]+"/v1/articles/"+a1.id, map[string]any{"title": "renamed", "content": "c"},
		http.StatusOK, nil)
	a1.title = "renamed"
	call(t, "DELETE", p.urls["article"]+"/v1/articles/"+a11.id, nil, http.StatusNoContent, nil)
	a11.deleted = true

	var want []hotOut
	for _, a := range articles {
		if !a.deleted {
			want = append(want, hotOut{a.id, a.title, a.createdAt, a.likes*3 + a.comments*2 + a.views, a.likes,
				a.comments, a.views})
		}
	}
	slices.SortStableFunc(want, func(x, y hotOut) int {
		if x.Score != y.Score {
			return int(y.Score - x.Score)
		}
		xi, _ := strconv.ParseInt(x.ArticleID, 10, 64)
		yi, _ := strconv.ParseInt(y.ArticleID, 10, 64)
		return cmp.Compare(yi, xi) // the newer article first
	})
	want = want[:10]
	created, err := time.Parse(time.RFC3339, a0.createdAt)
	if err != nil {
		t.Fatal(err)
	}
	seoul, _ := time.LoadLocation("Asia/Seoul")
	path := "/v1/hot-articles/articles/date/" + created.In(seoul).Format("20060102")
	waitForList(t, p, p.urls["hot-article"]+path, want)

	// Rebuild by replay: stop, start again with --replay on the same engines, and wait for the same list. The
	// replay clears the keys first, so the list can only come back from the topics.
	p.shutdown()
	p = startProgram(t, append(flags, "--replay", "hot-article"))
	if !strings.Contains(p.logs.String(), `"msg":"replaying from the oldest records"`) {
		t.Errorf("no replay was logged:\n%s", p.logs)
	}
	waitForList(t, p, p.urls["hot-article"]+path, want)

	resp, err := http.Get(p.urls["hot-article"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `board_event_age_seconds_count{group="board-hot-article",topic="board-like"}`) {
		t.Errorf("/metrics has no event age of the hot-article group:\n%s", metrics)
	}
}

// waitForList polls a hot-article list until it equals want, failing after a generous bound.
func waitForList(t *testing.T, p *program, url string, want []hotOut) {
	t.Helper()
	polltest.Until(t, 30*time.Second, func() (bool, string) {
		var got []hotOut
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("%v\n%s", err, p.logs)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("GET %s: %s: %v", url, body, err)
		}
		diff := gocmp.Diff(want, got)
		return diff == "", fmt.Sprintf("GET %s (-want +got):\n%s", url, diff)
	})
}
