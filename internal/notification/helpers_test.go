package notification

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// Who the tests' users are.
const (
	author  = 101 // writes the articles
	replier = 102
	other   = 103
	mod     = 900 // a moderator
)

// t0 is when the tests' events say their acts happened.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// nodes gives every generator of the package a node id of its own, as two instances have.
var nodes atomic.Int64

func newIDs(t testing.TB) *snowflake.Generator {
	t.Helper()
	g, err := snowflake.New(nodes.Add(1)%1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// eventIDs issues the tests' event ids.
var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(1023, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// run calls fn on every SQL backend, each with a Redis: the test Redis when BOARD_TEST_REDIS_ADDR is set, else
// miniredis.
func run(t *testing.T, fn func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend)) {
	t.Helper()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) { fn(t, db, redisclienttest.Real(t)) })
}

// origin fakes the article service's GET /v1/articles/{id}.
type origin struct {
	url      string
	mu       sync.Mutex
	articles map[int64]article
	status   atomic.Int64 // an answer other than the article's, when set
	calls    atomic.Int64
}

func newOrigin(t testing.TB) *origin {
	o := &origin{articles: map[int64]article{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.calls.Add(1)
		id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/v1/articles/"), 10, 64)
		if s := o.status.Load(); s != 0 {
			http.Error(w, `{"code":"DATABASE_UNAVAILABLE","message":"down"}`, int(s))
			return
		}
		o.mu.Lock()
		a, ok := o.articles[id]
		o.mu.Unlock()
		if !ok {
			http.Error(w, `{"code":"ARTICLE_NOT_FOUND","message":"no such article"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"articleId": apijson.ID(id), "title": a.title, "content": "c",
			"boardId": "1", "writerId": apijson.ID(a.writerID)})
	}))
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

func (o *origin) add(id, writer int64, title string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.articles[id] = article{id: id, writerID: writer, title: title}
}

// users fakes the user service's GET /v1/users?usernames=: the user named "u<id>" is user id; no other name is
// anyone's.
type users struct {
	url    string
	status atomic.Int64 // an answer other than the users', when set
	calls  atomic.Int64
}

func newUsers(t testing.TB) *users {
	u := &users{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		if s := u.status.Load(); s != 0 {
			http.Error(w, `{"code":"DATABASE_UNAVAILABLE","message":"down"}`, int(s))
			return
		}
		found := []map[string]any{}
		for _, name := range strings.Split(r.URL.Query().Get("usernames"), ",") {
			if id, err := strconv.ParseInt(strings.TrimPrefix(name, "u"), 10, 64); err == nil && strings.HasPrefix(name, "u") && id > 0 {
				found = append(found, map[string]any{"userId": apijson.ID(id), "username": name})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(found)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

// fixture is a service over a test database and Redis, with a fake article service, served as board serve does.
type fixture struct {
	t      *testing.T
	svc    *Service
	api    http.Handler
	origin *origin
	users  *users

	mu      sync.Mutex
	servers map[int64]*httptest.Server // by user: a port that serves as that user
}

// newFixture returns a service with its listener of the other instances running until the test ends.
func newFixture(t *testing.T, db *sqldb.DB, b redisclienttest.Backend, cfg Config) *fixture {
	t.Helper()
	f := &fixture{t: t, origin: newOrigin(t), users: newUsers(t), servers: map[int64]*httptest.Server{}}
	cfg.ArticleOrigin, cfg.UserOrigin, cfg.KeyPrefix, cfg.Logger = f.origin.url, f.users.url, b.Prefix, httpiotest.Logger
	f.svc = New(db, newIDs(t), b.Client, cfg)
	f.api = httpio.Server{Service: "notification", API: Routes(f.svc, httpiotest.Logger), Gatherer: prometheus.NewRegistry(),
		Metrics: httpio.NewMetrics(prometheus.NewRegistry()), Logger: httpiotest.Logger,
		Streams: map[string]bool{StreamPath: true}}.Handler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.svc.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return f
}

// call sends a request as user (0: without a principal, as a request without a token).
func (f *fixture) call(user int64, method, target, body string) httpiotest.Reply {
	h := f.api
	if user != 0 {
		h = httpiotest.As(h, user)
	}
	return httpiotest.Call(h, method, target, body)
}

// deliver hands a new event to the service's handler of its type, as the consumer would, and stops the test if the
// handler fails; it returns the envelope, to deliver again.
func (f *fixture) deliver(typ event.Type, payload any) event.Envelope {
	f.t.Helper()
	env := envelope(f.t, typ, payload)
	if err := f.handle(env); err != nil {
		f.t.Fatalf("%s: %v", typ, err)
	}
	return env
}

// handle hands env to its handler; a type without one is skipped, as the consumer skips it.
func (f *fixture) handle(env event.Envelope) error {
	h, ok := f.svc.Handlers()[env.Type]
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h(ctx, env)
}

func envelope(t testing.TB, typ event.Type, payload any) event.Envelope {
	t.Helper()
	id, err := eventIDs.Next()
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: apijson.ID(id), Type: typ, Payload: body}
}

// Payloads.

func articleEvent(id, writer int64, title string) event.Article {
	return event.Article{ArticleID: apijson.ID(id), Title: title, BoardID: 1, WriterID: apijson.ID(writer),
		CreatedAt: apijson.Time(t0), ModifiedAt: apijson.Time(t0)}
}

// commentV2 is a v2 comment: its parent is the comment whose path is its path less the last level.
func commentV2(id, articleID, writer int64, path string) event.Comment {
	return event.Comment{CommentID: apijson.ID(id), Content: "c", Path: path, ArticleID: apijson.ID(articleID),
		WriterID: apijson.ID(writer), CreatedAt: apijson.Time(t0)}
}

// commentV1 is a v1 comment; a root's parent is itself.
func commentV1(id, articleID, writer, parent int64) event.Comment {
	if parent == 0 {
		parent = id
	}
	return event.Comment{CommentID: apijson.ID(id), Content: "c", ParentCommentID: apijson.ID(parent),
		ArticleID: apijson.ID(articleID), WriterID: apijson.ID(writer), CreatedAt: apijson.Time(t0)}
}

func likeEvent(articleID, user int64) event.Like {
	return event.Like{ArticleLikeID: apijson.ID(user), ArticleID: apijson.ID(articleID),
		UserID: apijson.ID(user), CreatedAt: apijson.Time(t0)}
}

// wireN is a notification as a client reads it: ids must be JSON strings.
type wireN struct {
	NotificationID string   `json:"notificationId"`
	Kind           Kind     `json:"kind"`
	ArticleID      string   `json:"articleId"`
	ArticleTitle   string   `json:"articleTitle"`
	CommentID      string   `json:"commentId"`
	ActorIDs       []string `json:"actorIds"`
	ActorCount     int64    `json:"actorCount"`
	Action         string   `json:"action"`
	Reason         string   `json:"reason"`
	Read           bool     `json:"read"`
	CreatedAt      string   `json:"createdAt"`
	UpdatedAt      string   `json:"updatedAt"`
}

// brief is what most tests compare of a notification.
type brief struct {
	Kind    Kind
	Article string
	Comment string
	Actors  string // actor ids, newest first, comma-separated
	Count   int64
	Read    bool
	Action  string
	Reason  string
	Title   string
}

func (n wireN) brief() brief {
	return brief{n.Kind, n.ArticleID, n.CommentID, strings.Join(n.ActorIDs, ","), n.ActorCount, n.Read, n.Action, n.Reason,
		n.ArticleTitle}
}

func briefs(ns []wireN) []brief {
	out := make([]brief, len(ns))
	for i, n := range ns {
		out[i] = n.brief()
	}
	return out
}

// page is one answer of the list.
type page struct {
	Notifications []wireN `json:"notifications"`
	NextCursor    string  `json:"nextCursor"`
}

// listPage GETs one page of user's notifications.
func (f *fixture) listPage(user int64, query string) page {
	f.t.Helper()
	r := f.call(user, "GET", "/v1/notifications"+query, "")
	httpiotest.WantStatus(f.t, r, http.StatusOK)
	var p page
	decode(f.t, r.Body, &p)
	for _, n := range p.Notifications {
		checkWire(f.t, n)
	}
	return p
}

// list GETs all of user's notifications, newest first, through the pages.
func (f *fixture) list(user int64) []wireN {
	f.t.Helper()
	var all []wireN
	for cursor := ""; ; {
		p := f.listPage(user, "?pageSize=100&cursor="+cursor)
		all = append(all, p.Notifications...)
		if p.NextCursor == "" {
			return all
		}
		cursor = p.NextCursor
	}
}

// unread GETs user's unread count.
func (f *fixture) unread(user int64) int64 {
	f.t.Helper()
	r := f.call(user, "GET", "/v1/notifications/unread-count", "")
	httpiotest.WantStatus(f.t, r, http.StatusOK)
	var c struct {
		Count *int64 `json:"count"`
	}
	decode(f.t, r.Body, &c)
	if c.Count == nil {
		f.t.Fatalf("unread-count %s has no count", r.Body)
	}
	return *c.Count
}

// markRead marks one notification read as user.
func (f *fixture) markRead(user int64, id string) {
	f.t.Helper()
	httpiotest.WantStatus(f.t, f.call(user, "POST", "/v1/notifications/"+id+"/read", ""), http.StatusNoContent)
}

// inboxState is everything a user sees of the inbox, and its sequence.
type inboxState struct {
	List   []wireN
	Unread int64
	Seq    int64
}

func (f *fixture) state(user int64) inboxState {
	f.t.Helper()
	seq, _, err := f.svc.state(context.Background(), user)
	if err != nil {
		f.t.Fatal(err)
	}
	return inboxState{f.list(user), f.unread(user), seq}
}

// checkWire checks the conventions of a notification on the wire.
func checkWire(t testing.TB, n wireN) {
	t.Helper()
	if _, err := strconv.ParseInt(n.NotificationID, 10, 64); err != nil {
		t.Errorf("notificationId %q: %v", n.NotificationID, err)
	}
	if !httpiotest.TimeFormat.MatchString(n.CreatedAt) || !httpiotest.TimeFormat.MatchString(n.UpdatedAt) {
		t.Errorf("times %q, %q are not RFC 3339 UTC with milliseconds", n.CreatedAt, n.UpdatedAt)
	}
	if n.ActorIDs == nil {
		t.Errorf("notification %s: actorIds missing or null", n.NotificationID)
	}
	if len(n.ActorIDs) > maxActors || int64(len(n.ActorIDs)) > n.ActorCount {
		t.Errorf("notification %s: actorIds %v with actorCount %d", n.NotificationID, n.ActorIDs, n.ActorCount)
	}
}

func decode(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
}

func idStr(id int64) string { return strconv.FormatInt(id, 10) }

// The stream, as a client reads it.

// sseEvent is one event of a stream; a retry field comes as an event of its own named "retry".
type sseEvent struct {
	ID, Name, Data string
}

type sseStream struct {
	t      testing.TB
	resp   *http.Response
	events chan sseEvent // closed when the stream ends
	cancel context.CancelFunc
}

// server returns a port that serves the API as user, as if each request carried the user's token.
func (f *fixture) server(user int64) *httptest.Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	if srv, ok := f.servers[user]; ok {
		return srv
	}
	srv := httptest.NewServer(httpiotest.As(f.api, user))
	f.t.Cleanup(func() {
		srv.CloseClientConnections() // ends the streams still open
		srv.Close()
	})
	f.servers[user] = srv
	return srv
}

// get starts GET path as user with the headers, and returns the answer, body unread.
func (f *fixture) get(user int64, path string, header http.Header) (*http.Response, context.CancelFunc) {
	f.t.Helper()
	srv := f.server(user)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	return resp, cancel
}

// stream opens user's stream, resuming after lastEventID unless it is empty; it must be answered 200.
func (f *fixture) stream(user int64, lastEventID string) *sseStream {
	f.t.Helper()
	h := http.Header{}
	if lastEventID != "" {
		h.Set("Last-Event-ID", lastEventID)
	}
	return f.openStream(user, StreamPath, h)
}

// openStream opens the stream at path (with a query, say) as user; it must be answered 200.
func (f *fixture) openStream(user int64, path string, h http.Header) *sseStream {
	f.t.Helper()
	resp, cancel := f.get(user, path, h) //nolint:bodyclose // the stream's close closes it, at the latest when the test ends
	if resp.StatusCode != http.StatusOK {
		r := readReply(f.t, resp)
		cancel()
		f.t.Fatalf("stream: status %d; body %s", r.Status, r.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		f.t.Errorf("stream Content-Type = %q", ct)
	}
	s := &sseStream{t: f.t, resp: resp, events: make(chan sseEvent, 1024), cancel: cancel}
	go s.read()
	f.t.Cleanup(s.close)
	return s
}

// streamRefused opens user's stream and expects an error answer, which it returns.
func (f *fixture) streamRefused(user int64, path string) httpiotest.Reply {
	f.t.Helper()
	resp, cancel := f.get(user, path, nil)
	defer cancel()
	if resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		f.t.Fatal("the stream opened; want it refused")
	}
	return readReply(f.t, resp)
}

// readReply reads a whole answer.
func readReply(t testing.TB, resp *http.Response) httpiotest.Reply {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpiotest.Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(body)}
}

func mustMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *sseStream) read() {
	defer close(s.events)
	r := bufio.NewReader(s.resp.Body)
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a blank line ends an event; a comment (": ping") is nothing
			if line == "" && (ev.Name != "" || ev.Data != "") {
				s.events <- ev
				ev = sseEvent{}
			}
		case "id":
			ev.ID = value
		case "event":
			ev.Name = value
		case "data":
			ev.Data = value
		case "retry":
			ev.Name, ev.Data = "retry", value
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the stream's next event; the test stops if none comes within the timeout.
func (s *sseStream) next(timeout time.Duration) sseEvent {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(timeout):
		s.t.Fatalf("no event within %v", timeout)
	}
	return sseEvent{}
}

// unread expects the next event to be the unread count n.
func (s *sseStream) unread(n int64) {
	s.t.Helper()
	ev := s.next(5 * time.Second)
	if want := `{"count":` + strconv.FormatInt(n, 10) + `}`; ev.Name != "unread" || ev.Data != want {
		s.t.Fatalf("event %+v, want unread %s", ev, want)
	}
}

// notification expects the next event to be a notification, and returns it.
func (s *sseStream) notification(timeout time.Duration) (int64, wireN) {
	s.t.Helper()
	ev := s.next(timeout)
	if ev.Name != "notification" {
		s.t.Fatalf("event %+v, want a notification", ev)
	}
	seq, err := strconv.ParseInt(ev.ID, 10, 64)
	if err != nil {
		s.t.Fatalf("event id %q: %v", ev.ID, err)
	}
	var n wireN
	decode(s.t, ev.Data, &n)
	checkWire(s.t, n)
	return seq, n
}

// quiet expects no event for d.
func (s *sseStream) quiet(d time.Duration) {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			s.t.Fatalf("unexpected event %+v", ev)
		}
	case <-time.After(d):
	}
}

// opened expects the events a stream starts with: the retry (with the id it starts from) and the unread count.
func (s *sseStream) opened(unread int64) {
	s.t.Helper()
	if ev := s.next(5 * time.Second); ev.Name != "retry" || ev.Data != "3000" || ev.ID == "" {
		s.t.Fatalf("first event %+v, want retry: 3000", ev)
	}
	s.unread(unread)
}

// noAutoWatch turns autoWatch off for users: the tests of replies are about replies, not about the watches that
// writing a comment makes.
func (f *fixture) noAutoWatch(users ...int64) {
	f.t.Helper()
	for _, u := range users {
		if _, err := f.svc.SetPreferences(context.Background(), u, func(p *Preferences) { p.AutoWatch = false }); err != nil {
			f.t.Fatal(err)
		}
	}
}
