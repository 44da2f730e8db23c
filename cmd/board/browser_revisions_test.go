package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// editComment edits comment id in place on the article page the tab is on, and follows the form back to it.
func (b *tab) editComment(id, content string) {
	b.t.Helper()
	b.typeCommentEdit(id, content)
	b.followOK("save the edit", "li#c-"+id+" form.edit-comment button[type=submit]")
}

// typeCommentEdit opens comment id's edit form in place and types content into it, without saving.
func (b *tab) typeCommentEdit(id, content string) {
	b.t.Helper()
	b.click("open the edit form", "li#c-"+id+" details.edit summary")
	b.checkPage("a comment with its edit form open")
	b.fill("the new content", "#edit-"+id, content)
}

// TestBrowserCommentHistory is an edit as its people make it: a writer rewords their comment from the
// article page, which then shows the new text marked edited, linking to its history, where the edit is a diff; a
// moderator's later edit is marked as theirs. With BOARD_WEB_SCREENSHOTS set it photographs the history for
// docs/web.md.
func TestBrowserCommentHistory(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	_, bobToken := signUp(t, p, "bob")
	signUp(t, p, "mod")
	grant(t, p, "mod", "moderator")
	article := apiArticle(t, p, bobToken, 1, "Foxes in the garden", "Seen this morning.")
	comment := apiComment(t, p, bobToken, article, "A quick fox jumped.")
	articleURL, item := "/articles/"+article, "li#c-"+comment

	bob := newTab(t, "bob", p.urls["web"])
	bob.openOK("/signin?next=" + articleURL)
	if status := bob.signInWith("bob", "bob-password"); status != 200 {
		bob.fatalf("status %d after signing in, want 200", status)
	}
	expect(bob, "edited marks before any edit", bob.count(item+" a.comment-edited"), 0)
	bob.editComment(comment, "The quick fox jumped.")
	expect(bob, "the page after the edit", bob.path(), articleURL)
	expect(bob, "the comment after the edit", bob.text(item+" .comment-content"), "The quick fox jumped.")
	bob.followOK("open the history", item+" a.comment-edited")
	expect(bob, "the history's address", bob.path(), articleURL+"/comments/"+comment+"/revisions")
	bob.checkPage("a comment's history")
	expect(bob, "the current text", bob.text("#current-content"), "The quick fox jumped.")
	expect(bob, "edits listed", bob.count("ol.edits li.edit"), 1)
	if del, ins := bob.text("li#r-1 del.diff-del"), bob.text("li#r-1 ins.diff-ins"); !strings.Contains(del, "A") || !strings.Contains(ins, "The") {
		bob.failf("the diff: removed %q, added %q; want A out and The in", del, ins)
	}
	expect(bob, "a writer's edit marked as a moderator's", bob.count("li#r-1 .moderator-edit"), 0)

	mod := newTab(t, "mod", p.urls["web"])
	mod.openOK("/signin?next=" + articleURL)
	if status := mod.signInWith("mod", "mod-password"); status != 200 {
		mod.fatalf("status %d after signing in, want 200", status)
	}
	mod.editComment(comment, "The quick brown fox jumped.")
	mod.followOK("open the history", item+" a.comment-edited")
	expect(mod, "edits listed", mod.count("ol.edits li.edit"), 2)
	expect(mod, "the moderator's edit marked", mod.count("li#r-2 .moderator-edit"), 1)
	if ins := mod.text("li#r-2 ins.diff-ins"); !strings.Contains(ins, "brown") {
		mod.failf("the moderator's diff adds %q, want brown", ins)
	}
	mod.checkPage("a history with a moderator's edit")
	if dir := os.Getenv(screenshotsEnv); dir != "" { // docs/web.md's picture of a history
		mod.do("the screen", chromedp.EmulateViewport(1280, 900))
		shoot(t, mod, filepath.Join(dir, "revisions-desktop.png"))
	}
}
