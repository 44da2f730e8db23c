package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// pressEnter presses Enter as a keyboard does: a key down carrying its text, which the page may prevent. chromedp's
// KeyEvent sends the text in an event of its own, which inserts a line break whatever the page did with the key.
func pressEnter() chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		key := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter",
			WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Text: "\r", UnmodifiedText: "\r"}
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, key); err != nil {
			return chromedp.Void{}, err
		}
		key.Type, key.Text, key.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, key)
		return chromedp.Void{}, err
	}
}

// TestBrowserFollowing is issue 40's test of record, following as a new member does it, with JavaScript on, against
// every real service: dana signs up, watches a board, opens eli's article, likes his comment and bookmarks it and
// the article, mentions him by picking his name from the autocomplete (the mention is a link to his page), reads the
// thread newest first and most liked first and the board by its top articles, finds her bookmarks and removes one,
// and blocks eli: his article leaves her board and his comment is folded; without script, she mutes the article,
// unblocks eli and unlikes his comment with the same buttons as forms. With BOARD_WEB_SCREENSHOTS set it
// photographs the thread, the autocomplete, the sorted board, the bookmarks and the folded comment for docs/web.md.
func TestBrowserFollowing(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	shots := os.Getenv(screenshotsEnv)
	eliID, eli := signUp(t, p, "eli")
	elenaID, elena := signUp(t, p, "elena") // a second name that starts as his, for the autocomplete to offer
	title := "Which trail for a first long walk?"
	article := apiArticle(t, p, eli, 1, title, "I would start with the ridge path: water every 5 km.")
	first := apiComment(t, p, eli, article, "The ridge path is closed in winter, mind.")
	articleURL := "/articles/" + article
	// Two more on the board, the older the better liked, for the board's top sort to put first.
	boots := apiArticle(t, p, elena, 1, "Boots that last a season", "Resoled twice, still dry.")
	apiArticle(t, p, elena, 1, "Maps or an app?", "Paper does not run out of battery.")
	likeAs(t, p, elena, boots, elenaID)
	likeAs(t, p, eli, boots, eliID)

	b := newTab(t, "dana", p.urls["web"])
	if shots != "" {
		b.do("the screen", chromedp.EmulateViewport(1280, 900))
	}
	b.signUpWith("dana")

	// She watches the board: the button swaps in place, and the service keeps it.
	b.openOK("/boards/1")
	b.checkPage("a board with its sorts and watch buttons")
	expect(b, "the level before", b.attr("#watch-normal", "aria-pressed"), "true")
	b.click("watch the board", "#watch-watching")
	b.waitFor("the board is watched", `document.querySelector("#watch-watching")?.getAttribute("aria-pressed") === "true"`)
	b.openOK("/boards/1")
	expect(b, "the board's watch after a reload", b.attr("#watch-watching", "aria-pressed"), "true")

	// eli's article and comment reach the read side; she likes the comment and bookmarks it and the article.
	comment := "li#c-" + first
	b.reloadUntil("eli's article and comment show", articleURL, `document.querySelector("`+comment+` .comment-content")`)
	b.checkPage("an article with following's buttons")
	b.click("like eli's comment", comment+" form.comment-like button")
	b.waitFor("the comment is liked", `document.querySelector("`+comment+` form.comment-like button")?.getAttribute("aria-pressed") === "true"`)
	expect(b, "the comment's likes", b.text(comment+" .comment-like-count"), "1")
	b.click("bookmark the article", "#bookmark-button")
	b.waitFor("the article is bookmarked", `document.querySelector("#bookmark-button")?.getAttribute("aria-pressed") === "true"`)
	b.click("bookmark eli's comment", comment+" form.bookmark button")
	b.waitFor("the comment is bookmarked", `document.querySelector("`+comment+` form.bookmark button")?.textContent.trim() === "Bookmarked"`)
	b.click("watch the article", "#watch-watching")
	b.waitFor("the article is watched", `document.querySelector("#watch-watching")?.getAttribute("aria-pressed") === "true"`)

	// She mentions eli, picking his name from the names offered as she types.
	b.fill("start a mention", "#comment-content", "Thanks @el")
	b.waitFor("names are offered", `document.querySelectorAll("ul.mentions:not([hidden]) li[role=option]").length === 2`)
	expect(b, "the names offered", eval[string](b, `[...document.querySelectorAll("ul.mentions li")].map(li => li.textContent).join(" ")`),
		"@elena @eli")
	b.do("move to eli", chromedp.KeyEvent(kb.ArrowDown))
	expect(b, "the option chosen", b.attr("#comment-content", "aria-activedescendant"), b.attr("ul.mentions li:nth-child(2)", "id"))
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "mention-desktop.png"))
	}
	b.do("pick eli", pressEnter())
	expect(b, "the text after picking", eval[string](b, `document.querySelector("#comment-content").value`), "Thanks @eli ")
	expect(b, "the names after picking", b.count("ul.mentions:not([hidden])"), 0)
	b.do("type on", chromedp.SendKeys(chromedp.CSS("#comment-content"), "for the warning."))
	b.followOK("post the comment", "#comment-form button[type=submit]")
	mine := b.waitComment("her comment shows", "Thanks @eli for the warning.")
	mention := "li#" + mine.ID + ` .comment-content a[href="/u/eli"]`
	expect(b, "the mention's link", b.text(mention), "@eli")

	// The thread newest first, then most liked first.
	b.followOK("read the thread newest first", `#comment-sorts a[data-sort="newest"]`)
	expect(b, "the address", b.location(), articleURL+"?sort=newest#comments")
	expect(b, "the sort in force", b.text(`#comment-sorts [aria-current]`), "Newest first")
	expect(b, "the first comment, newest first", b.attr("#comment-list > li:first-child", "id"), mine.ID)
	b.followOK("read the thread most liked first", `#comment-sorts a[data-sort="top"]`)
	b.reloadUntil("eli's liked comment comes first", articleURL+"?sort=top",
		`document.querySelector("#comment-list > li:first-child")?.id === "c-`+first+`"`)
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "following-desktop.png"))
	}

	// The mention goes to eli's page.
	b.followOK("follow the mention", mention)
	expect(b, "the mention's page", b.path(), "/users/"+strconv.FormatInt(eliID, 10))

	// The board by its top articles, in pages and in the endless scroll.
	b.openOK("/boards/1")
	b.followOK("sort the board by all-time likes", `#board-sorts a[data-sort="top-all"]`)
	expect(b, "the board's address", b.location(), "/boards/1?sort=top-all")
	expect(b, "the board's sort in force", b.text(`#board-sorts [aria-current]`), "Top of all time")
	b.reloadUntil("the best liked article comes first", "/boards/1?sort=top-all",
		`document.querySelector("ol#articles li.article .like-count")?.textContent === "2" && document.querySelectorAll("ol#articles li.article").length === 3`)
	listed := b.listedArticles()
	b.checkListed(listed)
	expect(b, "the first article of the top", listed[0].Title, "Boots that last a season")
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "sorted-desktop.png"))
	}
	b.followOK("the endless scroll in the sort", "a#scroll-view")
	expect(b, "the scroll's address", b.location(), "/boards/1/scroll?sort=top-all")
	expect(b, "the scroll's sort in force", b.text(`#board-sorts [aria-current]`), "Top of all time")

	// Her bookmarks, newest first; she removes the article's.
	b.followOK("open the bookmarks", "a#nav-bookmarks")
	b.checkPage("the bookmarks")
	expect(b, "bookmarks listed", b.count("ol#bookmarks > li"), 2)
	expect(b, "the newest bookmark", b.attr("ol#bookmarks > li:first-child a.title", "href"), articleURL+"#c-"+first)
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "bookmarks-desktop.png"))
	}
	b.followOK("remove the article's bookmark", "#b-article-"+article+" form.remove-bookmark button")
	expect(b, "bookmarks left", b.count("ol#bookmarks > li"), 1)
	expect(b, "the notice", b.text("#notice"), "The bookmark was removed.")

	// She blocks eli: his article leaves her board, his comment is folded, and she can unfold it.
	b.openOK("/users/" + strconv.FormatInt(eliID, 10))
	b.followOK("block eli", "#block-form button")
	expect(b, "the page after blocking", b.location(), "/users/"+strconv.FormatInt(eliID, 10)+"?notice=blocked")
	expect(b, "the unblock button", b.attr("#block-form", "action"), "/users/"+strconv.FormatInt(eliID, 10)+"/unblock")
	b.openOK("/boards/1")
	for _, a := range b.listedArticles() {
		if a.Title == title {
			b.failf("eli's article is still on the board of the reader who blocked him")
		}
	}
	b.openOK(articleURL)
	expect(b, "the folded comment", b.text(comment+" > details.blocked > summary"), "Comment by a user you blocked")
	expect(b, "folded", eval[bool](b, `document.querySelector("`+comment+` > details.blocked").open`), false)
	expect(b, "her own comment is not folded", b.count("li#"+mine.ID+" > details.blocked"), 0)
	if shots != "" {
		shoot(t, b, filepath.Join(shots, "blocked-desktop.png"))
	}
	b.click("unfold it", comment+" > details.blocked > summary")
	expect(b, "unfolded", eval[bool](b, `document.querySelector("`+comment+` > details.blocked").open`), true)
	if got := eval[string](b, `document.querySelector("`+comment+` .comment-content").innerText`); !strings.Contains(got, "closed in winter") {
		b.failf("the unfolded comment says %q", got)
	}

	// Without script the buttons are forms that come back to the page, in its order.
	b.disableJavaScript()
	b.openOK(articleURL + "?sort=top")
	b.followOK("mute the article without script", "#watch-muted")
	expect(b, "the page after muting", b.location(), articleURL+"?sort=top#watch")
	expect(b, "muted", b.attr("#watch-muted", "aria-pressed"), "true")
	b.openOK("/users/" + strconv.FormatInt(eliID, 10))
	b.followOK("unblock eli without script", "#block-form button")
	b.reloadUntil("eli's comment unfolds", articleURL+"?sort=top",
		`document.querySelector("`+comment+`") && !document.querySelector("`+comment+` > details.blocked")`)
	b.followOK("unlike the comment without script", comment+" form.comment-like button")
	expect(b, "the page after unliking", b.location(), articleURL+"?sort=top#c-"+first)
	expect(b, "unliked", b.attr(comment+" form.comment-like button", "aria-pressed"), "false")
}
