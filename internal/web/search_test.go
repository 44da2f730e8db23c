package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSearch is the search service, faked: it records the queries it is asked and answers each with answer.
type fakeSearch struct {
	mu      sync.Mutex
	queries []url.Values
	answer  func(w http.ResponseWriter, q url.Values)
}

func newFakeSearch(t *testing.T, answer func(w http.ResponseWriter, q url.Values)) (*fakeSearch, string) {
	t.Helper()
	fs := &fakeSearch{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/search" {
			writeError(w, http.StatusNotFound, "NOT_FOUND", "no such endpoint")
			return
		}
		fs.mu.Lock()
		fs.queries = append(fs.queries, r.URL.Query())
		fs.mu.Unlock()
		fs.answer(w, r.URL.Query())
	}))
	t.Cleanup(srv.Close)
	return fs, srv.URL
}

func (fs *fakeSearch) asked() []url.Values {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]url.Values(nil), fs.queries...)
}

// answerResults answers every query with results and count, as SPEC §3.10 writes them.
func answerResults(count int64, results ...map[string]any) func(http.ResponseWriter, url.Values) {
	return func(w http.ResponseWriter, _ url.Values) {
		if results == nil {
			results = []map[string]any{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"results": results, "count": count})
	}
}

func articleHit(article, board, writer int64, title, fragment string) map[string]any {
	return map[string]any{"type": "article", "articleId": wireID(article), "boardId": wireID(board), "title": title,
		"fragment": fragment, "writerId": wireID(writer), "createdAt": wireTime(t0)}
}

func commentHit(article, comment, board, writer int64, title, fragment string) map[string]any {
	hit := articleHit(article, board, writer, title, fragment)
	hit["type"], hit["commentId"] = "comment", wireID(comment)
	return hit
}

// searchHandler is the pages on the fakes, with the search service at origin.
func searchHandler(t *testing.T, origin string) http.Handler {
	t.Helper()
	return newFakes(t).handler(t, func(c *Config) { c.Origins.Search = origin })
}

// TestSearchPage: a search shows its results, articles and comments, each linked to its article (a comment to its
// place in the thread), with its board, writer, date and highlighted fragment, and how many there are.
func TestSearchPage(t *testing.T) {
	t.Parallel()
	found := answerResults(2,
		articleHit(1, 1, 10, "First post", "Hello, <mark>board</mark>."),
		commentHit(1, 100, 2, 11, "First post", "a <mark>board</mark> worth reading"))
	fs, origin := newFakeSearch(t, func(w http.ResponseWriter, q url.Values) {
		if q.Get("q") == "nothing" {
			answerResults(0)(w, q)
			return
		}
		found(w, q)
	})
	h := searchHandler(t, origin)

	w := get(t, h, "/search?q=+board+", "")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200\n%s", w.Code, w.Body)
	}
	body := w.Body.String()
	mustContain(t, "the results page", body,
		`<title>board · Search · board</title>`,
		`<input id="q" type="search" name="q" value="board" maxlength="200" required`,
		`<p id="result-count" class="muted" role="status">2 results for <q>board</q></p>`,
		`<li class="result" data-type="article"><a class="title" href="/articles/1">First post</a>`,
		`Hello, <mark>board</mark>.`,
		`<a class="board" href="/boards/1">General</a>`, `<span class="writer">alice</span>`,
		`<time datetime="2026-11-20T10:00:00.000Z">`,
		`<li class="result" data-type="comment"><span class="badge">Comment</span> <a class="title" href="/articles/1#c-100">First post</a>`,
		`a <mark>board</mark> worth reading`, `<a class="board" href="/boards/2">Questions</a>`, `<span class="writer">bob</span>`)
	mustNotContain(t, "one page of results", body, `id="pages"`)
	asked := fs.asked()
	if len(asked) != 1 {
		t.Fatalf("the search service was asked %d times, want once", len(asked))
	}
	if got, want := asked[0].Encode(), "page=1&pageSize=20&q=board"; got != want {
		t.Errorf("the search service was asked %q, want %q", got, want)
	}

	w = get(t, h, "/search?q=nothing", "")
	mustContain(t, "a search that finds nothing", w.Body.String(), "0 results for", `id="empty"`)
}

// TestSearchBoxOnEveryPage: the bar of every page has the search box, labelled and bounded as the service is.
func TestSearchBoxOnEveryPage(t *testing.T) {
	t.Parallel()
	_, origin := newFakeSearch(t, answerResults(0))
	h := searchHandler(t, origin)
	for _, path := range []string{"/", "/boards/1", "/articles/1", "/hot", "/signin", "/search", "/nowhere"} {
		body := get(t, h, path, "").Body.String()
		mustContain(t, path, body, `<form id="site-search" class="site-search" role="search" aria-label="Search the site" method="get" action="/search">`,
			`<label for="site-q" class="visually-hidden">`, `<input id="site-q" type="search" name="q" maxlength="200" required`)
	}
}

// TestSearchEmpty: the search page without words is the form alone, and asks the service nothing.
func TestSearchEmpty(t *testing.T) {
	t.Parallel()
	fs, origin := newFakeSearch(t, answerResults(0))
	h := searchHandler(t, origin)
	for _, path := range []string{"/search", "/search?q=", "/search?q=+++&type=comment"} {
		w := get(t, h, path, "")
		if w.Code != http.StatusOK {
			t.Errorf("%s: status %d, want 200", path, w.Code)
		}
		mustContain(t, path, w.Body.String(), `<form id="search"`, `<input id="q" type="search" name="q" value=""`)
		mustNotContain(t, path, w.Body.String(), `id="result-count"`, `id="search-error"`)
	}
	if n := len(fs.asked()); n != 0 {
		t.Errorf("the search service was asked %d times for no words", n)
	}
}

// TestSearchFilters: the board, type and order go to the search service as asked and stay chosen on the page; a
// filter the page does not offer is a 400, asked of no one.
func TestSearchFilters(t *testing.T) {
	t.Parallel()
	fs, origin := newFakeSearch(t, answerResults(1, commentHit(2, 200, 2, 10, "Second post", "<mark>why</mark>")))
	h := searchHandler(t, origin)

	w := get(t, h, "/search?q=why&boardId=2&type=comment&sort=newest&page=3", "")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200\n%s", w.Code, w.Body)
	}
	mustContain(t, "the filtered page", w.Body.String(), `<option value="2" selected>Questions</option>`,
		`<option value="comment" selected>Comments</option>`, `<option value="newest" selected>Newest first</option>`)
	asked := fs.asked()
	if got, want := asked[len(asked)-1].Encode(), "boardId=2&page=3&pageSize=20&q=why&sort=newest&type=comment"; got != want {
		t.Errorf("the search service was asked %q, want %q", got, want)
	}

	// Relevance is the service's default: the page does not name it.
	get(t, h, "/search?q=why&sort=relevance", "")
	asked = fs.asked()
	if got, want := asked[len(asked)-1].Encode(), "page=1&pageSize=20&q=why"; got != want {
		t.Errorf("sorted by relevance, the search service was asked %q, want %q", got, want)
	}

	before := len(asked)
	for _, path := range []string{"/search?q=why&boardId=99", "/search?q=why&boardId=x", "/search?q=why&type=user",
		"/search?q=why&sort=oldest", "/search?q=why&page=0"} {
		if w := get(t, h, path, ""); w.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", path, w.Code)
		}
	}
	if n := len(fs.asked()) - before; n != 0 {
		t.Errorf("the search service was asked %d times for bad filters", n)
	}
}

// TestSearchPaging: page numbers in blocks of ten that keep the query and filters, and a count at the service's
// cap says there are more.
func TestSearchPaging(t *testing.T) {
	t.Parallel()
	_, origin := newFakeSearch(t, func(w http.ResponseWriter, q url.Values) {
		// The capped count of SPEC §3.1: page 1's block knows of 201, page 11's of 401.
		count := int64(201)
		if q.Get("page") == "11" {
			count = 230
		}
		answerResults(count, articleHit(1, 1, 10, "First post", "<mark>post</mark>"))(w, q)
	})
	h := searchHandler(t, origin)

	body := get(t, h, "/search?q=post&type=article", "").Body.String()
	mustContain(t, "page 1", body, "More than 200 results for",
		`<span aria-current="page">1</span>`, `<a href="/search?q=post&amp;type=article&amp;page=2">2</a>`,
		`<a id="next-block" href="/search?q=post&amp;type=article&amp;page=11" rel="next">`)
	mustNotContain(t, "page 1", body, `page=12`)

	body = get(t, h, "/search?q=post&type=article&page=11", "").Body.String()
	mustContain(t, "page 11", body, "230 results for", `<span aria-current="page">11</span>`,
		`<a href="/search?q=post&amp;type=article&amp;page=12">12</a>`,
		`<a id="prev-block" href="/search?q=post&amp;type=article&amp;page=10" rel="prev">`)
	mustNotContain(t, "page 11", body, `page=13`, `id="next-block"`)
}

// TestSearchEscaping: nothing a result carries is markup but the fragment's <mark> tags, whatever the service sends.
func TestSearchEscaping(t *testing.T) {
	t.Parallel()
	_, origin := newFakeSearch(t, answerResults(1, articleHit(1, 1, 10, `<script>alert("title")</script>`,
		`<script>alert(1)</script> <mark onclick="steal()">x</mark> &lt;b&gt; <mark>open`)))
	h := searchHandler(t, origin)
	body := get(t, h, "/search?q="+url.QueryEscape(`"><script>alert("q")</script>`), "").Body.String()
	mustNotContain(t, "the results page", body, "<script>alert", "<mark onclick", "<b>")
	mustContain(t, "the results page", body, `&lt;script&gt;alert(&#34;title&#34;)&lt;/script&gt;`,
		`<p class="fragment">&lt;script&gt;alert(1)&lt;/script&gt; &lt;mark onclick=&#34;steal()&#34;&gt;x &lt;b&gt; <mark>open</mark></p>`,
		`value="&#34;&gt;&lt;script&gt;alert(&#34;q&#34;)&lt;/script&gt;"`)
}

func TestHighlighted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a <mark>match</mark> here", "a <mark>match</mark> here"},
		{"<mark>one</mark> and <mark>two</mark>", "<mark>one</mark> and <mark>two</mark>"},
		{"<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{`<mark onclick="steal()">x</mark>`, `&lt;mark onclick=&#34;steal()&#34;&gt;x`},
		{"<MARK>x</MARK>", "&lt;MARK&gt;x&lt;/MARK&gt;"},
		// Escaped text reads as it was written: an escaped tag is text, an escaped entity stays one.
		{"&lt;b&gt;bold&lt;/b&gt; &amp;lt;", "&lt;b&gt;bold&lt;/b&gt; &amp;lt;"},
		{"&lt;mark&gt;typed&lt;/mark&gt;", "&lt;mark&gt;typed&lt;/mark&gt;"},
		{"Tom &amp; Jerry's", "Tom &amp; Jerry&#39;s"},
		// Unbalanced: an open mark is closed, a close without an open and a mark inside a mark are dropped.
		{"<mark>open", "<mark>open</mark>"},
		{"x</mark>y", "xy"},
		{"<mark>a<mark>b</mark>c</mark>", "<mark>ab</mark>c"},
		{"<mark></mark", "<mark>&lt;/mark</mark>"},
		{"", ""},
	} {
		if got := highlighted(c.in); got != c.want {
			t.Errorf("highlighted(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSearchRefused: a query the service refuses is shown on the page with its message and the box, as a 400.
func TestSearchRefused(t *testing.T) {
	t.Parallel()
	_, origin := newFakeSearch(t, func(w http.ResponseWriter, _ url.Values) {
		writeError(w, http.StatusBadRequest, "INVALID_QUERY", "A search is 1 to 200 characters.")
	})
	h := searchHandler(t, origin)
	long := strings.Repeat("가", 201)
	w := get(t, h, "/search?q="+url.QueryEscape(long), "")
	if w.Code != http.StatusBadRequest {
		t.Fatalf("status %d, want 400\n%s", w.Code, w.Body)
	}
	mustContain(t, "a refused search", w.Body.String(), `<p id="search-error" class="error" role="alert">A search is 1 to 200 characters.</p>`,
		`<input id="q" type="search" name="q" value="`+long+`"`)
	mustNotContain(t, "a refused search", w.Body.String(), `id="result-count"`)
}

// TestSearchTooBroad: a search cut at the service's deadline is the form again, with the service's advice to narrow
// it, and a 503.
func TestSearchTooBroad(t *testing.T) {
	t.Parallel()
	_, origin := newFakeSearch(t, func(w http.ResponseWriter, _ url.Values) {
		writeError(w, http.StatusServiceUnavailable, "SEARCH_TIMEOUT", "The search did not finish in time; narrow it.")
	})
	w := get(t, searchHandler(t, origin), "/search?q=board", "")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503\n%s", w.Code, w.Body)
	}
	mustContain(t, "a search cut at its deadline", w.Body.String(),
		`<p id="search-error" class="error" role="alert">The search did not finish in time; narrow it.</p>`, `<input id="q" type="search" name="q" value="board"`)
}

// TestSearchUnavailable: a search service that is down, hung or says so is the friendly 503 page, never a hang.
func TestSearchUnavailable(t *testing.T) {
	t.Parallel()
	_, failing := newFakeSearch(t, func(w http.ResponseWriter, _ url.Values) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "index at 10.0.0.9 not open")
	})
	for name, origin := range map[string]string{"answers 503": failing, "on a closed port": closedOrigin(t), "hung": hungOrigin(t)} {
		t.Run(name, func(t *testing.T) {
			h := searchHandler(t, origin)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			w := serve(t, h, visit{target: "/search?q=board", ctx: ctx})
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
				t.Errorf("status %d, Retry-After %q; want 503 and a Retry-After", w.Code, w.Header().Get("Retry-After"))
			}
			mustContain(t, "the page", w.Body.String(), `<main id="error"`, "Part of the site (search) is not answering right now.")
			mustNotContain(t, "the page", w.Body.String(), "10.0.0.9", "127.0.0.1")
		})
	}
}
