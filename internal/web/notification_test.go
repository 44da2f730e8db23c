package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/httpio"
)

// The notification service, faked as SPEC §3.11 says, and the bell, the inbox and the live stream tested on it.

// alicesInbox is the first page of alice's (10) inbox, newest first: bob's comment on her article (unread), his
// reply to her comment (read), three likes, a moderator's removal of her comment, and her ban.
var alicesInbox = []map[string]any{
	{"notificationId": "501", "kind": "article-comment", "articleId": "1", "articleTitle": "First post", "commentId": "100",
		"actorIds": []string{"11"}, "actorCount": 1, "read": false, "createdAt": wireTime(t0), "updatedAt": wireTime(t0)},
	{"notificationId": "502", "kind": "comment-reply", "articleId": "1", "articleTitle": "First post", "commentId": "102",
		"actorIds": []string{"11"}, "actorCount": 1, "read": true, "createdAt": wireTime(t0), "updatedAt": wireTime(t0)},
	{"notificationId": "503", "kind": "article-like", "articleId": "1", "articleTitle": "First post",
		"actorIds": []string{"11", "12", "13"}, "actorCount": 3, "read": false, "createdAt": wireTime(t0), "updatedAt": wireTime(t0)},
	{"notificationId": "504", "kind": "moderation", "articleId": "1", "articleTitle": "First post", "commentId": "101",
		"actorIds": []string{"12"}, "actorCount": 1, "action": "remove", "reason": "Off-topic", "read": false,
		"createdAt": wireTime(t0), "updatedAt": wireTime(t0)},
	{"notificationId": "505", "kind": "moderation", "actorIds": []string{"12"}, "actorCount": 1, "action": "ban",
		"reason": "Spam", "read": false, "createdAt": wireTime(t0), "updatedAt": wireTime(t0)},
}

// notificationMux is the fake notification service: alice's inbox in two pages (the second after cursor "c2"),
// three unread, her preferences; its stream answers with stream.
func (f *fakes) notificationMux(stream http.HandlerFunc) http.Handler {
	mux := http.NewServeMux()
	prefs := map[string]bool{"reply": true, "commentReply": true, "like": false, "moderation": true,
		"mention": true, "watched": false, "autoWatch": true}
	mux.HandleFunc("GET /v1/notifications", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); !ok {
			return
		}
		switch r.URL.Query().Get("cursor") {
		case "":
			writeJSON(w, http.StatusOK, map[string]any{"notifications": alicesInbox, "nextCursor": "c2"})
		case "c2":
			writeJSON(w, http.StatusOK, map[string]any{"notifications": []map[string]any{{"notificationId": "400",
				"kind": "article-like", "articleId": "2", "articleTitle": "Old & gold", "actorIds": []string{"11"}, "actorCount": 1,
				"read": true, "createdAt": wireTime(t0), "updatedAt": wireTime(t0)}}, "nextCursor": ""})
		default:
			writeError(w, http.StatusBadRequest, "INVALID_CURSOR", "This cursor is not one of your inbox's.")
		}
	})
	mux.HandleFunc("GET /v1/notifications/unread-count", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			writeJSON(w, http.StatusOK, map[string]any{"count": 3})
		}
	})
	mux.HandleFunc("POST /v1/notifications/{notificationId}/read", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); !ok {
			return
		}
		if r.PathValue("notificationId") != "501" {
			writeError(w, http.StatusNotFound, "NOTIFICATION_NOT_FOUND", "no such notification in your inbox")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/notifications/read-all", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			w.WriteHeader(http.StatusNoContent)
		}
	})
	mux.HandleFunc("GET /v1/notification-preferences", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			writeJSON(w, http.StatusOK, prefs)
		}
	})
	mux.HandleFunc("PUT /v1/notification-preferences", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); !ok {
			return
		}
		var in map[string]bool
		if json.NewDecoder(r.Body).Decode(&in) != nil || len(in) != 7 {
			writeError(w, http.StatusBadRequest, "INVALID_PREFERENCES", "all seven preferences are required")
			return
		}
		writeJSON(w, http.StatusOK, in)
	})
	mux.HandleFunc("GET /v1/notifications/stream", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			stream(w, r)
		}
	})
	f.watchRoutes(mux)
	f.bookmarkRoutes(mux)
	return mux
}

// notificationPages is the pages on the fakes with the fake notification service, whose stream answers with stream.
func notificationPages(t *testing.T, f *fakes, stream http.HandlerFunc) http.Handler {
	t.Helper()
	srv := httptest.NewServer(f.recorded("notification", f.notificationMux(stream)))
	t.Cleanup(srv.Close)
	return f.handler(t, func(c *Config) { c.Origins.Notification = srv.URL })
}

// TestBell: a signed-in reader's pages have the bell with the unread count, asked with their token; a signed-out
// reader's have none, and a notification service down or hung leaves the bell without a count, not the page.
func TestBell(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := notificationPages(t, f, nil)
	alice := f.token(t, 10, auth.RoleUser)
	for _, path := range []string{"/", "/boards/1", "/articles/1", "/hot", "/notifications"} {
		w := get(t, h, path, alice)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d", path, w.Code)
		}
		mustContain(t, path, w.Body.String(), `<a id="nav-bell" class="bell" href="/notifications" aria-label="Notifications, 3 unread">`,
			`<span id="bell-count" class="bell-count">3</span>`)
	}
	for _, s := range f.requests("notification") {
		if s.String() == "GET /v1/notifications/unread-count" && s.Auth != "Bearer "+alice {
			t.Errorf("the count was asked with %q, want alice's token", s.Auth)
		}
	}
	w := get(t, h, "/articles/1", "")
	mustNotContain(t, "a signed-out page", w.Body.String(), `id="nav-bell"`)

	for name, origin := range map[string]string{"down": closedOrigin(t), "hung": hungOrigin(t)} {
		t.Run(name, func(t *testing.T) {
			f := newFakes(t)
			h := f.handler(t, func(c *Config) { c.Origins.Notification = origin })
			alice := f.token(t, 10, auth.RoleUser)
			start := time.Now()
			w := get(t, h, "/articles/1", alice)
			if took := time.Since(start); took > bellTimeout+2*time.Second {
				t.Errorf("the page took %s", took)
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status %d:\n%s", w.Code, w.Body)
			}
			mustContain(t, "the page", w.Body.String(), `<a id="nav-bell" class="bell" href="/notifications" aria-label="Notifications">`,
				`<span id="bell-count" class="bell-count" hidden>0</span>`)
			// The next page does not wait on it again.
			start = time.Now()
			get(t, h, "/articles/1", alice)
			if took := time.Since(start); took >= bellTimeout {
				t.Errorf("the next page took %s: it waited for the bell again", took)
			}
		})
	}
}

// TestBellAskedOnce: a reader's count is asked once in bellFresh and shown on the pages they open meanwhile; after
// it, after their own "mark read", and on the inbox, it is asked again; another reader's is their own.
func TestBellAskedOnce(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := notificationPages(t, f, nil)
	alice, bob := f.token(t, 10, auth.RoleUser), f.token(t, 11, auth.RoleUser)
	asked := func() (n int) {
		for _, s := range f.requests("notification") {
			if s.Path == "/v1/notifications/unread-count" {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		name, path, token string
		asked             int
	}{
		{"first page", "/boards/1", alice, 1},
		{"next page", "/articles/1", alice, 1},
		{"another reader", "/articles/1", bob, 2},
		{"the inbox", "/notifications", alice, 3},
		{"a page after it", "/", alice, 3},
		{"after marking read", "/", alice, 4},
		{"after bellFresh", "/hot", alice, 5},
	} {
		switch step.name {
		case "after marking read":
			post(t, h, "/notifications/501/read", nil, alice)
		case "after bellFresh":
			f.clock.advance(bellFresh)
		}
		w := get(t, h, step.path, step.token)
		mustContain(t, step.name, w.Body.String(), `<span id="bell-count" class="bell-count">3</span>`)
		if n := asked(); n != step.asked {
			t.Errorf("%s: the count was asked %d times in all, want %d", step.name, n, step.asked)
		}
	}
}

// TestInbox: the inbox says who did what, links each to the comment or the article, sets the unread apart with a
// button each, and pages to older ones by the service's cursor.
func TestInbox(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := notificationPages(t, f, nil)
	alice := f.token(t, 10, auth.RoleUser)

	w := get(t, h, "/notifications", alice)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d:\n%s", w.Code, w.Body)
	}
	body := w.Body.String()
	mustContain(t, "the inbox", body,
		`<ol id="inbox" class="inbox" data-live>`,
		`<li id="n-501" class="notification unread" data-kind="article-comment">`,
		`<strong class="who">bob</strong> commented on your article <a class="target" href="/articles/1#c-100">First post</a>`,
		`<li id="n-502" class="notification" data-kind="comment-reply">`,
		`<strong class="who">bob</strong> replied to your comment on <a class="target" href="/articles/1#c-102">First post</a>`,
		`<strong class="who">3 people</strong> liked your article <a class="target" href="/articles/1">First post</a>`,
		`<p class="meta actors">bob, mia and user 13</p>`,
		`<strong class="who">mia</strong> removed your comment on <a class="target" href="/articles/1#c-101">First post</a>`,
		`<p class="reason">Reason: Off-topic</p>`,
		`<strong class="who">mia</strong> banned you`, `<p class="reason">Reason: Spam</p>`,
		`<form class="mark-read" method="post" action="/notifications/501/read"><input type="hidden" name="back" value="/notifications">`,
		`<form id="read-all" method="post" action="/notifications/read-all">`,
		`<a id="older" href="/notifications?cursor=c2" rel="next">Older ›</a>`,
		`<input id="pref-reply" type="checkbox" name="reply" checked>`,
		`<input id="pref-like" type="checkbox" name="like">`,
		`<input id="pref-mention" type="checkbox" name="mention" checked>`,
		`<input id="pref-watched" type="checkbox" name="watched">`,
		`<input id="pref-auto-watch" type="checkbox" name="autoWatch" checked>`)
	mustNotContain(t, "the inbox", body, `action="/notifications/502/read"`, `id="newest"`)
	if got := f.requests("notification"); len(got) < 3 || !strings.Contains(fmt.Sprint(got), "GET /v1/notifications?pageSize=20") {
		t.Errorf("the notification service received %v", got)
	}

	w = get(t, h, "/notifications?cursor=c2", alice)
	mustContain(t, "the older page", w.Body.String(), `<ol id="inbox" class="inbox">`, `<a class="target" href="/articles/2">Old &amp; gold</a>`,
		`<a id="newest" href="/notifications" rel="first">`)
	mustNotContain(t, "the older page", w.Body.String(), `id="older"`, `data-live`)

	// The script's fragment: the list alone.
	w = serve(t, h, visit{target: "/notifications", token: alice, header: map[string]string{"X-Fragment": "1"}})
	if w.Header().Get("X-Fragment") == "" || strings.Contains(w.Body.String(), "<html") || !strings.Contains(w.Body.String(), `id="n-501"`) {
		t.Errorf("the fragment:\n%s", w.Body)
	}

	w = get(t, h, "/notifications?cursor=elsewhere", alice)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not one of your inbox") {
		t.Errorf("a cursor from elsewhere: status %d:\n%s", w.Code, w.Body)
	}

	before := len(f.requests("notification"))
	w = get(t, h, "/notifications", "")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin?next=%2Fnotifications" {
		t.Errorf("signed out: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if n := len(f.requests("notification")) - before; n != 0 {
		t.Errorf("a signed-out visit asked the notification service %d times", n)
	}
}

// TestInboxForms: marking read, all read, and the preferences are sent as the reader, and come back to the inbox;
// a form from another site is refused before any service is asked.
func TestInboxForms(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := notificationPages(t, f, nil)
	alice := f.token(t, 10, auth.RoleUser)
	last := func() seen {
		got := f.requests("notification")
		return got[len(got)-1]
	}

	w := post(t, h, "/notifications/501/read", url.Values{"back": {"/notifications?cursor=c2"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/notifications?cursor=c2" {
		t.Errorf("mark read: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if s := last(); s.String() != "POST /v1/notifications/501/read" || s.Auth != "Bearer "+alice {
		t.Errorf("mark read sent %v with %q", s, s.Auth)
	}
	w = post(t, h, "/notifications/501/read", url.Values{"back": {"https://elsewhere.example/"}}, alice)
	if w.Header().Get("Location") != "/" {
		t.Errorf("a back elsewhere went to %q", w.Header().Get("Location"))
	}
	w = post(t, h, "/notifications/999/read", nil, alice)
	if w.Code != http.StatusNotFound {
		t.Errorf("another's notification: status %d", w.Code)
	}

	w = post(t, h, "/notifications/read-all", nil, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/notifications?notice=allread" || last().String() != "POST /v1/notifications/read-all" {
		t.Errorf("read all: status %d, Location %q, sent %v", w.Code, w.Header().Get("Location"), last())
	}

	w = post(t, h, "/notifications/preferences", url.Values{"reply": {"on"}, "moderation": {"on"}, "autoWatch": {"on"}}, alice)
	if w.Code != http.StatusSeeOther {
		t.Errorf("preferences: status %d:\n%s", w.Code, w.Body)
	}
	var sent map[string]bool
	if s := last(); s.String() != "PUT /v1/notification-preferences" || json.Unmarshal([]byte(s.Body), &sent) != nil ||
		fmt.Sprint(sent) != "map[autoWatch:true commentReply:false like:false mention:false moderation:true reply:true watched:false]" {
		t.Errorf("preferences sent %v %s", s, s.Body)
	}

	before := len(f.requests("notification"))
	w = serve(t, h, visit{method: http.MethodPost, target: "/notifications/read-all", form: url.Values{}, token: alice,
		header: map[string]string{"Sec-Fetch-Site": "cross-site"}})
	if w.Code != http.StatusForbidden || len(f.requests("notification")) != before {
		t.Errorf("a cross-site form: status %d, the service asked %d times", w.Code, len(f.requests("notification"))-before)
	}
	w = post(t, h, "/notifications/read-all", nil, "")
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/signin") {
		t.Errorf("signed out: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
}

// TestNotificationStream: the web passes the service's stream on event by event, as the reader with the reader's
// Last-Event-ID, past the request deadline and the server's timeouts; a signed-out reader is refused without a call,
// and the service's refusals come through.
func TestNotificationStream(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	next := make(chan struct{})
	h := notificationPages(t, f, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 3000\n\nevent: unread\ndata: {\"count\":2}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "id: 8\nevent: notification\ndata: {\"notificationId\":\"501\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	// Served as the web is, with a request deadline and server timeouts far shorter than the stream.
	httpSrv := httpio.Server{Service: "web", API: h.(*http.ServeMux), RequestTimeout: 100 * time.Millisecond,
		Streams: map[string]bool{"/notifications/stream": true}, Metrics: httpio.NewMetrics(prometheus.NewRegistry()),
		Logger: slog.New(slog.DiscardHandler)}.HTTPServer()
	srv := httptest.NewUnstartedServer(httpSrv.Handler)
	srv.Config = httpSrv
	srv.Start()
	t.Cleanup(srv.Close)
	alice := f.token(t, 10, auth.RoleUser)

	// A stream that stalls fails the test at this deadline rather than hang it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/notifications/stream", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: alice})
	req.Header.Set("Last-Event-ID", "7")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	read := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if !sc.Scan() {
				t.Fatalf("the stream ended (%v) before it said %q", sc.Err(), w)
			}
			if got := sc.Text(); got != w {
				t.Fatalf("the stream said %q, want %q", got, w)
			}
		}
	}
	read("retry: 3000", "", "event: unread", `data: {"count":2}`, "")
	time.Sleep(600 * time.Millisecond) // past the request deadline and every server timeout of 100 ms
	close(next)
	read("id: 8", "event: notification", `data: {"notificationId":"501"}`, "")
	var upstream seen
	for _, s := range f.requests("notification") {
		if s.Path == "/v1/notifications/stream" {
			upstream = s
		}
	}
	if upstream.Auth != "Bearer "+alice {
		t.Errorf("the stream was asked with %q, want alice's token", upstream.Auth)
	}

	t.Run("signed out", func(t *testing.T) {
		before := len(f.requests("notification"))
		w := get(t, h, "/notifications/stream", "")
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `"code":"UNAUTHENTICATED"`) {
			t.Errorf("status %d: %s", w.Code, w.Body)
		}
		if n := len(f.requests("notification")) - before; n != 0 {
			t.Errorf("the service was asked %d times", n)
		}
	})
	t.Run("refused", func(t *testing.T) {
		f.override("notification", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			writeError(w, http.StatusTooManyRequests, "TOO_MANY_STREAMS", "You have 8 streams open already.")
		})
		w := get(t, h, "/notifications/stream", alice)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "30" || !strings.Contains(w.Body.String(), "TOO_MANY_STREAMS") {
			t.Errorf("status %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	})
}

// TestStreamLastEventID: the browser's Last-Event-ID, or the page's lastEventId, goes on to the service, which
// resumes from it.
func TestStreamLastEventID(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := notificationPages(t, f, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": after "+r.Header.Get("Last-Event-ID")+"\n\nid: 9\nevent: notification\ndata: {}\n\n")
	})
	alice := f.token(t, 10, auth.RoleUser)
	w := serve(t, h, visit{target: "/notifications/stream", token: alice, header: map[string]string{"Last-Event-ID": "7"}})
	if w.Code != http.StatusOK || w.Body.String() != ": after 7\n\nid: 9\nevent: notification\ndata: {}\n\n" {
		t.Errorf("status %d: %q", w.Code, w.Body)
	}
	// The page reopening a stream itself passes the id as a parameter.
	w = serve(t, h, visit{target: "/notifications/stream?lastEventId=8", token: alice})
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), ": after 8\n") {
		t.Errorf("with ?lastEventId=8: status %d: %q", w.Code, w.Body)
	}
}

// TestInboxItemOf: what an item says of its people, of each kind, and of a moderation without a moderator.
func TestInboxItemOf(t *testing.T) {
	t.Parallel()
	names := map[int64]string{1: "ann", 2: "ben", 3: "cy"}
	ids := func(n ...int64) []apijson.ID {
		out := make([]apijson.ID, len(n))
		for i, v := range n {
			out[i] = apijson.ID(v)
		}
		return out
	}
	for _, c := range []struct {
		n                notification
		who, says, names string
	}{
		{notification{Kind: "article-comment", ActorIDs: ids(1), ActorCount: 1}, "ann", "commented on your article", ""},
		{notification{Kind: "article-like", ActorIDs: ids(1, 2), ActorCount: 2}, "2 people", "liked your article", "ann and ben"},
		{notification{Kind: "article-like", ActorIDs: ids(1, 2, 3), ActorCount: 12}, "12 people", "liked your article", "ann, ben and 10 others"},
		{notification{Kind: "moderation", ArticleID: 5, CommentID: 6, Action: "hide"}, "Readers' reports", "hid your comment on", ""},
		{notification{Kind: "moderation", ArticleID: 5, Action: "lock", ActorIDs: ids(3), ActorCount: 1}, "cy", "locked your article", ""},
		{notification{Kind: "moderation", Action: "unban"}, "A moderator", "lifted your ban", ""},
		{notification{Kind: "mention", ArticleID: 5, ActorIDs: ids(1), ActorCount: 1}, "ann", "mentioned you in", ""},
		{notification{Kind: "watched-comment", ArticleID: 5, CommentID: 6, ActorIDs: ids(2), ActorCount: 1}, "ben", "commented on", ""},
		{notification{Kind: "watched-article", ArticleID: 5, ActorIDs: ids(3), ActorCount: 1}, "cy", "posted on a board you watch:", ""},
	} {
		it := inboxItemOf(c.n, names)
		if it.Who != c.who || it.Says != c.says || it.Names != c.names {
			t.Errorf("%+v: %q %q (%q), want %q %q (%q)", c.n, it.Who, it.Says, it.Names, c.who, c.says, c.names)
		}
	}
}

// TestBellsBound: past maxBells readers, counts older than bellFresh are dropped to make room, and a new count is
// not kept while every kept one is fresh.
func TestBellsBound(t *testing.T) {
	t.Parallel()
	b := bells{counts: map[int64]*unreadCount{}}
	now := time.Unix(1_800_000_000, 0)
	for id := range int64(maxBells) {
		b.keep(id, &unreadCount{asked: now}, now)
	}
	b.keep(maxBells, &unreadCount{asked: now}, now)
	if len(b.counts) != maxBells || b.counts[maxBells] != nil {
		t.Errorf("full of fresh counts: %d kept, the new one kept %v; want %d, false", len(b.counts), b.counts[maxBells] != nil, maxBells)
	}
	later := now.Add(bellFresh)
	b.keep(maxBells, &unreadCount{asked: later}, later)
	if len(b.counts) != 1 || b.counts[maxBells] == nil {
		t.Errorf("full of old counts: %d kept, the new one kept %v; want only it", len(b.counts), b.counts[maxBells] != nil)
	}
}
