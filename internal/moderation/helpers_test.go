package moderation

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
)

// t0 is the fake clock's start: every time the service writes is at or after it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// firstID is above 2^53 so that a float64 on the way would lose digits.
const firstID = 1<<60 + 1

// eventIDs issues the tests' event ids: one generator for the package, as one process has one.
var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(5, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// Who the tests' content and users are.
const (
	writer = 7 // writes every article and comment of the fake origins
	mod1   = 9 // moderators, as the user service has them
	mod2   = 10
	board  = 3
)

type fakeArticle struct {
	title         string
	board, writer int64
}

type fakeComment struct {
	content         string
	article, writer int64
	v1, deleted     bool
}

// origins fakes the article, comment and user services' reads that moderation makes.
type origins struct {
	url      string
	mu       sync.Mutex
	articles map[int64]fakeArticle
	comments map[int64]fakeComment
	roles    map[int64]string
	down     atomic.Bool // answer 503
	hang     atomic.Bool // answer nothing until the request ends
	calls    atomic.Int64
}

func newOrigins(t testing.TB) *origins {
	o := &origins{articles: map[int64]fakeArticle{}, comments: map[int64]fakeComment{}, roles: map[int64]string{}}
	mux := http.NewServeMux()
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	guard := func(fn func(w http.ResponseWriter, id int64) bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			o.calls.Add(1)
			if o.hang.Load() {
				<-r.Context().Done()
				return
			}
			if o.down.Load() {
				http.Error(w, `{"code":"DATABASE_UNAVAILABLE","message":"down"}`, http.StatusServiceUnavailable)
				return
			}
			id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
			o.mu.Lock()
			defer o.mu.Unlock()
			if !fn(w, id) {
				http.Error(w, `{"code":"NOT_FOUND","message":"no such thing"}`, http.StatusNotFound)
			}
		}
	}
	mux.HandleFunc("GET /v1/articles/{id}", guard(func(w http.ResponseWriter, id int64) bool {
		a, ok := o.articles[id]
		if ok {
			write(w, map[string]any{"articleId": apijson.ID(id), "title": a.title, "content": "content", "boardId": apijson.ID(a.board),
				"writerId": apijson.ID(a.writer)})
		}
		return ok
	}))
	comment := func(v1 bool) http.HandlerFunc {
		return guard(func(w http.ResponseWriter, id int64) bool {
			c, ok := o.comments[id]
			if ok && c.v1 == v1 {
				write(w, map[string]any{"commentId": apijson.ID(id), "content": "**" + c.content + "**", "contentText": c.content,
					"articleId": apijson.ID(c.article),
					"writerId":  apijson.ID(c.writer), "deleted": c.deleted})
				return true
			}
			return false
		})
	}
	mux.HandleFunc("GET /v1/comments/{id}", comment(true))
	mux.HandleFunc("GET /v2/comments/{id}", comment(false))
	mux.HandleFunc("GET /v1/users/{id}", guard(func(w http.ResponseWriter, id int64) bool {
		role, ok := o.roles[id]
		if ok {
			write(w, map[string]any{"userId": apijson.ID(id), "username": "u" + strconv.FormatInt(id, 10), "role": role})
		}
		return ok
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o.url = srv.URL
	o.roles[writer] = "user"
	o.roles[mod1] = "moderator"
	o.roles[mod2] = "moderator"
	return o
}

func (o *origins) addArticle(id, boardID int64, title string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.articles[id] = fakeArticle{title, boardID, writer}
}

func (o *origins) addComment(id, articleID int64, content string, v1 bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.comments[id] = fakeComment{content, articleID, writer, v1, false}
}

// fixture is a service over a test database with fake origins, ids and clock.
type fixture struct {
	db      *sqldb.DB
	svc     *Service
	h       http.Handler
	origins *origins
	clock   *snowflaketest.Clock
}

func newFixture(t testing.TB, db *sqldb.DB, threshold int) *fixture {
	o := newOrigins(t)
	clock := snowflaketest.NewClock(t0)
	ob := outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil)
	svc := New(db, ob, snowflaketest.NewIDs(firstID), Config{Origins: Origins{Article: o.url, Comment: o.url, User: o.url},
		ReportThreshold: threshold, LookupTimeout: 300 * time.Millisecond, Now: clock.Now})
	return &fixture{db: db, svc: svc, h: httpiotest.Handler("moderation", Routes(svc, httpiotest.Logger)), origins: o, clock: clock}
}

// call sends a request as user (0: without a principal; mod1 and mod2 act as moderators).
func (f *fixture) call(user int64, method, target, body string) httpiotest.Reply {
	h := f.h
	switch user {
	case 0:
	case mod1, mod2:
		h = httpiotest.AsModerator(h, user)
	default:
		h = httpiotest.As(h, user)
	}
	return httpiotest.Call(h, method, target, body)
}

// decode decodes a reply's body into v.
func decode(t testing.TB, r httpiotest.Reply, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Body), v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

// outboxEvent is an event as the outbox holds it.
type outboxEvent struct {
	Type    event.Type
	Key     int64
	Payload json.RawMessage
}

// events returns the events in db's outbox, oldest first.
func events(t testing.TB, db *sqldb.DB) []outboxEvent {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT event_type, record_key, payload FROM outbox ORDER BY outbox_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var e outboxEvent
		var typ string
		var body []byte
		if err := rows.Scan(&typ, &e.Key, &body); err != nil {
			t.Fatal(err)
		}
		e.Type, e.Payload = event.Type(typ), body
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// payload decodes an event's payload.
func payload[T any](t testing.TB, e outboxEvent) T {
	t.Helper()
	p, err := event.Payload[T](event.Envelope{Type: e.Type, Payload: e.Payload})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// count counts the rows of a table that match a condition.
func count(t testing.TB, db *sqldb.DB, table, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func reportBody(typ string, id int64, reason, text string) string {
	m := map[string]any{"targetType": typ, "targetId": strconv.FormatInt(id, 10), "reason": reason}
	if text != "" {
		m["text"] = text
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func idStr(id int64) string { return strconv.FormatInt(id, 10) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// timesEqual compares wire times as instants.
var timesEqual = cmp.Comparer(func(a, b apijson.Time) bool { return time.Time(a).Equal(time.Time(b)) })
