package main

import (
	"strings"
	"testing"
)

// TestBrowserMarkdown writes an article and a comment in Markdown through the web and reads them as a browser shows
// them: rendered, with nothing of the source's raw HTML live, external links marked, images from elsewhere as
// links, a newline in a paragraph a line break; the edit form gives back the source.
func TestBrowserMarkdown(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	signUp(t, p, "dana")
	b := newTab(t, "dana", p.urls["web"])
	b.openOK("/boards/1/write")
	if status := b.signInWith("dana", "dana-password"); status != 200 {
		b.fatalf("status %d after signing in, want 200", status)
	}

	content := "**Bold** and ~~struck~~ with [a link](https://example.com).\nSame paragraph, next line.\n\n" +
		"- one\n- two\n\n- [x] done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n" +
		"![a picture](https://example.com/p.png) <script>alert(1)</script> <img src=x onerror=alert(1)>"
	b.fill("title", "#title", "Markdown")
	b.fill("content", "#content", content)
	articleURL, _ := b.publish()
	b.checkPage("an article in Markdown")
	expect(b, "bold", b.text("#article-content strong"), "Bold")
	expect(b, "struck", b.text("#article-content del"), "struck")
	expect(b, "list items", b.count("#article-content ul li"), 3)
	expect(b, "table cells", b.count("#article-content td"), 2)
	expect(b, "the checkbox is disabled", eval[bool](b, `document.querySelector("#article-content input[type=checkbox]")?.disabled === true`), true)
	expect(b, "the external link's rel", b.attr(`#article-content a[href="https://example.com"]`, "rel"), "nofollow ugc noopener")
	expect(b, "images", b.count("#article-content img"), 0)
	expect(b, "the picture as a link", b.text(`#article-content a[href="https://example.com/p.png"]`), "a picture")
	expect(b, "scripts", b.count("#article-content script"), 0)
	if got := b.text("#article-content"); !strings.Contains(got, "<script>alert(1)</script> <img src=x onerror=alert(1)>") {
		b.failf("#article-content = %q, want the raw HTML shown as typed", got)
	}
	// A newline inside a paragraph shows as a line break: the paragraph is two lines high.
	lines := eval[float64](b, `(() => { const p = document.querySelector("#article-content p");
		return p.getBoundingClientRect().height / parseFloat(getComputedStyle(p).lineHeight); })()`)
	if lines < 1.5 || lines > 2.5 {
		b.failf("the first paragraph is %.1f lines high, want 2", lines)
	}

	b.fill("write a comment", "#comment-content", "*emphasis* and `code`")
	if status := b.follow("post the comment", "#comment-form button"); status != 200 {
		b.fatalf("status %d after commenting, want 200", status)
	}
	b.waitComment("the comment shows", "emphasis and code")
	expect(b, "the comment's emphasis", b.text(".comment-content em"), "emphasis")
	expect(b, "the comment's code", b.text(".comment-content code"), "code")

	b.followOK("open the edit form", "a#edit")
	expect(b, "the edit form holds the source", eval[string](b, `document.querySelector("#content")?.value ?? ""`), content)
	b.fill("new content", "#content", "# Edited")
	if status := b.follow("save the edit", "#article-form button[type=submit]"); status != 200 {
		b.fatalf("status %d after saving, want 200", status)
	}
	b.reloadUntilText("the edit shows", articleURL, "#article-content h1", "Edited")
}
