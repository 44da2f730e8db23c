package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"board/internal/auth"

	"github.com/chromedp/chromedp"
)

// choose picks value in the <select> sel.
func (b *tab) choose(step, sel, value string) {
	b.t.Helper()
	b.do(step, chromedp.SetValue(chromedp.CSS(sel), value))
}

// makeModerator runs `board user grant` beside the program, as an operator would: the user signs in as a
// moderator from then on.
// waitBanned waits until the services have the user's ban (banned) or its lift: a write of theirs that only a ban
// refuses (a like of an article that does not exist: 404 otherwise) says which.
func waitBanned(t *testing.T, p *program, userID int64, banned bool) {
	t.Helper()
	id := strconv.FormatInt(userID, 10)
	token := minterOf(t, p).token(t, auth.Principal{UserID: userID, Role: auth.RoleUser})
	eventually(t, func() string {
		a := sendAs(t, bearer(token), "POST", p.urls["like"]+"/v1/article-likes/articles/1/users/"+id, nil)
		if (a.code() == "BANNED") != banned {
			return fmt.Sprintf("user %s's write: %d %s, want banned %v", id, a.status, a.body, banned)
		}
		return ""
	})
}

// apiComment writes a root comment on the article as the holder of token and returns its id.
func apiComment(t *testing.T, p *program, token, article, content string) string {
	t.Helper()
	a := sendAs(t, bearer(token), "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": article, "content": content})
	var c struct{ CommentID string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &c) != nil {
		t.Fatalf("comment: %d %s", a.status, a.body)
	}
	return c.CommentID
}

// TestBrowserModeration is moderation as its people do it, with JavaScript on: a reader reports an article and a
// comment, a moderator removes the article from the queue and dismisses the comment's report, the public log shows
// it, the reader sees the reason in the article's place and its writer the article marked hidden; the moderator
// locks and pins an article, and bans its writer, whose next write and sign-in say so, and lifts the ban.
func TestBrowserModeration(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	bobID, bobToken := signUp(t, p, "bob")
	_, aliceToken := signUp(t, p, "alice")
	signUp(t, p, "mod")
	grant(t, p, "mod", "moderator")
	spam := apiArticle(t, p, bobToken, 1, "Cheap watches, best prices", "Visit my shop for watches.")
	question := apiArticle(t, p, bobToken, 1, "A fair question", "Is anyone here?")
	bump := apiComment(t, p, bobToken, question, "Bump.")
	spamURL, questionURL := "/articles/"+spam, "/articles/"+question

	// alice reports the article, twice, and the comment.
	alice := newTab(t, "alice", p.urls["web"])
	alice.openOK("/signin?next=" + spamURL)
	if status := alice.signInWith("alice", "alice-password"); status != 200 {
		alice.fatalf("status %d after signing in, want 200", status)
	}
	report := "#report-article-" + spam
	alice.click("open the report form", report+" summary")
	alice.checkPage("an article with its report form open")
	alice.choose("choose spam", report+" select", "spam")
	alice.fill("say why", report+" textarea", "Advertising, not a post.")
	if status := alice.follow("send the report", report+" button[type=submit]"); status != 200 {
		alice.fatalf("status %d after reporting, want 200", status)
	}
	expect(alice, "page after reporting", alice.location(), spamURL+"?notice=reported")
	if !strings.Contains(alice.text("p#notice"), "report was sent") {
		alice.failf("p#notice = %q after reporting", alice.text("p#notice"))
	}
	alice.click("open the report form again", report+" summary")
	alice.choose("choose abuse", report+" select", "abuse")
	alice.follow("report again", report+" button[type=submit]")
	expect(alice, "page after reporting again", alice.location(), spamURL+"?notice=alreadyreported")

	alice.openOK(questionURL)
	commentReport := "#report-comment-" + bump
	alice.click("open the comment's report form", commentReport+" summary")
	alice.choose("choose off-topic", commentReport+" select", "off-topic")
	alice.follow("report the comment", commentReport+" button[type=submit]")
	expect(alice, "page after reporting the comment", alice.location(), questionURL+"?notice=reported#c-"+bump)

	// The moderator's queue has both; the article is removed, the comment's report dismissed.
	mod := newTab(t, "mod", p.urls["web"])
	mod.openOK("/signin")
	if status := mod.signInWith("mod", "mod-password"); status != 200 {
		mod.fatalf("status %d after signing in, want 200", status)
	}
	mod.followOK("open the queue", "a#nav-reports")
	expect(mod, "queue page", mod.location(), "/moderation/reports")
	mod.checkPage("the queue")
	row := "#r-article-" + spam
	expect(mod, "the reported article in the queue", mod.count(row), 1)
	expect(mod, "its report count", mod.text(row+" .report-count"), "1")
	expect(mod, "its reasons", mod.text(row+" .reasons"), "Spam 1")
	expect(mod, "its writer", mod.text(row+" .writer"), "bob")
	expect(mod, "its link", mod.attr(row+" a.excerpt", "href"), spamURL)
	expect(mod, "the reported comment in the queue", mod.count("#r-comment-"+bump), 1)
	reason := "Advertising is not allowed here."
	mod.fill("the removal's reason", "#remove-reason-article-"+spam, reason)
	if status := mod.follow("remove the article", row+" .remove-form button"); status != 200 {
		mod.fatalf("status %d after removing, want 200", status)
	}
	expect(mod, "page after removing", mod.location(), "/moderation/reports?notice=removed")
	expect(mod, "the removed article in the queue", mod.count(row), 0)
	mod.follow("dismiss the comment's report", "#r-comment-"+bump+" .dismiss-form button")
	expect(mod, "page after dismissing", mod.location(), "/moderation/reports?notice=dismissed")
	expect(mod, "p#empty in the queue", mod.count("p#empty"), 1)

	// The public log shows the removal, by whom and why, and never who reported.
	reader := newTab(t, "reader", p.urls["web"])
	reader.openOK("/")
	reader.followOK("open the log", "a#nav-modlog")
	reader.checkPage("the log")
	removal := `ol#modlog li.log-entry[data-action="remove"]`
	expect(reader, "removals in the log", reader.count(removal), 1)
	expect(reader, "the removal's target", reader.attr(removal+" a.log-target", "href"), spamURL)
	expect(reader, "the removal's moderator", reader.text(removal+" .log-moderator"), "mod")
	expect(reader, "the removal's reason", reader.text(removal+" .log-reason"), reason)
	expect(reader, "the newest entry", reader.attr("ol#modlog li.log-entry", "data-action"), "dismiss")
	if body := eval[string](reader, `document.body.innerText`); strings.Contains(body, "alice") {
		reader.failf("the log names the reporter:\n%s", body)
	}

	// Readers see the reason in its place; its writer sees it too, marked.
	alice.reloadUntil("the removal shows", spamURL, `document.querySelector("#hidden-reason")?.textContent.includes(`+js(reason)+`)`)
	expect(alice, "#article-content of a removed article", alice.count("#article-content"), 0)
	expect(alice, "a report form on a removed article", alice.count(report), 0)
	bob := newTab(t, "bob", p.urls["web"])
	bob.openOK("/signin?next=" + spamURL)
	if status := bob.signInWith("bob", "bob-password"); status != 200 {
		bob.fatalf("status %d after signing in, want 200", status)
	}
	bob.checkPage("a removed article seen by its writer")
	expect(bob, "#hidden-note for the writer", bob.count("#hidden-note"), 1)
	expect(bob, "#article-content for the writer", bob.text("#article-content"), "Visit my shop for watches.")
	expect(bob, "the title for the writer", bob.text("h1#article-title"), "Cheap watches, best prices")

	// Lock and pin.
	mod.openOK(questionURL)
	expect(mod, "#lock-button", mod.text("#lock-button"), "Lock")
	mod.follow("lock", "#lock-button")
	expect(mod, "page after locking", mod.location(), questionURL+"?notice=locked")
	mod.follow("pin", "#pin-button")
	expect(mod, "page after pinning", mod.location(), questionURL+"?notice=pinned")
	mod.reloadUntil("the moderator sees the lock", questionURL, `document.querySelector("#lock-button")?.textContent.trim() == "Unlock" &&
		document.querySelector("#article-locked") && document.querySelector("#comment-form")`)
	alice.reloadUntil("alice sees the lock", questionURL, `document.querySelector("#locked") && !document.querySelector("#comment-form")`)
	expect(alice, "reply forms on a locked article", alice.count("details.reply"), 0)
	alice.reloadUntil("the pin shows on the board", "/boards/1", `(() => { const first = document.querySelector("ol#articles li.article");
		return first?.querySelector(".badge.pinned") && first.querySelector("a.title")?.getAttribute("href") == `+js(questionURL)+`; })()`)

	// Ban bob for 7 days: his writes and his sign-in say so.
	bobURL := "/users/" + strconv.FormatInt(bobID, 10)
	mod.openOK(bobURL)
	mod.checkPage("a user's page for a moderator")
	expect(mod, "h1#user-name", mod.text("h1#user-name"), "bob")
	expect(mod, "#not-banned", mod.count("#not-banned"), 1)
	mod.fill("the ban's reason", "#ban-reason", "Spam")
	mod.choose("7 days", "#ban-duration", "7d")
	if status := mod.follow("ban bob", "#ban-form button"); status != 200 {
		mod.fatalf("status %d after banning, want 200", status)
	}
	expect(mod, "page after banning", mod.location(), bobURL+"?notice=banned")
	if ban := mod.text("#ban"); !strings.HasPrefix(ban, "Banned until ") || !strings.HasSuffix(ban, ": Spam") {
		mod.failf("#ban = %q", ban)
	}
	waitBanned(t, p, bobID, true)
	bob.openOK("/boards/1/write")
	bob.fill("title", "#title", "Still posting")
	bob.fill("content", "#content", "Am I banned?")
	if status := bob.follow("write while banned", "#article-form button[type=submit]"); status != http.StatusForbidden {
		bob.failf("status %d for a banned writer's article, want 403", status)
	}
	if msg := bob.text("p#form-error"); !strings.HasPrefix(msg, "You are banned until ") || !strings.HasSuffix(msg, ": Spam.") {
		bob.failf("p#form-error = %q, want the ban's end and reason", msg)
	}
	expect(bob, "the kept title", eval[string](bob, `document.querySelector("#title")?.value ?? ""`), "Still posting")
	bob.followOK("sign out", "form#signout button")
	bob.openOK("/signin")
	if status := bob.signInWith("bob", "bob-password"); status != http.StatusForbidden {
		bob.failf("status %d for a banned sign-in, want 403", status)
	}
	if msg := bob.text("p#form-error"); !strings.HasPrefix(msg, "You are banned until ") {
		bob.failf("p#form-error = %q after a banned sign-in", msg)
	}

	// Unban: bob signs in again.
	mod.follow("unban bob", "#unban-form button")
	expect(mod, "page after unbanning", mod.location(), bobURL+"?notice=unbanned")
	expect(mod, "#not-banned after unbanning", mod.count("#not-banned"), 1)
	waitBanned(t, p, bobID, false)
	bob.openOK("/signin")
	if status := bob.signInWith("bob", "bob-password"); status != 200 {
		bob.failf("status %d signing in after the unban, want 200", status)
	}
	reader.openOK("/modlog")
	for _, action := range []string{"lock", "pin", "ban", "unban"} {
		expect(reader, action+" entries in the log", reader.count(`ol#modlog li.log-entry[data-action="`+action+`"]`), 1)
	}

	// On a phone's screen, nothing of moderation's pages is wider than the screen.
	// A report after the dismissal is a new one: the queue has something to lay out.
	if a := sendAs(t, bearer(aliceToken), "POST", p.urls["moderation"]+"/v1/reports",
		map[string]any{"targetType": "comment", "targetId": bump, "reason": "spam"}); a.status != http.StatusCreated {
		t.Fatalf("report the comment again: %d %s", a.status, a.body)
	}
	mod.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	for _, path := range []string{"/moderation/reports", bobURL, "/modlog", spamURL, questionURL} {
		mod.openOK(path)
		if inner, scroll := eval[int](mod, `window.innerWidth`), eval[int](mod, `document.documentElement.scrollWidth`); inner != 390 || scroll > inner {
			mod.failf("%s is laid out %d px wide (scrolls %d) on a 390 px screen", path, inner, scroll)
		}
	}
}

// TestWebScreenshotsModeration makes the screenshots of moderation's pages for docs/web.md, like TestWebScreenshots
// (whose comment has the command; `-run TestWebScreenshots` runs both).
func TestWebScreenshotsModeration(t *testing.T) {
	t.Parallel()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		t.Skip("set " + screenshotsEnv + "=docs/screenshots to write the documentation's screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startProgram(t, testFlags(t, t.TempDir()))
	tokens := map[string]string{}
	ids := map[string]int64{}
	for _, name := range []string{"alice", "bob", "carol", "dan", "watchdeals", "mia"} {
		ids[name], tokens[name] = signUp(t, p, name)
	}
	grant(t, p, "mia", "moderator")
	tokens["mia"] = signIn(t, p, "mia")
	moderation := func(token, method, path string, body any, want int) {
		t.Helper()
		if a := sendAs(t, bearer(token), method, p.urls["moderation"]+path, body); a.status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, a.status, a.body, want)
		}
	}
	reportAs := func(name, targetType, target, reason, text string) {
		t.Helper()
		body := map[string]any{"targetType": targetType, "targetId": target, "reason": reason}
		if text != "" {
			body["text"] = text
		}
		moderation(tokens[name], "POST", "/v1/reports", body, http.StatusCreated)
	}

	rules := apiArticle(t, p, tokens["mia"], 1, "Board rules: be kind, stay on topic, no ads",
		"Moderators remove spam and abuse. Use the Report button under anything that breaks these rules.")
	watches := apiArticle(t, p, tokens["watchdeals"], 1, "Cheap watches, best prices, click here", "Visit my shop for watches.")
	lenses := apiArticle(t, p, tokens["watchdeals"], 1, "Lenses half price today only", "Limited offer, see my shop.")
	hike := apiArticle(t, p, tokens["dan"], 1, "Weekend hike: the ridge trail after the rain",
		"Muddy but worth it. The view from the top was clear all the way to the sea.")
	offTopic := apiComment(t, p, tokens["bob"], hike, "Anyone selling a used bike? Message me.")
	apiComment(t, p, tokens["carol"], hike, "Thanks for the photos!")
	rude := apiComment(t, p, tokens["dan"], rules, "These rules are pointless.")

	for _, name := range []string{"alice", "bob", "carol", "dan"} {
		reportAs(name, "article", lenses, "spam", "")
	}
	reportAs("alice", "comment", offTopic, "off-topic", "")
	reportAs("carol", "comment", offTopic, "other", "Selling things belongs on the market board.")
	reportAs("bob", "comment", rude, "abuse", "")
	reportAs("alice", "article", watches, "spam", "")
	reportAs("carol", "article", watches, "spam", "")
	moderation(tokens["mia"], "POST", "/v1/reports/resolutions",
		map[string]any{"targetType": "article", "targetId": watches, "action": "remove", "reason": "Advertising is not allowed on this board."}, http.StatusOK)
	moderation(tokens["mia"], "PUT", "/v1/articles/"+rules+"/pin", nil, http.StatusOK)
	moderation(tokens["mia"], "PUT", "/v1/articles/"+rules+"/lock", nil, http.StatusOK)
	until := time.Now().Add(7 * 24 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	moderation(tokens["mia"], "PUT", fmt.Sprintf("/v1/bans/%d", ids["watchdeals"]), map[string]any{"reason": "Spam: ads for a shop", "until": until}, http.StatusOK)

	for _, screen := range []struct {
		name     string
		viewport chromedp.Action[chromedp.Void]
	}{
		{"desktop", chromedp.EmulateViewport(1280, 900)},
		{"mobile", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)},
	} {
		signedIn := func(name string) *tab {
			b := newTab(t, name+"-"+screen.name, p.urls["web"])
			b.do("the screen", screen.viewport)
			b.openOK("/signin")
			if status := b.signInWith(name, name+"-password"); status != 200 {
				b.fatalf("status %d after signing in, want 200", status)
			}
			return b
		}
		alice := signedIn("alice")
		alice.openOK("/articles/" + hike)
		alice.click("open the report form", "#report-comment-"+offTopic+" summary")
		shoot(t, alice, filepath.Join(dir, "report-"+screen.name+".png"))
		alice.reloadUntil("the lock and pin show", "/articles/"+rules, `document.querySelector("#locked") && document.querySelector("#article-pinned")`)
		shoot(t, alice, filepath.Join(dir, "locked-"+screen.name+".png"))

		// Its writer is banned, so a moderator shows what a writer would see of their removed article.
		mia := signedIn("mia")
		mia.reloadUntil("the removal shows", "/articles/"+watches, `document.querySelector("#hidden-note")`)
		shoot(t, mia, filepath.Join(dir, "removed-"+screen.name+".png"))
		mia.openOK("/moderation/reports")
		shoot(t, mia, filepath.Join(dir, "queue-"+screen.name+".png"))
		mia.openOK(fmt.Sprintf("/users/%d", ids["watchdeals"]))
		shoot(t, mia, filepath.Join(dir, "user-"+screen.name+".png"))
		mia.openOK("/modlog")
		shoot(t, mia, filepath.Join(dir, "modlog-"+screen.name+".png"))
	}
}
