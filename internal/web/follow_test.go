package web

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"board/internal/auth"
)

// The following of SPEC §3.13, faked as the contract of issue 40 says: watches and bookmarks in the notification
// service, comment likes in the like service, blocks and names in the user service, sorts in article-read and the
// comment service.

type fakeBookmark struct {
	User, TargetID, ArticleID int64
	TargetType                string
	Created                   time.Time
}

// following is what the fakes keep of it.
type following struct {
	watches      map[string]string // by "user type id"
	bookmarks    []fakeBookmark    // oldest first
	commentLikes map[[2]int64]bool // by comment and user
	blocks       map[int64][]int64 // by blocker
}

func newFollowing() following {
	return following{watches: map[string]string{}, commentLikes: map[[2]int64]bool{}, blocks: map[int64][]int64{}}
}

func userJSON(u *fakeUser) map[string]any {
	return map[string]any{"userId": wireID(u.ID), "username": u.Name, "role": string(u.Role), "createdAt": wireTime(t0)}
}

// usersByName answers GET /v1/users?usernames= and ?prefix=&limit=; f.mu is held.
func (f *fakes) usersByName(q url.Values) []map[string]any {
	users := slices.SortedFunc(func(yield func(*fakeUser) bool) {
		for _, u := range f.users {
			if !yield(u) {
				return
			}
		}
	}, func(a, b *fakeUser) int { return strings.Compare(a.Name, b.Name) })
	list := []map[string]any{}
	for _, u := range users {
		if q.Has("usernames") && slices.Contains(strings.Split(strings.ToLower(q.Get("usernames")), ","), u.Name) ||
			q.Has("prefix") && strings.HasPrefix(u.Name, q.Get("prefix")) && q.Get("limit") == "8" {
			list = append(list, userJSON(u))
		}
	}
	return list
}

func (f *fakes) blockRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/blocks", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		list := []map[string]any{}
		for _, b := range f.blocks[p.UserID] {
			list = append(list, map[string]any{"userId": wireID(b), "username": f.users[b].Name, "createdAt": wireTime(t0)})
		}
		writeJSON(w, http.StatusOK, map[string]any{"blocks": list})
	})
	mux.HandleFunc("PUT /v1/blocks/{userId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "userId")
		if !ok {
			return
		}
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case n == p.UserID:
			writeError(w, http.StatusBadRequest, "SELF_BLOCK", "You cannot block yourself.")
		case f.users[n] == nil:
			writeError(w, http.StatusNotFound, "USER_NOT_FOUND", "no such user")
		default:
			if !slices.Contains(f.blocks[p.UserID], n) {
				f.blocks[p.UserID] = append(f.blocks[p.UserID], n)
			}
			writeJSON(w, http.StatusOK, map[string]any{"userId": wireID(n), "username": f.users[n].Name, "createdAt": wireTime(today)})
		}
	})
	mux.HandleFunc("DELETE /v1/blocks/{userId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "userId")
		if !ok {
			return
		}
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.blocks[p.UserID] = slices.DeleteFunc(f.blocks[p.UserID], func(b int64) bool { return b == n })
		w.WriteHeader(http.StatusNoContent)
	})
}

func (f *fakes) commentLikeRoutes(mux *http.ServeMux) {
	const one = "/v1/comment-likes/comments/{commentId}/users/{userId}"
	ids := func(w http.ResponseWriter, r *http.Request) ([2]int64, bool) {
		c, ok := pathID(w, r, "commentId")
		if !ok {
			return [2]int64{}, false
		}
		u, ok := pathID(w, r, "userId")
		return [2]int64{c, u}, ok
	}
	mux.HandleFunc("GET "+one, func(w http.ResponseWriter, r *http.Request) {
		k, ok := ids(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.commentLikes[k] {
			writeError(w, http.StatusNotFound, "LIKE_NOT_FOUND", "not liked")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"commentLikeId": "8", "commentId": wireID(k[0]), "articleId": "1",
			"userId": wireID(k[1]), "createdAt": wireTime(t0)})
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
			case method == http.MethodPost && f.commentLikes[k]:
				writeError(w, http.StatusConflict, "ALREADY_LIKED", "already liked")
			case method == http.MethodPost:
				f.commentLikes[k] = true
				writeJSON(w, http.StatusCreated, map[string]any{"commentLikeId": "8", "commentId": wireID(k[0]), "articleId": "1",
					"userId": wireID(k[1]), "createdAt": wireTime(today)})
			case !f.commentLikes[k]:
				writeError(w, http.StatusNotFound, "LIKE_NOT_FOUND", "not liked")
			default:
				delete(f.commentLikes, k)
				w.WriteHeader(http.StatusNoContent)
			}
		})
	}
	mux.HandleFunc("GET /v1/comment-likes/comments/{commentId}/count", func(w http.ResponseWriter, r *http.Request) {
		c, ok := pathID(w, r, "commentId")
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for k := range f.commentLikes {
			if k[0] == c {
				n++
			}
		}
		writeJSON(w, http.StatusOK, n)
	})
}

func (f *fakes) watchRoutes(mux *http.ServeMux) {
	const one = "/v1/watches/{targetType}/{targetId}"
	key := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		p, ok := f.acting(w, r)
		if !ok {
			return "", false
		}
		if tt := r.PathValue("targetType"); tt != "article" && tt != "board" {
			writeError(w, http.StatusBadRequest, "INVALID_TARGET_TYPE", "articles and boards are watched")
			return "", false
		}
		return wireID(p.UserID) + " " + r.PathValue("targetType") + " " + r.PathValue("targetId"), true
	}
	answer := func(w http.ResponseWriter, r *http.Request, level string) {
		writeJSON(w, http.StatusOK, map[string]any{"targetType": r.PathValue("targetType"), "targetId": r.PathValue("targetId"),
			"level": level, "createdAt": wireTime(t0)})
	}
	mux.HandleFunc("GET "+one, func(w http.ResponseWriter, r *http.Request) {
		k, ok := key(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		level := f.watches[k]
		f.mu.Unlock()
		if level == "" {
			writeError(w, http.StatusNotFound, "WATCH_NOT_FOUND", "not watched")
			return
		}
		answer(w, r, level)
	})
	mux.HandleFunc("PUT "+one, func(w http.ResponseWriter, r *http.Request) {
		k, ok := key(w, r)
		if !ok {
			return
		}
		var in struct{ Level string }
		if json.NewDecoder(r.Body).Decode(&in) != nil || in.Level != "watching" && in.Level != "muted" {
			writeError(w, http.StatusBadRequest, "INVALID_LEVEL", "watching or muted")
			return
		}
		f.mu.Lock()
		f.watches[k] = in.Level
		f.mu.Unlock()
		answer(w, r, in.Level)
	})
	mux.HandleFunc("DELETE "+one, func(w http.ResponseWriter, r *http.Request) {
		k, ok := key(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		delete(f.watches, k)
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
}

// bookmarkRoutes: the list's cursor is the position to go on from, as a string.
func (f *fakes) bookmarkRoutes(mux *http.ServeMux) {
	const one = "/v1/bookmarks/{targetType}/{targetId}"
	target := func(w http.ResponseWriter, r *http.Request) (auth.Principal, string, int64, bool) {
		p, ok := f.acting(w, r)
		if !ok {
			return p, "", 0, false
		}
		tt := r.PathValue("targetType")
		if tt != "article" && tt != "comment" {
			writeError(w, http.StatusBadRequest, "INVALID_TARGET_TYPE", "articles and comments are bookmarked")
			return p, "", 0, false
		}
		n, ok := pathID(w, r, "targetId")
		return p, tt, n, ok
	}
	find := func(user int64, tt string, n int64) int {
		return slices.IndexFunc(f.bookmarks, func(b fakeBookmark) bool { return b.User == user && b.TargetType == tt && b.TargetID == n })
	}
	mux.HandleFunc("GET "+one, func(w http.ResponseWriter, r *http.Request) {
		p, tt, n, ok := target(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(p.UserID, tt, n); i >= 0 {
			writeJSON(w, http.StatusOK, bookmarkJSON(f.bookmarks[i], f))
			return
		}
		writeError(w, http.StatusNotFound, "BOOKMARK_NOT_FOUND", "not bookmarked")
	})
	mux.HandleFunc("PUT "+one, func(w http.ResponseWriter, r *http.Request) {
		p, tt, n, ok := target(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		article := n
		if tt == "comment" {
			c := f.commentByID(n)
			if c == nil {
				writeError(w, http.StatusNotFound, "TARGET_NOT_FOUND", "no such comment")
				return
			}
			article = c.Article
		}
		if find(p.UserID, tt, n) < 0 {
			f.bookmarks = append(f.bookmarks, fakeBookmark{User: p.UserID, TargetType: tt, TargetID: n, ArticleID: article, Created: today})
		}
		writeJSON(w, http.StatusOK, bookmarkJSON(f.bookmarks[find(p.UserID, tt, n)], f))
	})
	mux.HandleFunc("DELETE "+one, func(w http.ResponseWriter, r *http.Request) {
		p, tt, n, ok := target(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if i := find(p.UserID, tt, n); i >= 0 {
			f.bookmarks = slices.Delete(f.bookmarks, i, i+1)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/bookmarks", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		size, _ := strconv64(q.Get("pageSize"))
		from, _ := strconv64(cmp.Or(q.Get("cursor"), "0"))
		f.mu.Lock()
		defer f.mu.Unlock()
		var mine []fakeBookmark
		for _, b := range slices.Backward(f.bookmarks) {
			if b.User == p.UserID {
				mine = append(mine, b)
			}
		}
		list := []map[string]any{}
		next := ""
		for i := from; i < int64(len(mine)); i++ {
			if int64(len(list)) == size {
				next = wireID(i)
				break
			}
			list = append(list, bookmarkJSON(mine[i], f))
		}
		writeJSON(w, http.StatusOK, map[string]any{"bookmarks": list, "nextCursor": next})
	})
}

// bookmarkJSON is b as the service lists it, with its article's title and an excerpt; f.mu is held.
func bookmarkJSON(b fakeBookmark, f *fakes) map[string]any {
	m := map[string]any{"targetType": b.TargetType, "targetId": wireID(b.TargetID), "articleId": wireID(b.ArticleID),
		"createdAt": wireTime(b.Created)}
	if a := f.read[b.ArticleID]; a != nil {
		m["title"], m["excerpt"] = a.Title, a.Content
	}
	if c := f.commentByID(b.TargetID); b.TargetType == "comment" && c != nil {
		m["excerpt"] = c.Content
	}
	return m
}

// sortedBoard is article-read's order of a board's articles (newest first): top-all by likes; the other sorts as
// newest, which is enough to see that the pages ask for them.
func sortedBoard(as []*fakeArticle, sort string) ([]*fakeArticle, bool) {
	switch sort {
	case "", "newest", "top-day", "top-week", "top-month", "comments", "active":
		return as, true
	case "top-all":
		return slices.SortedStableFunc(slices.Values(as), func(a, b *fakeArticle) int { return cmp.Compare(b.Likes, a.Likes) }), true
	}
	return nil, false
}

// sortedThread is the comment service's order of a thread: the tree (oldest), newest first, or by likes.
func sortedThread(cs []fakeComment, sort string) ([]fakeComment, bool) {
	switch sort {
	case "", "oldest":
		return cs, true
	case "newest":
		return slices.SortedFunc(slices.Values(cs), func(a, b fakeComment) int { return cmp.Compare(b.ID, a.ID) }), true
	case "top":
		return slices.SortedFunc(slices.Values(cs), func(a, b fakeComment) int {
			return cmp.Or(cmp.Compare(b.Likes, a.Likes), cmp.Compare(b.ID, a.ID))
		}), true
	}
	return nil, false
}

// followPages is the pages on the fakes with the fake notification service.
func followPages(t *testing.T, f *fakes) http.Handler {
	t.Helper()
	return notificationPages(t, f, nil)
}

// TestMentionLinks: /u/{name} goes to the user's page, in any case; a name no one has, or that is no name, is the
// 404 page (the latter asks no service).
func TestMentionLinks(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	w := get(t, h, "/u/Bob", "")
	if w.Code != http.StatusFound || w.Header().Get("Location") != "/users/11" {
		t.Errorf("/u/Bob: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if s := f.requests("user"); len(s) != 1 || s[0].String() != "GET /v1/users?usernames=bob" {
		t.Errorf("the user service received %v", s)
	}
	w = get(t, h, "/u/nobody", "")
	if w.Code != http.StatusNotFound {
		t.Errorf("/u/nobody: status %d", w.Code)
	}
	mustContain(t, "/u/nobody", w.Body.String(), "There is no user called @nobody.")
	before := len(f.requests("user"))
	for _, path := range []string{"/u/ab", "/u/a-b-c", "/u/" + strings.Repeat("a", 31)} {
		if w := get(t, h, path, ""); w.Code != http.StatusNotFound {
			t.Errorf("%s: status %d", path, w.Code)
		}
	}
	if n := len(f.requests("user")) - before; n != 0 {
		t.Errorf("names that cannot be were asked %d times", n)
	}
}

// TestUsernames: the autocomplete's names come from the user service's prefix search, 8 at most; anything but the
// start of a name is none, asked of no one; a user service down is a 503 the script passes over.
func TestUsernames(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	w := get(t, h, "/usernames?prefix=A", "")
	var names []string
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &names) != nil || !slices.Equal(names, []string{"alice"}) {
		t.Errorf("prefix A: status %d, %s", w.Code, w.Body)
	}
	if s := f.requests("user"); len(s) != 1 || s[0].String() != "GET /v1/users?limit=8&prefix=a" {
		t.Errorf("the user service received %v", s)
	}
	for _, prefix := range []string{"", "a b", "<", strings.Repeat("a", 31)} {
		w := get(t, h, "/usernames?prefix="+url.QueryEscape(prefix), "")
		if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "[]" {
			t.Errorf("prefix %q: status %d, %s", prefix, w.Code, w.Body)
		}
	}
	if n := len(f.requests("user")); n != 1 {
		t.Errorf("prefixes that are no name's start were asked: %d calls", n)
	}
	down := f.handler(t, func(c *Config) { c.Origins.User = closedOrigin(t) })
	if w := get(t, down, "/usernames?prefix=a", ""); w.Code != http.StatusServiceUnavailable {
		t.Errorf("user service down: status %d", w.Code)
	}
}

// TestWatchButtons: a signed-in reader's article and board pages have the watch buttons with their level pressed;
// a press sets it in the notification service (normal drops the watch) and comes back, or with script gets the
// buttons alone. Signed out, or with the notification service down, there are none, and the page does not wait.
func TestWatchButtons(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := followPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)

	body := get(t, h, "/articles/1?sort=top", alice).Body.String()
	mustContain(t, "an article", body, `<form id="watch" class="watch" method="post" action="/articles/1/watch" data-swap="watch">`,
		`<input type="hidden" name="back" value="/articles/1?sort=top">`,
		`id="watch-normal" type="submit" name="level" value="normal" class="secondary" title="Tell me of replies and mentions only" aria-pressed="true"`)
	w := post(t, h, "/articles/1/watch", url.Values{"level": {"watching"}, "back": {"/articles/1?sort=top"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1?sort=top#watch" {
		t.Errorf("watch: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	last := func() seen { s := f.requests("notification"); return s[len(s)-1] }
	if s := last(); s.String() != "PUT /v1/watches/article/1" || s.Body != `{"level":"watching"}` || s.Auth != "Bearer "+alice {
		t.Errorf("watch sent %v %s with %q", s, s.Body, s.Auth)
	}
	mustContain(t, "a watched article", get(t, h, "/articles/1", alice).Body.String(),
		`id="watch-watching" type="submit" name="level" value="watching" class="secondary" title="Tell me of every new comment" aria-pressed="true"`)

	w = serve(t, h, visit{method: http.MethodPost, target: "/articles/1/watch", form: url.Values{"level": {"muted"}}, token: alice,
		header: map[string]string{"X-Fragment": "1"}})
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `<form id="watch"`) {
		t.Errorf("a script's watch: status %d\n%s", w.Code, w.Body)
	}
	mustContain(t, "a script's mute", w.Body.String(), `value="muted" class="secondary" title="Tell me of nothing here" aria-pressed="true"`)
	post(t, h, "/articles/1/watch", url.Values{"level": {"normal"}}, alice)
	if s := last(); s.String() != "DELETE /v1/watches/article/1" {
		t.Errorf("normal sent %v", s)
	}
	if w := post(t, h, "/articles/1/watch", url.Values{"level": {"loud"}}, alice); w.Code != http.StatusBadRequest {
		t.Errorf("a level that is none: status %d", w.Code)
	}

	mustContain(t, "a board", get(t, h, "/boards/1", alice).Body.String(), `action="/boards/1/watch"`)
	w = post(t, h, "/boards/1/watch", url.Values{"level": {"watching"}, "back": {"/boards/1?page=2"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/boards/1?page=2#watch" || last().String() != "PUT /v1/watches/board/1" {
		t.Errorf("board watch: status %d, Location %q, sent %v", w.Code, w.Header().Get("Location"), last())
	}
	if w := post(t, h, "/boards/77/watch", url.Values{"level": {"watching"}}, alice); w.Code != http.StatusNotFound {
		t.Errorf("a board the site has not: status %d", w.Code)
	}

	mustNotContain(t, "signed out", get(t, h, "/articles/1", "").Body.String(), `id="watch"`)
	hung := f.handler(t, func(c *Config) { c.Origins.Notification = hungOrigin(t) })
	start := time.Now()
	body = get(t, hung, "/articles/1", alice).Body.String()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("with the notification service hung, the page took %v", took)
	}
	mustNotContain(t, "the notification service hung", body, `id="watch"`, `id="bookmark"`)
	mustContain(t, "the notification service hung", body, `id="article-content"`)
}

// TestBookmarkButtons: the article and each comment have a bookmark button, pressed for what the reader's newest
// bookmarks hold; a press bookmarks or unbookmarks through the notification service. The bookmarks page lists them
// newest first, by cursor, each with a button that removes it.
func TestBookmarkButtons(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := followPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)

	body := get(t, h, "/articles/1", alice).Body.String()
	mustContain(t, "an article", body, `<form id="bookmark" class="bookmark" method="post" action="/articles/1/bookmark" data-swap="bookmark">`,
		`<form id="cb-100" class="bookmark" method="post" action="/articles/1/comments/100/bookmark" data-swap="cb-100">`)
	if !slices.ContainsFunc(f.requests("notification"), func(s seen) bool { return s.String() == "GET /v1/bookmarks?pageSize=100" }) {
		t.Errorf("the page did not read the reader's bookmarks: %v", f.requests("notification"))
	}
	w := post(t, h, "/articles/1/bookmark", url.Values{"back": {"/articles/1"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1#bookmark" {
		t.Errorf("bookmark: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	w = post(t, h, "/articles/1/comments/100/bookmark", url.Values{"back": {"/articles/1?cpage=1"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1?cpage=1#c-100" {
		t.Errorf("comment bookmark: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	body = get(t, h, "/articles/1", alice).Body.String()
	mustContain(t, "bookmarked", body, `action="/articles/1/unbookmark"`, `action="/articles/1/comments/100/unbookmark"`,
		`<button id="bookmark-button" type="submit" class="secondary" aria-pressed="true">Bookmarked</button>`)
	mustContain(t, "bookmarked", body, `action="/articles/1/comments/101/bookmark"`)

	w = serve(t, h, visit{method: http.MethodPost, target: "/articles/1/comments/100/unbookmark", form: url.Values{}, token: alice,
		header: map[string]string{"X-Fragment": "1"}})
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `<form id="cb-100" class="bookmark" method="post" action="/articles/1/comments/100/bookmark"`) {
		t.Errorf("a script's unbookmark: status %d\n%s", w.Code, w.Body)
	}
	if s := f.requests("notification"); s[len(s)-1].String() != "DELETE /v1/bookmarks/comment/100" {
		t.Errorf("unbookmark sent %v", s[len(s)-1])
	}

	// The page of bookmarks, 20 at a time.
	f.mu.Lock()
	for i := range 21 {
		f.bookmarks = append(f.bookmarks, fakeBookmark{User: 10, TargetType: "comment", TargetID: 101, ArticleID: 1,
			Created: today.Add(time.Duration(i) * time.Minute)})
	}
	f.mu.Unlock()
	body = get(t, h, "/bookmarks", alice).Body.String()
	if n := strings.Count(body, `class="bookmark-item"`); n != 20 {
		t.Errorf("the first page lists %d bookmarks, want 20", n)
	}
	mustContain(t, "the bookmarks", body, `<a class="title" href="/articles/1#c-101">First post</a>`, `<p class="excerpt">Thanks</p>`,
		`<a id="older" href="/bookmarks?cursor=20" rel="next">Older ›</a>`,
		`<input type="hidden" name="targetType" value="comment"> <input type="hidden" name="targetId" value="101"> <input type="hidden" name="back" value="/bookmarks">`)
	body = get(t, h, "/bookmarks?cursor=20", alice).Body.String()
	mustContain(t, "the second page", body, `<a class="title" href="/articles/1">First post</a>`, `<a id="newest" href="/bookmarks" rel="first">`)
	w = post(t, h, "/bookmarks/remove", url.Values{"targetType": {"article"}, "targetId": {"1"}, "back": {"/bookmarks?cursor=20"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/bookmarks?cursor=20&notice=unbookmarked" {
		t.Errorf("remove: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if s := f.requests("notification"); s[len(s)-1].String() != "DELETE /v1/bookmarks/article/1" {
		t.Errorf("remove sent %v", s[len(s)-1])
	}
	if w := post(t, h, "/bookmarks/remove", url.Values{"targetType": {"user"}, "targetId": {"1"}}, alice); w.Code != http.StatusBadRequest {
		t.Errorf("a bookmark of a user: status %d", w.Code)
	}
	if w := get(t, h, "/bookmarks", ""); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin?next=%2Fbookmarks" {
		t.Errorf("signed out: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	mustContain(t, "the bar", get(t, h, "/", alice).Body.String(), `<a id="nav-bookmarks" class="bar-icon" href="/bookmarks" aria-label="Bookmarks" title="Bookmarks">`)
	mustNotContain(t, "a site without notifications", get(t, f.handler(t), "/articles/1", alice).Body.String(), `id="bookmark"`, `id="nav-bookmarks"`)
}

// TestCommentLikes: each comment shows its likes with a button; the like service is asked whether the reader likes
// only the comments with likes (or liked here lately); a like is sent with its form's key, and comes back to the
// comment, or with script as the button and the like service's own count.
func TestCommentLikes(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	bob := f.token(t, 11, auth.RoleUser)
	f.mu.Lock()
	f.comments[1][1].Likes = 2
	f.commentLikes[[2]int64{101, 11}] = true
	f.commentLikes[[2]int64{101, 12}] = true
	f.mu.Unlock()

	body := get(t, h, "/articles/1", bob).Body.String()
	mustContain(t, "the thread", body, `<form id="cl-101" class="comment-like" method="post" action="/articles/1/comments/101/unlike" data-swap="cl-101">`,
		`<form id="cl-100" class="comment-like" method="post" action="/articles/1/comments/100/like" data-swap="cl-100">`,
		`<span class="comment-like-count">2</span> likes`)
	var asked []string
	for _, s := range f.requests("like") {
		if strings.HasPrefix(s.Path, "/v1/comment-likes/") {
			asked = append(asked, s.String())
		}
	}
	if !slices.Equal(asked, []string{"GET /v1/comment-likes/comments/101/users/11"}) {
		t.Errorf("the like service was asked %v, want only the comment with likes", asked)
	}

	keys, keyOf := keysOf(t, body)
	key := keyOf(`id="cl-100"`)
	w := post(t, h, "/articles/1/comments/100/like", url.Values{"idempotencyKey": {key}, "back": {"/articles/1?sort=top"}}, bob)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1?sort=top#c-100" {
		t.Errorf("like: status %d, Location %q (keys %v)", w.Code, w.Header().Get("Location"), keys)
	}
	if s := f.writes("like"); s[len(s)-1].String() != "POST /v1/comment-likes/comments/100/users/11" || s[len(s)-1].Key != key {
		t.Errorf("like sent %+v", s[len(s)-1])
	}
	// Its count is still 0 in the comment service: asked all the same, as liked here lately.
	mustContain(t, "a comment liked a moment ago", get(t, h, "/articles/1", bob).Body.String(), `action="/articles/1/comments/100/unlike"`)

	w = serve(t, h, visit{method: http.MethodPost, target: "/articles/1/comments/101/unlike", form: url.Values{}, token: bob,
		header: map[string]string{"X-Fragment": "1"}})
	if w.Code != http.StatusOK {
		t.Fatalf("a script's unlike: status %d\n%s", w.Code, w.Body)
	}
	mustContain(t, "a script's unlike", w.Body.String(), `action="/articles/1/comments/101/like"`,
		`<span class="comment-like-count">1</span> like</form>`)
	// Twice is done, not an error.
	if w := post(t, h, "/articles/1/comments/101/unlike", nil, bob); w.Code != http.StatusSeeOther {
		t.Errorf("an unlike twice: status %d", w.Code)
	}

	body = get(t, h, "/articles/1", "").Body.String()
	mustContain(t, "signed out", body, `<span id="cl-101" class="comment-like"><span class="comment-like-count">2</span> likes</span>`)
	mustNotContain(t, "signed out", body, `id="cl-100"`, `class="comment-like" method="post"`)
}

// TestSorts: a board's sort tabs and a thread's orders go to the services as sort, the page numbers, the endless
// scroll and the comment forms keep them, and a sort that is none is a 400 page asked of no service.
func TestSorts(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)
	f.mu.Lock()
	f.read[1].Likes = 5
	f.mu.Unlock()

	body := get(t, h, "/boards/1?sort=top-all", "").Body.String()
	mustContain(t, "a board by likes", body, `<title>General · Top of all time · board</title>`,
		`<span class="sort" aria-current="true">Top of all time</span>`, `<a class="sort" href="/boards/1" data-sort="newest">Newest</a>`,
		`<a class="sort" href="/boards/1?sort=top-week" data-sort="top-week">Top this week</a>`,
		`<a id="scroll-view" href="/boards/1/scroll?sort=top-all">`)
	if strings.Index(body, "First post") > strings.Index(body, "Second post") {
		t.Errorf("the most liked article is not first")
	}
	if s := f.requests("article-read"); s[len(s)-1].Query != "boardId=1&page=1&pageSize=20&sort=top-all&view=summary" {
		t.Errorf("article-read was asked %v", s[len(s)-1])
	}
	f.mu.Lock()
	for i := range 25 {
		n := int64(300 + i)
		f.read[n] = &fakeArticle{ID: n, Board: 1, Writer: 11, Title: "More", Created: t0, Modified: t0}
	}
	f.mu.Unlock()
	mustContain(t, "page numbers in the sort", get(t, h, "/boards/1?sort=comments", "").Body.String(), `<a href="/boards/1?sort=comments&amp;page=2">2</a>`)
	body = get(t, h, "/boards/1/scroll?sort=top-all", "").Body.String()
	mustContain(t, "the endless scroll in the sort", body, `<a id="pages-view" href="/boards/1?sort=top-all">Pages</a>`,
		`<span class="sort" aria-current="true">Top of all time</span>`, `href="/boards/1/scroll?sort=top-all&amp;after=`)
	before := len(f.requests("article-read"))
	for _, path := range []string{"/boards/1?sort=oldest", "/boards/1/scroll?sort=x", "/articles/1?sort=top-all"} {
		if w := get(t, h, path, ""); w.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", path, w.Code)
		}
	}
	if n := len(f.requests("article-read")) - before; n != 0 {
		t.Errorf("sorts that are none were asked %d times", n)
	}

	body = get(t, h, "/articles/1?sort=newest", alice).Body.String()
	if s := f.requests("comment"); s[len(s)-1].Query != "articleId=1&page=1&pageSize=100&sort=newest" {
		t.Errorf("the comment service was asked %v", s[len(s)-1])
	}
	mustContain(t, "a thread newest first", body, `<span class="sort" aria-current="true">Newest first</span>`,
		`<a class="sort" href="/articles/1#comments" data-sort="oldest">Oldest first</a>`,
		`<li id="c-101" class="comment depth-1 flat" data-depth="2">`,
		`<span class="reply-to">in reply to <a href="#c-100">bob</a></span>`,
		`<input type="hidden" name="sort" value="newest">`)
	if strings.Index(body, `id="c-101"`) > strings.Index(body, `id="c-100"`) {
		t.Errorf("the newest comment is not first")
	}
	w := post(t, h, "/articles/1/comments", url.Values{"content": {"Hi"}, "sort": {"newest"}, "cpage": {"2"}}, alice)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/articles/1?cpage=2&sort=newest#c-") {
		t.Errorf("a comment in a sort: status %d, Location %q", w.Code, loc)
	}
	mustNotContain(t, "the tree", get(t, h, "/articles/1", alice).Body.String(), `name="sort"`, "reply-to")
}

// TestBlocks: a reader's blocks leave the blocked writers' articles out of board lists and fold their comments;
// the user's page blocks and unblocks; the blocks are asked once for a reader's pages a while, and again after a
// change; a user service that cannot say leaves the pages as they are.
func TestBlocks(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)

	mustContain(t, "bob's page", get(t, h, "/users/11", alice).Body.String(), `<form id="block-form" method="post" action="/users/11/block"`)
	mustNotContain(t, "her own page", get(t, h, "/users/10", alice).Body.String(), `id="block-form"`)
	mustNotContain(t, "signed out", get(t, h, "/users/11", "").Body.String(), `id="block-form"`)
	w := post(t, h, "/users/11/block", nil, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/users/11?notice=blocked" {
		t.Errorf("block: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	if s := f.writes("user"); s[len(s)-1].String() != "PUT /v1/blocks/11" || s[len(s)-1].Auth != "Bearer "+alice {
		t.Errorf("block sent %v", s[len(s)-1])
	}
	if w := post(t, h, "/users/10/block", nil, alice); w.Code != http.StatusBadRequest {
		t.Errorf("blocking herself: status %d", w.Code)
	}

	countBlocks := func() int {
		n := 0
		for _, s := range f.requests("user") {
			if s.String() == "GET /v1/blocks" {
				n++
			}
		}
		return n
	}
	asked := countBlocks()
	mustContain(t, "bob's page, blocked", get(t, h, "/users/11?notice=blocked", alice).Body.String(), `action="/users/11/unblock"`, `id="blocked"`)
	body := get(t, h, "/boards/1", alice).Body.String()
	mustContain(t, "the board", body, "First post")
	mustNotContain(t, "the board", body, "Second post")
	mustNotContain(t, "the endless scroll", get(t, h, "/boards/1/scroll", alice).Body.String(), "Second post")
	body = get(t, h, "/articles/1", alice).Body.String()
	mustContain(t, "the thread", body, `<li id="c-100" class="comment depth-1" data-depth="1"><details class="blocked"><summary class="blocked-summary">Comment by a user you blocked</summary>`)
	mustNotContain(t, "the thread", body, `<li id="c-101" class="comment depth-2" data-depth="2"><details`)
	if n := countBlocks() - asked; n != 1 {
		t.Errorf("four pages asked the blocks %d times, want once", n)
	}
	mustContain(t, "bob's own board", get(t, h, "/boards/1", f.token(t, 11, auth.RoleUser)).Body.String(), "Second post")
	mustContain(t, "signed out", get(t, h, "/boards/1", "").Body.String(), "Second post")

	post(t, h, "/users/11/unblock", nil, alice)
	if s := f.writes("user"); s[len(s)-1].String() != "DELETE /v1/blocks/11" {
		t.Errorf("unblock sent %v", s[len(s)-1])
	}
	mustContain(t, "unblocked", get(t, h, "/boards/1", alice).Body.String(), "Second post")

	f.mu.Lock()
	f.blocks[10] = []int64{11}
	f.mu.Unlock()
	f.override("user", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/blocks" {
			writeError(w, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE", "down")
			return
		}
		f.userMux().ServeHTTP(w, r)
	})
	fresh := f.handler(t)
	w = get(t, fresh, "/boards/1", alice)
	if w.Code != http.StatusOK {
		t.Errorf("blocks unknown: status %d", w.Code)
	}
	mustContain(t, "blocks unknown", w.Body.String(), "Second post")
	mustNotContain(t, "blocks unknown", get(t, fresh, "/users/11", alice).Body.String(), `id="block-form"`)
}

// TestCommentLikesAskedUntilAFailure: the like state of a thread's comments is asked a few at a time, and a failing
// like service's first answer ends the asking, rather than every comment waiting its own timeout.
func TestCommentLikesAskedUntilAFailure(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	var asked atomic.Int64
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/comment-likes/") {
			asked.Add(1)
		}
		http.Error(w, `{"code":"BROKEN","message":"broken"}`, http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	h := f.handler(t, func(c *Config) { c.Origins.Like = failing.URL })
	bob := f.token(t, 11, auth.RoleUser)
	f.mu.Lock()
	for i := range int64(5 * commentLikeAsks) {
		f.comments[1] = append(f.comments[1], fakeComment{ID: 200 + i, Article: 1, Writer: 10, Content: "liked",
			Path: fmt.Sprintf("%05d", 10+i), Created: time.Now(), Likes: 1})
	}
	f.mu.Unlock()

	if w := get(t, h, "/articles/1", bob); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if n := asked.Load(); n > commentLikeAsks {
		t.Errorf("a failing like service was asked of %d comments, want at most %d (those in flight at the first failure)", n, commentLikeAsks)
	}
}

// TestBookmarkedLongAgo: an article bookmarked before the reader's newest bookmarksSeen shows as bookmarked all the
// same, asked for by name, so its button can take the bookmark away.
func TestBookmarkedLongAgo(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := followPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)
	f.mu.Lock()
	f.bookmarks = append(f.bookmarks, fakeBookmark{User: 10, TargetType: "article", TargetID: 1, ArticleID: 1, Created: today})
	for i := range int64(bookmarksSeen) {
		f.bookmarks = append(f.bookmarks, fakeBookmark{User: 10, TargetType: "article", TargetID: 1000 + i, ArticleID: 1000 + i, Created: today})
	}
	f.mu.Unlock()
	mustContain(t, "an article bookmarked long ago", get(t, h, "/articles/1", alice).Body.String(), `action="/articles/1/unbookmark"`)
}
