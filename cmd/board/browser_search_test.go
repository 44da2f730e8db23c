package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"board/internal/polltest"
)

// searchUntil opens the search page for query until its results link to href, and returns the result's selector.
// The search service learns of a write from its event, a moment after the write.
func (b *tab) searchUntil(query, href string) string {
	b.t.Helper()
	path := "/search?" + url.Values{"q": {query}}.Encode()
	result := fmt.Sprintf(`ol#results li.result:has(a.title[href=%s])`, js(href))
	polltest.Until(b.t, settleTimeout, func() (bool, string) {
		status := b.open(path)
		n := b.count(result)
		return status == http.StatusOK && n == 1, fmt.Sprintf("%s: status %d, %d results linking to %s: %q", path, status, n, href, b.text("main"))
	})
	return result
}

// marks is the text of the <mark> elements in the result sel.
func (b *tab) marks(sel string) []string {
	b.t.Helper()
	return eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%s)].map(e => e.textContent)`, js(sel+" .fragment mark")))
}

// TestBrowserSearch is search as a reader does it: an article written on the site is found from the box in the bar
// by a Korean word inside a longer word and by another form of an English word, its matches marked, and a result
// opens the article; a comment's result opens its place in the thread; a query too long is refused on the page.
func TestBrowserSearch(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	b := newTab(t, "writer", p.urls["web"])
	b.signUpWith("writer")

	title := "Meetup notes from the 자유게시판에서 thread"
	b.openOK("/boards/1/write")
	b.fill("title", "#title", title)
	b.fill("content", "#content", "We like the new layout of the 자유게시판에서 board, and the meetup went well.")
	b.followOK("write", "#article-form button[type=submit]")
	articleURL := b.path()
	if !strings.HasPrefix(articleURL, "/articles/") {
		b.fatalf("page after writing: %s, want the article", articleURL)
	}
	token := signIn(t, p, "writer")
	comment := apiComment(t, p, token, strings.TrimPrefix(articleURL, "/articles/"), "Zephyrs blew through the venue all evening.")

	// A Korean word inside a longer one, with a particle attached.
	result := b.searchUntil("게시판", articleURL)
	b.checkPage("the search page")
	if marks := b.marks(result); len(marks) == 0 || !strings.Contains(strings.Join(marks, ""), "게시") {
		b.failf("the marks of the Korean match: %q, want 게시판 marked", marks)
	}
	expect(b, "the result's board", b.text(result+" a.board"), "General")
	expect(b, "the result's writer", b.text(result+" .writer"), "writer")

	// "liked" finds "like", from the box in the bar of any page.
	b.openOK(articleURL)
	b.fill("the search box", "#site-q", "liked")
	b.followOK("search from the bar", "#site-search button[type=submit]")
	expect(b, "the page after searching", b.location(), "/search?q=liked")
	expect(b, "the search box of the results page", b.attr("#q", "value"), "liked")
	result = fmt.Sprintf(`ol#results li.result:has(a.title[href=%s])`, js(articleURL))
	expect(b, "results for liked", b.count(result), 1)
	if marks := b.marks(result); len(marks) == 0 || !strings.EqualFold(marks[0], "like") {
		b.failf("the marks of the English match: %q, want like", marks)
	}
	if html := eval[string](b, fmt.Sprintf(`document.querySelector(%s).innerHTML`, js(result+" .fragment"))); strings.Contains(html, "&lt;mark") {
		b.failf("the fragment shows its marks as text: %s", html)
	}
	b.followOK("open the result", result+" a.title")
	expect(b, "the opened result", b.path(), articleURL)
	expect(b, "its title", b.text("h1#article-title"), title)

	// A comment's result opens the thread at the comment, and the filters narrow to comments.
	commentURL := articleURL + "#c-" + comment
	b.searchUntil("zephyr", commentURL)
	b.choose("only comments", "#search-type", "comment")
	b.followOK("search comments", "#search button[type=submit]")
	expect(b, "the filtered search", b.location(), "/search?q=zephyr&boardId=&type=comment&sort=")
	expect(b, "comment results", b.count(`ol#results li.result[data-type="comment"]`), 1)
	expect(b, "article results", b.count(`ol#results li.result[data-type="article"]`), 0)
	b.followOK("open the comment's result", `ol#results li.result a.title`)
	expect(b, "the opened comment", b.location(), commentURL)
	expect(b, "the comment on the page", b.count("li#c-"+comment), 1)

	// No words: the form alone. Too many: the service's message, on the page.
	b.openOK("/search")
	expect(b, "results without words", b.count("#result-count"), 0)
	expect(b, "the empty search box", b.attr("#q", "value"), "")
	if status := b.open("/search?q=" + url.QueryEscape(strings.Repeat("게", 201))); status != http.StatusBadRequest {
		b.failf("a 201-character search answered %d, want 400", status)
	}
	if b.text("#search-error") == "" {
		b.failf("a 201-character search shows no message")
	}
}
