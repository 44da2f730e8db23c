package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// selectText selects the first occurrence of text inside the element sel, as a reader's mouse would.
func (b *tab) selectText(sel, text string) {
	b.t.Helper()
	ok := eval[bool](b, fmt.Sprintf(`(() => {
		const root = document.querySelector(%s), walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
		for (let n = walker.nextNode(); n; n = walker.nextNode()) {
			const at = n.data.indexOf(%s);
			if (at < 0) continue;
			const range = document.createRange();
			range.setStart(n, at);
			range.setEnd(n, at + %d);
			getSelection().removeAllRanges();
			getSelection().addRange(range);
			return true;
		}
		return false; })()`, js(sel), js(text), len([]rune(text))))
	if !ok {
		b.fatalf("no %q in %s to select", text, sel)
	}
}

// TestBrowserQuotes: a reader quotes the article whole, a passage of a comment he selected, and a comment whole
// from the keyboard; each lands in the right form as a Markdown block quote linked to its source, and a reply with
// a quote is posted as written.
func TestBrowserQuotes(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	erin := newTab(t, "erin", p.urls["web"])
	erin.signUpWith("erin")
	erin.openOK("/boards/1/write")
	erin.fill("title", "#title", "Sourdough in winter")
	erin.fill("content", "#content", "My starter sleeps in the cold.")
	articleURL, _ := erin.publish()
	erin.fill("write a comment", "#comment-content", "Keep it by the oven. Feed it twice a day.")
	erin.click("post the comment", "#comment-form button")
	comment := erin.waitComment("her comment shows", "Keep it by the oven. Feed it twice a day.")

	frank := newTab(t, "frank", p.urls["web"])
	frank.signUpWith("frank")
	frank.reloadUntil("the comment reaches frank", articleURL, fmt.Sprintf(`document.getElementById(%s)`, js(comment.ID)))
	frank.checkPage("the article page with its quote buttons")
	articleQuote := `#article .actions button.quote`
	commentQuote := frank.markOwn(comment.ID, "button.quote", "quote-comment")
	expect(frank, "the article's quote button", frank.attr(articleQuote, "aria-label"), "Quote the article by erin")
	expect(frank, "the comment's quote button", frank.attr(commentQuote, "aria-label"), "Quote this comment by erin")

	// The article, nothing selected: all of it, into the article's comment form, which gets the focus.
	frank.click("quote the article", articleQuote)
	expect(frank, "the comment form after quoting the article", eval[string](frank, `document.getElementById("comment-content").value`),
		"> My starter sleeps in the cold.\n>\n> [— erin]("+articleURL+")\n\n")
	expect(frank, "the focus", eval[string](frank, `document.activeElement.id`), "comment-content")

	// A passage selected in the comment: only it, into the comment's own reply form, opened.
	frank.selectText("#"+comment.ID+" .comment-content", "Feed it twice a day.")
	frank.click("quote the selection", commentQuote)
	reply := frank.markOwn(comment.ID, "details.reply", "reply-form")
	expect(frank, "the reply form opened", eval[bool](frank, `document.querySelector(`+js(reply)+`).open`), true)
	quoted := "> Feed it twice a day.\n>\n> [— erin](" + articleURL + "#" + comment.ID + ")\n\n"
	expect(frank, "the reply form after quoting a selection", eval[string](frank, `document.querySelector(`+js(reply+" textarea")+`).value`), quoted)
	expect(frank, "the focus", eval[bool](frank, `document.activeElement === document.querySelector(`+js(reply+" textarea")+`)`), true)

	// From the keyboard, nothing selected: the whole comment, after what the form holds.
	eval[bool](frank, `(getSelection().removeAllRanges(), true)`)
	frank.do("focus the comment's quote button", chromedp.Focus(chromedp.CSS(commentQuote)))
	frank.do("press Enter", chromedp.KeyEvent(kb.Enter))
	whole := "> Keep it by the oven. Feed it twice a day.\n>\n> [— erin](" + articleURL + "#" + comment.ID + ")\n\n"
	expect(frank, "the reply form after quoting from the keyboard", eval[string](frank, `document.querySelector(`+js(reply+" textarea")+`).value`),
		strings.TrimRight(quoted, "\n")+"\n\n"+whole)

	// A reply with a quote is sent as written, and shows as two block quotes, each linked to the comment, above
	// the reply's own words.
	frank.do("write below the quote", chromedp.SendKeys(chromedp.CSS(reply+" textarea"), "Twice? Mine gets once."))
	frank.click("post the reply", reply+" button")
	source := js(articleURL + "#" + comment.ID)
	frank.waitFor("the reply with its quotes shows", `(() => { `+ownJS+`
		return [...document.querySelectorAll("#comment-list li.comment")].some(li => {
			const body = own(li, ".comment-content")[0];
			if (!body) return false;
			const quotes = [...body.querySelectorAll(":scope > blockquote")];
			const said = q => q.querySelector("p").textContent.trim();
			const links = q => [...q.querySelectorAll("a")].map(a => a.getAttribute("href"));
			return quotes.length == 2 && said(quotes[0]) == "Feed it twice a day." &&
				said(quotes[1]) == "Keep it by the oven. Feed it twice a day." &&
				quotes.every(q => links(q).length == 1 && links(q)[0] == `+source+`) &&
				body.lastElementChild.tagName == "P" && body.lastElementChild.textContent.trim() == "Twice? Mine gets once.";
		}); })()`)
}
