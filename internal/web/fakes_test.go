package web

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
	"board/internal/markdown"
)

// The services the pages are made from, faked with httptest servers that answer as SPEC §3 says (64-bit ids as JSON
// strings, times RFC 3339 UTC with milliseconds). The JSON is written here by hand, not with the package's own
// types, so that a wrong tag in backend.go is caught rather than mirrored.

// today is the "now" of the pages when a test starts: hot-article's calendar is UTC in these tests.
var today = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// clock is the pages' clock: it stands still unless a test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// t0 is when the fixture's articles were written.
var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

type fakeArticle struct {
	ID, Board, Writer      int64
	Title, Content         string
	Created, Modified      time.Time
	Comments, Likes, Views int64
	Hidden, RemovedReason  string
	Locked, Pinned         bool
}

type fakeComment struct {
	ID, Article, Writer   int64
	Content, Path         string
	Deleted               bool
	Created               time.Time
	Hidden, RemovedReason string
	Likes                 int64
}

type fakeUser struct {
	ID             int64
	Name, Password string
	Role           auth.Role
}

type fakeHot struct {
	ID                            int64
	Title                         string
	Created                       time.Time
	Score, Likes, Comments, Views int64
}

// seen is one request a fake service received.
type seen struct {
	Method, Path, Query, Auth, Body string
	Key                             string // the Idempotency-Key header
}

func (s seen) String() string {
	if s.Query != "" {
		return s.Method + " " + s.Path + "?" + s.Query
	}
	return s.Method + " " + s.Path
}

// services names the fake services, as Origins has them.
var services = []string{"article-read", "hot-article", "article", "comment", "like", "view", "user", "moderation"}

// fakes is the fleet of fake services with the data they answer from. The fixture:
//
//	users 10 alice (user, password "correct horse"), 11 bob (user), 12 mia (moderator)
//	board 1: article 1 "First post" by alice, article 2 "Second post" by bob
//	article 1's comments: 100 by bob ("Nice post"), its reply 101 by alice ("Thanks")
//	hot: today article 1, 2026-11-01 article 2
type fakes struct {
	clock    *clock // the pages' "now"
	key      auth.Key
	verifier *auth.Verifier // the token check of the fake producers

	mu        sync.Mutex
	read      map[int64]*fakeArticle // what article-read answers, with counts
	source    map[int64]*fakeArticle // what the article service answers
	comments  map[int64][]fakeComment
	users     map[int64]*fakeUser
	likes     map[[2]int64]bool
	hot       map[string][]fakeHot
	log       map[string][]seen
	overrides map[string]http.HandlerFunc
	answered  map[string]*httptest.ResponseRecorder // a keyed write's first answer, by token and key
	issued    []tokenIssued
	moderation
	following
	accounts

	servers map[string]*httptest.Server
}

type tokenIssued struct {
	token   string
	expires time.Time
}

func newFakes(t *testing.T) *fakes {
	t.Helper()
	key, err := auth.NewKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f := &fakes{
		clock: &clock{t: today},
		key:   key,
		verifier: auth.NewVerifier(func(context.Context) (map[string]ed25519.PublicKey, error) {
			return map[string]ed25519.PublicKey{key.ID: key.Private.Public().(ed25519.PublicKey)}, nil
		}, auth.VerifierConfig{}),
		read:   map[int64]*fakeArticle{},
		source: map[int64]*fakeArticle{},
		comments: map[int64][]fakeComment{1: {
			{ID: 100, Article: 1, Writer: 11, Content: "Nice post", Path: "00000", Created: t0.Add(time.Hour)},
			{ID: 101, Article: 1, Writer: 10, Content: "Thanks", Path: "0000000000", Created: t0.Add(2 * time.Hour)},
		}},
		users: map[int64]*fakeUser{
			10: {ID: 10, Name: "alice", Password: "correct horse", Role: auth.RoleUser},
			11: {ID: 11, Name: "bob", Password: "battery staple", Role: auth.RoleUser},
			12: {ID: 12, Name: "mia", Password: "moderate please", Role: auth.RoleModerator},
		},
		likes: map[[2]int64]bool{},
		hot: map[string][]fakeHot{
			"20261122": {{ID: 1, Title: "First post", Created: t0, Score: 9, Likes: 2, Comments: 1, Views: 1}},
			"20261101": {{ID: 2, Title: "November the first", Created: t0, Score: 3, Likes: 1}},
		},
		log:        map[string][]seen{},
		overrides:  map[string]http.HandlerFunc{},
		answered:   map[string]*httptest.ResponseRecorder{},
		servers:    map[string]*httptest.Server{},
		moderation: moderation{bans: map[int64]fakeBan{}},
		following:  newFollowing(),
		accounts:   newAccounts(),
	}
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "First post", Content: "Hello, board.", Created: t0, Modified: t0,
		Comments: 2, Likes: 2, Views: 5})
	f.putArticle(&fakeArticle{ID: 2, Board: 1, Writer: 11, Title: "Second post", Content: "Another one.", Created: t0.Add(time.Minute),
		Modified: t0.Add(time.Minute)})
	handlers := map[string]http.Handler{"article-read": f.articleReadMux(), "hot-article": f.hotMux(), "article": f.articleMux(),
		"comment": f.commentMux(), "like": f.likeMux(), "view": f.viewMux(), "user": f.userMux(), "moderation": f.moderationMux()}
	for _, name := range services {
		srv := httptest.NewServer(f.recorded(name, handlers[name]))
		t.Cleanup(srv.Close)
		f.servers[name] = srv
	}
	return f
}

// putArticle stores a as both the article service and article-read have it.
func (f *fakes) putArticle(a *fakeArticle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, s := *a, *a
	f.read[a.ID], f.source[a.ID] = &r, &s
}

// override makes service answer with h instead of its fake behaviour.
func (f *fakes) override(service string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overrides[service] = h
}

// recorded logs every request to service before answering it. A write with an Idempotency-Key that succeeded
// before is answered as it was then, without writing, as the services do (internal/idempotency).
func (f *fakes) recorded(service string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		key := r.Header.Get("Idempotency-Key")
		f.mu.Lock()
		f.log[service] = append(f.log[service], seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), Body: string(body), Key: key})
		o := f.overrides[service]
		first := f.answered[r.Header.Get("Authorization")+" "+key]
		f.mu.Unlock()
		if o != nil {
			o(w, r)
			return
		}
		if key == "" {
			h.ServeHTTP(w, r)
			return
		}
		if first == nil {
			first = httptest.NewRecorder()
			h.ServeHTTP(first, r)
			if first.Code < 300 {
				f.mu.Lock()
				f.answered[r.Header.Get("Authorization")+" "+key] = first
				f.mu.Unlock()
			}
		}
		maps.Copy(w.Header(), first.Header())
		w.WriteHeader(first.Code)
		_, _ = w.Write(first.Body.Bytes()) // the client went away
	})
}

// inMemory answers r from the fake service of its origin in this goroutine, with no connection.
func (f *fakes) inMemory(r *http.Request) (*http.Response, error) {
	for _, srv := range f.servers {
		if srv.URL == "http://"+r.URL.Host {
			if r.Body == nil {
				r.Body = http.NoBody
			}
			w := httptest.NewRecorder()
			srv.Config.Handler.ServeHTTP(w, r)
			return w.Result(), nil
		}
	}
	return nil, fmt.Errorf("no fake service at %s", r.URL.Host)
}

// requests returns what service has received so far.
func (f *fakes) requests(service string) []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log[service])
}

// total is the number of requests every fake service has received, the signing keys included.
func (f *fakes) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.log {
		n += len(l)
	}
	return n
}

// token mints an access token for user, as the user service would.
func (f *fakes) token(t *testing.T, userID int64, role auth.Role) string {
	t.Helper()
	tok, _, err := auth.Sign(f.key, auth.Principal{UserID: userID, Role: role}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// handler builds the pages on the fakes, with changes to the configuration.
func (f *fakes) handler(t *testing.T, changes ...func(*Config)) http.Handler {
	t.Helper()
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	cfg := Config{
		Origins: Origins{ArticleRead: f.servers["article-read"].URL, HotArticle: f.servers["hot-article"].URL,
			Article: f.servers["article"].URL, Comment: f.servers["comment"].URL, Like: f.servers["like"].URL,
			View: f.servers["view"].URL, User: f.servers["user"].URL, Moderation: f.servers["moderation"].URL},
		Tokens:   auth.NewVerifier(auth.JWKS(f.servers["user"].Client(), f.servers["user"].URL+"/.well-known/jwks.json"), auth.VerifierConfig{}),
		Location: time.UTC,
		Client:   &http.Client{Transport: transport},
		Now:      f.clock.now,
	}
	for _, change := range changes {
		change(&cfg)
	}
	return New(cfg).Routes()
}

// Answers.

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeJSON(w, status, map[string]string{"code": code, "message": message})
}

func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func wireID(n int64) string { return strconv.FormatInt(n, 10) }

// articleJSON is a as a service answers it; a hidden article is a placeholder unless whole is set (its writer or a
// moderator asked the article service).
// listedJSON is a as article-read lists it: whole, or with view=summary, without its content but an excerpt.
func listedJSON(r *http.Request, a *fakeArticle) map[string]any {
	m := articleJSON(a, true)
	if r.URL.Query().Get("view") == "summary" {
		m["excerpt"] = m["contentText"]
		delete(m, "content")
		delete(m, "contentHtml")
		delete(m, "contentText")
	}
	return m
}

func articleJSON(a *fakeArticle, counts bool, whole ...bool) map[string]any {
	title, content := a.Title, a.Content
	if a.Hidden != "" && (len(whole) == 0 || !whole[0]) {
		title, content = "Hidden article", ""
	}
	m := map[string]any{"articleId": wireID(a.ID), "title": title, "content": content, "contentHtml": rendered(content),
		"contentText": markdown.Render(content).Text, "boardId": wireID(a.Board),
		"writerId": wireID(a.Writer), "createdAt": wireTime(a.Created), "modifiedAt": wireTime(a.Modified),
		"hidden": a.Hidden, "removedReason": a.RemovedReason, "locked": a.Locked, "pinned": a.Pinned}
	if counts {
		m["articleCommentCount"], m["articleLikeCount"], m["articleViewCount"] = a.Comments, a.Likes, a.Views
	}
	return m
}

// commentJSON is c as the comment service answers it; a hidden comment's content goes only to whole (its writer or
// a moderator).
func commentJSON(c fakeComment, whole ...bool) map[string]any {
	content := c.Content
	if c.Deleted || c.Hidden != "" && (len(whole) == 0 || !whole[0]) {
		content = ""
	}
	return map[string]any{"commentId": wireID(c.ID), "content": content, "contentHtml": rendered(content),
		"articleId": wireID(c.Article),
		"writerId":  wireID(c.Writer), "path": c.Path, "deleted": c.Deleted, "createdAt": wireTime(c.Created),
		"hidden": c.Hidden, "removedReason": c.RemovedReason, "likeCount": c.Likes}
}

// rendered is content's HTML as the article and comment services store it ("" for no content).
func rendered(content string) string {
	if content == "" {
		return ""
	}
	return markdown.Render(content).HTML
}

func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	n, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_ID", "bad "+name)
		return 0, false
	}
	return n, true
}

// acting is the user a write's bearer token names; it answers 401 itself when there is none.
func (f *fakes) acting(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "no token")
		return auth.Principal{}, false
	}
	p, err := f.verifier.Verify(r.Context(), raw)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "bad token")
		return auth.Principal{}, false
	}
	return p, true
}

// reader is the user a read's bearer token names, if it names one.
func (f *fakes) reader(r *http.Request) (auth.Principal, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return auth.Principal{}, false
	}
	p, err := f.verifier.Verify(r.Context(), raw)
	return p, err == nil
}

// boardArticles is board's articles in article-read, newest first.
func (f *fakes) boardArticles(board int64) []*fakeArticle {
	var as []*fakeArticle
	for _, a := range f.read {
		if a.Board == board {
			as = append(as, a)
		}
	}
	slices.SortFunc(as, func(a, b *fakeArticle) int { return int(b.ID - a.ID) })
	return as
}

func (f *fakes) articleReadMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /v1/articles/{articleId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "articleId")
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.read[n]
		if a == nil {
			writeError(w, http.StatusNotFound, "ARTICLE_NOT_FOUND", "no such article")
			return
		}
		writeJSON(w, http.StatusOK, articleJSON(a, true))
	})
	mux.HandleFunc("GET /v1/articles", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		board, _ := strconv.ParseInt(q.Get("boardId"), 10, 64)
		page, _ := strconv.ParseInt(q.Get("page"), 10, 64)
		size, _ := strconv.ParseInt(q.Get("pageSize"), 10, 64)
		if page < 1 || size < 1 || size > 100 {
			writeError(w, http.StatusBadRequest, "BAD_PAGE", "bad page")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		as, ok := sortedBoard(f.boardArticles(board), q.Get("sort"))
		if !ok {
			writeError(w, http.StatusBadRequest, "INVALID_SORT", "no such sort")
			return
		}
		list := []map[string]any{}
		for i := (page - 1) * size; i < page*size && i < int64(len(as)); i++ {
			list = append(list, listedJSON(r, as[i]))
		}
		capped := min(int64(len(as)), ((page-1)/10+1)*size*10+1)
		writeJSON(w, http.StatusOK, map[string]any{"articles": list, "articleCount": capped})
	})
	mux.HandleFunc("GET /v1/articles/infinite-scroll", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		board, _ := strconv.ParseInt(q.Get("boardId"), 10, 64)
		size, _ := strconv.ParseInt(q.Get("pageSize"), 10, 64)
		after, _ := strconv.ParseInt(q.Get("lastArticleId"), 10, 64)
		f.mu.Lock()
		defer f.mu.Unlock()
		as, ok := sortedBoard(f.boardArticles(board), q.Get("sort"))
		if !ok {
			writeError(w, http.StatusBadRequest, "INVALID_SORT", "no such sort")
			return
		}
		list := []map[string]any{}
		past := after == 0
		for _, a := range as {
			if past && int64(len(list)) < size {
				list = append(list, listedJSON(r, a))
			}
			past = past || a.ID == after // the next chunk starts after the last article's place in the order
		}
		writeJSON(w, http.StatusOK, list)
	})
	return mux
}

func (f *fakes) articleMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/articles/{articleId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "articleId")
		if !ok {
			return
		}
		p, _ := f.reader(r)
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.source[n]
		if a == nil {
			writeError(w, http.StatusNotFound, "ARTICLE_NOT_FOUND", "no such article")
			return
		}
		writeJSON(w, http.StatusOK, articleJSON(a, false, p.UserID == a.Writer || p.Role == auth.RoleModerator))
	})
	mux.HandleFunc("POST /v1/articles", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Title, Content, BoardID string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" || in.Content == "" {
			writeError(w, http.StatusBadRequest, "INVALID_ARTICLE", "The title and the content must not be empty.")
			return
		}
		board, _ := strconv.ParseInt(in.BoardID, 10, 64)
		f.mu.Lock()
		n := int64(1000 + len(f.source))
		a := &fakeArticle{ID: n, Board: board, Writer: p.UserID, Title: in.Title, Content: in.Content, Created: today, Modified: today}
		f.source[n] = a
		f.mu.Unlock()
		writeJSON(w, http.StatusCreated, articleJSON(a, false))
	})
	mux.HandleFunc("PUT /v1/articles/{articleId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "articleId")
		if !ok {
			return
		}
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Title, Content string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" || in.Content == "" {
			writeError(w, http.StatusBadRequest, "INVALID_ARTICLE", "The title and the content must not be empty.")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.source[n]
		switch {
		case a == nil:
			writeError(w, http.StatusNotFound, "ARTICLE_NOT_FOUND", "no such article")
		case a.Writer != p.UserID && p.Role != auth.RoleModerator:
			writeError(w, http.StatusForbidden, "FORBIDDEN", "not yours")
		default:
			// Only the article service has the edit: article-read applies it later, from the event.
			a.Title, a.Content, a.Modified = in.Title, in.Content, a.Modified.Add(time.Hour)
			writeJSON(w, http.StatusOK, articleJSON(a, false))
		}
	})
	mux.HandleFunc("DELETE /v1/articles/{articleId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "articleId")
		if !ok {
			return
		}
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		a := f.source[n]
		switch {
		case a == nil:
			writeError(w, http.StatusNotFound, "ARTICLE_NOT_FOUND", "no such article")
		case a.Writer != p.UserID && p.Role != auth.RoleModerator:
			writeError(w, http.StatusForbidden, "FORBIDDEN", "not yours")
		default:
			delete(f.source, n)
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return mux
}

func (f *fakes) commentMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/comments", func(w http.ResponseWriter, r *http.Request) {
		article, _ := strconv.ParseInt(r.URL.Query().Get("articleId"), 10, 64)
		p, _ := f.reader(r)
		f.mu.Lock()
		defer f.mu.Unlock()
		thread, ok := sortedThread(f.comments[article], r.URL.Query().Get("sort"))
		if !ok {
			writeError(w, http.StatusBadRequest, "INVALID_SORT", "no such sort")
			return
		}
		list := []map[string]any{}
		for _, c := range thread {
			list = append(list, commentJSON(c, p.UserID == c.Writer || p.Role == auth.RoleModerator))
		}
		writeJSON(w, http.StatusOK, map[string]any{"comments": list, "commentCount": len(list)})
	})
	mux.HandleFunc("POST /v2/comments", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ ArticleID, Content, ParentPath string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Content == "" {
			writeError(w, http.StatusBadRequest, "INVALID_COMMENT", "The comment must not be empty.")
			return
		}
		article, _ := strconv.ParseInt(in.ArticleID, 10, 64)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refuseBanned(w, p.UserID) {
			return
		}
		if a := f.source[article]; a != nil && a.Locked && p.Role != auth.RoleModerator {
			writeError(w, http.StatusForbidden, "LOCKED", "the article is locked")
			return
		}
		c := fakeComment{ID: int64(200 + len(f.comments[article])), Article: article, Writer: p.UserID, Content: in.Content,
			Path: in.ParentPath + "zzzzz", Created: today}
		f.comments[article] = append(f.comments[article], c)
		writeJSON(w, http.StatusCreated, commentJSON(c))
	})
	mux.HandleFunc("DELETE /v2/comments/{commentId}", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return mux
}

func (f *fakes) likeMux() http.Handler {
	mux := http.NewServeMux()
	const one = "/v1/article-likes/articles/{articleId}/users/{userId}"
	ids := func(w http.ResponseWriter, r *http.Request) ([2]int64, bool) {
		a, ok := pathID(w, r, "articleId")
		if !ok {
			return [2]int64{}, false
		}
		u, ok := pathID(w, r, "userId")
		return [2]int64{a, u}, ok
	}
	mux.HandleFunc("GET "+one, func(w http.ResponseWriter, r *http.Request) {
		k, ok := ids(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.likes[k] {
			writeError(w, http.StatusNotFound, "LIKE_NOT_FOUND", "not liked")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"articleLikeId": "7", "articleId": wireID(k[0]), "userId": wireID(k[1]),
			"createdAt": wireTime(t0)})
	})
	for _, method := range []string{http.MethodPost, http.MethodDelete} {
		mux.HandleFunc(method+" "+one, func(w http.ResponseWriter, r *http.Request) {
			k, ok := ids(w, r)
			if !ok {
				return
			}
			p, ok := f.acting(w, r)
			if !ok {
				return
			}
			if p.UserID != k[1] {
				writeError(w, http.StatusForbidden, "FORBIDDEN", "not you")
				return
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			switch {
			case method == http.MethodPost && f.likes[k]:
				writeError(w, http.StatusConflict, "ALREADY_LIKED", "already liked")
			case method == http.MethodPost:
				f.likes[k] = true
				writeJSON(w, http.StatusCreated, map[string]any{"articleLikeId": "7", "articleId": wireID(k[0]), "userId": wireID(k[1]),
					"createdAt": wireTime(today)})
			case !f.likes[k]:
				writeError(w, http.StatusNotFound, "LIKE_NOT_FOUND", "not liked")
			default:
				delete(f.likes, k)
				w.WriteHeader(http.StatusNoContent)
			}
		})
	}
	f.commentLikeRoutes(mux)
	mux.HandleFunc("GET /v1/article-likes/articles/{articleId}/count", func(w http.ResponseWriter, r *http.Request) {
		a, ok := pathID(w, r, "articleId")
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for k, v := range f.likes {
			if k[0] == a && v {
				n++
			}
		}
		writeJSON(w, http.StatusOK, n)
	})
	return mux
}

func (f *fakes) viewMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/article-views/articles/{articleId}/users/{userId}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		if wireID(p.UserID) != r.PathValue("userId") {
			writeError(w, http.StatusForbidden, "FORBIDDEN", "not you")
			return
		}
		writeJSON(w, http.StatusOK, 6)
	})
	return mux
}

func (f *fakes) hotMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hot-articles/articles/date/{day}", func(w http.ResponseWriter, r *http.Request) {
		day := r.PathValue("day")
		if _, err := time.Parse("20060102", day); err != nil {
			writeError(w, http.StatusBadRequest, "BAD_DATE", "bad date")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		list := []map[string]any{}
		for _, h := range f.hot[day] {
			list = append(list, map[string]any{"articleId": wireID(h.ID), "title": h.Title, "createdAt": wireTime(h.Created),
				"score": h.Score, "likeCount": h.Likes, "commentCount": h.Comments, "viewCount": h.Views})
		}
		writeJSON(w, http.StatusOK, list)
	})
	return mux
}

func (f *fakes) userMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"keys": []any{f.key.PublicJWK()}})
	})
	mux.HandleFunc("GET /v1/users", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		q := r.URL.Query()
		if q.Has("usernames") || q.Has("prefix") {
			writeJSON(w, http.StatusOK, f.usersByName(q))
			return
		}
		list := []map[string]any{}
		for part := range strings.SplitSeq(q.Get("ids"), ",") {
			n, _ := strconv.ParseInt(part, 10, 64)
			if u := f.users[n]; u != nil {
				list = append(list, userJSON(u))
			}
		}
		writeJSON(w, http.StatusOK, list)
	})
	f.blockRoutes(mux)
	f.accountRoutes(mux)
	mux.HandleFunc("GET /v1/users/{userId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "userId")
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		u := f.users[n]
		if u == nil {
			writeError(w, http.StatusNotFound, "USER_NOT_FOUND", "no such user")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"userId": wireID(u.ID), "username": u.Name, "role": string(u.Role), "createdAt": wireTime(t0)})
	})
	mux.HandleFunc("POST /v1/tokens", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Username, Password string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, u := range f.users {
			if u.Name == in.Username && u.Password == in.Password {
				if f.refuseBanned(w, u.ID) {
					return
				}
				tok, exp, err := auth.Sign(f.key, auth.Principal{UserID: u.ID, Role: u.Role}, time.Now(), time.Hour)
				if err != nil {
					writeError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
					return
				}
				f.issued = append(f.issued, tokenIssued{token: tok, expires: exp})
				writeJSON(w, http.StatusOK, map[string]any{"accessToken": tok, "tokenType": "Bearer", "expiresAt": wireTime(exp)})
				return
			}
		}
		writeError(w, http.StatusUnauthorized, "BAD_CREDENTIALS", "wrong username or password")
	})
	mux.HandleFunc("POST /v1/users", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Username, Password string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, u := range f.users {
			if u.Name == in.Username {
				writeError(w, http.StatusConflict, "USERNAME_TAKEN", "taken")
				return
			}
		}
		u := &fakeUser{ID: int64(50 + len(f.users)), Name: in.Username, Password: in.Password, Role: auth.RoleUser}
		f.users[u.ID] = u
		writeJSON(w, http.StatusCreated, map[string]any{"userId": wireID(u.ID), "username": u.Name, "role": "user", "createdAt": wireTime(today)})
	})
	return mux
}

// Origins that do not answer.

// closedOrigin is the address of a port nothing listens on.
func closedOrigin(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// hungOrigin is the address of a listener that accepts connections and never answers on them.
func hungOrigin(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

// Requests to the pages.

// visit is one request to the pages.
type visit struct {
	method, target string
	form           url.Values
	token          string // the session cookie's value
	header         map[string]string
	ctx            context.Context
}

// serve sends v to h. A POST is same-origin unless v's headers say otherwise, as a browser's form on the site.
func serve(t *testing.T, h http.Handler, v visit) *httptest.ResponseRecorder {
	t.Helper()
	method := v.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if v.form != nil {
		body = strings.NewReader(v.form.Encode())
	}
	r := httptest.NewRequest(method, v.target, body)
	if v.ctx != nil {
		r = r.WithContext(v.ctx)
	}
	if v.form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, val := range v.header {
		if val == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, val)
		}
	}
	if v.token != "" {
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: v.token})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func get(t *testing.T, h http.Handler, target, token string) *httptest.ResponseRecorder {
	t.Helper()
	return serve(t, h, visit{target: target, token: token})
}

func post(t *testing.T, h http.Handler, target string, form url.Values, token string) *httptest.ResponseRecorder {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	return serve(t, h, visit{method: http.MethodPost, target: target, form: form, token: token})
}

var backendCalls = regexp.MustCompile(`backend;desc="(\d+) calls"`)

// callsOf is the number of backend calls a page's Server-Timing header names; -1 without one.
func callsOf(w *httptest.ResponseRecorder) int {
	m := backendCalls.FindStringSubmatch(w.Header().Get("Server-Timing"))
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// sessionCookieOf returns the session cookie w sets, nil when it sets none.
func sessionCookieOf(w *httptest.ResponseRecorder) *http.Cookie {
	for _, c := range w.Result().Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}
