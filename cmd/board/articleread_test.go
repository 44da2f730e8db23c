package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
)

// readOut is an article as article-read writes it.
type readOut struct {
	ArticleID, Title, Content, BoardID, WriterID, CreatedAt, ModifiedAt string
	ArticleCommentCount, ArticleLikeCount, ArticleViewCount             int64
}

// TestArticleReadMatchesTheSources writes through the producers of a running board and reads through article-read:
// an article with its counts, every page and every scroll of a board compared with the article service's, warm,
// after a flush of the read model (cold), and after deletes.
func TestArticleReadMatchesTheSources(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	const board = 5
	var ids []string
	for i := range 45 {
		var a articleOut
		call(t, "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": fmt.Sprint("t", i), "content": "c",
			"writerId": 1, "boardId": board}, http.StatusCreated, &a)
		ids = append(ids, a.ArticleID)
	}
	hot := ids[44]
	for u := range 3 {
		call(t, "POST", fmt.Sprintf("%s/v1/article-likes/articles/%s/users/%d", p.urls["like"], hot, u+1), nil,
			http.StatusCreated, nil)
	}
	call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": hot, "content": "c", "writerId": 1},
		http.StatusCreated, nil)
	var views int64
	call(t, "POST", fmt.Sprintf("%s/v1/article-views/articles/%s/users/9", p.urls["view"], hot), nil, http.StatusOK, &views)
	call(t, "PUT", p.urls["article"]+"/v1/articles/"+hot, map[string]any{"title": "edited", "content": "c2"}, http.StatusOK, nil)

	eventually(t, func() string {
		var got readOut
		getJSON(t, p.urls["article-read"]+"/v1/articles/"+hot, &got)
		if got.Title != "edited" || got.Content != "c2" || got.ArticleLikeCount != 3 || got.ArticleCommentCount != 1 ||
			got.ArticleViewCount != views {
			return fmt.Sprintf("article %s = %+v; want edited, c2, 3 likes, 1 comment, %d views", hot, got, views)
		}
		return ""
	})
	comparePages(t, p, board)

	// Cold: the read model is flushed; answers stay right (the article service fills in, then the backfill).
	flushReadModel(t, p)
	comparePages(t, p, board)
	var got readOut
	getJSON(t, p.urls["article-read"]+"/v1/articles/"+hot, &got)
	if got.ArticleLikeCount != 3 || got.ArticleCommentCount != 1 || got.Title != "edited" {
		t.Errorf("after a flush, article %s = %+v", hot, got)
	}

	// Deletes, inside the list: no holes.
	for _, id := range []string{ids[44], ids[30], ids[3]} {
		call(t, "DELETE", p.urls["article"]+"/v1/articles/"+id, nil, http.StatusNoContent, nil)
	}
	eventuallyGone(t, p, ids[44])
	comparePages(t, p, board)
	call(t, "GET", p.urls["article-read"]+"/v1/articles/abc", nil, http.StatusBadRequest, nil)
	call(t, "GET", p.urls["article-read"]+"/v1/articles?boardId=5&pageSize=101", nil, http.StatusBadRequest, nil)
	call(t, "GET", p.urls["article-read"]+"/v1/articles/123", nil, http.StatusNotFound, nil)
}

// comparePages waits until every page and every scroll step of board through article-read lists the same articles
// as the article service, with the same capped counts.
func comparePages(t *testing.T, p *program, board int) {
	t.Helper()
	for _, size := range []int{1, 7, 30} {
		eventually(t, func() string {
			for page := 1; page <= 50/size+2; page++ {
				q := fmt.Sprintf("/v1/articles?boardId=%d&page=%d&pageSize=%d", board, page, size)
				var want, got struct {
					Articles     []readOut
					ArticleCount int64
				}
				getJSON(t, p.urls["article"]+q, &want)
				getJSON(t, p.urls["article-read"]+q, &got)
				if diff := gocmp.Diff(articleFields(want.Articles), articleFields(got.Articles)); diff != "" || want.ArticleCount != got.ArticleCount {
					return fmt.Sprintf("%s: count %d, want %d; (-article +article-read):\n%s", q, got.ArticleCount, want.ArticleCount, diff)
				}
			}
			last := ""
			for {
				q := fmt.Sprintf("/v1/articles/infinite-scroll?boardId=%d&pageSize=%d", board, size)
				if last != "" {
					q += "&lastArticleId=" + last
				}
				var want, got []readOut
				getJSON(t, p.urls["article"]+q, &want)
				getJSON(t, p.urls["article-read"]+q, &got)
				if diff := gocmp.Diff(articleFields(want), articleFields(got)); diff != "" {
					return fmt.Sprintf("%s (-article +article-read):\n%s", q, diff)
				}
				if len(want) < size {
					return ""
				}
				last = want[len(want)-1].ArticleID
			}
		})
	}
}

// articleFields drops the counts, which the article service does not have.
func articleFields(as []readOut) []readOut {
	out := make([]readOut, len(as))
	for i, a := range as {
		out[i] = readOut{ArticleID: a.ArticleID, Title: a.Title, Content: a.Content, BoardID: a.BoardID,
			WriterID: a.WriterID, CreatedAt: a.CreatedAt, ModifiedAt: a.ModifiedAt}
	}
	return out
}

// flushReadModel deletes every article-read key of the program's Redis.
func flushReadModel(t *testing.T, p *program) {
	t.Helper()
	rdb := redisClient(p.redisAddr())
	defer rdb.Close()
	prefix := flagValue(p.flags, "--redis-prefix") + "article-read::"
	if len(redisclienttest.Keys(t, rdb, prefix+"*")) == 0 {
		t.Fatal("flush the read model: no keys")
	}
	redisclienttest.DeletePrefix(t, rdb, prefix)
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %s: %v", url, body, err)
	}
}

// eventuallyGone waits until article-read answers 404 for a deleted article: its model learns of the delete from
// the event, a moment after the article service answered.
func eventuallyGone(t *testing.T, p *program, article string) {
	t.Helper()
	eventually(t, func() string {
		if status, body := sendJSON(t, "GET", p.urls["article-read"]+"/v1/articles/"+article, nil); status != http.StatusNotFound {
			return fmt.Sprintf("article-read still serves deleted article %s: %d %s", article, status, body)
		}
		return ""
	})
}

// eventually retries check (which returns "" when satisfied) until it holds, failing with its last complaint
// after a generous bound.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	polltest.Until(t, 20*time.Second, func() (bool, string) {
		complaint := check()
		return complaint == "", complaint
	})
}
