package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// bfcacheWatch collects why the browser did not restore a page from its back/forward cache.
type bfcacheWatch struct {
	mu      sync.Mutex
	reasons []string
}

func watchBFCache(b *tab) *bfcacheWatch {
	w := &bfcacheWatch{}
	events := chromedp.Events(b.ctx, page.BackForwardCacheNotUsed)
	b.console.Go(func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			w.mu.Lock()
			for _, e := range ev.NotRestoredExplanations {
				w.reasons = append(w.reasons, fmt.Sprintf("%s (%s)", e.Reason, e.Type))
			}
			w.mu.Unlock()
		}
	})
	return w
}

func (w *bfcacheWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.reasons
	w.reasons = nil
	return r
}

// watchStreams makes every page of the tab keep its newest EventSource in window.boardTestStream, so that a test
// can tell whether the page's notification stream is open.
func (b *tab) watchStreams() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.EventSource = class extends window.EventSource {
			constructor(...args) { super(...args); window.boardTestStream = this; } }`}); err != nil {
		b.t.Fatalf("watch the streams: %v", err)
	}
}

// leaveAndComeBack marks the page open now, opens path, and goes back as the back button does; it returns whether
// the page came back whole from the back/forward cache (its pageshow event said persisted, and it is the same
// document, not reloaded).
func (b *tab) leaveAndComeBack(path string) bool {
	b.t.Helper()
	eval[bool](b, `(window.boardTestMark = true, window.boardTestPersisted = null,
		addEventListener("pageshow", (e) => { window.boardTestPersisted = e.persisted }), true)`)
	here := b.location()
	b.openOK(path)
	eval[bool](b, `(history.back(), true)`)
	b.waitFor("back to "+here, fmt.Sprintf(`location.href.endsWith(%s) && document.readyState === "complete" &&
		(window.boardTestMark !== true || window.boardTestPersisted !== null)`, js(here)))
	return eval[bool](b, `window.boardTestMark === true && window.boardTestPersisted === true`)
}

// TestBrowserBackForwardCache: a signed-in page, with its notification stream open, is kept whole by the browser
// when its reader goes on to another page, and shown again at once by the back button, its stream open again; once
// the reader signs out, the back button shows no signed-in page.
func TestBrowserBackForwardCache(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	p := startWeb(t)
	dana := newTab(t, "dana", p.urls["web"])
	watch := watchBFCache(dana)
	dana.watchStreams()
	dana.signUpWith("dana")
	dana.openOK("/hot")
	streamOpen := `window.boardTestStream?.readyState === EventSource.OPEN`
	dana.waitFor("the notification stream is open", streamOpen)

	if !dana.leaveAndComeBack("/modlog") {
		dana.failf("the signed-in page was not restored from the back/forward cache: %v", watch.take())
	}
	if reasons := watch.take(); len(reasons) > 0 {
		dana.failf("the browser says it did not use its back/forward cache: %v", reasons)
	}
	expect(dana, "the reader on the restored page", dana.text("#nav-user"), "dana")
	dana.waitFor("the restored page's stream opens again", streamOpen)

	// Signed out, the back button brings back no signed-in page: neither /modlog, where she signed out, nor /hot
	// before it, which the browser has kept. (The page is opened anew: chromedp does not find the elements of a
	// restored page.)
	dana.openOK("/modlog")
	if status := dana.follow("sign out", "#signout button"); status != 200 {
		dana.fatalf("status %d after signing out, want 200", status)
	}
	for _, back := range []string{"/modlog", "/hot"} {
		eval[bool](dana, `(history.back(), true)`)
		dana.waitFor("back to "+back+" after signing out", fmt.Sprintf(`location.pathname === %s && document.readyState === "complete" &&
			!document.body.hidden && document.getElementById("nav-signin") !== null`, js(back)))
		if who := dana.text("#nav-user"); who != "" {
			dana.failf("%s after signing out shows %q signed in", back, who)
		}
		if !strings.Contains(dana.attr("#nav-signin", "href"), "/signin") {
			dana.failf("%s after signing out has no sign-in link", back)
		}
	}
}
