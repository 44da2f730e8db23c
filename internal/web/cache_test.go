package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"board/internal/auth"
)

// TestSignedOutPagesShared: a signed-out reader's board or article page is made once for everyone and kept less
// than a second, by the pages' clock.
func TestSignedOutPagesShared(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"/boards/1", "/articles/1"} {
		t.Run(target, func(t *testing.T) {
			f := newFakes(t)
			h := f.handler(t)
			first := get(t, h, target, "")
			if first.Code != http.StatusOK || !strings.Contains(first.Body.String(), "First post") {
				t.Fatalf("status %d:\n%s", first.Code, first.Body)
			}
			made := len(f.requests("article-read"))

			f.putArticle(&fakeArticle{ID: 1, Board: 1, Writer: 10, Title: "First post, edited", Content: "Hello, board.", Created: t0, Modified: t0})
			f.clock.advance(sharedPageTTL - time.Millisecond)
			w := get(t, h, target, "")
			if w.Body.String() != first.Body.String() || w.Header().Get("Server-Timing") != `cache;desc="hit"` {
				t.Errorf("within the second: not the page kept (Server-Timing %q):\n%s", w.Header().Get("Server-Timing"), w.Body)
			}
			if n := len(f.requests("article-read")); n != made {
				t.Errorf("within the second: article-read asked %d times, want %d", n, made)
			}

			f.clock.advance(time.Millisecond)
			w = get(t, h, target, "")
			if !strings.Contains(w.Body.String(), "First post, edited") {
				t.Errorf("a second on: the page kept is still shown:\n%s", w.Body)
			}
			if n := len(f.requests("article-read")); n != made+1 {
				t.Errorf("a second on: article-read asked %d times, want %d", n, made+1)
			}
		})
	}
}

// TestSignedInPagesNeverShared: a signed-in reader's page is made for them every time, and never shown to anyone
// else; a signed-out reader never gets a page made for a signed-in one.
func TestSignedInPagesNeverShared(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"/boards/1", "/articles/1"} {
		t.Run(target, func(t *testing.T) {
			f := newFakes(t)
			h := f.handler(t)
			alice := f.token(t, 10, auth.RoleUser)
			signedIn := func(step string) {
				t.Helper()
				before := len(f.requests("article-read"))
				w := get(t, h, target, alice)
				if !strings.Contains(w.Body.String(), `<span id="nav-user" class="who">alice</span>`) {
					t.Errorf("%s: alice's page does not show her:\n%s", step, w.Body)
				}
				if n := len(f.requests("article-read")); n != before+1 {
					t.Errorf("%s: alice's page asked article-read %d times, want once: not made for her", step, n-before)
				}
			}
			signedOut := func(step string) {
				t.Helper()
				w := get(t, h, target, "")
				if body := w.Body.String(); strings.Contains(body, `id="nav-user"`) || strings.Contains(body, `id="signout"`) ||
					!strings.Contains(body, `id="nav-signin"`) {
					t.Errorf("%s: the signed-out page shows a signed-in reader:\n%s", step, body)
				}
			}

			signedIn("first, alice")
			signedOut("then signed out")
			signedIn("alice again, with a signed-out page kept")
			signedIn("and again")
			signedOut("signed out again")
		})
	}
}

// TestABurstMakesOnePage: signed-out readers who ask for a page while it is being made wait for it, rather than
// each make it again.
func TestABurstMakesOnePage(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var asked atomic.Int32
		readHost := strings.TrimPrefix(f.servers["article-read"].URL, "http://")
		// The services answer in memory, so that a reader waiting on one is durably blocked for synctest.Wait.
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == readHost {
				asked.Add(1)
				<-release
			}
			return f.inMemory(r)
		})}
		h := f.handler(t, func(c *Config) { c.Client = client })

		const readers = 8
		pages := make([]*httptest.ResponseRecorder, readers)
		var wg sync.WaitGroup
		for i := range readers {
			wg.Go(func() { pages[i] = get(t, h, "/boards/1", "") })
		}
		synctest.Wait() // every reader waits: one on article-read, the others on its page
		if n := asked.Load(); n != 1 {
			t.Errorf("%d readers asked article-read for the page at once, want 1", n)
		}
		close(release)
		wg.Wait()
		for i, w := range pages {
			if w.Code != http.StatusOK || w.Body.String() != pages[0].Body.String() {
				t.Errorf("reader %d: status %d, a page other than the first reader's:\n%s", i, w.Code, w.Body)
			}
		}
	})
}
