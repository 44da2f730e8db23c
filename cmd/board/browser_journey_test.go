package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/sync/errgroup"
)

// needBrowser skips a browser test before it starts a program, when Chromium is not installed.
func needBrowser(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("the browser tests need Chromium: apt-get install chromium")
	}
}

// startWeb starts every service, the web among them, and returns the program. When the test fails, the program's
// warnings and errors are logged, as they often tell why a page was not what the test wanted.
func startWeb(t *testing.T, flags ...string) *program {
	t.Helper()
	p := startProgram(t, append(testFlags(t, t.TempDir()), flags...))
	if p.urls["web"] == "" {
		t.Fatal("board serve started no web service")
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var lines []string
		for line := range strings.Lines(p.logs.String()) {
			if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
				lines = append(lines, strings.TrimSpace(line))
			}
		}
		if n := len(lines); n > 40 {
			lines = append(lines[:20], append([]string{fmt.Sprintf("... %d more ...", n-40)}, lines[n-20:]...)...)
		}
		if len(lines) > 0 {
			t.Logf("the program's warnings and errors:\n%s", strings.Join(lines, "\n"))
		}
	})
	return p
}

// seedBoard writes n articles to board through the article API as the holder of token, a few at a time.
func seedBoard(t *testing.T, p *program, token string, board, n int) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(4)
	for i := range n {
		g.Go(func() error {
			body, _ := json.Marshal(map[string]any{"title": fmt.Sprintf("Seeded article %03d", i),
				"content": "Seeded to have pages to turn.", "boardId": board})
			req, err := http.NewRequest("POST", p.urls["article"]+"/v1/articles", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", bearer(token))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("seed article %d: %d %s", i, resp.StatusCode, raw)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// apiArticle writes one article through the API as the holder of token and returns its id.
func apiArticle(t *testing.T, p *program, token string, board int, title, content string) string {
	t.Helper()
	a := sendAs(t, bearer(token), "POST", p.urls["article"]+"/v1/articles",
		map[string]any{"title": title, "content": content, "boardId": board})
	var out articleOut
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &out) != nil {
		t.Fatalf("write %q: %d %s", title, a.status, a.body)
	}
	return out.ArticleID
}

// signUpWith signs a new user up through the sign-up page; the password is the one signIn and signUp use.
func (b *tab) signUpWith(name string) {
	b.t.Helper()
	b.openOK("/signup")
	b.checkPage("the sign-up page")
	b.fill("sign up: username", "#username", name)
	b.fill("sign up: password", "#password", name+"-password")
	if status := b.follow("sign up", "#signup button[type=submit]"); status != 200 {
		b.fatalf("status %d after signing up, want 200", status)
	}
	expect(b, "page after sign up", b.path(), "/")
	expect(b, "#nav-user after sign up", b.text("#nav-user"), name)
}

// signInWith signs in through the sign-in form of the page open now, and returns the status of the next page.
func (b *tab) signInWith(name, password string) int {
	b.t.Helper()
	b.fill("sign in: username", "#username", name)
	b.fill("sign in: password", "#password", password)
	return b.follow("sign in as "+name, "#signin button[type=submit]")
}

// pageComment is a comment as the article page shows it.
type pageComment struct {
	ID      string `json:"id"`
	Depth   string `json:"depth"`
	Writer  string `json:"writer"`
	Content string `json:"content"`
	Deleted bool   `json:"deleted"`
	Reply   bool   `json:"reply"`  // it has a reply form of its own
	Delete  bool   `json:"delete"` // it has a delete form of its own
}

// ownJS finds the elements matching a selector that belong to a comment itself, not to its replies, if the page
// nests them.
const ownJS = `const own = (li, sel) => [...li.querySelectorAll(sel)].filter(e => e.closest("li.comment") === li);`

// comments lists the comments of the article page open now.
func (b *tab) comments() []pageComment {
	b.t.Helper()
	return eval[[]pageComment](b, `(() => { `+ownJS+`
		return [...document.querySelectorAll("#comment-list li.comment")].map(li => ({
			id: li.id, depth: li.dataset.depth ?? "",
			writer: (own(li, ".comment-writer")[0]?.textContent ?? "").trim(),
			content: (own(li, ".comment-content")[0]?.textContent ?? "").trim(),
			deleted: own(li, ".comment-content.deleted").length > 0,
			reply: own(li, "details.reply").length > 0,
			delete: own(li, "form.delete-comment").length > 0,
		}));
	})()`)
}

// comment finds the comment whose content is content on the page open now.
func (b *tab) comment(content string) (pageComment, bool) {
	b.t.Helper()
	for _, c := range b.comments() {
		if c.Content == content {
			return c, true
		}
	}
	return pageComment{}, false
}

// waitComment waits until the page (this one or the one a form loads) shows a comment with content.
func (b *tab) waitComment(step, content string) pageComment {
	b.t.Helper()
	b.waitFor(step, `(() => { `+ownJS+`
		return [...document.querySelectorAll("#comment-list li.comment")].some(li =>
			(own(li, ".comment-content")[0]?.textContent ?? "").trim() == `+js(content)+`); })()`)
	c, _ := b.comment(content)
	return c
}

// markOwn marks the first element matching sel of the comment id with data-test=mark, for a selector to find.
func (b *tab) markOwn(commentID, sel, mark string) string {
	b.t.Helper()
	ok := eval[bool](b, fmt.Sprintf(`(() => { %s
		const li = document.getElementById(%s), e = li && own(li, %s)[0];
		if (!e) return false;
		e.setAttribute("data-test", %s);
		return true; })()`, ownJS, js(commentID), js(sel), js(mark)))
	if !ok {
		b.fatalf("comment %s has no %s", commentID, sel)
	}
	return `[data-test="` + mark + `"]`
}

// replyTo opens the reply form of the comment parentID, writes content and sends it; with navigate the form must
// load a new page, which must be the article's at the new comment.
func (b *tab) replyTo(parentID, content string, navigate bool) pageComment {
	b.t.Helper()
	form := b.markOwn(parentID, "details.reply", "reply-"+parentID)
	b.click("open the reply form of "+parentID, form+" summary")
	b.fill("write a reply to "+parentID, form+" textarea", content)
	if navigate {
		if status := b.follow("reply to "+parentID, form+" button"); status != 200 {
			b.fatalf("status %d after replying, want 200", status)
		}
	} else {
		b.click("reply to "+parentID, form+" button")
	}
	c := b.waitComment("the reply to "+parentID+" shows", content)
	if navigate && !strings.HasSuffix(b.location(), "#"+c.ID) {
		b.failf("after replying the page is %s, want it at #%s", b.location(), c.ID)
	}
	return c
}

var articlePath = regexp.MustCompile(`^/articles/(\d+)$`)

// publish submits the write form and returns the new article's page path and id, failing unless the site lands on
// that page.
func (b *tab) publish() (path, id string) {
	b.t.Helper()
	if status := b.follow("publish", "#article-form button[type=submit]"); status != http.StatusOK {
		b.fatalf("status %d after publishing, want 200", status)
	}
	m := articlePath.FindStringSubmatch(b.location())
	if m == nil {
		b.fatalf("after publishing the page is %s, want /articles/{id}", b.location())
	}
	return m[0], m[1]
}

// listedArticle is an article as a board page lists it.
type listedArticle struct {
	Href     string `json:"href"`
	Title    string `json:"title"`
	Writer   string `json:"writer"`
	Datetime string `json:"datetime"`
	Likes    string `json:"likes"`
	Comments string `json:"comments"`
	Views    string `json:"views"`
}

// listedArticles lists the items of ol#articles on the page open now.
func (b *tab) listedArticles() []listedArticle {
	b.t.Helper()
	return eval[[]listedArticle](b, `[...document.querySelectorAll("ol#articles li.article")].map(li => {
		const t = s => (li.querySelector(s)?.textContent ?? "").trim();
		return {href: li.querySelector("a.title")?.getAttribute("href") ?? "", title: t("a.title"), writer: t(".writer"),
			datetime: li.querySelector("time")?.getAttribute("datetime") ?? "",
			likes: t(".like-count"), comments: t(".comment-count"), views: t(".view-count")};
	})`)
}

// checkListed checks the items of a board page: a link to the article, the writer, a machine-readable date and
// numeric counts.
func (b *tab) checkListed(items []listedArticle) {
	b.t.Helper()
	for _, a := range items {
		if !articlePath.MatchString(a.Href) || a.Title == "" || a.Writer == "" {
			b.failf("a listed article without a link, title or writer: %+v", a)
		}
		if _, err := time.Parse(time.RFC3339, a.Datetime); err != nil {
			b.failf("listed article %s: time datetime %q is not RFC 3339", a.Href, a.Datetime)
		}
		for what, n := range map[string]string{"likes": a.Likes, "comments": a.Comments, "views": a.Views} {
			if _, err := strconv.Atoi(strings.ReplaceAll(n, ",", "")); err != nil {
				b.failf("listed article %s: %s %q is not a number", a.Href, what, n)
			}
		}
	}
}

// pageLinks is the page numbers of nav#pages that are links, and the current one.
func (b *tab) pageLinks() (links []string, current string) {
	b.t.Helper()
	links = eval[[]string](b, `[...document.querySelectorAll("nav#pages a:not(#prev-block):not(#next-block)")].map(a => a.textContent.trim())`)
	return links, b.text(`nav#pages [aria-current="page"]`)
}

// TestBrowserJourney is a whole session of one person, with JavaScript on: sign up, write, comment, reply five
// deep, like and unlike in place, edit, page through a board and scroll it endlessly, see the hot articles, delete
// a comment with replies and the article, sign out.
func TestBrowserJourney(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	b := newTab(t, "alice", p.urls["web"])

	b.signUpWith("alice")
	b.checkPage("the home page")
	expect(b, "boards on the home page", b.count("ul#boards a"), 3)
	for id, name := range map[string]string{"1": "General", "2": "Questions", "3": "Showcase"} {
		expect(b, "link to board "+id, b.text(`ul#boards a[href="/boards/`+id+`"]`), name)
	}
	expect(b, "#nav-home", b.attr("a#nav-home", "href"), "/")
	expect(b, "#nav-hot", b.attr("a#nav-hot", "href"), "/hot")
	b.followOK("open board 1", `ul#boards a[href="/boards/1"]`)
	expect(b, "board page", b.location(), "/boards/1")
	expect(b, "board h1", b.text("h1"), "General")
	b.checkPage("an empty board")

	// Write: markup in what a user writes must come back as text.
	title := `Hello <em>world</em> & "friends"`
	content := "First line.\nSecond line <script>alert(1)</script>"
	b.followOK("open the write form", "a#write")
	expect(b, "write page", b.location(), "/boards/1/write")
	b.checkPage("the write page")
	b.fill("title", "#title", title)
	b.fill("content", "#content", content)
	articleURL, article := b.publish()
	expect(b, "h1#article-title", b.text("h1#article-title"), title)
	expect(b, "elements in the title", b.count("#article-title em"), 0)
	expect(b, "scripts in the content", b.count("#article-content script"), 0)
	if got := b.text("#article-content"); !strings.Contains(got, "Second line <script>alert(1)</script>") {
		b.failf("#article-content = %q, want the text as written", got)
	}
	expect(b, "#article-writer", b.text("#article-writer"), "alice")
	if dt := b.attr("time", "datetime"); dt == "" {
		b.failf("the article's time has no datetime")
	} else if _, err := time.Parse(time.RFC3339, dt); err != nil {
		b.failf("time datetime %q is not RFC 3339", dt)
	}
	expect(b, "#like-count", b.text("#like-count"), "0")
	expect(b, "#comment-count", b.text("#comment-count"), "0")
	expect(b, "a#edit", b.attr("a#edit", "href"), "/articles/"+article+"/edit")
	expect(b, "form#delete-article", b.count("form#delete-article button"), 1)

	// Comment, then reply down to the deepest level.
	first := "First comment <img src=x>"
	b.fill("write a comment", "#comment-content", first)
	b.click("post the comment", "#comment-form button")
	c := b.waitComment("the comment shows", first)
	expect(b, "depth of the comment", c.Depth, "1")
	expect(b, "writer of the comment", c.Writer, "alice")
	expect(b, "images in comments", b.count("#comment-list img"), 0)
	thread := []pageComment{c}
	for depth := 2; depth <= 5; depth++ {
		r := b.replyTo(thread[len(thread)-1].ID, fmt.Sprintf("A reply at depth %d", depth), false)
		expect(b, fmt.Sprintf("depth of the reply %s", r.ID), r.Depth, strconv.Itoa(depth))
		thread = append(thread, r)
	}
	b.openOK(articleURL)
	for _, want := range thread {
		got, ok := b.comment(want.Content)
		if !ok {
			b.failf("after a reload comment %q is gone", want.Content)
			continue
		}
		expect(b, "reply form of the comment at depth "+got.Depth, got.Reply, got.Depth != "5")
		expect(b, "delete form of alice's comment at depth "+got.Depth, got.Delete, true)
	}
	b.checkPage("the article page")
	reached := b.pressTab(200, "like-button", "comment-content")
	expect(b, "Tab reaches #like-button", reached["like-button"], true)
	expect(b, "Tab reaches #comment-content", reached["comment-content"], true)

	// Like and unlike: the page updates in place.
	expect(b, "#like-button before liking", b.text("#like-button"), "Like")
	expect(b, "aria-pressed before liking", b.attr("#like-button", "aria-pressed"), "false")
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.boardTestMark = "same page"`))
	b.click("like", "#like-button")
	b.waitFor("the like shows", `document.querySelector("#like-button")?.getAttribute("aria-pressed") == "true" &&
		document.querySelector("#like-button").textContent.trim() == "Unlike" &&
		document.querySelector("#like-count")?.textContent.trim() == "1"`)
	expect(b, "the page after liking is the same page", eval[string](b, `window.boardTestMark ?? "a new page"`), "same page")
	b.click("unlike", "#like-button")
	b.waitFor("the unlike shows", `document.querySelector("#like-button")?.getAttribute("aria-pressed") == "false" &&
		document.querySelector("#like-button").textContent.trim() == "Like" &&
		document.querySelector("#like-count")?.textContent.trim() == "0"`)
	expect(b, "the page after unliking is the same page", eval[string](b, `window.boardTestMark ?? "a new page"`), "same page")
	b.reloadUntil("the unlike lasts", articleURL, `document.querySelector("#like-button")?.getAttribute("aria-pressed") == "false"`)

	// Edit.
	b.followOK("open the edit form", "a#edit")
	expect(b, "edit page", b.location(), "/articles/"+article+"/edit")
	expect(b, "prefilled title", eval[string](b, `document.querySelector("#title")?.value ?? ""`), title)
	expect(b, "prefilled content", eval[string](b, `document.querySelector("#content")?.value ?? ""`), content)
	newTitle := "Hello again, edited"
	b.fill("new title", "#title", newTitle)
	if status := b.follow("save the edit", "#article-form button[type=submit]"); status != 200 {
		b.fatalf("status %d after saving, want 200", status)
	}
	expect(b, "page after the edit", b.path(), articleURL)
	if got := b.text("h1#article-title"); got != newTitle {
		t.Logf("right after the edit the title read %q (the read model lagged); waiting for %q", got, newTitle)
		b.reloadUntilText("the new title shows", articleURL, "h1#article-title", newTitle)
	}

	// Many visits by one reader within ten minutes are one view.
	b.reloadUntilText("the view counts", articleURL, "#view-count", "1")
	time.Sleep(2 * time.Second) // longer than the read model lags: a second view, if counted, would show now
	b.openOK(articleURL)
	expect(b, "#view-count after more visits", b.text("#view-count"), "1")

	// The hot articles of today list it; yesterday has none.
	b.followOK("open the hot articles", "a#nav-hot")
	b.reloadUntil("the article is hot", "/hot", `document.querySelector('ol#hot a.title[href="/articles/`+article+`"]')`)
	b.checkPage("the hot page")
	expect(b, "a#next-day today", b.count("a#next-day"), 0)
	b.followOK("the day before", "a#prev-day")
	expect(b, "p#empty the day before", b.count("p#empty"), 1)
	expect(b, "items the day before", b.count("ol#hot li"), 0)
	b.followOK("back to today", "a#next-day")
	expect(b, "the article is hot again", b.count(`ol#hot a.title[href="/articles/`+article+`"]`), 1)

	// Pages: 205 more articles make 11 pages of 20, more than one block of ten.
	seedBoard(t, p, signIn(t, p, "alice"), 1, 205)
	b.reloadUntil("the board has eleven pages", "/boards/1", `document.querySelector("a#next-block")`)
	b.checkPage("a board page")
	items := b.listedArticles()
	expect(b, "articles on page 1", len(items), 20)
	b.checkListed(items)
	links, current := b.pageLinks()
	expect(b, "current page", current, "1")
	expect(b, "page links on page 1", strings.Join(links, " "), "2 3 4 5 6 7 8 9 10")
	expect(b, "a#prev-block on page 1", b.count("a#prev-block"), 0)
	b.followOK("page 2", `nav#pages a:not(#prev-block):not(#next-block)`)
	_, current = b.pageLinks()
	expect(b, "current page", current, "2")
	page2 := b.listedArticles()
	expect(b, "articles on page 2", len(page2), 20)
	if len(page2) > 0 && len(items) > 0 && page2[0].Href == items[0].Href {
		b.failf("page 2 starts with the article page 1 starts with: %s", items[0].Href)
	}
	b.followOK("the next block", "a#next-block")
	links, current = b.pageLinks()
	expect(b, "current page", current, "11")
	expect(b, "page links on page 11", strings.Join(links, " "), "")
	expect(b, "a#next-block on page 11", b.count("a#next-block"), 0)
	expect(b, "a#prev-block on page 11", b.count("a#prev-block"), 1)
	last := b.listedArticles()
	expect(b, "articles on page 11", len(last), 6)
	b.checkListed(last)
	if n := len(last); n > 0 {
		a := last[n-1]
		expect(b, "the oldest article", a.Href, articleURL)
		expect(b, "its title", a.Title, newTitle)
		expect(b, "its writer", a.Writer, "alice")
		expect(b, "its comments", a.Comments, "5")
		expect(b, "its likes", a.Likes, "0")
	}
	b.followOK("the previous block", "a#prev-block")
	_, current = b.pageLinks()
	if n, err := strconv.Atoi(current); err != nil || n < 1 || n > 10 {
		b.failf("after a#prev-block the current page is %q, want one of 1 to 10", current)
	}

	// Endless scroll: every article once, newest first, without leaving the page.
	b.followOK("open the scroll view", "a#scroll-view")
	expect(b, "scroll view", b.location(), "/boards/1/scroll")
	b.checkPage("the scroll view")
	expect(b, "articles in the first chunk", b.count("ol#articles li.article"), 20)
	for seen := 20; b.count("a#more") > 0; {
		if seen > 206 {
			b.fatalf("a#more is still there after %d articles", seen)
		}
		b.do(fmt.Sprintf("scroll to a#more after %d articles", seen), chromedp.ScrollIntoView(chromedp.CSS("a#more")))
		b.waitFor(fmt.Sprintf("more than %d articles", seen),
			fmt.Sprintf(`document.querySelectorAll("ol#articles li.article").length > %d || !document.querySelector("a#more")`, seen))
		seen = b.count("ol#articles li.article")
	}
	expect(b, "scroll view after scrolling", b.location(), "/boards/1/scroll")
	all := b.listedArticles()
	expect(b, "articles after scrolling to the end", len(all), 206)
	seenHref := map[string]bool{}
	for i, a := range all {
		if seenHref[a.Href] {
			b.failf("article %s twice in the scroll view", a.Href)
		}
		seenHref[a.Href] = true
		if i > 0 && newerID(all[i].Href, all[i-1].Href) {
			b.failf("the scroll view has %s after %s, want newest first", all[i].Href, all[i-1].Href)
		}
	}

	// Delete a comment that has replies: it stays, as deleted, and its replies stay.
	b.openOK(articleURL)
	del := b.markOwn(thread[0].ID, "form.delete-comment", "delete-first")
	b.click("delete the first comment", del+" button")
	b.waitFor("the first comment shows as deleted", `document.querySelector("#`+thread[0].ID+` .comment-content.deleted")`)
	got, _ := b.comment("This comment was deleted.")
	expect(b, "the deleted comment", got.ID, thread[0].ID)
	if _, ok := b.comment(thread[1].Content); !ok {
		b.failf("the reply to the deleted comment is gone")
	}
	// A comment without replies goes away.
	del = b.markOwn(thread[4].ID, "form.delete-comment", "delete-deepest")
	b.click("delete the deepest reply", del+" button")
	b.waitFor("the deepest reply is gone", `!document.getElementById(`+js(thread[4].ID)+`)`)

	// Delete the article.
	b.openOK(articleURL)
	b.followOK("delete the article", "form#delete-article button")
	expect(b, "page after deleting", b.location(), "/boards/1?notice=deleted")
	if b.text("p#notice") == "" || b.attr("p#notice", "role") != "status" {
		b.failf("no p#notice with role=status after deleting")
	}
	b.openUntil(articleURL, http.StatusNotFound)
	expect(b, "main#error of the deleted article", b.count("main#error h1"), 1)

	// Sign out.
	b.openOK("/")
	b.followOK("sign out", "form#signout button")
	expect(b, "page after signing out", b.path(), "/")
	for _, a := range []string{"signin", "signup"} {
		if href := b.attr("a#nav-"+a, "href"); !strings.HasPrefix(href, "/"+a) {
			b.failf("a#nav-%s = %q, want /%s", a, href, a)
		}
	}
	expect(b, "#nav-user", b.count("#nav-user"), 0)

	// Signing in again from the header of the page that says "signed out" must not say it again.
	b.followOK("the sign-in link", "a#nav-signin")
	if status := b.signInWith("alice", "alice-password"); status != 200 {
		b.fatalf("status %d after signing in, want 200", status)
	}
	expect(b, "#nav-user after signing in again", b.text("#nav-user"), "alice")
	if notice := b.text("p#notice"); strings.Contains(strings.ToLower(notice), "signed out") {
		b.failf("right after signing in the page says %q (at %s)", notice, b.location())
	}
	b.followOK("sign out again", "form#signout button")
	b.openOK("/boards/1/write")
	if loc := b.location(); !strings.HasPrefix(loc, "/signin?next=") {
		b.failf("signed out, the write page sent to %s, want /signin?next=...", loc)
	}
}

// newerID reports whether the article of href a has a larger id than that of href b.
func newerID(a, b string) bool {
	x, _ := strconv.ParseInt(strings.TrimPrefix(a, "/articles/"), 10, 64)
	y, _ := strconv.ParseInt(strings.TrimPrefix(b, "/articles/"), 10, 64)
	return x > y
}

// TestBrowserWithoutJavaScript does the core of the journey with scripts off: every form is a full-page POST and
// its redirect, and the scroll view pages through links.
func TestBrowserWithoutJavaScript(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	_, token := signUp(t, p, "carol")
	seedBoard(t, p, token, 2, 25)
	b := newTab(t, "carol", p.urls["web"])
	b.disableJavaScript()

	// Signed out, the write page asks to sign in first, and comes back after.
	b.openOK("/boards/2/write")
	if loc := b.location(); !strings.HasPrefix(loc, "/signin?next=") {
		b.fatalf("signed out, the write page sent to %s, want /signin?next=...", loc)
	}
	b.checkPage("the sign-in page")
	if status := b.signInWith("carol", "carol-password"); status != 200 {
		b.fatalf("status %d after signing in, want 200", status)
	}
	expect(b, "page after signing in", b.location(), "/boards/2/write")
	expect(b, "#nav-user", b.text("#nav-user"), "carol")

	title := "Written without JavaScript"
	b.fill("title", "#title", title)
	b.fill("content", "#content", "Plain forms work.")
	articleURL, _ := b.publish()
	expect(b, "h1#article-title", b.text("h1#article-title"), title)

	b.fill("write a comment", "#comment-content", "A comment sent by a form")
	if status := b.follow("post the comment", "#comment-form button"); status != 200 {
		b.fatalf("status %d after commenting, want 200", status)
	}
	c := b.waitComment("the comment shows", "A comment sent by a form")
	if loc := b.location(); loc != articleURL+"#"+c.ID {
		b.failf("after commenting the page is %s, want %s#%s", loc, articleURL, c.ID)
	}
	r := b.replyTo(c.ID, "A reply sent by a form", true)
	expect(b, "depth of the reply", r.Depth, "2")

	// Like and unlike are form posts that come back to the article.
	expect(b, "#like-button", b.text("#like-button"), "Like")
	if status := b.follow("like", "#like-button"); status != 200 {
		b.fatalf("status %d after liking, want 200", status)
	}
	if !strings.HasPrefix(b.location(), articleURL) {
		b.failf("after liking the page is %s, want %s", b.location(), articleURL)
	}
	liked := `document.querySelector("#like-button")?.getAttribute("aria-pressed") == "true" &&
		document.querySelector("#like-button").textContent.trim() == "Unlike" &&
		document.querySelector("#like-count")?.textContent.trim() == "1"`
	if !eval[bool](b, liked) {
		t.Logf("right after liking the page did not show it (the read model lagged)")
		b.reloadUntil("the like shows", articleURL, liked)
	}
	if status := b.follow("unlike", "#like-button"); status != 200 {
		b.fatalf("status %d after unliking, want 200", status)
	}
	unliked := `document.querySelector("#like-button")?.getAttribute("aria-pressed") == "false" &&
		document.querySelector("#like-button").textContent.trim() == "Like" &&
		document.querySelector("#like-count")?.textContent.trim() == "0"`
	if !eval[bool](b, unliked) {
		t.Logf("right after unliking the page did not show it (the read model lagged)")
		b.reloadUntil("the unlike shows", articleURL, unliked)
	}

	// The scroll view without script: a#more is a link to the next chunk.
	b.reloadUntil("the board lists 26 articles", "/boards/2?page=2", `document.querySelectorAll("ol#articles li.article").length == 6`)
	b.openOK("/boards/2/scroll")
	firstChunk := b.listedArticles()
	expect(b, "articles in the first chunk", len(firstChunk), 20)
	more := b.attr("a#more", "href")
	if len(firstChunk) == 0 || more != "/boards/2/scroll?after="+strings.TrimPrefix(firstChunk[len(firstChunk)-1].Href, "/articles/") {
		b.failf("a#more = %q, want /boards/2/scroll?after={the last article's id}", more)
	}
	b.followOK("more", "a#more")
	expect(b, "page after a#more", b.location(), more)
	next := b.listedArticles()
	expect(b, "articles in the second chunk", len(next), 6)
	expect(b, "a#more after the last chunk", b.count("a#more"), 0)
	if len(next) > 0 && len(firstChunk) > 0 && !newerID(firstChunk[len(firstChunk)-1].Href, next[0].Href) {
		b.failf("the second chunk starts with %s, not after %s", next[0].Href, firstChunk[len(firstChunk)-1].Href)
	}

	// Page numbers are links too.
	b.openOK("/boards/2")
	b.followOK("page 2", `nav#pages a:not(#prev-block):not(#next-block)`)
	expect(b, "articles on page 2", len(b.listedArticles()), 6)

	b.openOK(articleURL)
	b.followOK("delete the article", "form#delete-article button")
	expect(b, "page after deleting", b.location(), "/boards/2?notice=deleted")
	expect(b, "p#notice", b.count("p#notice"), 1)
	b.followOK("sign out", "form#signout button")
	expect(b, "a#nav-signin after signing out", b.count("a#nav-signin"), 1)
}

// TestBrowserFailures: a wrong password, another user's article, forged and cross-site posts, an unknown article,
// and the article-read service down or hung each get a friendly page with the real status.
func TestBrowserFailures(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	_, aliceToken := signUp(t, p, "alice")
	signUp(t, p, "bob")
	article := apiArticle(t, p, aliceToken, 1, "Alice's article", "Only alice may change this.")
	articleURL := "/articles/" + article
	stillThere := func(what string) {
		t.Helper()
		var a articleOut
		call(t, "GET", p.urls["article"]+"/v1/articles/"+article, nil, http.StatusOK, &a)
		if a.Title != "Alice's article" {
			t.Errorf("after %s the article is %+v", what, a)
		}
	}

	bob := newTab(t, "bob", p.urls["web"])
	bob.openOK("/signin")
	if status := bob.signInWith("bob", "not bob's password"); status != http.StatusUnauthorized {
		bob.failf("status %d for a wrong password, want 401", status)
	}
	if !strings.HasPrefix(bob.location(), "/signin") {
		bob.failf("after a wrong password the page is %s, want the sign-in page", bob.location())
	}
	if bob.text("p#form-error") == "" || bob.attr("p#form-error", "role") != "alert" {
		bob.failf("no p#form-error with role=alert after a wrong password")
	}
	expect(bob, "form#signin after a wrong password", bob.count("form#signin"), 1)
	expect(bob, "#nav-user after a wrong password", bob.count("#nav-user"), 0)
	bob.checkPage("the sign-in page with an error")

	bob.openOK("/signin?next=" + articleURL)
	if status := bob.signInWith("bob", "bob-password"); status != 200 {
		bob.fatalf("status %d after signing in, want 200", status)
	}
	expect(bob, "page after signing in", bob.location(), articleURL)
	expect(bob, "a#edit for bob", bob.count("a#edit"), 0)
	expect(bob, "form#delete-article for bob", bob.count("form#delete-article"), 0)

	checkError := func(b *tab, what string, resp *network.Response, status int) {
		t.Helper()
		b.step = what
		if int(resp.Status) != status {
			b.failf("status %d, want %d", resp.Status, status)
		}
		if resp.MimeType != "text/html" {
			b.failf("Content-Type %q, want text/html", resp.MimeType)
		}
		if b.text("main#error h1") == "" || b.text("main#error p") == "" {
			b.failf("no friendly main#error with an h1 and a p")
		}
		if body := eval[string](b, `document.body?.innerText.trim() ?? ""`); strings.HasPrefix(body, "{") || strings.Contains(body, "goroutine ") {
			b.failf("the page shows raw JSON or a stack: %.200s", body)
		}
		b.checkPage(what)
	}
	checkError(bob, "bob opens alice's edit page", bob.openResponse(articleURL+"/edit"), http.StatusForbidden)

	// A forged delete and a forged edit from bob's own page, with his cookie: not his to change.
	bob.openOK(articleURL)
	post := func(path, form string) int {
		return result(bob, "bob posts to "+path, chromedp.Evaluate[int](fmt.Sprintf(
			`fetch(%s, {method: "POST", body: new URLSearchParams(%s), redirect: "manual"}).then(r => r.status)`,
			js(path), js(form)), chromedp.EvalAwaitPromise))
	}
	expect(bob, "status of bob's forged delete", post(articleURL+"/delete", ""), http.StatusForbidden)
	expect(bob, "status of bob's forged edit", post(articleURL+"/edit", "title=bob+was+here&content=x"), http.StatusForbidden)
	stillThere("bob's forged posts")

	// Alice, signed in, visits another site whose page posts a form to the web: refused.
	alice := newTab(t, "alice", p.urls["web"])
	alice.openOK("/signin")
	if status := alice.signInWith("alice", "alice-password"); status != 200 {
		alice.fatalf("status %d after signing in, want 200", status)
	}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Win a prize</title><form id="f" method="post" action="%s/delete"></form>
<script>addEventListener("load", () => setTimeout(() => document.getElementById("f").submit(), 50))</script>`, p.urls["web"]+articleURL)
	}))
	defer evil.Close()
	alice.step = "a cross-site form posts to the delete"
	ctx, cancel := context.WithTimeout(alice.ctx, stepTimeout)
	responses := chromedp.Events(ctx, network.ResponseReceived)
	if err := chromedp.Do(ctx, chromedp.Navigate(evil.URL)); err != nil {
		alice.fatalf("open the other site: %v", err)
	}
	var crossSite *network.Response
	for ev, err := range responses {
		if err != nil {
			alice.fatalf("no answer to the cross-site post: %v", err)
		}
		if ev.Type == network.ResourceTypeDocument && ev.Response.URL == p.urls["web"]+articleURL+"/delete" {
			crossSite = ev.Response
			break
		}
	}
	cancel()
	alice.waitFor("the refusal shows", `location.href.startsWith(`+js(p.urls["web"])+`) && document.readyState != "loading"`)
	checkError(alice, "a cross-site form posts to the delete", crossSite, http.StatusForbidden)
	stillThere("the cross-site post")

	resp := bob.openResponse("/articles/999999999999999")
	checkError(bob, "an unknown article", resp, http.StatusNotFound)
	checkError(bob, "an unknown page", bob.openResponse("/no-such-page"), http.StatusNotFound)

	// The same delete from alice's own page goes through: the refusals above were not about alice.
	alice.openOK(articleURL)
	alice.followOK("alice deletes her article", "form#delete-article button")
	expect(alice, "page after deleting", alice.location(), "/boards/1?notice=deleted")

	// article-read down: nothing listens where the web looks for it.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	q := startWeb(t, "--article-read-origin", "http://"+deadAddr, "--request-timeout", "2s")
	reader := newTab(t, "reader", q.urls["web"])
	checkError(reader, "article-read refuses connections", reader.openResponse("/boards/1"), http.StatusServiceUnavailable)

	// article-read hung: it accepts connections and never answers.
	hung, err := net.Listen("tcp", deadAddr)
	if err != nil {
		t.Fatalf("listen again at %s: %v", deadAddr, err)
	}
	defer hung.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	checkError(reader, "article-read hangs", reader.openResponse("/boards/1"), http.StatusServiceUnavailable)
}

// TestBrowserMobile: on a phone's screen nothing is wider than the screen, the home, a board and an article with
// long words in it among the pages.
func TestBrowserMobile(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	_, token := signUp(t, p, "dana")
	long := strings.Repeat("Supercalifragilistic", 4) // one 80-letter word, wider than a phone
	article := apiArticle(t, p, token, 1, "Long: "+long, "Content with a long word: "+long+" and a long link https://example.com/"+long)
	if a := sendAs(t, bearer(token), "POST", p.urls["comment"]+"/v2/comments",
		map[string]any{"articleId": article, "content": "A comment with a long word: " + long}); a.status != http.StatusCreated {
		t.Fatalf("comment: %d %s", a.status, a.body)
	}
	b := newTab(t, "dana", p.urls["web"])
	b.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile,
		chromedp.EmulateTouch))
	b.openOK("/signin")
	if status := b.signInWith("dana", "dana-password"); status != 200 {
		b.fatalf("status %d after signing in, want 200", status)
	}
	pages := []struct{ path, ready string }{
		{"/", "true"},
		{"/boards/1", `document.querySelector('ol#articles a.title[href="/articles/` + article + `"]')`},
		{"/boards/1/scroll", `document.querySelector("ol#articles li.article")`},
		{"/articles/" + article, `document.querySelector("#comment-list li.comment")`},
		{"/boards/1/write", "true"},
		{"/hot", `document.querySelector("ol#hot li")`},
		{"/articles/1", `document.querySelector("main#error")`},
	}
	for _, pg := range pages {
		b.reloadUntil("open "+pg.path+" on a phone", pg.path, pg.ready)
		// A phone widens its layout to fit content wider than the screen, so the layout width itself must be the
		// screen's: anything wider shows as innerWidth above 390.
		inner, scroll := eval[int](b, `window.innerWidth`), eval[int](b, `document.documentElement.scrollWidth`)
		if inner != 390 || scroll > inner {
			wide := eval[[]string](b, `[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > 391)
				.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + e.className : ""))`)
			b.failf("%s is laid out %d px wide (scrolls %d) on a 390 px screen; wider than the screen: %v", pg.path, inner, scroll, wide)
		}
	}
}
