package web

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
	"board/internal/fault"
)

// fakeSessions holds users' token epochs; loading answers as a table that has not read the sessions yet.
type fakeSessions struct {
	mu      sync.Mutex
	loading bool
	epochs  map[int64]int64
}

func (f *fakeSessions) Ended(p auth.Principal) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loading {
		return false, fault.Unavailablef(nil, "STANDING_UNAVAILABLE", "loading")
	}
	return p.TokenEpoch < f.epochs[p.UserID], nil
}

func (f *fakeSessions) set(fn func()) { f.mu.Lock(); defer f.mu.Unlock(); fn() }

// TestEndedSession: once the reader's session has ended (their password changed since the cookie's token was
// signed), a page shows them signed out and clears the cookie, a form sends them to sign in, and an error page does
// not name them, though their token still verifies; a token of the new epoch is signed in. While the sessions are not
// read yet, the session goes on.
func TestEndedSession(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	sessions := &fakeSessions{epochs: map[int64]int64{}}
	h := f.handler(t, func(c *Config) { c.Sessions = sessions })
	old := f.token(t, 10, auth.RoleUser)
	signedIn := func(what string, w *http.Response, body string, want bool) {
		t.Helper()
		if got := strings.Contains(body, `<span id="nav-user" class="who">alice</span>`); got != want {
			t.Errorf("%s: signed in %v, want %v (status %d)\n%s", what, got, want, w.StatusCode, body)
		}
		var cleared bool
		for _, c := range w.Cookies() {
			cleared = cleared || (c.Name == sessionCookie && c.MaxAge < 0 && c.Value == "")
		}
		if cleared == want {
			t.Errorf("%s: cookie cleared %v: Set-Cookie %q", what, cleared, w.Header.Values("Set-Cookie"))
		}
	}
	w := get(t, h, "/", old)
	signedIn("before the password change", w.Result(), w.Body.String(), true)

	sessions.set(func() { sessions.epochs[10] = 1 })
	w = get(t, h, "/", old)
	signedIn("after the password change", w.Result(), w.Body.String(), false)
	if !strings.Contains(w.Body.String(), `id="nav-signin"`) {
		t.Errorf("the page offers no sign-in:\n%s", w.Body)
	}
	w = get(t, h, "/boards/1/write", old)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin?") {
		t.Errorf("a form of an ended session: %d Location %q, want 303 to sign in", w.Code, loc)
	}
	// An error page names the reader from the token already verified, but not once the session has ended.
	w = get(t, h, "/nope", old)
	if !strings.Contains(w.Body.String(), `<main id="error"`) || strings.Contains(w.Body.String(), `id="nav-user"`) {
		t.Errorf("the error page of an ended session: %d\n%s", w.Code, w.Body)
	}

	renewed, _, err := auth.Sign(f.key, auth.Principal{UserID: 10, Role: auth.RoleUser, TokenEpoch: 1}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w = get(t, h, "/", renewed)
	signedIn("a token of the new epoch", w.Result(), w.Body.String(), true)
	w = get(t, h, "/nope", renewed)
	if !strings.Contains(w.Body.String(), `<span id="nav-user" class="who">alice</span>`) {
		t.Errorf("the error page of a token of the new epoch does not name alice: %d\n%s", w.Code, w.Body)
	}

	sessions.set(func() { sessions.loading = true })
	w = get(t, h, "/", old)
	signedIn("while the sessions are not read", w.Result(), w.Body.String(), true)
}
