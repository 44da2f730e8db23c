package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"board/internal/auth"
	"board/internal/polltest"
)

// notificationOut is one notification as the API shows it.
type notificationOut struct {
	NotificationID, Kind, ArticleID, ArticleTitle, CommentID, Action, Reason string
	ActorIDs                                                                 []string
	ActorCount                                                               int
	Read                                                                     bool
}

type inboxPage struct {
	Notifications []notificationOut
	NextCursor    string
}

// inbox returns the user's whole inbox, newest first, following the cursors.
func inbox(t *testing.T, base, token string) []notificationOut {
	t.Helper()
	var all []notificationOut
	for cursor := ""; ; {
		var page inboxPage
		if a := getAs(t, token, base+"/v1/notifications?pageSize=7&cursor="+cursor, &page); a.status != http.StatusOK {
			t.Fatalf("inbox: %d %s", a.status, a.body)
		}
		all = append(all, page.Notifications...)
		if cursor = page.NextCursor; cursor == "" {
			return all
		}
	}
}

func unreadCount(t *testing.T, base, token string) int {
	t.Helper()
	var out struct{ Count int }
	if a := getAs(t, token, base+"/v1/notifications/unread-count", &out); a.status != http.StatusOK {
		t.Fatalf("unread count: %d %s", a.status, a.body)
	}
	return out.Count
}

// sseEvent is one event of a notification stream.
type sseEvent struct {
	id, event, data string
}

// stream is an open notification stream whose events arrive on events.
type stream struct {
	events <-chan sseEvent
	close  func()
}

// openStream opens the user's notification stream at base, resuming after lastID when it is not empty.
func openStream(t *testing.T, base, token, lastID string) stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/notifications/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bearer(token))
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the reader goroutine below closes it
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan sseEvent, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(events)
		defer resp.Body.Close()
		var ev sseEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "":
				if ev.event != "" {
					events <- ev
				}
				ev = sseEvent{}
			case "id":
				ev.id = value
			case "event":
				ev.event = value
			case "data":
				ev.data = value
			}
		}
	}()
	s := stream{events: events, close: func() { cancel(); <-done }}
	t.Cleanup(s.close)
	return s
}

// next returns the stream's next event of the kind, skipping others, within 20 s.
func (s stream) next(t *testing.T, kind string) sseEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended while waiting for a %s event", kind)
			}
			if ev.event == kind {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 20 s", kind)
		}
	}
}

// nextNotification returns the stream's next notification.
func (s stream) nextNotification(t *testing.T) (notificationOut, string) {
	t.Helper()
	ev := s.next(t, "notification")
	var n notificationOut
	if err := json.Unmarshal([]byte(ev.data), &n); err != nil {
		t.Fatalf("notification event %q: %v", ev.data, err)
	}
	return n, ev.id
}

func postComment(t *testing.T, base, token, article, parentPath string) (id, path string) {
	t.Helper()
	body := map[string]any{"articleId": article, "content": "a reply"}
	if parentPath != "" {
		body["parentPath"] = parentPath
	}
	a := sendAs(t, bearer(token), "POST", base+"/v2/comments", body)
	var c struct{ CommentID, Path string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &c) != nil {
		t.Fatalf("comment: %d %s", a.status, a.body)
	}
	return c.CommentID, c.Path
}

// What people are told, through the running services: a comment on your article, a reply to your comment, likes of
// your article grouped in one notification updated in place, a moderator's act; never your own acts; a comment
// deleted before it was read is taken back; live on the stream, which resumes from Last-Event-ID; and only your own
// inbox.
func TestNotificationFlow(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the board's log:\n%s", p.logs)
		}
	})
	n := p.urls["notification"]
	aliceID, alice := signUp(t, p, "alice")
	bobID, bob := signUp(t, p, "bob")
	carolID, carol := signUp(t, p, "carol")
	daveID, dave := signUp(t, p, "dave")
	signUp(t, p, "mod")
	mod := grant(t, p, "mod", "moderator")

	live := openStream(t, n, alice, "")
	if ev := live.next(t, "unread"); ev.data != `{"count":0}` {
		t.Fatalf("first unread event %q, want a count of 0", ev.data)
	}
	article := writeArticle(t, p, alice, 1, "tell me")
	bobComment, bobPath := postComment(t, p.urls["comment"], bob, article, "")
	got, _ := live.nextNotification(t)
	if got.Kind != "article-comment" || got.ArticleID != article || got.CommentID != bobComment || got.ArticleTitle != "tell me" ||
		strings.Join(got.ActorIDs, ",") != strconv.FormatInt(bobID, 10) || got.Read {
		t.Fatalf("after bob's comment alice got %+v", got)
	}
	if ev := live.next(t, "unread"); ev.data != `{"count":1}` {
		t.Fatalf("unread event %q, want a count of 1", ev.data)
	}

	// alice's reply tells bob, and not alice.
	bobLive := openStream(t, n, bob, "")
	reply, _ := postComment(t, p.urls["comment"], alice, article, bobPath)
	if got, _ := bobLive.nextNotification(t); got.Kind != "comment-reply" || got.CommentID != reply {
		t.Fatalf("after alice's reply bob got %+v", got)
	}

	// Likes: one notification, updated in place, newest liker first; alice's own like tells no one.
	for _, token := range []string{bob, carol, alice} {
		id := map[string]int64{bob: bobID, carol: carolID, alice: aliceID}[token]
		if a := sendAs(t, bearer(token), "POST", p.urls["like"]+"/v1/article-likes/articles/"+article+"/users/"+strconv.FormatInt(id, 10), nil); a.status >= 300 {
			t.Fatalf("like: %d %s", a.status, a.body)
		}
	}
	var likes notificationOut
	var lastID string
	eventually(t, func() string {
		likes, lastID = live.nextNotification(t)
		if likes.Kind != "article-like" || likes.ActorCount != 2 {
			return "not yet two likers"
		}
		return ""
	})
	if strings.Join(likes.ActorIDs, ",") != strconv.FormatInt(carolID, 10)+","+strconv.FormatInt(bobID, 10) {
		t.Errorf("likers %v, want carol then bob", likes.ActorIDs)
	}

	// A comment deleted before alice read it is taken back.
	gone, _ := postComment(t, p.urls["comment"], carol, article, "")
	live.nextNotification(t)
	if a := sendAs(t, bearer(carol), "DELETE", p.urls["comment"]+"/v2/comments/"+gone, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete comment: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		for _, got := range inbox(t, n, alice) {
			if got.CommentID == gone {
				return "the deleted comment's notification is still there"
			}
		}
		return ""
	})
	if c := unreadCount(t, n, alice); c != 2 {
		t.Errorf("unread count %d, want 2 (bob's comment and the likes)", c)
	}

	// The stream resumes after the last event it had: a like while it was closed comes first, once.
	live.close()
	if a := sendAs(t, bearer(dave), "POST", p.urls["like"]+"/v1/article-likes/articles/"+article+"/users/"+strconv.FormatInt(daveID, 10), nil); a.status >= 300 {
		t.Fatalf("like: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		for _, got := range inbox(t, n, alice) {
			if got.Kind == "article-like" && got.ActorCount == 3 {
				return ""
			}
		}
		return "dave's like is not in the group yet"
	})
	resumed := openStream(t, n, alice, lastID)
	if got, _ := resumed.nextNotification(t); got.NotificationID != likes.NotificationID || got.ActorCount != 3 {
		t.Fatalf("resumed with %+v, want the like group with 3 likers", got)
	}
	select {
	case ev := <-resumed.events:
		if ev.event == "notification" {
			t.Fatalf("a second notification on resume: %+v", ev)
		}
	case <-time.After(300 * time.Millisecond):
	}

	// Reading.
	if a := sendAs(t, bearer(alice), "POST", n+"/v1/notifications/"+likes.NotificationID+"/read", nil); a.status != http.StatusNoContent {
		t.Fatalf("read: %d %s", a.status, a.body)
	}
	if ev := resumed.next(t, "unread"); ev.data != `{"count":1}` {
		t.Errorf("unread event after a read %q, want a count of 1", ev.data)
	}
	if a := sendAs(t, bearer(bob), "POST", n+"/v1/notifications/"+likes.NotificationID+"/read", nil); a.status != http.StatusNotFound || a.code() != "NOTIFICATION_NOT_FOUND" {
		t.Errorf("bob reading alice's notification: %d %s, want 404 NOTIFICATION_NOT_FOUND", a.status, a.body)
	}
	if a := sendAs(t, bearer(alice), "POST", n+"/v1/notifications/read-all", nil); a.status != http.StatusNoContent {
		t.Fatalf("read all: %d %s", a.status, a.body)
	}
	if c := unreadCount(t, n, alice); c != 0 {
		t.Errorf("unread count after read-all %d, want 0", c)
	}

	// A moderator's ban reaches the banned user.
	if a := sendAs(t, bearer(mod), "PUT", p.urls["moderation"]+"/v1/bans/"+strconv.FormatInt(carolID, 10), map[string]any{"reason": "spam"}); a.status != http.StatusOK {
		t.Fatalf("ban: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		for _, got := range inbox(t, n, carol) {
			if got.Kind == "moderation" && got.Action == "ban" && got.Reason == "spam" {
				return ""
			}
		}
		return "carol has no ban notification"
	})

	// Only one's own inbox, with clear answers to bad input.
	var alicePage inboxPage
	getAs(t, alice, n+"/v1/notifications?pageSize=1", &alicePage)
	for _, c := range []struct {
		token, path string
		status      int
		code        string
	}{
		{"", "/v1/notifications", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"", "/v1/notifications/stream", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{bob, "/v1/notifications?cursor=" + alicePage.NextCursor, http.StatusBadRequest, "INVALID_CURSOR"},
		{bob, "/v1/notifications?cursor=12345", http.StatusBadRequest, "INVALID_CURSOR"},
		{bob, "/v1/notifications?pageSize=0", http.StatusBadRequest, "INVALID_PAGE_SIZE"},
	} {
		if a := getAs(t, c.token, n+c.path, nil); a.status != c.status || a.code() != c.code {
			t.Errorf("GET %s: %d %s, want %d %s", c.path, a.status, a.body, c.status, c.code)
		}
	}
}

// The inbox is written from committed events: a board killed with SIGKILL while comments pour in comes back with a
// notification for every comment it acknowledged, and a stream that resumes from its last event id gets the rest,
// none twice.
func TestNotificationsSurviveKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	args := allServicesArgs(t)
	p := startProcess(t, args...)
	const writer = 1
	m := registerMinter(t, p.urls, args)
	token := func(user int64) string { return m.token(t, auth.Principal{UserID: user, Role: auth.RoleUser}) }
	a := sendAs(t, bearer(token(writer)), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "under fire", "content": "c", "boardId": 1})
	var art articleOut
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &art) != nil {
		t.Fatalf("article: %d %s", a.status, a.body)
	}
	live := openStream(t, p.urls["notification"], token(writer), "")
	seen := map[string]bool{}
	var lastID string
	var mu sync.Mutex
	go func() {
		for ev := range live.events {
			if ev.event != "notification" {
				continue
			}
			var n notificationOut
			if json.Unmarshal([]byte(ev.data), &n) == nil {
				mu.Lock()
				seen[n.CommentID], lastID = true, ev.id
				mu.Unlock()
			}
		}
	}()
	var next atomic.Int64
	var ackedMu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				user := next.Add(1) + 100
				req := jsonRequest(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": art.ArticleID, "content": "fast"})
				req.Header.Set("Authorization", bearer(token(user)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // killed
				}
				var c struct{ CommentID string }
				err = json.NewDecoder(resp.Body).Decode(&c)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusCreated || err != nil {
					return
				}
				ackedMu.Lock()
				acked = append(acked, c.CommentID)
				ackedMu.Unlock()
			}
		})
	}
	polltest.Until(t, time.Minute, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 30, strconv.Itoa(len(seen)) + " notifications streamed before the kill, want 30"
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	wg.Wait()
	live.close()
	waitGone(t, p.redisPid)

	p = startProcess(t, args...)
	registerMinter(t, p.urls, args)
	mu.Lock()
	resumeAfter, before := lastID, len(seen)
	mu.Unlock()
	resumed := openStream(t, p.urls["notification"], token(writer), resumeAfter)
	for {
		var missing int
		for _, id := range acked {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		n, _ := resumed.nextNotification(t)
		if seen[n.CommentID] {
			t.Fatalf("comment %s came again on the resumed stream", n.CommentID)
		}
		seen[n.CommentID] = true
	}
	if got := len(inbox(t, p.urls["notification"], token(writer))); got < len(acked) {
		t.Errorf("%d notifications in the inbox, fewer than the %d comments acknowledged", got, len(acked))
	}
	t.Logf("%d comments acknowledged, %d streamed before the kill", len(acked), before)
}
