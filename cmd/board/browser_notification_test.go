package main

import (
	"fmt"
	"strings"
	"testing"
)

// markDocument marks the page open now, so that a later check can tell it was not reloaded.
func (b *tab) markDocument() {
	b.t.Helper()
	eval[bool](b, `(window.boardTestMark = true)`)
}

// bellCounts is a condition that the bell counts at least n unread on the page marked by markDocument, not reloaded
// since.
func bellCounts(n int) string {
	return fmt.Sprintf(`window.boardTestMark === true && (() => { const c = document.getElementById("bell-count");
		return c && !c.hidden && Number(c.textContent) >= %d })()`, n)
}

// TestBrowserNotifications is notifications as two people get them, in two browsers with JavaScript on: alice
// writes an article and comments on it; bob comments on it in his browser, and alice's bell counts it without a
// reload; on her inbox, bob's reply to her comment arrives on top, live; its link opens the reply in its thread;
// marking all read empties the bell.
func TestBrowserNotifications(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	alice := newTab(t, "alice", p.urls["web"])
	alice.signUpWith("alice")
	bob := newTab(t, "bob", p.urls["web"])
	bob.signUpWith("bob")
	expect(alice, "the bell", alice.attr("a#nav-bell", "href"), "/notifications")
	expect(alice, "the bell's count shown", eval[bool](alice, `document.getElementById("bell-count").hidden`), true)

	// alice writes an article and comments on it: nothing tells her of her own acts.
	title := "Where do you keep your notes?"
	alice.openOK("/boards/1/write")
	alice.fill("title", "#title", title)
	alice.fill("content", "#content", "Paper, an app, plain files?")
	articleURL, _ := alice.publish()
	alice.fill("write a comment", "#comment-content", "Plain files, in git.")
	alice.click("post the comment", "#comment-form button")
	own := alice.waitComment("her comment shows", "Plain files, in git.")

	// bob comments in his browser; alice's page counts it without a reload.
	alice.openOK("/")
	alice.markDocument()
	bob.reloadUntil("the article reaches bob", articleURL, `document.getElementById("comment-form")`)
	bob.fill("write a comment", "#comment-content", "A paper notebook, always.")
	bob.click("post the comment", "#comment-form button")
	bob.waitComment("bob's comment shows", "A paper notebook, always.")
	alice.waitFor("alice's bell counts bob's comment without a reload", bellCounts(1))
	expect(alice, "the bell's count", alice.text("#bell-count"), "1")
	expect(alice, "the bell's label", alice.attr("a#nav-bell", "aria-label"), "Notifications, 1 unread")

	// Her inbox says who did what, and takes bob's reply to her comment on top as it comes.
	alice.followOK("open the inbox", "a#nav-bell")
	expect(alice, "inbox page", alice.location(), "/notifications")
	alice.checkPage("the inbox")
	first := "ol#inbox > li:first-child"
	expect(alice, "the first notification's kind", alice.attr(first, "data-kind"), "article-comment")
	expect(alice, "unread", alice.attr(first, "class"), "notification unread")
	if got := alice.text(first + " p.what"); !strings.Contains(got, "bob commented on your article "+title) {
		alice.failf("the notification says %q", got)
	}
	alice.markDocument()
	reply := bob.replyTo(own.ID, "Paper for me, but files sound tidy.", false)
	alice.waitFor("bob's reply arrives on the inbox without a reload",
		`window.boardTestMark === true && document.querySelector("ol#inbox > li:first-child")?.dataset.kind === "comment-reply"`)
	alice.waitFor("the bell counts the reply", bellCounts(2))
	if got := alice.text(first + " p.what"); !strings.Contains(got, "bob replied to your comment on "+title) {
		alice.failf("the reply's notification says %q", got)
	}
	link := alice.attr(first+" a.target", "href")
	expect(alice, "the reply's link", link, articleURL+"#"+reply.ID)

	// The link opens the reply in its thread.
	alice.followOK("follow the link to the reply", first+" a.target")
	expect(alice, "the page of the link", alice.location(), link)
	expect(alice, "the reply at the anchor", alice.text("#"+reply.ID+" .comment-content"), "Paper for me, but files sound tidy.")

	// Marked all read, the bell is empty and the inbox plain.
	alice.openOK("/notifications")
	alice.followOK("mark all read", "form#read-all button")
	expect(alice, "page after marking all read", alice.location(), "/notifications?notice=allread")
	alice.waitFor("the bell is empty", `document.getElementById("bell-count").hidden`)
	expect(alice, "unread notifications", alice.count("ol#inbox > li.unread"), 0)
}
