package articleread

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"board/internal/apijson"
	"board/internal/boardpage"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/logicalttl"
	"board/internal/redisclient"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
)

// truth is what the origin services hold: articles per board, their versions, the board counts, and the comment,
// like and view counts of each article. Every change also records the event its service would publish, so that
// tests can deliver them in any order. Safe for concurrent use.
type truth struct {
	mu       sync.Mutex
	now      func() time.Time
	base     time.Time // ids are issued from here on, a few per millisecond
	issued   int64
	articles map[int64]*truthArticle
	boards   map[int64]*versioned[int64] // the board's article count and its version
	comments map[int64]*versioned[int64]
	likes    map[int64]*versioned[int64]
	views    map[int64]int64
	events   []event.Envelope
	listed   map[int64][]int64 // live ids per board, newest first, until the next create or delete
}

type truthArticle struct {
	article Article
	version int64
	deleted bool
	mod     Moderation // with its version
}

func newTruth(now func() time.Time) *truth {
	return &truth{now: now, base: now().Add(-time.Hour), articles: map[int64]*truthArticle{},
		boards: map[int64]*versioned[int64]{}, comments: map[int64]*versioned[int64]{},
		likes: map[int64]*versioned[int64]{}, views: map[int64]int64{}}
}

// nextID issues an id a little after the previous one; four share each millisecond, so list scores tie too.
func (tr *truth) nextID() int64 {
	n := tr.issued
	tr.issued++
	return snowflake.Compose(tr.base.Add(time.Duration(n/4)*time.Millisecond), 7, n%4)
}

func (tr *truth) emit(t event.Type, payload any) event.Envelope {
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	// Event ids are Snowflakes of the test's clock, as a producer's: the service trusts an event to create state
	// only if it was committed since the read model's epoch (see flush).
	env := event.Envelope{EventID: apijson.ID(snowflake.Compose(tr.now(), 9, int64(len(tr.events)%(snowflake.MaxSeq+1)))),
		Type: t, Payload: raw}
	tr.events = append(tr.events, env)
	return env
}

// eventsSince returns the events recorded from index from on.
func (tr *truth) eventsSince(from int) []event.Envelope {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.events[from:])
}

func (tr *truth) eventCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.events)
}

// createEvent returns the ARTICLE_CREATED of article id, to deliver again.
func (tr *truth) createEvent(id int64) event.Envelope {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, env := range tr.events {
		if env.Type != event.ArticleCreated {
			continue
		}
		if p, err := event.Payload[event.Article](env); err == nil && int64(p.ArticleID) == id {
			return env
		}
	}
	panic(fmt.Sprintf("article %d was never created", id))
}

func (tr *truth) articleEvent(t event.Type, a *truthArticle) event.Envelope {
	b := tr.boards[int64(a.article.BoardID)]
	return tr.emit(t, event.Article{ArticleID: a.article.ArticleID, Title: a.article.Title, Content: a.article.Content,
		ContentHTML: a.article.ContentHTML, ContentText: a.article.ContentText, BoardID: a.article.BoardID, WriterID: a.article.WriterID, CreatedAt: a.article.CreatedAt,
		ModifiedAt: a.article.ModifiedAt, BoardArticleCount: b.Value, ArticleVersion: a.version,
		BoardArticleCountVersion: b.Version})
}

// create adds an article to board and returns its id.
func (tr *truth) create(boardID int64) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.createLocked(boardID, tr.nextID())
}

// createAt adds an article to board whose id carries the time at.
func (tr *truth) createAt(boardID int64, at time.Time) int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.issued++
	return tr.createLocked(boardID, snowflake.Compose(at, 7, tr.issued%4096))
}

func (tr *truth) createLocked(boardID, id int64) int64 {
	created := apijson.Time(snowflake.Timestamp(id))
	a := &truthArticle{version: 1, article: Article{ArticleID: apijson.ID(id), Title: fmt.Sprintf("title %d", id),
		Content: fmt.Sprintf("content of %d", id), ContentHTML: fmt.Sprintf("<p>content of %d</p>\n", id),
		ContentText: fmt.Sprintf("content of %d", id), BoardID: apijson.ID(boardID), WriterID: apijson.ID(id%97 + 1),
		CreatedAt: created, ModifiedAt: created}}
	tr.articles[id] = a
	clear(tr.listed)
	b := tr.board(boardID)
	b.Value++
	b.Version++
	tr.articleEvent(event.ArticleCreated, a)
	return id
}

func (tr *truth) board(boardID int64) *versioned[int64] {
	b := tr.boards[boardID]
	if b == nil {
		b = &versioned[int64]{}
		tr.boards[boardID] = b
	}
	return b
}

func (tr *truth) update(id int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	a := tr.articles[id]
	a.version++
	a.article.Title = fmt.Sprintf("title %d v%d", id, a.version)
	a.article.Content = fmt.Sprintf("content of %d v%d", id, a.version)
	a.article.ContentHTML = fmt.Sprintf("<p>content of %d v%d</p>\n", id, a.version)
	a.article.ContentText = a.article.Content
	a.article.ModifiedAt = apijson.Time(apijson.Millis(tr.now()))
	tr.articleEvent(event.ArticleUpdated, a)
}

func (tr *truth) delete(id int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	a := tr.articles[id]
	a.version++
	a.deleted = true
	clear(tr.listed)
	b := tr.board(int64(a.article.BoardID))
	b.Value--
	b.Version++
	tr.articleEvent(event.ArticleDeleted, a)
}

// counter returns the count of id in counts, created at zero (version 0, as the services answer for "never").
func counter(counts map[int64]*versioned[int64], id int64) *versioned[int64] {
	c := counts[id]
	if c == nil {
		c = &versioned[int64]{}
		counts[id] = c
	}
	return c
}

// comment adds delta (+1 or -1) to an article's comment count.
func (tr *truth) comment(id, delta int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	c := counter(tr.comments, id)
	c.Value += delta
	c.Version++
	t := event.CommentCreated
	if delta < 0 {
		t = event.CommentDeleted
	}
	tr.emit(t, event.Comment{CommentID: apijson.ID(tr.nextID()), Content: "a comment", Path: "00000",
		ArticleID: apijson.ID(id), WriterID: 5, CreatedAt: apijson.Time(apijson.Millis(tr.now())),
		ArticleCommentCount: c.Value, ArticleCommentCountVersion: c.Version})
}

// like adds delta (+1 or -1) to an article's like count.
func (tr *truth) like(id, delta int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	c := counter(tr.likes, id)
	c.Value += delta
	c.Version++
	t := event.ArticleLiked
	if delta < 0 {
		t = event.ArticleUnliked
	}
	tr.emit(t, event.Like{ArticleLikeID: apijson.ID(tr.nextID()), ArticleID: apijson.ID(id), UserID: 9,
		CreatedAt: apijson.Time(apijson.Millis(tr.now())), ArticleLikeCount: c.Value, ArticleLikeCountVersion: c.Version})
}

func (tr *truth) setViews(id, n int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.views[id] = n
}

// want returns an article as article-read should answer it; ok is false when it does not exist.
func (tr *truth) want(id int64) (ArticleRead, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.wantLocked(id)
}

func (tr *truth) wantLocked(id int64) (ArticleRead, bool) {
	a := tr.articles[id]
	if a == nil || a.deleted {
		return ArticleRead{}, false
	}
	article, err := encodeArticle(a.article)
	if err != nil {
		panic(err)
	}
	return ArticleRead{Article: article, Moderation: a.mod, CommentCount: counter(tr.comments, id).Value,
		LikeCount: counter(tr.likes, id).Value, ViewCount: tr.views[id]}, true
}

// live returns the live article ids of a board, newest first.
func (tr *truth) live(boardID int64) []int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.liveLocked(boardID))
}

func (tr *truth) liveLocked(boardID int64) []int64 {
	if ids, ok := tr.listed[boardID]; ok {
		return ids
	}
	if tr.listed == nil {
		tr.listed = map[int64][]int64{}
	}
	var ids []int64
	for id, a := range tr.articles {
		if !a.deleted && int64(a.article.BoardID) == boardID {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b int64) int { return cmpInt(b, a) })
	tr.listed[boardID] = ids
	return ids
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// page is the article service's offset page: the articles and the capped count (SPEC §3.1).
func (tr *truth) page(boardID, pageNo, pageSize int64) ([]originArticle, int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ids := tr.liveLocked(boardID)
	offset := min((pageNo-1)*pageSize, int64(len(ids)))
	end := min(offset+pageSize, int64(len(ids)))
	return tr.articlesLocked(ids[offset:end]), min(int64(len(ids)), boardpage.CountLimit(pageNo, pageSize))
}

// scroll is the article service's infinite scroll: pageSize articles older than lastID (0: from the newest).
func (tr *truth) scroll(boardID, pageSize, lastID int64) []originArticle {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ids := tr.liveLocked(boardID)
	from := 0
	if lastID != 0 {
		from = len(ids)
		for i, id := range ids {
			if id < lastID {
				from = i
				break
			}
		}
	}
	return tr.articlesLocked(ids[from:min(from+int(pageSize), len(ids))])
}

func (tr *truth) articlesLocked(ids []int64) []originArticle {
	as := make([]originArticle, len(ids))
	for i, id := range ids {
		as[i] = tr.articles[id].origin()
	}
	return as
}

// origin is the article as the article service answers article-read (an anonymous reader), moderation included:
// a placeholder while hidden. It tells no moderationVersion, as the article service does not.
func (a *truthArticle) origin() originArticle {
	shown := a.article
	switch a.mod.Hidden {
	case event.Removed:
		shown.Title, shown.Content, shown.ContentHTML, shown.ContentText = removedTitle, "", "", ""
	case event.Pending:
		shown.Title, shown.Content, shown.ContentHTML, shown.ContentText = pendingTitle, "", "", ""
	}
	return originArticle{Article: shown, Moderation: a.mod}
}

// moderate sets an article's moderation state as the moderation service would, and records its ARTICLE_MODERATED.
func (tr *truth) moderate(id int64, hidden event.Hidden, locked, pinned bool) event.Envelope {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	a := tr.articles[id]
	reason := ""
	if hidden != event.Visible {
		reason = "why " + string(hidden)
	}
	a.mod = Moderation{Hidden: hidden, RemovedReason: reason, Locked: locked, Pinned: pinned, Version: a.mod.Version + 1}
	return tr.emit(event.ArticleModerated, event.ArticleModeration{ArticleID: a.article.ArticleID,
		BoardID: a.article.BoardID, WriterID: a.article.WriterID, Hidden: hidden, RemovedReason: reason, Locked: locked,
		Pinned: pinned, Action: "test", ModeratorID: 3, ModeratedAt: apijson.Time(apijson.Millis(tr.now())),
		ModerationVersion: a.mod.Version})
}

// wantReads returns articles as article-read should answer them.
func (tr *truth) wantReads(as []originArticle) []ArticleRead {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]ArticleRead, len(as))
	for i, a := range as {
		out[i], _ = tr.wantLocked(int64(a.ArticleID))
	}
	return out
}

// Origin endpoints, as the fake origin counts its requests.
const (
	epArticle      = "article"
	epBoardCount   = "boardCount"
	epPage         = "page"
	epScroll       = "scroll"
	epCommentCount = "commentCount"
	epLikeCount    = "likeCount"
	epViewCount    = "viewCount"
)

// Origin services, as the fake origin takes them down.
const (
	svcArticle = "article"
	svcComment = "comment"
	svcLike    = "like"
	svcView    = "view"
)

var serviceOf = map[string]string{epArticle: svcArticle, epBoardCount: svcArticle, epPage: svcArticle,
	epScroll: svcArticle, epCommentCount: svcComment, epLikeCount: svcLike, epViewCount: svcView}

// health is how a fake origin service answers.
type health int

const (
	up      health = iota
	failing        // 503
	hanging        // no answer until the request ends
)

// origin serves the GET endpoints of the article, comment, like and view services over a truth, answering as the
// real services do (paths, JSON shapes with ids as strings, ETags with versions, 404 bodies).
type origin struct {
	*truth
	URL     string
	mu      sync.Mutex
	calls   map[string]int
	health  map[string]health
	release chan struct{}
}

func newOrigin(t *testing.T, tr *truth) *origin {
	o := &origin{truth: tr, calls: map[string]int{}, health: map[string]health{}, release: make(chan struct{})}
	mux := http.NewServeMux()
	o.handle(mux, "GET /v1/articles/{articleId}", epArticle, o.getArticle)
	o.handle(mux, "GET /v1/articles", epPage, o.getPage)
	o.handle(mux, "GET /v1/articles/infinite-scroll", epScroll, o.getScroll)
	o.handle(mux, "GET /v1/articles/boards/{boardId}/count", epBoardCount, o.getBoardCount)
	o.handle(mux, "GET /v2/comments/articles/{articleId}/count", epCommentCount, o.counts(tr.comments))
	o.handle(mux, "GET /v1/article-likes/articles/{articleId}/count", epLikeCount, o.counts(tr.likes))
	o.handle(mux, "GET /v1/article-views/articles/{articleId}/count", epViewCount, o.getViews)
	srv := httptest.NewServer(mux)
	o.URL = srv.URL
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(o.release) }) // runs first: hanging requests end before the server closes
	return o
}

func (o *origin) handle(mux *http.ServeMux, pattern, endpoint string, fn func(http.ResponseWriter, *http.Request)) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.calls[endpoint]++
		h := o.health[serviceOf[endpoint]]
		o.mu.Unlock()
		switch h {
		case failing:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "DATABASE_UNAVAILABLE", "message": "down"})
			return
		case hanging:
			select {
			case <-r.Context().Done():
			case <-o.release:
			}
			return
		}
		fn(w, r)
	})
}

// set makes service answer as h.
func (o *origin) set(service string, h health) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.health[service] = h
}

// calledOf returns how many requests an endpoint got.
func (o *origin) calledOf(endpoint string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[endpoint]
}

// allCalls returns a copy of the request counts per endpoint.
func (o *origin) allCalls() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for k, v := range o.calls {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func (o *origin) resetCalls() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.calls)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeVersioned(w http.ResponseWriter, v any, version int64) {
	w.Header().Set("ETag", strconv.Quote(strconv.FormatInt(version, 10)))
	writeJSON(w, http.StatusOK, v)
}

func badRequest(w http.ResponseWriter, name string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"code": "INVALID_" + name, "message": "bad " + name})
}

func (o *origin) getArticle(w http.ResponseWriter, r *http.Request) {
	id, err := apijson.Parse(r.PathValue("articleId"))
	if err != nil {
		badRequest(w, "ARTICLE_ID")
		return
	}
	o.truth.mu.Lock()
	a := o.articles[id]
	var found truthArticle
	if a != nil {
		found = *a
	}
	o.truth.mu.Unlock()
	if a == nil || found.deleted {
		writeJSON(w, http.StatusNotFound, map[string]string{"code": "ARTICLE_NOT_FOUND", "message": "no such article"})
		return
	}
	writeVersioned(w, found.origin(), found.version)
}

func queryInt(r *http.Request, name string) (int64, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, name == "lastArticleId"
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

func (o *origin) getPage(w http.ResponseWriter, r *http.Request) {
	boardID, ok1 := queryInt(r, "boardId")
	pageNo, ok2 := queryInt(r, "page")
	pageSize, ok3 := queryInt(r, "pageSize")
	if !ok1 || !ok2 || !ok3 || pageNo < 1 || pageSize < 1 || pageSize > 100 {
		badRequest(w, "QUERY")
		return
	}
	as, count := o.page(boardID, pageNo, pageSize)
	writeJSON(w, http.StatusOK, page{Articles: as, ArticleCount: count})
}

func (o *origin) getScroll(w http.ResponseWriter, r *http.Request) {
	boardID, ok1 := queryInt(r, "boardId")
	pageSize, ok2 := queryInt(r, "pageSize")
	lastID, ok3 := queryInt(r, "lastArticleId")
	if !ok1 || !ok2 || !ok3 || pageSize < 1 || pageSize > 100 {
		badRequest(w, "QUERY")
		return
	}
	writeJSON(w, http.StatusOK, o.scroll(boardID, pageSize, lastID))
}

func (o *origin) getBoardCount(w http.ResponseWriter, r *http.Request) {
	id, err := apijson.Parse(r.PathValue("boardId"))
	if err != nil {
		badRequest(w, "BOARD_ID")
		return
	}
	o.truth.mu.Lock()
	b := *o.board(id)
	o.truth.mu.Unlock()
	writeVersioned(w, b.Value, b.Version)
}

func (o *origin) counts(counts map[int64]*versioned[int64]) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := apijson.Parse(r.PathValue("articleId"))
		if err != nil {
			badRequest(w, "ARTICLE_ID")
			return
		}
		o.truth.mu.Lock()
		c := *counter(counts, id)
		o.truth.mu.Unlock()
		writeVersioned(w, c.Value, c.Version)
	}
}

func (o *origin) getViews(w http.ResponseWriter, r *http.Request) {
	id, err := apijson.Parse(r.PathValue("articleId"))
	if err != nil {
		badRequest(w, "ARTICLE_ID")
		return
	}
	o.truth.mu.Lock()
	n := o.views[id]
	o.truth.mu.Unlock()
	writeJSON(w, http.StatusOK, n) // the view service sends no version: counts only grow
}

// loadViews is a ViewCounts that caches nothing: every Get calls the view service.
type loadViews struct{}

func (loadViews) Get(ctx context.Context, _ string, load func(context.Context) (int64, error)) (int64, error) {
	return load(ctx)
}

func (loadViews) EntryKey(key string) string { return "no-view-cache::" + key }

// Cached never has a count: every read goes through Get.
func (loadViews) Cached(string) (int64, int64, bool) { return 0, 0, false }

func (loadViews) Fresh(int64) bool { return false }

func (loadViews) RefreshSoon(string, func(context.Context) (int64, error)) {}

// testClock is the clock of a test: on miniredis a fixed instant that the test moves and miniredis follows (its
// TTLs too); on a real Redis the wall clock, since the server's own clock judges the expiries written.
type testClock struct {
	mini *snowflaketest.Clock
	b    redisclienttest.Backend
}

func newTestClock(b redisclienttest.Backend) *testClock {
	c := &testClock{b: b}
	if b.Mini != nil {
		c.mini = snowflaketest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		b.Mini.SetTime(c.mini.Now())
		b.Mini.ClockTTL(true)
	}
	return c
}

func (c *testClock) Now() time.Time {
	if c.mini != nil {
		return c.mini.Now()
	}
	return time.Now()
}

// add moves a miniredis clock by d; it reports false on a real Redis, whose clock no test moves.
func (c *testClock) add(d time.Duration) bool {
	if c.mini == nil {
		return false
	}
	c.mini.Add(d)
	c.b.Mini.SetTime(c.mini.Now())
	return true
}

// env is a test's service over one backend and a fake origin.
type env struct {
	b      redisclienttest.Backend
	clock  *testClock
	truth  *truth
	origin *origin
	reads  rueidis.Client // without a near cache: a test reads what it just applied
	svc    *Service
}

func newEnv(t *testing.T, b redisclienttest.Backend) *env {
	clock := newTestClock(b)
	tr := newTruth(clock.Now)
	o := newOrigin(t, tr)
	reads, _ := readsClient(t, b.Addrs, 0)
	e := &env{b: b, clock: clock, truth: tr, origin: o, reads: reads}
	e.svc = e.service(loadViews{})
	// This Redis has held the read model since before the test's first event: every event may build it. (A flush
	// drops the epoch, and the service starts a new one.)
	if err := b.Client.Set(context.Background(), b.Prefix+"article-read::epoch", 0, 0).Err(); err != nil {
		t.Fatal(err)
	}
	return e
}

// service returns another Service over the env's Redis and origin.
func (e *env) service(views ViewCounts) *Service { return e.serviceWithClock(views, e.clock.Now) }

// viewCache returns the view-count cache production uses, over the env's Redis and clock, as cmd/board builds it.
func (e *env) viewCache() *logicalttl.Cache[int64] {
	return logicalttl.New[int64](e.b.Client, e.b.Prefix+"article-read::", logicalttl.Config{Now: e.clock.Now})
}

// serviceWithClock returns another Service over the env's Redis and origin whose clock is now.
func (e *env) serviceWithClock(views ViewCounts, now func() time.Time) *Service {
	return NewService(e.b.Client, views, Config{KeyPrefix: e.b.Prefix, Now: now, Reads: e.reads,
		Origins: Origins{Article: e.origin.URL, Comment: e.origin.URL, Like: e.origin.URL, View: e.origin.URL}})
}

// readsClient connects the client reads go through, with a near cache of cacheBytes and its memo if the Redis
// tracks clients.
func readsClient(t *testing.T, addrs []string, cacheBytes int) (rueidis.Client, *redisclient.Memo) {
	t.Helper()
	c, memo, err := redisclient.ConnectReads(context.Background(), addrs, "", cacheBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, memo
}

// apply applies events in the order given; each must succeed.
func (e *env) apply(t *testing.T, envs []event.Envelope) {
	t.Helper()
	for _, env := range envs {
		if err := e.svc.Apply(context.Background(), env); err != nil {
			t.Fatalf("Apply %s %d: %v", env.Type, env.EventID, err)
		}
	}
}

// applyNew applies every event the truth recorded from index from on, in order, and returns the new end.
func (e *env) applyNew(t *testing.T, from int) int {
	t.Helper()
	envs := e.truth.eventsSince(from)
	e.apply(t, envs)
	return from + len(envs)
}

// flush deletes every key of the test, as a flushed or replaced Redis would have lost them.
func (e *env) flush(t *testing.T) {
	t.Helper()
	e.b.Flush(t)
	// Time moves on past the flush, so that the events emitted before it are older than the new epoch.
	if !e.clock.add(2 * time.Millisecond) {
		time.Sleep(2 * time.Millisecond)
	}
}

// shuffled returns envs with each event delivered one to three times, in a random order.
func shuffled(rng *rand.Rand, envs []event.Envelope) []event.Envelope {
	var out []event.Envelope
	for _, env := range envs {
		for range 1 + rng.IntN(3) {
			out = append(out, env)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// decoded is the article of a as the wire has it.
func decoded(t *testing.T, a ArticleRead) Article {
	t.Helper()
	var out Article
	if err := json.Unmarshal([]byte(a.Article), &out); err != nil {
		t.Fatalf("article %q: %v", a.Article, err)
	}
	return out
}

// timeEqual compares wire times as instants.
var timeEqual = cmp.Comparer(func(a, b apijson.Time) bool { return time.Time(a).Equal(time.Time(b)) })

// checkGet checks that Get answers article id as the truth holds it: equal, or ARTICLE_NOT_FOUND.
func (e *env) checkGet(t *testing.T, id int64) {
	t.Helper()
	got, err := e.svc.Get(context.Background(), id)
	want, ok := e.truth.want(id)
	if !ok {
		if fe, isFault := fault.As(err); !isFault || fe.Kind != fault.NotFound || fe.Code != "ARTICLE_NOT_FOUND" {
			t.Errorf("Get(%d) of a deleted article = %+v, %v; want ARTICLE_NOT_FOUND", id, got, err)
		}
		return
	}
	if err != nil {
		t.Errorf("Get(%d): %v", id, err)
		return
	}
	if diff := cmp.Diff(want, got, timeEqual); diff != "" {
		t.Errorf("Get(%d) (-want +got):\n%s", id, diff)
	}
}

// wantFault checks that err is a fault of kind and code.
func wantFault(t *testing.T, what string, err error, kind fault.Kind, code string) {
	t.Helper()
	fe, ok := fault.As(err)
	if !ok || fe.Kind != kind || fe.Code != code {
		t.Errorf("%s: err = %v, want a fault of kind %d with code %s", what, err, kind, code)
	}
}
