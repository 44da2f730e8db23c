package web

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/auth"
	"board/internal/polltest"
)

const (
	scriptXSS = `<script>alert(1)</script>`
	attrXSS   = `"><img src=x onerror=alert(1)>`
)

// TestUserTextIsEscaped puts markup in every piece of user text a page shows (titles, contents, usernames,
// comments, the address itself) and checks that none of it reaches a page raw, while the text itself is shown.
func TestUserTextIsEscaped(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	evil := scriptXSS + attrXSS
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "T " + evil, Content: "C " + attrXSS + scriptXSS, Created: t0, Modified: t0})
	f.putArticle(&fakeArticle{ID: 2, Board: 1, Writer: 11, Title: attrXSS, Content: scriptXSS, Created: t0, Modified: t0})
	f.mu.Lock()
	f.users[10].Name = "alice" + evil
	f.users[11].Name = attrXSS
	f.comments[1] = []fakeComment{
		{ID: 100, Article: 1, Writer: 11, Content: "c " + evil, Path: "00000", Created: t0},
		{ID: 101, Article: 1, Writer: 10, Content: scriptXSS, Path: "0000000000", Created: t0},
	}
	f.hot["20261122"] = []fakeHot{{ID: 1, Title: evil, Created: t0, Score: 1}}
	f.mu.Unlock()
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)

	for _, tc := range []struct{ target, token string }{
		{"/", alice},
		{"/boards/1", ""},
		{"/boards/1", alice},
		{"/boards/1?q=" + url.QueryEscape(evil), ""},
		{"/boards/1/scroll", ""},
		{"/boards/1/scroll", alice},
		{"/articles/1", ""},
		{"/articles/1", alice},
		{"/articles/2", alice},
		{"/hot", ""},
		{"/hot", alice},
		{"/articles/1/edit", alice},
		{"/boards/1/write", alice},
		{"/signin?next=" + url.QueryEscape("/"+evil), ""},
		{"/signup?next=" + url.QueryEscape("/"+evil), ""},
	} {
		name := tc.target
		if tc.token != "" {
			name += " signed in"
		}
		t.Run(name, func(t *testing.T) {
			w := get(t, h, tc.target, tc.token)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200\n%s", w.Code, w.Body)
			}
			body := w.Body.String()
			for _, raw := range []string{scriptXSS, attrXSS, "<script>alert", "<img src=x", `"><img`} {
				if strings.Contains(body, raw) {
					t.Errorf("the page holds %q raw:\n%s", raw, body)
				}
			}
			if !strings.Contains(body, "alert(1)") && !strings.Contains(body, "alert%281%29") {
				t.Errorf("the page shows none of the user text, so it proves nothing:\n%s", body)
			}
		})
	}
	// The scroll page's chunk, which a script appends, is escaped too.
	w := serve(t, h, visit{target: "/boards/1/scroll", header: map[string]string{"X-Fragment": "1"}})
	if body := w.Body.String(); strings.Contains(body, scriptXSS) || strings.Contains(body, attrXSS) || !strings.Contains(body, "alert(1)") {
		t.Errorf("scroll chunk not escaped:\n%s", body)
	}
}

// TestCrossOriginFormsRefused: a form sent from another site is a 403 page, and nothing reaches the services; the
// same form from the site itself goes through.
func TestCrossOriginFormsRefused(t *testing.T) {
	t.Parallel()
	forms := []struct {
		target  string
		form    url.Values
		service string // the service the form reaches when it goes through
	}{
		{"/articles/1/delete", url.Values{"boardId": {"1"}}, "article"},
		{"/signin", url.Values{"username": {"alice"}, "password": {"correct horse"}}, "user"},
		{"/articles/1/like", url.Values{}, "like"},
	}
	refused := []struct {
		name   string
		header map[string]string
	}{
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"Sec-Fetch-Site same-site", map[string]string{"Sec-Fetch-Site": "same-site"}},
		{"Origin of another host", map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}},
	}
	for _, form := range forms {
		for _, tc := range refused {
			t.Run(form.target+"/"+tc.name, func(t *testing.T) {
				f := newFakes(t)
				h := f.handler(t)
				w := serve(t, h, visit{method: http.MethodPost, target: form.target, form: form.form,
					token: f.token(t, 10, auth.RoleUser), header: tc.header})
				if w.Code != http.StatusForbidden {
					t.Errorf("status %d, want 403", w.Code)
				}
				if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
					t.Errorf("Content-Type %q, want HTML", ct)
				}
				if !strings.Contains(w.Body.String(), `<main id="error"`) {
					t.Errorf("not the error page:\n%s", w.Body)
				}
				if n := f.total(); n != 0 {
					t.Errorf("the services received %d requests for a refused form: %v", n, f.log)
				}
				if c := sessionCookieOf(w); c != nil {
					t.Errorf("a refused form set the session cookie: %v", c)
				}
			})
		}
		for _, tc := range []struct {
			name   string
			header map[string]string
		}{
			{"Sec-Fetch-Site same-origin", map[string]string{"Sec-Fetch-Site": "same-origin"}},
			{"Origin of this host", map[string]string{"Sec-Fetch-Site": "", "Origin": "http://example.com"}},
		} {
			t.Run(form.target+"/"+tc.name, func(t *testing.T) {
				f := newFakes(t)
				h := f.handler(t)
				w := serve(t, h, visit{method: http.MethodPost, target: form.target, form: form.form,
					token: f.token(t, 10, auth.RoleUser), header: tc.header})
				if w.Code != http.StatusSeeOther {
					t.Errorf("status %d, want 303\n%s", w.Code, w.Body)
				}
				var writes []string
				for _, s := range f.requests(form.service) {
					if s.Method == http.MethodPost || s.Method == http.MethodDelete {
						writes = append(writes, s.String())
					}
				}
				if len(writes) != 1 {
					t.Errorf("the %s service received writes %v, want one", form.service, writes)
				}
			})
		}
	}
}

// TestServiceDown: a service that cannot answer is a friendly page, never a blank one or its raw error; what a page
// can do without is left out.
func TestServiceDown(t *testing.T) {
	t.Parallel()
	checkUnavailable := func(t *testing.T, w *httptest.ResponseRecorder) {
		t.Helper()
		res, body := w.Result(), w.Body.String()
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", res.StatusCode)
		}
		if res.Header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("Content-Type %q, want text/html", ct)
		}
		if !strings.Contains(body, `<main id="error"`) {
			t.Errorf("not the error page:\n%s", body)
		}
		for _, leak := range []string{`"code"`, "dial tcp", "connection refused", "context deadline", "127.0.0.1", "Get \"http"} {
			if strings.Contains(body, leak) {
				t.Errorf("the page shows %q:\n%s", leak, body)
			}
		}
		if strings.HasPrefix(strings.TrimSpace(body), "{") {
			t.Errorf("a JSON body:\n%s", body)
		}
	}

	t.Run("article-read on a closed port", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t, func(c *Config) { c.Origins.ArticleRead = closedOrigin(t) })
		w := get(t, h, "/boards/1", "")
		checkUnavailable(t, w)
	})

	t.Run("article-read hung", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t, func(c *Config) { c.Origins.ArticleRead = hungOrigin(t) })
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		w := serve(t, h, visit{target: "/boards/1", ctx: ctx})
		checkUnavailable(t, w)
	})

	t.Run("article-read answers 503", func(t *testing.T) {
		f := newFakes(t)
		f.override("article-read", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "redis: connection refused at 10.0.0.7:6379")
		})
		h := f.handler(t)
		w := get(t, h, "/articles/1", "")
		checkUnavailable(t, w)
		if strings.Contains(w.Body.String(), "10.0.0.7") {
			t.Errorf("the page shows the service's internal message:\n%s", w.Body)
		}
	})

	t.Run("home without hot-article", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t, func(c *Config) { c.Origins.HotArticle = closedOrigin(t) })
		w := get(t, h, "/", "")
		if w.Code != http.StatusOK {
			t.Fatalf("status %d, want 200\n%s", w.Code, w.Body)
		}
		body := w.Body.String()
		for _, want := range []string{`id="boards"`, `href="/boards/1">General<`, `href="/boards/3">Showcase<`, "Hot articles cannot be shown right now."} {
			if !strings.Contains(body, want) {
				t.Errorf("the home page lacks %q:\n%s", want, body)
			}
		}
	})

	t.Run("article without comments", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t, func(c *Config) { c.Origins.Comment = closedOrigin(t) })
		for _, token := range []string{"", f.token(t, 11, auth.RoleUser)} {
			w := get(t, h, "/articles/1", token)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200\n%s", w.Code, w.Body)
			}
			body := w.Body.String()
			for _, want := range []string{"First post", "Hello, board.", "Comments cannot be shown right now."} {
				if !strings.Contains(body, want) {
					t.Errorf("the article page lacks %q:\n%s", want, body)
				}
			}
		}
	})

	t.Run("board without the user service", func(t *testing.T) {
		// Writers are then shown by id: the page is still worth showing.
		f := newFakes(t)
		f.override("user", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "down")
		})
		w := get(t, f.handler(t), "/boards/1", "")
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "user 10") {
			t.Errorf("status %d, want 200 naming writers by id:\n%s", w.Code, w.Body)
		}
	})
}

// TestListsAskForSummaries: a board's pages list titles, so they ask article-read for its summaries, without the
// articles' content, and still show every article.
func TestListsAskForSummaries(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)
	for _, target := range []string{"/boards/1", "/boards/1/scroll"} {
		w := get(t, h, target, alice)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "First post") {
			t.Errorf("%s: status %d, want 200 with the first post:\n%s", target, w.Code, w.Body)
		}
	}
	reads := f.requests("article-read")
	if len(reads) != 2 {
		t.Fatalf("article-read received %v, want a page and a scroll", reads)
	}
	for _, r := range reads {
		if q, _ := url.ParseQuery(r.Query); q.Get("view") != "summary" {
			t.Errorf("%s: not view=summary", r)
		}
	}
}

// TestCallsPerPage reads the backend calls of a page from its Server-Timing header.
func TestCallsPerPage(t *testing.T) {
	t.Parallel()
	t.Run("board", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t)
		for i, want := range []int{2, 1, 1} {
			f.clock.advance(sharedPageTTL) // past the page kept for signed-out readers
			w := get(t, h, "/boards/1", "")
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			if got := callsOf(w); got != want {
				t.Errorf("visit %d: %d backend calls (%q), want %d", i+1, got, w.Header().Get("Server-Timing"), want)
			}
		}
		users := f.requests("user")
		if len(users) != 1 || users[0].Path != "/v1/users" {
			t.Fatalf("the user service received %v, want one GET /v1/users?ids=", users)
		}
		q, _ := url.ParseQuery(users[0].Query)
		ids := strings.Split(q.Get("ids"), ",")
		slices.Sort(ids)
		if diff := cmp.Diff([]string{"10", "11"}, ids); diff != "" {
			t.Errorf("the writers asked for (-want +got):\n%s", diff)
		}
		if n := len(f.requests("article-read")); n != 3 {
			t.Errorf("article-read received %d requests, want 3", n)
		}
	})

	t.Run("article signed out", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t)
		get(t, h, "/articles/1", "") // learns the names
		f.clock.advance(sharedPageTTL)
		w := get(t, h, "/articles/1", "")
		if got := callsOf(w); got != 2 {
			t.Errorf("%d backend calls (%q), want 2: article-read and comments", got, w.Header().Get("Server-Timing"))
		}
		if n := len(f.requests("view")); n != 0 {
			t.Errorf("a signed-out visit was counted as a view: %v", f.requests("view"))
		}
	})

	t.Run("article signed in", func(t *testing.T) {
		f := newFakes(t)
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		transport := &http.Transport{}
		t.Cleanup(transport.CloseIdleConnections)
		// The view call waits here, whatever its deadline, until the page has answered: a page that waited for it
		// would never answer.
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.URL.Path, "/v1/article-views/") {
				<-release
			}
			return transport.RoundTrip(r)
		})}
		h := f.handler(t, func(c *Config) { c.Client = client })
		bob := f.token(t, 11, auth.RoleUser)
		get(t, h, "/articles/1", "") // learns the names of its writers, bob among them

		done := make(chan *httpResult, 1)
		go func() {
			w := get(t, h, "/articles/1", bob)
			done <- &httpResult{code: w.Code, calls: callsOf(w), timing: w.Header().Get("Server-Timing")}
		}()
		var res *httpResult
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the article page waited for the view service")
		}
		if res.code != http.StatusOK {
			t.Fatalf("status %d", res.code)
		}
		if res.calls != 4 {
			t.Errorf("%d backend calls (%q), want 4: article-read, comments, the like state and the reader's blocks", res.calls, res.timing)
		}
		once.Do(func() { close(release) })
		polltest.Until(t, 10*time.Second, func() (bool, string) {
			views := f.requests("view")
			for _, s := range views {
				if s.String() == "POST /v1/article-views/articles/1/users/11" && s.Auth == "Bearer "+bob {
					return true, ""
				}
			}
			return false, fmt.Sprintf("the view service has not received bob's view of article 1 with his token: %v", views)
		})
		var likes []string
		for _, s := range f.requests("like") {
			likes = append(likes, s.String())
		}
		if !slices.Contains(likes, "GET /v1/article-likes/articles/1/users/11") {
			t.Errorf("the like state was not asked: %v", likes)
		}
	})
}

// TestUnknownWritersRemembered: a writer the user service does not know is shown by id, and not asked for again.
func TestUnknownWritersRemembered(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 3, Board: 1, Writer: 99, Title: "By a gone user", Content: "x", Created: t0, Modified: t0})
	h := f.handler(t)
	for i, want := range []int{2, 1} {
		f.clock.advance(sharedPageTTL)
		w := get(t, h, "/boards/1", "")
		if got := callsOf(w); got != want {
			t.Errorf("visit %d: %d backend calls, want %d", i+1, got, want)
		}
		if !strings.Contains(w.Body.String(), `<span class="writer">user 99</span>`) {
			t.Errorf("visit %d: the unknown writer is not shown by id:\n%s", i+1, w.Body)
		}
	}
}

// TestErrorPageShowsReader: an error page names the signed-in reader from what is already known, and asks no service
// for it (the service may be what failed).
func TestErrorPageShowsReader(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)
	refused := visit{method: http.MethodPost, target: "/articles/1/like", form: url.Values{}, token: alice,
		header: map[string]string{"Sec-Fetch-Site": "cross-site"}}

	// A token never seen: the error page is signed out rather than fetch the keys.
	w := serve(t, h, refused)
	if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), `id="nav-user"`) || f.total() != 0 {
		t.Errorf("status %d, %d requests to the services, page:\n%s", w.Code, f.total(), w.Body)
	}

	get(t, h, "/", alice) // verifies the token and learns alice's name
	before := f.total()
	for _, v := range []visit{refused, {target: "/nope", token: alice}, {target: "/boards/99", token: alice}} {
		w := serve(t, h, v)
		if !strings.Contains(w.Body.String(), `<main id="error"`) ||
			!strings.Contains(w.Body.String(), `<span id="nav-user" class="who">alice</span>`) {
			t.Errorf("%s %s: status %d, the error page does not name alice:\n%s", v.method, v.target, w.Code, w.Body)
		}
	}
	if n := f.total() - before; n != 0 {
		t.Errorf("the error pages made %d requests to the services", n)
	}

	// The service that failed is not asked for the name.
	f.override("article-read", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "down")
	})
	f.override("user", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "down")
	})
	w = get(t, h, "/boards/1", alice)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `<span id="nav-user" class="who">alice</span>`) {
		t.Errorf("status %d, want the 503 page naming alice:\n%s", w.Code, w.Body)
	}
}

type httpResult struct {
	code, calls int
	timing      string
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestPager: page numbers in blocks of ten from the capped count.
func TestPager(t *testing.T) {
	t.Parallel()
	type shown struct {
		Pages      []int64
		Prev, Next int64
	}
	for _, tc := range []struct {
		name              string
		page, size, count int64
		want              shown
	}{
		{"first page, capped count", 1, 20, 201, shown{Pages: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Next: 11}},
		{"last page of the first block", 10, 20, 201, shown{Pages: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, Next: 11}},
		{"first block exactly full", 1, 20, 200, shown{Pages: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}},
		{"second block", 11, 20, 401, shown{Pages: []int64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, Prev: 10, Next: 21}},
		{"three pages", 3, 20, 45, shown{Pages: []int64{1, 2, 3}}},
		{"one page", 1, 20, 7, shown{Pages: []int64{1}}},
		{"nothing", 1, 20, 0, shown{}},
		{"short second block", 12, 20, 210, shown{Pages: []int64{11}, Prev: 10}},
		{"past the end", 15, 20, 210, shown{Pages: []int64{11}, Prev: 10}},
		{"past every page", 31, 20, 0, shown{Prev: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPager("pages", "Pages", "/boards/1?page=", tc.page, tc.size, tc.count)
			if diff := cmp.Diff(tc.want, shown{Pages: p.Pages, Prev: p.Prev, Next: p.Next}); diff != "" {
				t.Errorf("newPager(page %d, size %d, count %d) (-want +got):\n%s", tc.page, tc.size, tc.count, diff)
			}
			if p.Current != tc.page {
				t.Errorf("Current = %d, want %d", p.Current, tc.page)
			}
			if want := len(tc.want.Pages) > 1 || tc.want.Prev > 0 || tc.want.Next > 0; p.Shown() != want {
				t.Errorf("Shown() = %v, want %v", p.Shown(), want)
			}
		})
	}
	p := newPager("comment-pages", "Comment pages", "/articles/1?cpage=", 1, 100, 250)
	p.Fragment = "#comments"
	if got, want := p.Link(3), "/articles/1?cpage=3#comments"; got != want {
		t.Errorf("Link(3) = %q, want %q", got, want)
	}
}

// TestBoardPager checks the pager on a board page, from the fake's capped count.
func TestBoardPager(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	for n := int64(3); n <= 45; n++ {
		f.putArticle(&fakeArticle{ID: n, Board: 1, Writer: 10, Title: fmt.Sprintf("Article %d", n), Content: "x", Created: t0, Modified: t0})
	}
	h := f.handler(t)
	w := get(t, h, "/boards/1?page=2", "")
	body := w.Body.String()
	for _, want := range []string{`<nav id="pages"`, `<a href="/boards/1?page=1">1</a>`, `<span aria-current="page">2</span>`,
		`<a href="/boards/1?page=3">3</a>`, "Article 25", "Article 6"} {
		if !strings.Contains(body, want) {
			t.Errorf("page 2 lacks %q:\n%s", want, body)
		}
	}
	for _, unwanted := range []string{`id="next-block"`, `id="prev-block"`, "Article 26<", "Article 5<"} {
		if strings.Contains(body, unwanted) {
			t.Errorf("page 2 holds %q", unwanted)
		}
	}
}

// TestSignIn: the session cookie, and the sign-in form's answers.
func TestSignIn(t *testing.T) {
	t.Parallel()
	form := func(next string) url.Values {
		return url.Values{"username": {"alice"}, "password": {"correct horse"}, "next": {next}}
	}

	for _, tc := range []struct {
		name, target string
		secure       bool
	}{
		{"plain HTTP", "http://example.com/signin", false},
		{"TLS", "https://example.com/signin", true},
	} {
		t.Run("cookie over "+tc.name, func(t *testing.T) {
			f := newFakes(t)
			h := f.handler(t)
			w := post(t, h, tc.target, form("/boards/1"), "")
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/boards/1" {
				t.Fatalf("status %d to %q, want 303 to /boards/1\n%s", w.Code, w.Header().Get("Location"), w.Body)
			}
			c := sessionCookieOf(w)
			if c == nil {
				t.Fatalf("no %s cookie: %v", sessionCookie, w.Header()["Set-Cookie"])
			}
			f.mu.Lock()
			issued := f.issued
			f.mu.Unlock()
			if len(issued) != 1 {
				t.Fatalf("tokens issued: %d", len(issued))
			}
			type attrs struct {
				Value          string
				Path           string
				Expires        time.Time
				HttpOnly       bool
				Secure         bool
				SameSite       http.SameSite
				MaxAgeNegative bool
			}
			got := attrs{c.Value, c.Path, c.Expires.UTC(), c.HttpOnly, c.Secure, c.SameSite, c.MaxAge < 0}
			want := attrs{issued[0].token, "/", issued[0].expires.UTC(), true, tc.secure, http.SameSiteLaxMode, false}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("session cookie (-want +got):\n%s\nSet-Cookie: %s", diff, w.Header().Get("Set-Cookie"))
			}
			// The cookie signs the reader in.
			page := get(t, h, "/", c.Value)
			if !strings.Contains(page.Body.String(), `<span id="nav-user" class="who">alice</span>`) {
				t.Errorf("the home page after sign-in does not name alice:\n%s", page.Body)
			}
		})
	}

	t.Run("wrong password", func(t *testing.T) {
		f := newFakes(t)
		w := post(t, f.handler(t), "/signin", url.Values{"username": {"alice"}, "password": {"wrong"}, "next": {"/"}}, "")
		if w.Code != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", w.Code)
		}
		body := w.Body.String()
		for _, want := range []string{`id="form-error"`, "Wrong username or password.", `name="username" value="alice"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the form lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "wrong\"") || strings.Contains(body, `value="wrong"`) {
			t.Errorf("the password is echoed:\n%s", body)
		}
		if c := sessionCookieOf(w); c != nil && c.Value != "" {
			t.Errorf("a session cookie for a wrong password: %v", c)
		}
	})

	t.Run("rate limited", func(t *testing.T) {
		f := newFakes(t)
		f.override("user", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			writeError(w, http.StatusTooManyRequests, "RATE_LIMITED", "too many")
		})
		w := post(t, f.handler(t), "/signin", form("/"), "")
		if w.Code != http.StatusTooManyRequests {
			t.Errorf("status %d, want 429", w.Code)
		}
		body := w.Body.String()
		for _, want := range []string{`id="form-error"`, "wait 30 seconds", `value="alice"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the form lacks %q:\n%s", want, body)
			}
		}
	})

	t.Run("client address goes along", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t, func(c *Config) { c.ClientAddr = func(*http.Request) string { return "203.0.113.9" } })
		forwarded := make(chan string, 1)
		f.override("user", func(w http.ResponseWriter, r *http.Request) {
			forwarded <- r.Header.Get("X-Forwarded-For")
			writeError(w, http.StatusUnauthorized, "BAD_CREDENTIALS", "no")
		})
		post(t, h, "/signin", form("/"), "")
		if got := <-forwarded; got != "203.0.113.9" {
			t.Errorf("X-Forwarded-For %q, want the client's address", got)
		}
	})

	for _, tc := range []struct{ next, want string }{
		{"//evil.example", "/"},
		{"https://evil.example", "/"},
		{`/\evil`, "/"},
		{"/\\\\evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"/\t/evil.example", "/"},
		{"", "/"},
		{"/boards/2?page=3", "/boards/2?page=3"},
		{"/articles/1", "/articles/1"},
	} {
		t.Run("next="+tc.next, func(t *testing.T) {
			f := newFakes(t)
			h := f.handler(t)
			w := post(t, h, "/signin", form(tc.next), "")
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != tc.want {
				t.Errorf("status %d to %q, want 303 to %q", w.Code, w.Header().Get("Location"), tc.want)
			}
			// The form names it too, as the page was asked for.
			page := get(t, h, "/signin?next="+url.QueryEscape(tc.next), "")
			if want := `name="next" value="` + tc.want + `"`; !strings.Contains(page.Body.String(), want) {
				t.Errorf("the sign-in form lacks %s:\n%s", want, page.Body)
			}
		})
	}
}

// TestBadSession: a cookie whose token does not verify is a signed-out reader, and is cleared; a write the service
// refuses for its token sends the reader to sign in again.
func TestBadSession(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	other, err := auth.NewKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sameKid := other
	sameKid.ID = f.key.ID
	mint := func(k auth.Key, now time.Time) string {
		tok, _, err := auth.Sign(k, auth.Principal{UserID: 10, Role: auth.RoleUser}, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct{ name, token string }{
		{"expired", mint(f.key, time.Now().Add(-3*time.Hour))},
		{"unknown key", mint(other, time.Now())},
		{"forged with a known key id", mint(sameKid, time.Now())},
		{"not a token", "not-a-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := f.handler(t)
			w := get(t, h, "/boards/1", tc.token)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d, want 200", w.Code)
			}
			body := w.Body.String()
			if !strings.Contains(body, `id="nav-signin"`) || strings.Contains(body, `id="nav-user"`) {
				t.Errorf("the page is not shown signed out:\n%s", body)
			}
			c := sessionCookieOf(w)
			if c == nil || c.MaxAge >= 0 || c.Value != "" {
				t.Errorf("the cookie is not cleared: Set-Cookie %q", w.Header().Values("Set-Cookie"))
			}
		})
	}

	t.Run("write refused for its token", func(t *testing.T) {
		f := newFakes(t)
		f.override("like", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "the access token is invalid or expired")
		})
		h := f.handler(t)
		w := serve(t, h, visit{method: http.MethodPost, target: "/articles/1/like", form: url.Values{},
			token: f.token(t, 10, auth.RoleUser), header: map[string]string{"Referer": "http://example.com/articles/1"}})
		if w.Code != http.StatusSeeOther {
			t.Fatalf("status %d, want 303\n%s", w.Code, w.Body)
		}
		if got, want := w.Header().Get("Location"), "/signin?expired=1&next=%2Farticles%2F1"; got != want {
			t.Errorf("Location %q, want %q", got, want)
		}
		if c := sessionCookieOf(w); c == nil || c.MaxAge >= 0 {
			t.Errorf("the cookie is not cleared: %q", w.Header().Values("Set-Cookie"))
		}
		page := get(t, h, "/signin?expired=1&next=%2Farticles%2F1", "")
		if !strings.Contains(page.Body.String(), "Your session has ended") {
			t.Errorf("the sign-in page does not say why:\n%s", page.Body)
		}
	})

	t.Run("a form without a session", func(t *testing.T) {
		f := newFakes(t)
		w := serve(t, f.handler(t), visit{method: http.MethodPost, target: "/articles/1/comments", form: url.Values{"content": {"my long comment"}},
			header: map[string]string{"Referer": "http://example.com/articles/1"}})
		body := w.Body.String()
		if w.Code != http.StatusUnauthorized || !strings.Contains(body, `href="/signin?next=%2Farticles%2F1" target="_blank"`) ||
			!strings.Contains(body, ">my long comment</textarea>") {
			t.Errorf("status %d, want 401 with the text kept and a sign-in link back:\n%s", w.Code, body)
		}
		if n := len(f.requests("comment")); n != 0 {
			t.Errorf("the comment service received %v", f.requests("comment"))
		}
	})
}

// TestOwnership: the controls to change an article show to its writer and moderators only, and its edit form is
// theirs alone.
func TestOwnership(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	for _, tc := range []struct {
		name           string
		user           int64
		role           auth.Role
		owner          bool
		commentDeletes int // of comment 100 by bob and its reply 101 by alice
	}{
		{"signed out", 0, "", false, 0},
		{"another user", 11, auth.RoleUser, false, 1},
		{"the writer", 10, auth.RoleUser, true, 1},
		{"a moderator", 12, auth.RoleModerator, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := ""
			if tc.user != 0 {
				token = f.token(t, tc.user, tc.role)
			}
			body := get(t, h, "/articles/1", token).Body.String()
			for _, control := range []string{`id="edit"`, `id="delete-article"`} {
				if strings.Contains(body, control) != tc.owner {
					t.Errorf("%s shown: %v, want %v", control, !tc.owner, tc.owner)
				}
			}
			if n := strings.Count(body, `class="delete-comment"`); n != tc.commentDeletes {
				t.Errorf("%d comment delete buttons, want %d", n, tc.commentDeletes)
			}
			if tc.user == 0 {
				return
			}
			w := get(t, h, "/articles/1/edit", token)
			switch {
			case tc.owner && w.Code != http.StatusOK:
				t.Errorf("edit form: status %d, want 200\n%s", w.Code, w.Body)
			case tc.owner && !strings.Contains(w.Body.String(), `name="title" value="First post"`):
				t.Errorf("edit form without the article's title:\n%s", w.Body)
			case !tc.owner && (w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `<main id="error"`)):
				t.Errorf("edit form of someone else's article: status %d, want the 403 page\n%s", w.Code, w.Body)
			case !tc.owner && strings.Contains(w.Body.String(), "Hello, board."):
				t.Errorf("the 403 page shows the article's content")
			}
		})
	}

	t.Run("the service refuses a change", func(t *testing.T) {
		w := post(t, h, "/articles/1/delete", url.Values{"boardId": {"1"}}, f.token(t, 11, auth.RoleUser))
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `<main id="error"`) {
			t.Errorf("delete of someone else's article: status %d, want the 403 page\n%s", w.Code, w.Body)
		}
	})
	t.Run("the writer deletes", func(t *testing.T) {
		w := post(t, h, "/articles/1/delete", url.Values{"boardId": {"1"}}, f.token(t, 10, auth.RoleUser))
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/boards/1?notice=deleted" {
			t.Errorf("status %d to %q, want 303 to the board", w.Code, w.Header().Get("Location"))
		}
	})
}

// TestReadYourWrites: after an edit the article page shows it, even while article-read still has the old one.
func TestReadYourWrites(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)
	w := post(t, h, "/articles/1/edit", url.Values{"title": {"Edited title"}, "content": {"Edited content"}}, alice)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("status %d, want 303\n%s", w.Code, w.Body)
	}
	modified := t0.Add(time.Hour) // what the fake article service answers the edit with
	want := "/articles/1?since=" + strconv.FormatInt(modified.UnixMilli(), 10)
	if got := w.Header().Get("Location"); got != want {
		t.Fatalf("Location %q, want %q", got, want)
	}
	puts := f.requests("article")
	if len(puts) != 1 || puts[0].Method != http.MethodPut || puts[0].Auth != "Bearer "+alice ||
		!strings.Contains(puts[0].Body, `"title":"Edited title"`) {
		t.Errorf("the article service received %+v", puts)
	}

	// article-read has not applied the edit: without ?since the page shows it as it was.
	stale := get(t, h, "/articles/1", alice).Body.String()
	if !strings.Contains(stale, "First post") {
		t.Fatalf("the fake's read model is not stale:\n%s", stale)
	}
	page := get(t, h, want, alice)
	body := page.Body.String()
	if page.Code != http.StatusOK {
		t.Fatalf("status %d", page.Code)
	}
	for _, s := range []string{`<h1 id="article-title">Edited title</h1>`, "Edited content", "edited <time"} {
		if !strings.Contains(body, s) {
			t.Errorf("the page after the edit lacks %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "First post") || strings.Contains(body, "Hello, board.") {
		t.Errorf("the page after the edit shows the old article:\n%s", body)
	}

	// Once article-read has it, the article service is not asked.
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "Edited title", Content: "Edited content", Created: t0, Modified: modified})
	before := len(f.requests("article"))
	get(t, h, want, alice)
	if n := len(f.requests("article")) - before; n != 0 {
		t.Errorf("the article service was asked %d times though article-read is current", n)
	}
}

// TestLikeFragment: a script's like gets the new button and the like service's count back.
func TestLikeFragment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path string
		already    bool // the like service holds bob's like before
		button     string
		action     string
		count      int
	}{
		{"like", "/articles/1/like", false, "Unlike", "/articles/1/unlike", 3},
		{"like again (409)", "/articles/1/like", true, "Unlike", "/articles/1/unlike", 3},
		{"unlike", "/articles/1/unlike", true, "Like", "/articles/1/like", 2},
		{"unlike again (404)", "/articles/1/unlike", false, "Like", "/articles/1/like", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			f.mu.Lock()
			f.likes[[2]int64{1, 20}], f.likes[[2]int64{1, 21}] = true, true
			f.likes[[2]int64{1, 11}] = tc.already
			f.mu.Unlock()
			h := f.handler(t)
			w := serve(t, h, visit{method: http.MethodPost, target: tc.path, form: url.Values{}, token: f.token(t, 11, auth.RoleUser),
				header: map[string]string{"X-Fragment": "1"}})
			if w.Code != http.StatusOK || w.Header().Get("X-Fragment") != "1" {
				t.Fatalf("status %d, X-Fragment %q; want 200 and 1\n%s", w.Code, w.Header().Get("X-Fragment"), w.Body)
			}
			body := w.Body.String()
			if strings.Contains(body, "<html") || strings.Contains(body, "<main") {
				t.Errorf("a whole page, not the fragment:\n%s", body)
			}
			for _, want := range []string{`<form id="like"`, `action="` + tc.action + `"`, `data-swap="like"`,
				">" + tc.button + "</button>", fmt.Sprintf(`<span id="like-count">%d</span>`, tc.count)} {
				if !strings.Contains(body, want) {
					t.Errorf("the fragment lacks %q:\n%s", want, body)
				}
			}
		})
	}

	t.Run("without script", func(t *testing.T) {
		f := newFakes(t)
		w := post(t, f.handler(t), "/articles/1/like", nil, f.token(t, 11, auth.RoleUser))
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1#like" {
			t.Errorf("status %d to %q, want 303 back to the article", w.Code, w.Header().Get("Location"))
		}
		f.mu.Lock()
		liked := f.likes[[2]int64{1, 11}]
		f.mu.Unlock()
		if !liked {
			t.Error("the like was not sent")
		}
	})
}

// TestSecurityHeaders: every answer, page or asset, carries the same policy.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	home := get(t, h, "/", "").Body.String()
	version := map[string]string{}
	for _, name := range []string{"app.js", "style.css", "icon.svg"} {
		m := regexp.MustCompile(`"/static/` + regexp.QuoteMeta(name) + `\?v=([0-9a-f]+)"`).FindStringSubmatch(home)
		if m == nil {
			t.Fatalf("the home page does not link %s with its version:\n%s", name, home)
		}
		version[name] = m[1]
	}

	for _, tc := range []struct {
		name   string
		v      visit
		status int
	}{
		{"home", visit{target: "/"}, http.StatusOK},
		{"board", visit{target: "/boards/1"}, http.StatusOK},
		{"article", visit{target: "/articles/1"}, http.StatusOK},
		{"sign in", visit{target: "/signin"}, http.StatusOK},
		{"unknown page", visit{target: "/nope"}, http.StatusNotFound},
		{"bad page number", visit{target: "/boards/1?page=x"}, http.StatusBadRequest},
		{"redirect", visit{target: "/boards/1/write"}, http.StatusSeeOther},
		{"refused form", visit{method: http.MethodPost, target: "/signout", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
		{"script", visit{target: "/static/app.js?v=" + version["app.js"]}, http.StatusOK},
		{"style sheet", visit{target: "/static/style.css"}, http.StatusOK},
		{"icon", visit{target: "/static/icon.svg?v=old"}, http.StatusOK},
		{"unknown asset", visit{target: "/static/nope.js"}, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, h, tc.v)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			got := map[string]string{}
			for _, k := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"} {
				got[k] = w.Header().Get(k)
			}
			want := map[string]string{
				"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
					"form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
				"X-Content-Type-Options": "nosniff",
				"Referrer-Policy":        "same-origin",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("security headers (-want +got):\n%s", diff)
			}
		})
	}

	for _, tc := range []struct{ name, mediaType string }{
		{"app.js", "text/javascript"},
		{"style.css", "text/css"},
		{"icon.svg", "image/svg+xml"},
	} {
		t.Run("asset "+tc.name, func(t *testing.T) {
			file, err := os.ReadFile("static/" + tc.name)
			if err != nil {
				t.Fatal(err)
			}
			w := get(t, h, "/static/"+tc.name+"?v="+version[tc.name], "")
			mt, _, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
			if err != nil || mt != tc.mediaType && !(tc.mediaType == "text/javascript" && mt == "application/javascript") {
				t.Errorf("Content-Type %q, want %s", w.Header().Get("Content-Type"), tc.mediaType)
			}
			if w.Body.String() != string(file) {
				t.Error("the body is not the file")
			}
			if cc := w.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") || !strings.Contains(cc, "max-age=31536000") {
				t.Errorf("Cache-Control %q for the current version, want a year, immutable", cc)
			}
			stale := get(t, h, "/static/"+tc.name+"?v=0123456789ab", "")
			if cc := stale.Header().Get("Cache-Control"); strings.Contains(cc, "immutable") {
				t.Errorf("Cache-Control %q for another version, want no immutable", cc)
			}
			again := serve(t, h, visit{target: "/static/" + tc.name, header: map[string]string{"If-None-Match": w.Header().Get("ETag")}})
			if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
				t.Errorf("If-None-Match: status %d with %d bytes, want 304", again.Code, again.Body.Len())
			}
		})
	}

	for _, target := range []string{"/nope", "/articles/1/nope", "/boards/1/scroll/x", "/static/"} {
		t.Run("404 page "+target, func(t *testing.T) {
			w := get(t, h, target, "")
			if w.Code != http.StatusNotFound || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") ||
				!strings.Contains(w.Body.String(), `<main id="error"`) {
				t.Errorf("status %d, %q, want the HTML 404 page\n%s", w.Code, w.Header().Get("Content-Type"), w.Body)
			}
		})
	}
}

// TestEveryPageRenders: each page, signed out and signed in, and bad addresses as 4xx pages.
func TestEveryPageRenders(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	// 25 articles on board 2, so that the scroll has a next chunk.
	for n := int64(301); n <= 325; n++ {
		f.putArticle(&fakeArticle{ID: n, Board: 2, Writer: 11, Title: fmt.Sprintf("Question %d", n), Content: "?", Created: t0, Modified: t0})
	}
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)

	type page struct {
		target   string
		fragment bool
		out, in  int    // the status signed out, signed in
		want     string // in the body of a 200
	}
	pages := []page{
		{target: "/", out: 200, in: 200, want: `<h2 id="hot-heading">`},
		{target: "/boards/1", out: 200, in: 200, want: "Second post"},
		{target: "/boards/1?page=2", out: 200, in: 200, want: `id="empty"`},
		{target: "/boards/2/scroll", out: 200, in: 200, want: `<a id="more" class="more" href="/boards/2/scroll?after=306">`},
		{target: "/boards/2/scroll?after=306", fragment: true, out: 200, in: 200, want: "Question 305"},
		{target: "/boards/1/scroll?after=1", out: 200, in: 200, want: "No more articles."},
		{target: "/articles/1", out: 200, in: 200, want: `<li id="c-101" class="comment depth-2"`},
		{target: "/boards/1/write", out: 303, in: 200, want: `action="/boards/1/write"`},
		{target: "/articles/1/edit", out: 303, in: 200, want: `action="/articles/1/edit"`},
		{target: "/hot", out: 200, in: 200, want: "Sunday, 22 November 2026"},
		{target: "/hot?date=20261101", out: 200, in: 200, want: "November the first"},
		{target: "/hot?date=2026-11-01", out: 200, in: 200, want: "November the first"},
		{target: "/signin", out: 200, in: 303, want: `<form id="signin"`},
		{target: "/signup", out: 200, in: 303, want: `<form id="signup"`},
		{target: "/modlog", out: 200, in: 200, want: "<h1>Moderation log</h1>"},
		{target: "/users/11", out: 200, in: 200, want: `<h1 id="user-name">bob</h1>`},
		{target: "/moderation/reports", out: 303, in: 403},
		{target: "/account", out: 303, in: 200, want: "<h1>Your account</h1>"},
		{target: "/forgot-password", out: 200, in: 200, want: `<form id="forgot-form"`},
		{target: "/reset-password/10.abc", out: 200, in: 200, want: `<form id="reset-form"`},
		{target: "/verify-email/10.abc", out: 200, in: 200, want: `<form id="verify-form"`},
		{target: "/nope", out: 404, in: 404},
	}
	for _, signedIn := range []bool{false, true} {
		for _, p := range pages {
			token, status, who := "", p.out, "signed out"
			if signedIn {
				token, status, who = alice, p.in, "signed in"
			}
			t.Run(who+" "+p.target, func(t *testing.T) {
				v := visit{target: p.target, token: token}
				if p.fragment {
					v.header = map[string]string{"X-Fragment": "1"}
				}
				w := serve(t, h, v)
				body := w.Body.String()
				if w.Code != status {
					t.Fatalf("status %d, want %d\n%s", w.Code, status, body)
				}
				if status == http.StatusSeeOther {
					if loc := w.Header().Get("Location"); !signedIn && !strings.HasPrefix(loc, "/signin?next=") {
						t.Errorf("redirect to %q, want sign-in", loc)
					}
					return
				}
				if p.fragment {
					if w.Header().Get("X-Fragment") != "1" || strings.Contains(body, "<html") || !strings.Contains(body, `<li class="article">`) {
						t.Errorf("not a chunk of articles:\n%s", body)
					}
				} else {
					mainID := `<main id="main"`
					if status != http.StatusOK {
						mainID = `<main id="error"`
					}
					for _, s := range []string{"<!doctype html>", mainID, "</html>"} {
						if !strings.Contains(body, s) {
							t.Errorf("the page lacks %q:\n%s", s, body)
						}
					}
					// An error page too shows the reader, whose token and name earlier pages have made known.
					if signedIn != strings.Contains(body, `<span id="nav-user" class="who">alice</span>`) {
						t.Errorf("the page does not show the reader as %s", who)
					}
				}
				if p.want != "" && !strings.Contains(body, p.want) {
					t.Errorf("the page lacks %q:\n%s", p.want, body)
				}
			})
		}
	}

	// The hot page of a day asks hot-article for that day, whichever way the date is written.
	var days []string
	for _, s := range f.requests("hot-article") {
		days = append(days, s.Path)
	}
	for _, want := range []string{"/v1/hot-articles/articles/date/20261122", "/v1/hot-articles/articles/date/20261101"} {
		if !slices.Contains(days, want) {
			t.Errorf("hot-article was not asked %s: %v", want, days)
		}
	}
	// The date picker's form on a past day offers the day after; today's does not.
	past := get(t, h, "/hot?date=2026-11-01", "").Body.String()
	for _, want := range []string{`value="2026-11-01"`, `max="2026-11-22"`, `href="/hot?date=20261031"`, `href="/hot?date=20261102"`} {
		if !strings.Contains(past, want) {
			t.Errorf("the hot page of 2026-11-01 lacks %q:\n%s", want, past)
		}
	}
	if strings.Contains(get(t, h, "/hot", "").Body.String(), `id="next-day"`) {
		t.Error("today's hot page offers the day after")
	}

	for _, tc := range []struct {
		target string
		status int
	}{
		{"/boards/abc", http.StatusNotFound},
		{"/boards/99", http.StatusNotFound},
		{"/boards/0", http.StatusNotFound},
		{"/boards/01", http.StatusNotFound},
		{"/boards/1?page=0", http.StatusBadRequest},
		{"/boards/1?page=x", http.StatusBadRequest},
		{"/boards/1?page=-1", http.StatusBadRequest},
		{"/boards/99/scroll", http.StatusNotFound},
		{"/boards/1/scroll?after=x", http.StatusBadRequest},
		{"/hot?date=nope", http.StatusBadRequest},
		{"/hot?date=2026-13-01", http.StatusBadRequest},
		{"/articles/abc", http.StatusNotFound},
		{"/articles/-1", http.StatusNotFound},
		{"/articles/999", http.StatusNotFound},
		{"/articles/1?cpage=0", http.StatusBadRequest},
	} {
		t.Run("bad "+tc.target, func(t *testing.T) {
			w := get(t, h, tc.target, "")
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || !strings.Contains(w.Body.String(), `<main id="error"`) {
				t.Errorf("not the HTML error page:\n%s", w.Body)
			}
		})
	}
}

// TestWriteAndComment: the forms that create, with the service's refusal shown on the form.
func TestWriteAndComment(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)

	w := post(t, h, "/boards/2/write", url.Values{"title": {"New one"}, "content": {"Body"}}, alice)
	if w.Code != http.StatusSeeOther || !regexp.MustCompile(`^/articles/\d+$`).MatchString(w.Header().Get("Location")) {
		t.Errorf("write: status %d to %q, want 303 to the article", w.Code, w.Header().Get("Location"))
	}
	if reqs := f.requests("article"); len(reqs) != 1 || !strings.Contains(reqs[0].Body, `"boardId":"2"`) {
		t.Errorf("the article service received %+v", reqs)
	}

	w = post(t, h, "/boards/2/write", url.Values{"title": {"Only a title " + scriptXSS}, "content": {""}}, alice)
	body := w.Body.String()
	if w.Code != http.StatusBadRequest || !strings.Contains(body, `id="form-error"`) || !strings.Contains(body, "must not be empty") {
		t.Errorf("refused write: status %d, want 400 with the form and its error\n%s", w.Code, body)
	}
	if !strings.Contains(body, `value="Only a title &lt;script&gt;`) {
		t.Errorf("the refused form does not keep the title, escaped:\n%s", body)
	}

	w = post(t, h, "/articles/1/comments", url.Values{"content": {"A reply"}, "parentPath": {"00000"}}, alice)
	if w.Code != http.StatusSeeOther || !regexp.MustCompile(`^/articles/1#c-\d+$`).MatchString(w.Header().Get("Location")) {
		t.Errorf("comment: status %d to %q, want 303 to the comment", w.Code, w.Header().Get("Location"))
	}
	if reqs := f.requests("comment"); len(reqs) != 1 || !strings.Contains(reqs[0].Body, `"parentPath":"00000"`) ||
		!strings.Contains(reqs[0].Body, `"articleId":"1"`) {
		t.Errorf("the comment service received %+v", reqs)
	}

	w = post(t, h, "/signout", nil, alice)
	if c := sessionCookieOf(w); w.Code != http.StatusSeeOther || c == nil || c.MaxAge >= 0 {
		t.Errorf("sign out: status %d, cookie %v; want 303 clearing the cookie", w.Code, c)
	}
}

// TestSignUp: a new account is signed in at once; a name taken or refused is said on the form.
func TestSignUp(t *testing.T) {
	t.Parallel()
	form := url.Values{"username": {"carol"}, "password": {"long enough"}}

	t.Run("signed in at once", func(t *testing.T) {
		f := newFakes(t)
		h := f.handler(t)
		w := post(t, h, "/signup", form, "")
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/?notice=welcome" {
			t.Fatalf("status %d to %q, want 303 to /?notice=welcome\n%s", w.Code, w.Header().Get("Location"), w.Body)
		}
		c := sessionCookieOf(w)
		if c == nil || c.Value == "" {
			t.Fatal("no session cookie")
		}
		page := get(t, h, "/?notice=welcome", c.Value).Body.String()
		for _, want := range []string{`<span id="nav-user" class="who">carol</span>`, `<p id="notice" class="notice" role="status">Welcome!`} {
			if !strings.Contains(page, want) {
				t.Errorf("the page after sign-up lacks %q:\n%s", want, page)
			}
		}
	})

	t.Run("name taken", func(t *testing.T) {
		f := newFakes(t)
		w := post(t, f.handler(t), "/signup", url.Values{"username": {"alice"}, "password": {"long enough"}}, "")
		body := w.Body.String()
		if w.Code != http.StatusConflict || !strings.Contains(body, `id="form-error"`) || !strings.Contains(body, "taken") ||
			!strings.Contains(body, `value="alice"`) {
			t.Errorf("status %d, want 409 with the form, its error and the name kept:\n%s", w.Code, body)
		}
	})

	t.Run("refused", func(t *testing.T) {
		f := newFakes(t)
		f.override("user", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusBadRequest, "INVALID_USERNAME", "A username is 3 to 30 letters, digits or _.")
		})
		w := post(t, f.handler(t), "/signup", url.Values{"username": {"a!"}, "password": {"long enough"}}, "")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "A username is 3 to 30 letters") {
			t.Errorf("status %d, want 400 with the service's message:\n%s", w.Code, w.Body)
		}
	})

	t.Run("created but not signed in", func(t *testing.T) {
		// The account exists, the sign-in after it failed: the page it lands on must not say the reader is signed in.
		f := newFakes(t)
		users := f.userMux()
		f.override("user", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/tokens" {
				w.Header().Set("Retry-After", "9")
				writeError(w, http.StatusTooManyRequests, "RATE_LIMITED", "too many")
				return
			}
			users.ServeHTTP(w, r)
		})
		h := f.handler(t)
		w := post(t, h, "/signup", form, "")
		loc := w.Header().Get("Location")
		if w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
			t.Fatalf("status %d to %q, want 303 to sign in", w.Code, loc)
		}
		if c := sessionCookieOf(w); c != nil && c.Value != "" {
			t.Errorf("a session cookie without a token: %v", c)
		}
		page := get(t, h, loc, "")
		body := page.Body.String()
		if page.Code != http.StatusOK || !strings.Contains(body, `<form id="signin"`) {
			t.Fatalf("status %d, want the sign-in form:\n%s", page.Code, body)
		}
		if strings.Contains(body, "signed in.") || strings.Contains(body, "you are signed in") {
			t.Errorf("the sign-in page says the reader is signed in:\n%s", body)
		}
		if !strings.Contains(body, "account is ready") {
			t.Errorf("the sign-in page does not say the account was made:\n%s", body)
		}
	})
}

func TestParseBoards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []Board
		ok   bool
	}{
		{"1=General,2=Questions", []Board{{1, "General"}, {2, "Questions"}}, true},
		{" 7 = Off topic , 3=Q&A ", []Board{{7, "Off topic"}, {3, "Q&A"}}, true},
		{"", nil, false},
		{"1=General,1=Again", nil, false},
		{"x=General", nil, false},
		{"0=Zero", nil, false},
		{"-1=Minus", nil, false},
		{"1=", nil, false},
		{"1", nil, false},
		{"1=General,", nil, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBoards(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseBoards(%q) error %v, want ok %v", tc.in, err, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseBoards(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// A notice belongs to the moment of its action: the sign-in link of the page that shows it comes back without it.
func TestSignInLinkDropsTheNotice(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	w := get(t, h, "/boards/1?page=1&notice=deleted", "")
	body := w.Body.String()
	if !strings.Contains(body, `id="notice"`) {
		t.Fatalf("no notice shown:\n%s", body)
	}
	if want := `href="/signin?next=%2Fboards%2F1%3Fpage%3D1"`; !strings.Contains(body, want) {
		t.Errorf("sign-in link: want %s in\n%s", want, body)
	}
}

// A delete asks first when script runs: the forms say what to ask.
func TestDeletesAskFirst(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "t", Content: "c"})
	h := f.handler(t)
	body := get(t, h, "/articles/1", f.token(t, 10, auth.RoleUser)).Body.String()
	if !strings.Contains(body, `id="delete-article" method="post" action="/articles/1/delete" data-confirm=`) {
		t.Errorf("the article's delete form does not ask first:\n%s", body)
	}
}

// A form over the size bound is a 413 page, and nothing is sent on.
func TestFormTooLarge(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	w := post(t, h, "/boards/1/write", url.Values{"title": {"t"}, "content": {strings.Repeat("x", 100<<10)}}, f.token(t, 10, auth.RoleUser))
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), `<main id="error"`) {
		t.Fatalf("status %d, want 413 with the error page:\n%s", w.Code, w.Body)
	}
	if n := len(f.requests("article")); n != 0 {
		t.Errorf("the article service got %d requests", n)
	}
}

// A user service that fails is not asked again for a while: its failure must not cost every page a wait.
func TestNamesRestAfterAFailure(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "t", Content: "c"})
	f.override("user", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "down")
	})
	h := f.handler(t)
	for range 3 {
		if w := get(t, h, "/boards/1", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "user 10") {
			t.Fatalf("status %d, want 200 naming the writer by id:\n%s", w.Code, w.Body)
		}
	}
	var asked int
	for _, r := range f.requests("user") {
		if r.Path == "/v1/users" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("the user service was asked for names %d times in three pages, want once", asked)
	}
}

// What a reader typed survives a refusal they can act on: the form comes back with it, and CRLF line breaks, which
// browsers send and maxlength counts once, reach the service as LF.
func TestTextKept(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		service string
		answer  func(w http.ResponseWriter)
		target  string
		form    url.Values
		status  int
		says    string
	}{
		{"a comment over the rate limit", "comment", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "7")
			writeError(w, http.StatusTooManyRequests, "RATE_LIMITED", "slow down")
		}, "/articles/1/comments", url.Values{"content": {"line one\r\nline two"}, "parentPath": {"00000"}, "cpage": {"2"}},
			http.StatusTooManyRequests, "wait 7 seconds"},
		{"a comment with the comment service down", "comment", func(w http.ResponseWriter) {
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "down")
		}, "/articles/1/comments", url.Values{"content": {"line one\r\nline two"}}, http.StatusServiceUnavailable, "not answering"},
		{"an edit over the rate limit", "article", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3")
			writeError(w, http.StatusTooManyRequests, "RATE_LIMITED", "slow down")
		}, "/articles/1/edit", url.Values{"title": {"t"}, "content": {"line one\r\nline two"}}, http.StatusTooManyRequests, "wait 3 seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakes(t)
			f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "t", Content: "c"})
			f.override(tc.service, func(w http.ResponseWriter, r *http.Request) { tc.answer(w) })
			w := post(t, f.handler(t), tc.target, tc.form, f.token(t, 10, auth.RoleUser))
			body := w.Body.String()
			if w.Code != tc.status || !strings.Contains(body, tc.says) || !strings.Contains(body, "line one\nline two</textarea>") {
				t.Errorf("status %d, want %d saying %q with the text kept:\n%s", w.Code, tc.status, tc.says, body)
			}
			if tc.form.Get("parentPath") != "" && !strings.Contains(body, `name="parentPath" value="00000"`) {
				t.Errorf("the reply lost its parent:\n%s", body)
			}
			reqs := f.requests(tc.service)
			if len(reqs) == 0 || strings.Contains(reqs[len(reqs)-1].Body, `\r\n`) {
				t.Errorf("the service got %v, want the text with LF line breaks", reqs)
			}
		})
	}
}

// A reply goes back to the comment page it was written on.
func TestReplyReturnsToItsCommentPage(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "t", Content: "c"})
	w := post(t, f.handler(t), "/articles/1/comments", url.Values{"content": {"hi"}, "cpage": {"3"}}, f.token(t, 10, auth.RoleUser))
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/articles/1?cpage=3#c-") {
		t.Errorf("status %d to %q, want 303 to /articles/1?cpage=3#c-...", w.Code, loc)
	}
}

// Signing up from a page's link comes back to that page, as signing in does.
func TestSignUpComesBack(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	if page := get(t, h, "/signup?next=%2Farticles%2F1", "").Body.String(); !strings.Contains(page, `name="next" value="/articles/1"`) {
		t.Fatalf("the sign-up form does not carry where to go back:\n%s", page)
	}
	w := post(t, h, "/signup", url.Values{"username": {"carol"}, "password": {"long enough"}, "next": {"/articles/1"}}, "")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1" {
		t.Errorf("status %d to %q, want 303 to /articles/1", w.Code, w.Header().Get("Location"))
	}
}

// A comment page past the end says so and leads back, instead of claiming there are no comments.
func TestCommentPagePastTheEnd(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 7, Board: 1, Writer: 10, Title: "t", Content: "c"}) // the fakes hold no comments on it
	body := get(t, f.handler(t), "/articles/7?cpage=5", "").Body.String()
	if !strings.Contains(body, "No comments on this page.") || !strings.Contains(body, `href="/articles/7?cpage=1#comments"`) {
		t.Errorf("a comment page past the end:\n%s", body)
	}
}

// Behind a proxy that ends TLS, SecureCookies marks the session cookie Secure although the request came in plain.
func TestSecureCookiesBehindATLSProxy(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t, func(c *Config) { c.SecureCookies = true })
	w := post(t, h, "/signin", url.Values{"username": {"alice"}, "password": {"correct horse"}}, "")
	if c := sessionCookieOf(w); c == nil || !c.Secure || !c.HttpOnly {
		t.Errorf("session cookie %+v, want Secure and HttpOnly", c)
	}
	if c := sessionCookieOf(post(t, h, "/signout", url.Values{}, "")); c == nil || !c.Secure {
		t.Errorf("the cleared cookie %+v, want Secure", c)
	}
}

// The web is ready while article-read answers, and not when it does not.
func TestReady(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	origins := Origins{ArticleRead: f.servers["article-read"].URL}
	if err := New(Config{Origins: origins}).Ready(context.Background()); err != nil {
		t.Errorf("with article-read up: %v", err)
	}
	origins.ArticleRead = closedOrigin(t)
	if err := New(Config{Origins: origins}).Ready(context.Background()); err == nil {
		t.Error("with article-read down: ready")
	}
}

// TestViewSentOncePerWindow: the view service counts a reader's visits to an article within 10 minutes as one, so
// the web sends the first of them alone, and the next after them.
func TestViewSentOncePerWindow(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	synctest.Test(t, func(t *testing.T) {
		keys := map[string]ed25519.PublicKey{f.key.ID: f.key.Private.Public().(ed25519.PublicKey)}
		h := f.handler(t, func(c *Config) {
			// In memory, so that synctest.Wait waits for the view sent behind a page.
			c.Client = &http.Client{Transport: roundTripFunc(f.inMemory)}
			c.Tokens = auth.NewVerifier(func(context.Context) (map[string]ed25519.PublicKey, error) { return keys, nil }, auth.VerifierConfig{})
		})
		bob := f.token(t, 11, auth.RoleUser)
		for _, visit := range []struct {
			after time.Duration
			views int
		}{{0, 1}, {viewDedupe - time.Second, 1}, {time.Second, 2}} {
			f.clock.advance(visit.after)
			if w := get(t, h, "/articles/1", bob); w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			synctest.Wait()
			if n := len(f.requests("view")); n != visit.views {
				t.Errorf("%s on: the view service received %d views, want %d", visit.after, n, visit.views)
			}
		}
	})
}

// TestMarkdownShown: an article and its comments show the HTML their services rendered when they were written, not
// their Markdown source.
func TestMarkdownShown(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "T", Content: "**bold** and [a link](https://example.com)\n\n- one\n- two",
		Created: t0, Modified: t0})
	f.mu.Lock()
	f.comments[1] = []fakeComment{{ID: 100, Article: 1, Writer: 11, Content: "`code` ~~gone~~", Path: "00000", Created: t0}}
	f.mu.Unlock()
	w := get(t, f.handler(t), "/articles/1", "")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200\n%s", w.Code, w.Body)
	}
	mustContain(t, "the article page", w.Body.String(), `<strong>bold</strong>`,
		`<a href="https://example.com" rel="nofollow ugc noopener">a link</a>`, "<li>two</li>",
		`<div class="comment-content"><p><code>code</code> <del>gone</del></p>`)
	mustNotContain(t, "the article page", w.Body.String(), "**bold**", "~~gone~~")
}
