package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
)

// sendKeyed sends body as JSON with an Idempotency-Key, as the user the test transport picks (see actingUser).
func sendKeyed(t *testing.T, method, url string, body any, key string) authAnswer {
	t.Helper()
	req := jsonRequest(t, method, url, body)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return authAnswer{resp.StatusCode, resp.Header, raw}
}

// wantReplay sends a keyed write twice and checks that the second answer is the first, replayed; it returns the body.
func wantReplay(t *testing.T, what, method, url string, body any, key string) []byte {
	t.Helper()
	first := sendKeyed(t, method, url, body, key)
	if first.status != http.StatusCreated {
		t.Fatalf("%s: %d %s", what, first.status, first.body)
	}
	again := sendKeyed(t, method, url, body, key)
	if again.status != first.status || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("%s sent again: %d %s (replayed %q), want the first answer %d %s", what, again.status, again.body,
			again.header.Get("Idempotent-Replayed"), first.status, first.body)
	}
	return first.body
}

// A write sent again with its Idempotency-Key, as a client whose answer was lost in a failover would, is made once
// and answered as the first time, in every keyed service; behind Vitess each key's record is on its write's shard
// and found through the lookup vindex.
func TestIdempotentRetries(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	const writer, liker = 77, 78
	var created articleOut
	body := wantReplay(t, "create", "POST", p.urls["article"]+"/v1/articles",
		map[string]any{"title": "once", "content": "c", "boardId": 3, "writerId": writer}, "create-1")
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	// The same key with another body, on another board (another shard, maybe): refused.
	if a := sendKeyed(t, "POST", p.urls["article"]+"/v1/articles",
		map[string]any{"title": "twice", "content": "c", "boardId": 4, "writerId": writer}, "create-1"); a.status != http.StatusConflict || a.code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Errorf("the key with another article: %d %s", a.status, a.body)
	}
	if a := sendKeyed(t, "POST", p.urls["article"]+"/v1/articles",
		map[string]any{"title": "t", "content": "c", "boardId": 3, "writerId": writer}, "not a key"); a.status != http.StatusBadRequest || a.code() != "INVALID_IDEMPOTENCY_KEY" {
		t.Errorf("a bad key: %d %s", a.status, a.body)
	}

	// Concurrent copies of one create, on boards of both shards.
	for _, board := range []int{5, 6} {
		var wg sync.WaitGroup
		answers := make([]authAnswer, 10)
		for i := range answers {
			wg.Go(func() {
				answers[i] = sendKeyed(t, "POST", p.urls["article"]+"/v1/articles",
					map[string]any{"title": "raced", "content": "c", "boardId": board, "writerId": writer}, fmt.Sprintf("raced-%d", board))
			})
		}
		wg.Wait()
		for _, a := range answers {
			if a.status != http.StatusCreated || string(a.body) != string(answers[0].body) {
				t.Errorf("board %d: concurrent copy answered %d %s, want 201 %s", board, a.status, a.body, answers[0].body)
			}
		}
		var count int
		call(t, "GET", fmt.Sprintf("%s/v1/articles/boards/%d/count", p.urls["article"], board), nil, http.StatusOK, &count)
		if count != 1 {
			t.Errorf("board %d has %d articles after concurrent copies of one create, want 1", board, count)
		}
	}

	article := created.ArticleID
	wantReplay(t, "comment", "POST", p.urls["comment"]+"/v2/comments",
		map[string]any{"articleId": article, "content": "first", "writerId": liker}, "comment-1")
	likePath := fmt.Sprintf("%s/v1/article-likes/articles/%s/users/%d", p.urls["like"], article, liker)
	wantReplay(t, "like", "POST", likePath, nil, "like-1")
	if a := sendKeyed(t, "POST", likePath+"/optimistic-lock", nil, "like-1"); a.status != http.StatusConflict || a.code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Errorf("the like's key on another strategy's path: %d %s", a.status, a.body)
	}
	wantReplay(t, "report", "POST", p.urls["moderation"]+"/v1/reports",
		map[string]any{"targetType": "article", "targetId": article, "reason": "spam"}, "report-1")

	var boardCount, comments, likes int
	call(t, "GET", p.urls["article"]+"/v1/articles/boards/3/count", nil, http.StatusOK, &boardCount)
	call(t, "GET", p.urls["comment"]+"/v2/comments/articles/"+article+"/count", nil, http.StatusOK, &comments)
	call(t, "GET", p.urls["like"]+"/v1/article-likes/articles/"+article+"/count", nil, http.StatusOK, &likes)
	if boardCount != 1 || comments != 1 || likes != 1 {
		t.Errorf("counts after every write sent twice: %d articles, %d comments, %d likes; want 1 each", boardCount, comments, likes)
	}
	m, _ := minters.Load(strings.TrimPrefix(p.urls["article"], "http://"))
	modToken := m.(*minter).token(t, auth.Principal{UserID: testModerator.UserID, Role: auth.RoleModerator})
	a := sendAs(t, bearer(modToken), "GET", p.urls["moderation"]+"/v1/reports", nil)
	var queue struct{ Targets []struct{ ReportCount int } }
	if a.status != http.StatusOK || json.Unmarshal(a.body, &queue) != nil || len(queue.Targets) != 1 || queue.Targets[0].ReportCount != 1 {
		t.Errorf("the report queue after a report sent twice: %d %s, want one target reported once", a.status, a.body)
	}
}

// The web's write form sent twice, as a double click or a reload would send it, makes one article: the pages send
// the form's key on to the article service.
func TestWebFormSentTwiceWritesOnce(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	signUp(t, p, "twice")
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// A client of its own: the tests' transport would add tokens to the writes.
	browser := &http.Client{Jar: jar, Transport: &http.Transport{}, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// sent is a form's answer: its status and where it goes on to.
	type sent struct {
		status   int
		location string
	}
	postForm := func(path string, form url.Values) sent {
		t.Helper()
		resp, err := browser.PostForm(p.urls["web"]+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return sent{resp.StatusCode, resp.Header.Get("Location")}
	}
	if a := postForm("/signin", url.Values{"username": {"twice"}, "password": {"twice-password"}}); a.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d", a.status)
	}
	resp, err := browser.Get(p.urls["web"] + "/boards/2/write")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="idempotencyKey" value="([^"]+)"`).FindSubmatch(page)
	if err != nil || resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("the write form: %d, %v, no key in\n%s", resp.StatusCode, err, page)
	}
	form := url.Values{"title": {"Sent twice"}, "content": {"Once"}, "idempotencyKey": {string(m[1])}}
	first, second := postForm("/boards/2/write", form), postForm("/boards/2/write", form)
	if first.status != http.StatusSeeOther || second != first {
		t.Errorf("the form sent twice: %+v, then %+v; want both to the one article", first, second)
	}
	var count int
	call(t, "GET", p.urls["article"]+"/v1/articles/boards/2/count", nil, http.StatusOK, &count)
	if count != 1 {
		t.Errorf("board 2 has %d articles after one form sent twice, want 1", count)
	}
}
