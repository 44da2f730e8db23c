package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"board/internal/app"
	"board/internal/comment"
	"board/internal/existence"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// send sends a JSON request and returns the status and, for an error answer, its code.
func send(t *testing.T, method, url string, body any) (status int, code string) {
	t.Helper()
	status, raw := sendJSON(t, method, url, body)
	if status >= 300 {
		var e struct{ Code string }
		if err := json.Unmarshal(raw, &e); err != nil || e.Code == "" {
			t.Fatalf("%s %s: %d with %q, not {code, message}", method, url, status, raw)
		}
		code = e.Code
	}
	return status, code
}

// newArticle creates an article through p's article service and returns its id.
func newArticle(t *testing.T, p *program) string {
	t.Helper()
	var a articleOut
	call(t, "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "an article", "content": "c", "writerId": 1,
		"boardId": 3}, http.StatusCreated, &a)
	return a.ArticleID
}

// writes are the write requests of comment, like and view on one article, by user.
type writes struct{ p *program }

func (w writes) like(article string, user int) string {
	return fmt.Sprintf("%s/v1/article-likes/articles/%s/users/%d", w.p.urls["like"], article, user)
}

func (w writes) view(article string, user int) string {
	return fmt.Sprintf("%s/v1/article-views/articles/%s/users/%d", w.p.urls["view"], article, user)
}

// each sends every kind of write on article as user and returns "method path -> status code" for each answer.
func (w writes) each(t *testing.T, article string, user int) map[string]string {
	out := map[string]string{}
	record := func(name string, status int, code string) { out[name] = fmt.Sprint(status, " ", code) }
	s, c := send(t, "POST", w.like(article, user), nil)
	record("like", s, c)
	s, c = send(t, "POST", w.like(article, user)+"/optimistic-lock", nil)
	record("like optimistic", s, c)
	s, c = send(t, "DELETE", w.like(article, user), nil)
	record("unlike", s, c)
	s, c = send(t, "POST", w.view(article, user), nil)
	record("view", s, c)
	for _, v := range []string{"v1", "v2"} {
		s, c = send(t, "POST", w.p.urls["comment"]+"/"+v+"/comments",
			map[string]any{"articleId": article, "writerId": user, "content": "hello"})
		record("comment "+v, s, c)
	}
	return out
}

// Comment, like and view refuse writes on articles that never existed and on deleted ones, accept them on an article
// created a moment ago (before its event reaches them), and remove a deleted article's comments, likes and counts.
func TestWritesNeedAnArticle(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	w := writes{p}
	notFound := fmt.Sprint(http.StatusNotFound, " ARTICLE_NOT_FOUND")

	// 1000 is an id from the first millisecond of the Snowflake epoch: never issued.
	for name, got := range w.each(t, "1000", 1) {
		if got != notFound {
			t.Errorf("%s on an article that never existed: %s, want %s", name, got, notFound)
		}
	}

	fresh := newArticle(t, p)
	want := map[string]string{"like": "201 ", "like optimistic": "409 ALREADY_LIKED", "unlike": "204 ", "view": "200 ",
		"comment v1": "201 ", "comment v2": "201 "}
	for name, got := range w.each(t, fresh, 1) {
		if got != want[name] {
			t.Errorf("%s on an article created a moment ago: %s, want %s", name, got, want[name])
		}
	}

	// A busy article is deleted; another one keeps what it has.
	busy, other := newArticle(t, p), newArticle(t, p)
	for user := 1; user <= 40; user++ {
		call(t, "POST", w.like(busy, user), nil, http.StatusCreated, nil)
		call(t, "POST", w.view(busy, user), nil, http.StatusOK, nil)
		var root struct{ CommentID, Path string }
		call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": busy, "writerId": user, "content": "root"},
			http.StatusCreated, &root)
		call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": busy, "writerId": user, "content": "reply",
			"parentPath": root.Path}, http.StatusCreated, nil)
		call(t, "POST", p.urls["comment"]+"/v1/comments", map[string]any{"articleId": busy, "writerId": user, "content": "v1"},
			http.StatusCreated, nil)
	}
	for user := 1; user <= 5; user++ {
		call(t, "POST", w.like(other, user), nil, http.StatusCreated, nil)
		call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": other, "writerId": user, "content": "c"},
			http.StatusCreated, nil)
	}
	call(t, "DELETE", p.urls["article"]+"/v1/articles/"+busy, nil, http.StatusNoContent, nil)

	eventually(t, func() string {
		for name, got := range w.each(t, busy, 1000) {
			if got != notFound {
				return fmt.Sprintf("%s on a deleted article: %s, want %s", name, got, notFound)
			}
		}
		return ""
	})
	eventually(t, func() string { return countsOf(t, p, busy, 0, 0, 0) })
	if msg := countsOf(t, p, other, 5, 5, 0); msg != "" {
		t.Error(msg)
	}
	for _, v := range []string{"v1", "v2"} {
		var page struct{ Comments []any }
		getJSON(t, p.urls["comment"]+"/"+v+"/comments?articleId="+busy+"&page=1&pageSize=10", &page)
		if len(page.Comments) != 0 {
			t.Errorf("%s comments of the deleted article: %d listed", v, len(page.Comments))
		}
	}
	call(t, "GET", w.like(busy, 1), nil, http.StatusNotFound, nil)
	eventuallyGone(t, p, busy)
}

// countsOf compares an article's like, comment and view counts with the wanted ones; "" when they match.
func countsOf(t *testing.T, p *program, article string, likes, comments, views int64) string {
	t.Helper()
	var gotLikes, gotComments, gotViews int64
	getJSON(t, p.urls["like"]+"/v1/article-likes/articles/"+article+"/count", &gotLikes)
	getJSON(t, p.urls["comment"]+"/v2/comments/articles/"+article+"/count", &gotComments)
	getJSON(t, p.urls["view"]+"/v1/article-views/articles/"+article+"/count", &gotViews)
	if gotLikes != likes || gotComments != comments || gotViews != views {
		return fmt.Sprintf("article %s counts %d likes, %d comments, %d views; want %d, %d, %d", article, gotLikes,
			gotComments, gotViews, likes, comments, views)
	}
	return ""
}

// Likes and comments that race with the delete of their article: each is accepted or refused with 404, and once
// the purge has run, none is left, whichever committed first.
func TestWritesRacingADeleteEndRemoved(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	w := writes{p}
	article := newArticle(t, p)

	var accepted, refused, others atomic.Int64
	var deleted atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	unexpected := map[string]int{}
	for worker := range 8 {
		wg.Go(func() {
			// Each worker writes until it has been refused a few times after the delete was acknowledged.
			for i, refusedAfter := 0, 0; refusedAfter < 3; i++ {
				user := worker*100_000 + i + 1
				status, code := send(t, "POST", w.like(article, user), nil)
				if i%2 == 0 {
					status, code = send(t, "POST", p.urls["comment"]+"/v2/comments",
						map[string]any{"articleId": article, "writerId": user, "content": "racing"})
				}
				switch {
				case status == http.StatusCreated:
					accepted.Add(1)
				case status == http.StatusNotFound && code == "ARTICLE_NOT_FOUND":
					refused.Add(1)
					if deleted.Load() {
						refusedAfter++
					}
				default:
					mu.Lock()
					unexpected[fmt.Sprint(status, " ", code)]++
					mu.Unlock()
					others.Add(1)
					return
				}
			}
		})
	}
	for accepted.Load() < 100 && others.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	call(t, "DELETE", p.urls["article"]+"/v1/articles/"+article, nil, http.StatusNoContent, nil)
	deleted.Store(true)
	wg.Wait()
	if len(unexpected) > 0 {
		t.Fatalf("answers other than 201 and 404 ARTICLE_NOT_FOUND: %v", unexpected)
	}
	t.Logf("%d writes accepted, %d refused", accepted.Load(), refused.Load())
	eventually(t, func() string { return countsOf(t, p, article, 0, 0, 0) })
	for _, v := range []string{"v1", "v2"} {
		var page struct{ Comments []any }
		getJSON(t, p.urls["comment"]+"/"+v+"/comments?articleId="+article+"&page=1&pageSize=10", &page)
		if len(page.Comments) != 0 {
			t.Errorf("%s comments of the deleted article: %d listed", v, len(page.Comments))
		}
	}
}

// A board killed with SIGKILL in the middle of purging a deleted article's 100,000 comments and 100,000 likes
// finishes the purge after it restarts, and leaves the other article's alone.
func TestPurgeResumesAfterKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--embedded-redis-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0",
		"--log-format", "json"}
	for _, s := range app.Services() {
		args = append(args, "--"+s.Name+"-addr", "127.0.0.1:0")
	}
	p := startProcess(t, args...)
	w := writes{&program{urls: p.urls}}
	newID := func() int64 {
		id, err := strconv.ParseInt(newArticle(t, w.p), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	busy, other := newID(), newID()
	for _, id := range []int64{busy, other} { // the services learn of both articles
		call(t, "POST", w.like(fmt.Sprint(id), 1), nil, http.StatusCreated, nil)
		call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": id, "writerId": 1, "content": "c"},
			http.StatusCreated, nil)
	}
	stop(t, p)

	// 100,000 more of each on the busy article, written straight into the stopped services' files.
	const seeded = 100_000
	addComments(t, filepath.Join(dir, "sqlite", "comment.db"), busy, seeded)
	addLikes(t, filepath.Join(dir, "sqlite", "article_like.db"), busy, seeded)

	p = startProcess(t, args...)
	w = writes{&program{urls: p.urls}}
	call(t, "DELETE", p.urls["article"]+"/v1/articles/"+fmt.Sprint(busy), nil, http.StatusNoContent, nil)
	// Kill as soon as the purge has removed its first batch of comments.
	for {
		var n int64
		getJSON(t, p.urls["comment"]+"/v2/comments/articles/"+fmt.Sprint(busy)+"/count", &n)
		if n < seeded+1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait() // killed: the exit status says so
	waitGone(t, p.redisPid)

	p = startProcess(t, args...)
	w = writes{&program{urls: p.urls}}
	var left int64
	getJSON(t, p.urls["comment"]+"/v2/comments/articles/"+fmt.Sprint(busy)+"/count", &left)
	t.Logf("%d of %d comments left after the kill", left, seeded+1)
	if left == 0 {
		t.Errorf("the purge had finished before the kill; this test shows nothing")
	}
	// A consumer killed before it committed the delete's offset gets the event again; writes it accepted meanwhile
	// are purged with the rest.
	eventually(t, func() string {
		for name, got := range w.each(t, fmt.Sprint(busy), 7) {
			if got != fmt.Sprint(http.StatusNotFound, " ARTICLE_NOT_FOUND") {
				return fmt.Sprintf("%s on the deleted article after the restart: %s", name, got)
			}
		}
		return ""
	})
	pw := &program{urls: p.urls}
	eventually(t, func() string { return countsOf(t, pw, fmt.Sprint(busy), 0, 0, 0) })
	if msg := countsOf(t, pw, fmt.Sprint(other), 1, 1, 0); msg != "" {
		t.Error(msg)
	}
	stop(t, p)
}

// stop ends a process with SIGTERM and checks that it exits cleanly.
func stop(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("board serve after SIGTERM: %v\n%s", err, p.logs)
	}
	waitGone(t, p.redisPid)
}

// toolIDs returns n Snowflake ids of the tools' node, from now on.
func toolIDs(n int) []int64 {
	ids := make([]int64, n)
	start := time.Now()
	for i := range ids {
		ids[i] = snowflake.Compose(start.Add(time.Duration(i/(snowflake.MaxSeq+1))*time.Millisecond), snowflake.MaxNode,
			int64(i%(snowflake.MaxSeq+1)))
	}
	return ids
}

// addComments adds n v2 comments (threads of replies after the article's first root) to an article in the comment service's SQLite file, with its count.
func addComments(t *testing.T, path string, articleID int64, n int) {
	t.Helper()
	db, err := sqldb.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := comment.NewStore(db, nil, existence.New(db, existence.Config{Service: "comment"}))
	ids := toolIDs(n)
	for first := 0; first < n; first += 1000 {
		chunk := make([]comment.Comment, min(1000, n-first))
		for i := range chunk {
			chunk[i] = comment.Comment{ID: ids[first+i], Path: replyChainPath(int64(first + i + comment.MaxDepth)), CreatedAt: time.Now().UTC()}
		}
		if err := store.SeedChunk(context.Background(), articleID, chunk); err != nil {
			t.Fatal(err)
		}
	}
}

// replyChainPath is the path of the idx-th comment of threads MaxDepth deep, a root and a chain of replies.
func replyChainPath(idx int64) string {
	return comment.Segment(idx/comment.MaxDepth) + strings.Repeat(comment.Segment(0), int(idx%comment.MaxDepth))
}

// addLikes adds likes by n new users to an article in the like service's SQLite file, with its count.
func addLikes(t *testing.T, path string, articleID int64, n int) {
	t.Helper()
	db, err := sqldb.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	ids := toolIDs(n)
	err = db.Transact(ctx, func(tx *sql.Tx) error {
		for first := 0; first < n; first += 1000 {
			var q strings.Builder
			q.WriteString("INSERT INTO article_like (article_like_id, article_id, user_id, created_at) VALUES ")
			var args []any
			for i := first; i < min(first+1000, n); i++ {
				if i > first {
					q.WriteByte(',')
				}
				q.WriteString("(?, ?, ?, ?)")
				args = append(args, ids[i], articleID, 1_000_000+i, time.Now().UTC())
			}
			if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = like_count + ?, version = version + 1 WHERE article_id = ?",
			n, articleID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
