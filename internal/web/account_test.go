package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"board/internal/auth"
)

// The accounts of SPEC §3.14, faked as the contract of issue 41 says: the account, its e-mail, password, sessions,
// deletion and export, and the sign-in with a provider in the user service; the e-mail preference and the
// unsubscribe link in the notification service.

// accounts is what the fakes keep of them. The fixture: alice (10) has a verified address and a pending one, and a
// connected "acme" account; a reset link "10.reset" and a verification link "10.verify" work once.
type accounts struct {
	email, pending map[int64]string
	identities     map[int64][]map[string]any
	used           map[string]bool // the links' tokens used
	// export answers GET /v1/users/me/export when set.
	export http.HandlerFunc
}

func newAccounts() accounts {
	return accounts{email: map[int64]string{10: "alice@example.com"}, pending: map[int64]string{10: "alice@new.example"},
		identities: map[int64][]map[string]any{10: {{"provider": "acme", "email": "alice@acme.example", "linkedAt": wireTime(t0)}}},
		used:       map[string]bool{}}
}

// newToken answers a fresh token for the user, as a password change does.
func (f *fakes) newToken(w http.ResponseWriter, p auth.Principal) {
	tok, exp, err := auth.Sign(f.key, auth.Principal{UserID: p.UserID, Role: p.Role, TokenEpoch: p.TokenEpoch + 1}, time.Now(), time.Hour)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"accessToken": tok, "tokenType": "Bearer", "expiresAt": wireTime(exp)})
}

// password checks the password a request body names as the acting user's; it answers 401 itself when wrong.
func (f *fakes) password(w http.ResponseWriter, p auth.Principal, given string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.users[p.UserID]; u == nil || u.Password != given {
		writeError(w, http.StatusUnauthorized, codeBadCredentials, "wrong password")
		return false
	}
	return true
}

func (f *fakes) accountRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/users/me", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		u := f.users[p.UserID]
		var email, pending any
		if e, ok := f.email[u.ID]; ok {
			email = e
		}
		if e, ok := f.pending[u.ID]; ok {
			pending = e
		}
		ids := f.identities[u.ID]
		if ids == nil {
			ids = []map[string]any{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"userId": wireID(u.ID), "username": u.Name, "role": string(u.Role),
			"createdAt": wireTime(t0), "email": email, "pendingEmail": pending, "hasPassword": u.Password != "", "identities": ids})
	})
	mux.HandleFunc("PUT /v1/users/me/email", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Email, Password string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if !f.password(w, p, in.Password) {
			return
		}
		if !strings.Contains(in.Email, "@") {
			writeError(w, http.StatusBadRequest, "INVALID_EMAIL", "That is not an e-mail address.")
			return
		}
		f.mu.Lock()
		f.pending[p.UserID] = in.Email
		f.mu.Unlock()
		writeJSON(w, http.StatusAccepted, map[string]any{})
	})
	mux.HandleFunc("PUT /v1/users/me/password", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Current, New string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if !f.password(w, p, in.Current) {
			return
		}
		if len(in.New) < 8 {
			writeError(w, http.StatusBadRequest, "INVALID_PASSWORD", "A password is 8 to 128 characters.")
			return
		}
		f.mu.Lock()
		f.users[p.UserID].Password = in.New
		f.mu.Unlock()
		f.newToken(w, p)
	})
	mux.HandleFunc("DELETE /v1/users/me/sessions", func(w http.ResponseWriter, r *http.Request) {
		if p, ok := f.acting(w, r); ok {
			f.newToken(w, p)
		}
	})
	mux.HandleFunc("DELETE /v1/users/me", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Password, Content string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if !f.password(w, p, in.Password) {
			return
		}
		if in.Content != "keep" && in.Content != "remove" {
			writeError(w, http.StatusBadRequest, "INVALID_CONTENT", "content is keep or remove")
			return
		}
		f.mu.Lock()
		delete(f.users, p.UserID)
		f.mu.Unlock()
		writeJSON(w, http.StatusAccepted, map[string]any{})
	})
	mux.HandleFunc("GET /v1/users/me/export", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); !ok {
			return
		}
		f.mu.Lock()
		export := f.export
		f.mu.Unlock()
		if export != nil {
			export(w, r)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"profile": map[string]any{"username": "alice"}, "articles": []any{}})
	})
	mux.HandleFunc("POST /v1/password-resets", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, map[string]any{})
	})
	// A link's token works once.
	useToken := func(w http.ResponseWriter, token, want string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if token != want || f.used[token] {
			writeError(w, http.StatusBadRequest, codeInvalidToken, "This link is used, expired or not whole.")
			return false
		}
		f.used[token] = true
		return true
	}
	mux.HandleFunc("POST /v1/password-resets/{token}", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ New string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if len(in.New) < 8 {
			writeError(w, http.StatusBadRequest, "INVALID_PASSWORD", "A password is 8 to 128 characters.")
			return
		}
		if useToken(w, r.PathValue("token"), "10.reset") {
			f.mu.Lock()
			f.users[10].Password = in.New
			f.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	})
	mux.HandleFunc("POST /v1/email-verifications/{token}", func(w http.ResponseWriter, r *http.Request) {
		if useToken(w, r.PathValue("token"), "10.verify") {
			f.mu.Lock()
			email := f.pending[10]
			f.email[10] = email
			delete(f.pending, 10)
			f.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"userId": "10", "email": email})
		}
	})
	// Sign-in with a provider: the flow's state is "s-acme"; code "alice" signs alice in (or links to the signed-in
	// user), code "unverified" is refused as a provider's unverified address is.
	mux.HandleFunc("GET /v1/oidc/{provider}/start", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "board_oidc_state", Value: "s-acme", Path: "/", HttpOnly: true})
		writeJSON(w, http.StatusOK, map[string]any{"authorizationUrl": "https://idp.example/authorize?client_id=board&state=s-acme"})
	})
	mux.HandleFunc("POST /v1/oidc/{provider}/link", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Password *string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		if in.Password == nil {
			writeError(w, http.StatusBadRequest, "MISSING_FIELD", "password is required")
			return
		}
		if !f.password(w, p, *in.Password) {
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "board_oidc_state", Value: "s-link", Path: "/", HttpOnly: true})
		writeJSON(w, http.StatusOK, map[string]any{"authorizationUrl": "https://idp.example/authorize?prompt=login&state=s-link"})
	})
	mux.HandleFunc("DELETE /v1/users/me/identities/{provider}", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); !ok {
			return
		}
		if r.PathValue("provider") == "last" {
			writeError(w, http.StatusConflict, "LAST_SIGN_IN", "This is the only way left to sign in to your account.")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/oidc/{provider}/callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if c, err := r.Cookie("board_oidc_state"); err != nil || c.Value != q.Get("state") || q.Get("state") != "s-acme" {
			writeError(w, http.StatusBadRequest, "INVALID_STATE", "This sign-in is unknown or expired.")
			return
		}
		if q.Get("code") == "unverified" {
			writeError(w, http.StatusBadRequest, "EMAIL_NOT_VERIFIED", "The provider has not verified your e-mail address.")
			return
		}
		tok, exp, _ := auth.Sign(f.key, auth.Principal{UserID: 10, Role: auth.RoleUser}, time.Now(), time.Hour)
		writeJSON(w, http.StatusOK, map[string]any{"accessToken": tok, "tokenType": "Bearer", "expiresAt": wireTime(exp),
			"userId": "10", "created": false, "linked": false})
	})
}

// accountNotifications is a fake notification service of the preferences with `email`, and the unsubscribe link
// "10.unsub"; it is at the returned origin.
func accountNotifications(t *testing.T, f *fakes) string {
	t.Helper()
	mux := http.NewServeMux()
	prefs := map[string]any{"reply": true, "commentReply": true, "like": false, "moderation": true, "mention": true,
		"watched": false, "autoWatch": true, "email": "daily"}
	mux.HandleFunc("GET /v1/notification-preferences", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			writeJSON(w, http.StatusOK, prefs)
		}
	})
	mux.HandleFunc("PUT /v1/notification-preferences", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.acting(w, r); ok {
			writeJSON(w, http.StatusOK, prefs)
		}
	})
	mux.HandleFunc("GET /v1/notifications/unread-count", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"count": 0})
	})
	mux.HandleFunc("POST /v1/email-unsubscribe/{token}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("token") != "10.unsub" {
			writeError(w, http.StatusBadRequest, codeInvalidToken, "This link is not one of ours.")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	srv := httptest.NewServer(f.recorded("notification", mux))
	t.Cleanup(srv.Close)
	return srv.URL
}

// accountPages is the pages on the fakes with the notification service above and the provider "acme" configured.
func accountPages(t *testing.T, f *fakes, changes ...func(*Config)) http.Handler {
	t.Helper()
	notification := accountNotifications(t, f)
	return f.handler(t, append([]func(*Config){func(c *Config) {
		c.Origins.Notification = notification
		c.OIDCProviders = []string{"acme", "globex"}
	}}, changes...)...)
}

// lastCall is the last request service received.
func lastCall(t *testing.T, f *fakes, service string) seen {
	t.Helper()
	got := f.requests(service)
	if len(got) == 0 {
		t.Fatalf("%s was not called", service)
	}
	return got[len(got)-1]
}

// TestAccountPage: the account page shows the address, the pending one, the providers and the e-mail choice, asked
// with the reader's token; signed out, it sends to sign in; each service down is said where it matters.
func TestAccountPage(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)

	if w := get(t, h, "/account", ""); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin?next=%2Faccount" {
		t.Fatalf("signed out: %d to %q, want sign-in first", w.Code, w.Header().Get("Location"))
	}
	w := get(t, h, "/account", alice)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d\n%s", w.Code, w.Body)
	}
	mustContain(t, "the account page", w.Body.String(),
		`<strong id="account-name">alice</strong>`,
		`Your address is <strong>alice@example.com</strong> (verified)`,
		`Waiting for verification: <strong>alice@new.example</strong>`,
		`<form id="password-form"`, `<form id="sessions-form"`,
		`<li data-provider="acme"><strong>Acme</strong>: connected as alice@acme.example`,
		`<form class="provider-connect stack narrow" method="post" action="/account/providers/globex/connect">`,
		`<input id="connect-password-globex" name="password" type="password" required`,
		`<form class="provider-disconnect" method="post" action="/account/providers/acme/disconnect" data-confirm=`,
		`<input id="email-pref-daily" type="radio" name="email" value="daily" checked>`,
		`<a id="export-link" class="button secondary" href="/account/export" download>`,
		`<form id="delete-account" class="stack" method="post" action="/account/delete" data-confirm=`,
		`<a id="nav-account" href="/account"`)
	if got := lastCall(t, f, "user"); got.String() != "GET /v1/users/me" || got.Auth != "Bearer "+alice {
		t.Errorf("the user service was asked %v with %q", got, got.Auth)
	}

	// An account a provider made has no password: no form asks for one, and the page says how to set it.
	f.mu.Lock()
	f.users[13] = &fakeUser{ID: 13, Name: "noor", Role: auth.RoleUser}
	f.mu.Unlock()
	noor := get(t, h, "/account", f.token(t, 13, auth.RoleUser)).Body.String()
	mustContain(t, "an account without a password", noor, `<p id="email-needs-password"`, `<p id="no-password"`, `<form id="delete-account"`)
	mustNotContain(t, "an account without a password", noor, `id="email-form"`, `id="password-form"`, `id="delete-password"`)

	// Without the notification service, the page says the choice cannot be shown; without the user service, no page.
	down := f.handler(t, func(c *Config) { c.Origins.Notification = closedOrigin(t) })
	mustContain(t, "the page without notification", get(t, down, "/account", alice).Body.String(), "Your choice cannot be shown right now")
	down = f.handler(t, func(c *Config) { c.Origins.User = closedOrigin(t) })
	// The session is checked with keys already fetched: a page before the user service went down fetched them.
	if w := get(t, down, "/account", alice); w.Code != http.StatusServiceUnavailable {
		t.Errorf("without the user service: %d, want 503\n%s", w.Code, w.Body)
	}
}

// TestAccountForms: each form of the account page sends what the reader typed, with their token, and comes back
// to the page with a notice; a refusal comes back in its own form with the reason.
func TestAccountForms(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)

	w := post(t, h, "/account/email", url.Values{"email": {" alice@other.example "}, "password": {"correct horse"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/account?notice=emailsent#email" {
		t.Fatalf("e-mail: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if got := lastCall(t, f, "user"); got.String() != "PUT /v1/users/me/email" || got.Body != `{"email":"alice@other.example","password":"correct horse"}` {
		t.Errorf("the e-mail change sent %v %s", got, got.Body)
	}
	w = post(t, h, "/account/email", url.Values{"email": {"alice@third.example"}, "password": {"wrong"}}, alice)
	if w.Code != http.StatusUnauthorized || sessionCookieOf(w) != nil {
		t.Errorf("a wrong password: %d, cookie %v", w.Code, sessionCookieOf(w))
	}
	mustContain(t, "a wrong password", w.Body.String(), `<p class="error form-error" role="alert">That is not your password.</p>`,
		`value="alice@third.example"`)
	w = post(t, h, "/account/email", url.Values{"email": {"nope"}, "password": {"correct horse"}}, alice)
	if w.Code != http.StatusBadRequest {
		t.Errorf("a bad address: %d", w.Code)
	}
	mustContain(t, "a bad address", w.Body.String(), "That is not an e-mail address.")

	// A password change keeps this session going, with the new token the service answered.
	w = post(t, h, "/account/password", url.Values{"current": {"correct horse"}, "new": {"staple battery"}}, alice)
	c := sessionCookieOf(w)
	if w.Code != http.StatusSeeOther || c == nil || c.Value == alice || c.Value == "" {
		t.Fatalf("password: %d, cookie %v", w.Code, c)
	}
	if p, err := f.verifier.Verify(t.Context(), c.Value); err != nil || p.UserID != 10 || p.TokenEpoch != 1 {
		t.Errorf("the new session's token: %+v %v", p, err)
	}
	if got := lastCall(t, f, "user"); got.Body != `{"current":"correct horse","new":"staple battery"}` {
		t.Errorf("the password change sent %s", got.Body)
	}
	w = post(t, h, "/account/password", url.Values{"current": {"correct horse"}, "new": {"another one"}}, alice)
	mustContain(t, "a wrong current password", w.Body.String(), "That is not your password.")
	w = post(t, h, "/account/password", url.Values{"current": {"staple battery"}, "new": {"short"}}, alice)
	if w.Code != http.StatusBadRequest || sessionCookieOf(w) != nil {
		t.Errorf("a short password: %d", w.Code)
	}
	mustContain(t, "a short password", w.Body.String(), "A password is 8 to 128 characters.")

	// Signing out everywhere else keeps this one, with the new token.
	w = post(t, h, "/account/sessions", nil, alice)
	if c := sessionCookieOf(w); w.Code != http.StatusSeeOther || c == nil || c.Value == alice ||
		w.Header().Get("Location") != "/account?notice=sessionsended#sessions" {
		t.Errorf("sessions: %d to %q, cookie %v", w.Code, w.Header().Get("Location"), c)
	}
	if got := lastCall(t, f, "user"); got.String() != "DELETE /v1/users/me/sessions" || got.Auth != "Bearer "+alice {
		t.Errorf("sign out everywhere sent %v with %q", got, got.Auth)
	}

	// A session that ended meanwhile goes to sign in, as any form's.
	f.override("user", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/jwks.json" {
			writeJSON(w, http.StatusOK, map[string]any{"keys": []any{f.key.PublicJWK()}})
			return
		}
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "this session has ended; sign in again")
	})
	w = post(t, h, "/account/sessions", nil, alice)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin?expired=1") {
		t.Errorf("an ended session: %d to %q", w.Code, loc)
	}
}

// TestEmailPreference: the choice is sent with the reader's other preferences as they are (the service's PUT takes
// them all); a choice the form does not offer is asked of no service.
func TestEmailPreference(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)
	w := post(t, h, "/account/notification-email", url.Values{"email": {"immediate"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/account?notice=emailpreference#notify" {
		t.Fatalf("%d to %q\n%s", w.Code, w.Header().Get("Location"), w.Body)
	}
	got := lastCall(t, f, "notification")
	var sent map[string]any
	if err := json.Unmarshal([]byte(got.Body), &sent); err != nil || got.Method != http.MethodPut {
		t.Fatalf("sent %v %s", got, got.Body)
	}
	want := map[string]any{"reply": true, "commentReply": true, "like": false, "moderation": true, "mention": true,
		"watched": false, "autoWatch": true, "email": "immediate"}
	if len(sent) != len(want) {
		t.Errorf("sent %v, want %v", sent, want)
	}
	for k, v := range want {
		if sent[k] != v {
			t.Errorf("sent %s=%v, want %v", k, sent[k], v)
		}
	}
	before := len(f.requests("notification"))
	if w := post(t, h, "/account/notification-email", url.Values{"email": {"hourly"}}, alice); w.Code != http.StatusBadRequest {
		t.Errorf("an unknown choice: %d", w.Code)
	}
	if n := len(f.requests("notification")); n != before {
		t.Errorf("an unknown choice was sent on (%d calls)", n-before)
	}
	// The inbox's preferences form does not send the e-mail choice, which the service then keeps.
	p, _ := json.Marshal(preferences{Reply: true})
	if strings.Contains(string(p), "email") {
		t.Errorf("the inbox's preferences carry the e-mail choice: %s", p)
	}
}

// TestDeleteAccount: the choice and the box are needed before anything is sent; a wrong password comes back in the
// form; done, the reader is signed out with a notice.
func TestDeleteAccount(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	alice := f.token(t, 10, auth.RoleUser)
	calls := func() int { return len(f.requests("user")) }
	for _, form := range []url.Values{
		{"password": {"correct horse"}, "confirm": {"yes"}},
		{"password": {"correct horse"}, "content": {"all"}, "confirm": {"yes"}},
		{"password": {"correct horse"}, "content": {"remove"}},
	} {
		before := calls()
		w := post(t, h, "/account/delete", form, alice)
		if w.Code != http.StatusBadRequest || sessionCookieOf(w) != nil {
			t.Errorf("%v: %d", form, w.Code)
		}
		for _, s := range f.requests("user")[before:] {
			if s.Method == http.MethodDelete {
				t.Errorf("%v was sent on", form)
			}
		}
	}
	w := post(t, h, "/account/delete", url.Values{"password": {"wrong"}, "content": {"remove"}, "confirm": {"yes"}}, alice)
	if w.Code != http.StatusUnauthorized || sessionCookieOf(w) != nil {
		t.Errorf("a wrong password: %d, cookie %v", w.Code, sessionCookieOf(w))
	}
	mustContain(t, "a wrong password", w.Body.String(), "That is not your password.", `value="remove" required checked>`)
	w = post(t, h, "/account/delete", url.Values{"password": {"correct horse"}, "content": {"remove"}, "confirm": {"yes"}}, alice)
	if c := sessionCookieOf(w); w.Code != http.StatusSeeOther || c == nil || c.MaxAge >= 0 || w.Header().Get("Location") != "/?notice=accountdeleted" {
		t.Fatalf("delete: %d to %q, cookie %v", w.Code, w.Header().Get("Location"), c)
	}
	if got := lastCall(t, f, "user"); got.String() != "DELETE /v1/users/me" || got.Body != `{"content":"remove","password":"correct horse"}` {
		t.Errorf("the delete sent %v %s", got, got.Body)
	}
	mustContain(t, "the page after", get(t, h, "/?notice=accountdeleted", "").Body.String(), "Your account is deleted and you are signed out.")
}

// TestExportStreams: the archive reaches the browser as a file to save while the user service is still writing it,
// and an archive cut off midway is a failed download, not a shorter file.
func TestExportStreams(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	site := httptest.NewServer(accountPages(t, f))
	t.Cleanup(site.Close)
	alice := f.token(t, 10, auth.RoleUser)
	release := make(chan struct{})
	cut := make(chan bool, 1)
	f.mu.Lock()
	f.export = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"profile":{"username":"alice"},"articles":[`+"\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		if <-cut {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, `]}`)
	}
	f.mu.Unlock()
	download := func() (int, http.Header, *bufio.Reader) {
		req, _ := http.NewRequest(http.MethodGet, site.URL+"/account/export", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: alice})
		resp, err := site.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp.StatusCode, resp.Header, bufio.NewReader(resp.Body)
	}

	status, header, body := download()
	if status != http.StatusOK || header.Get("Content-Type") != "application/json" ||
		header.Get("Content-Disposition") != `attachment; filename="board-alice-2026-11-22.json"` {
		t.Fatalf("%d %v", status, header)
	}
	// The first part arrives while the rest is still held back at the user service.
	if line, err := body.ReadString('\n'); err != nil || !strings.HasPrefix(line, `{"profile"`) {
		t.Fatalf("the first part: %q %v", line, err)
	}
	cut <- false
	release <- struct{}{}
	if rest, err := io.ReadAll(body); err != nil || string(rest) != `]}` {
		t.Errorf("the rest: %q %v", rest, err)
	}

	_, _, body = download()
	if _, err := body.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cut <- true
	release <- struct{}{}
	if _, err := io.ReadAll(body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a cut archive read to its end with %v, want a broken download", err)
	}

	// Signed out, the export is sign-in first; the user service down, the friendly 503.
	if w := get(t, accountPages(t, f), "/account/export", ""); w.Code != http.StatusSeeOther {
		t.Errorf("signed out: %d", w.Code)
	}
	down := f.handler(t, func(c *Config) { c.Origins.User = closedOrigin(t) })
	if w := get(t, down, "/account/export", alice); w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `<main id="error"`) {
		t.Errorf("user service down: %d\n%s", w.Code, w.Body)
	}
}

// TestForgotPassword: the page says the same whatever the address, and asks the user service with the browser's
// address for its limits.
func TestForgotPassword(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	mustContain(t, "the sign-in page", get(t, h, "/signin", "").Body.String(), `<a id="forgot-link" href="/forgot-password">`)
	var pages []string
	for _, email := range []string{"alice@example.com", "nobody@example.com"} {
		w := post(t, h, "/forgot-password", url.Values{"email": {email}}, "")
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", email, w.Code)
		}
		pages = append(pages, strings.ReplaceAll(w.Body.String(), email, "ADDRESS"))
		if got := lastCall(t, f, "user"); got.String() != "POST /v1/password-resets" || got.Body != `{"email":"`+email+`"}` {
			t.Errorf("sent %v %s", got, got.Body)
		}
	}
	if pages[0] != pages[1] {
		t.Error("the page differs between a known and an unknown address")
	}
	mustContain(t, "the page", pages[0], `<p id="reset-sent" class="notice" role="status">If an account has a verified address ADDRESS`)

	f.override("user", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusTooManyRequests, "RATE_LIMITED", "slow down")
	})
	w := post(t, h, "/forgot-password", url.Values{"email": {"alice@example.com"}}, "")
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("limited: %d", w.Code)
	}
	mustContain(t, "limited", w.Body.String(), "Please wait 30 seconds", `value="alice@example.com"`)
	down := f.handler(t, func(c *Config) { c.Origins.User = closedOrigin(t) })
	if w := post(t, down, "/forgot-password", url.Values{"email": {"a@b.c"}}, ""); w.Code != http.StatusServiceUnavailable {
		t.Errorf("user service down: %d", w.Code)
	}
}

// TestMailedLinks: the pages of the reset, verification and unsubscribe links use their token only when their
// button is pressed, never on GET (mail scanners fetch links); a used or broken link says so and where to ask again.
func TestMailedLinks(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	for _, path := range []string{"/reset-password/10.reset", "/verify-email/10.verify", "/unsubscribe/10.unsub"} {
		before := len(f.requests("user")) + len(f.requests("notification"))
		if w := get(t, h, path, ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `method="post" action="`+path+`"`) {
			t.Errorf("GET %s: %d\n%s", path, w.Code, w.Body)
		}
		if n := len(f.requests("user")) + len(f.requests("notification")); n != before {
			t.Errorf("GET %s called a service", path)
		}
	}

	// Reset.
	w := post(t, h, "/reset-password/10.reset", url.Values{"new": {"short"}}, "")
	if w.Code != http.StatusBadRequest {
		t.Errorf("a short password: %d", w.Code)
	}
	mustContain(t, "a short password", w.Body.String(), "A password is 8 to 128 characters.", `action="/reset-password/10.reset"`)
	w = post(t, h, "/reset-password/10.reset", url.Values{"new": {"a new secret"}}, "")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin?notice=passwordreset" {
		t.Fatalf("reset: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if got := lastCall(t, f, "user"); got.String() != "POST /v1/password-resets/10.reset" || got.Body != `{"new":"a new secret"}` {
		t.Errorf("sent %v %s", got, got.Body)
	}
	mustContain(t, "sign-in after", get(t, h, "/signin?notice=passwordreset", "").Body.String(), "Your password is set. Sign in with it.")
	for _, path := range []string{"/reset-password/10.reset", "/reset-password/10.forged"} {
		w = post(t, h, path, url.Values{"new": {"a new secret"}}, "")
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s again: %d", path, w.Code)
		}
		mustContain(t, path+" again", w.Body.String(), `<p id="link-invalid"`, `<a id="ask-again" href="/forgot-password">Ask for a new link</a>`)
	}
	before := len(f.requests("user"))
	for _, path := range []string{"/reset-password/" + url.PathEscape("<script>"), "/reset-password/" + strings.Repeat("x", 300)} {
		w = get(t, h, path, "")
		mustContain(t, path, w.Body.String(), `<p id="link-invalid"`)
		if post(t, h, path, url.Values{"new": {"a new secret"}}, "").Code != http.StatusBadRequest {
			t.Errorf("POST %s is not refused", path)
		}
	}
	if n := len(f.requests("user")); n != before {
		t.Errorf("tokens that cannot be were sent on (%d calls)", n-before)
	}

	// Verification.
	w = post(t, h, "/verify-email/10.verify", nil, "")
	if w.Code != http.StatusOK {
		t.Fatalf("verify: %d", w.Code)
	}
	mustContain(t, "verified", w.Body.String(), `Your address <strong>alice@new.example</strong> is verified.`)
	w = post(t, h, "/verify-email/10.verify", nil, "")
	if w.Code != http.StatusBadRequest {
		t.Errorf("verify again: %d", w.Code)
	}
	mustContain(t, "verify again", w.Body.String(), `<p id="link-invalid"`, `href="/account#email"`)

	// Unsubscribe, from the page.
	w = post(t, h, "/unsubscribe/10.unsub", nil, "")
	mustContain(t, "unsubscribed", w.Body.String(), `<p id="unsubscribed"`)
	w = post(t, h, "/unsubscribe/10.other", nil, "")
	if w.Code != http.StatusBadRequest {
		t.Errorf("a wrong unsubscribe link: %d", w.Code)
	}
}

// TestOneClickUnsubscribe: a mail client's one-click unsubscribe (RFC 8058) is a POST from no page of the site,
// with no session: taken, while any other form from another site is still refused.
func TestOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	form := url.Values{"List-Unsubscribe": {"One-Click"}}
	for _, site := range []string{"", "cross-site"} {
		w := serve(t, h, visit{method: http.MethodPost, target: "/unsubscribe/10.unsub", form: form,
			header: map[string]string{"Sec-Fetch-Site": site, "Origin": "https://mail.example"}})
		if w.Code != http.StatusOK {
			t.Errorf("one-click POST (Sec-Fetch-Site %q): %d\n%s", site, w.Code, w.Body)
		}
		if got := lastCall(t, f, "notification"); got.String() != "POST /v1/email-unsubscribe/10.unsub" || got.Auth != "" {
			t.Errorf("sent %v with %q", got, got.Auth)
		}
	}
	w := serve(t, h, visit{method: http.MethodPost, target: "/account/email", form: url.Values{"email": {"x@y.z"}},
		token: f.token(t, 10, auth.RoleUser), header: map[string]string{"Sec-Fetch-Site": "cross-site"}})
	if w.Code != http.StatusForbidden {
		t.Errorf("another site's e-mail change: %d", w.Code)
	}
}

// TestSignInWithProvider: the sign-in page has a button per provider; the start sends the browser to the provider
// with the flow's state in a cookie of this site, and the callback signs in only the browser holding it.
func TestSignInWithProvider(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f)
	mustContain(t, "the sign-in page", get(t, h, "/signin", "").Body.String(),
		`<a class="button secondary provider-start" href="/oidc/acme/start" data-provider="acme">Sign in with Acme</a>`,
		`href="/oidc/globex/start"`)
	mustNotContain(t, "a site without providers", get(t, f.handler(t), "/signin", "").Body.String(), `id="providers"`)

	w := get(t, h, "/oidc/acme/start", "")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "https://idp.example/authorize?client_id=board&state=s-acme" {
		t.Fatalf("start: %d to %q", w.Code, w.Header().Get("Location"))
	}
	var state *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == oidcCookie {
			state = c
		}
	}
	if state == nil || state.Value != "s-acme" || !state.HttpOnly || state.Path != "/oidc/acme/" || state.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the state cookie: %+v", state)
	}
	if got := lastCall(t, f, "user"); got.String() != "GET /v1/oidc/acme/start" || got.Auth != "" {
		t.Errorf("start sent %v with %q", got, got.Auth)
	}
	// The start only signs in: a signed-in reader's token does not go along (connecting is the account page's form).
	alice := f.token(t, 10, auth.RoleUser)
	get(t, h, "/oidc/globex/start", alice)
	if got := lastCall(t, f, "user"); got.String() != "GET /v1/oidc/globex/start" || got.Auth != "" {
		t.Errorf("a signed-in start sent %v with %q", got, got.Auth)
	}

	callback := func(query string, cookie string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/oidc/acme/callback?"+query, nil)
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: oidcCookie, Value: cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	before := len(f.requests("user"))
	for _, c := range []struct{ query, cookie string }{{"code=alice&state=s-acme", ""}, {"code=alice&state=s-acme", "s-other"}, {"code=alice", "s-acme"}} {
		w := callback(c.query, c.cookie)
		if w.Code != http.StatusBadRequest || sessionCookieOf(w) != nil {
			t.Errorf("%q with cookie %q: %d", c.query, c.cookie, w.Code)
		}
		mustContain(t, "another browser's callback", w.Body.String(), "This sign-in was not started in this browser")
	}
	if n := len(f.requests("user")); n != before {
		t.Errorf("callbacks of another browser were sent on (%d calls)", n-before)
	}
	w = callback("error=access_denied&error_description=The+user+said+no&state=s-acme", "s-acme")
	mustContain(t, "the provider's refusal", w.Body.String(), `<p id="oidc-error" class="error" role="alert">Acme did not sign you in: The user said no</p>`)
	w = callback("code=unverified&state=s-acme", "s-acme")
	if w.Code != http.StatusBadRequest {
		t.Errorf("refused: %d", w.Code)
	}
	mustContain(t, "the user service's refusal", w.Body.String(), "The provider has not verified your e-mail address.")

	w = callback("code=alice&state=s-acme", "s-acme")
	c := sessionCookieOf(w)
	if w.Code != http.StatusSeeOther || c == nil || w.Header().Get("Location") != "/?notice=signedin" {
		t.Fatalf("callback: %d to %q, cookie %v", w.Code, w.Header().Get("Location"), c)
	}
	if got := lastCall(t, f, "user"); got.String() != "GET /v1/oidc/acme/callback?code=alice&state=s-acme" {
		t.Errorf("callback sent %v", got)
	}
	if w := get(t, h, "/oidc/initech/start", ""); w.Code != http.StatusNotFound {
		t.Errorf("an unknown provider: %d", w.Code)
	}
}

// TestAccountHungUserService: a user service that does not answer is the friendly 503 within the call's deadline,
// on the account page and on a mailed link's button alike.
func TestAccountHungUserService(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	alice := f.token(t, 10, auth.RoleUser)
	hung := hungOrigin(t)
	h := f.handler(t, func(c *Config) { c.Origins.User = hung })
	for _, v := range []visit{{target: "/account", token: alice}, {method: http.MethodPost, target: "/verify-email/10.verify", form: url.Values{}}} {
		if w := serve(t, h, v); w.Code != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d", v.method, v.target, w.Code)
		}
	}
}

// TestConnectProvider: connecting a provider on the account page sends the password with the reader's token and goes
// on to the provider by a page (a form's redirect there would be stopped by form-action 'self'), with the state in
// this browser's cookie; a wrong password comes back in the form; disconnecting says what the service refused.
func TestConnectProvider(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := accountPages(t, f, func(c *Config) { c.OIDCProviders = append(c.OIDCProviders, "last") })
	alice := f.token(t, 10, auth.RoleUser)
	w := post(t, h, "/account/providers/globex/connect", url.Values{"password": {"correct horse"}}, alice)
	if w.Code != http.StatusOK || w.Header().Get("Refresh") != "0; url=https://idp.example/authorize?prompt=login&state=s-link" {
		t.Fatalf("connect: %d, Refresh %q\n%s", w.Code, w.Header().Get("Refresh"), w.Body)
	}
	mustContain(t, "the page on to the provider", w.Body.String(),
		`<a id="oidc-continue" class="button" href="https://idp.example/authorize?prompt=login&amp;state=s-link">Continue to Globex</a>`)
	var state *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == oidcCookie {
			state = c
		}
	}
	if state == nil || state.Value != "s-link" || state.Path != "/oidc/globex/" || !state.HttpOnly {
		t.Errorf("the state cookie: %+v", state)
	}
	if got := lastCall(t, f, "user"); got.String() != "POST /v1/oidc/globex/link" || got.Auth != "Bearer "+alice || got.Body != `{"password":"correct horse"}` {
		t.Errorf("connect sent %v with %q: %s", got, got.Auth, got.Body)
	}
	w = post(t, h, "/account/providers/globex/connect", url.Values{"password": {"wrong"}}, alice)
	if w.Code != http.StatusUnauthorized || w.Header().Get("Refresh") != "" {
		t.Errorf("a wrong password: %d", w.Code)
	}
	mustContain(t, "a wrong password", w.Body.String(), "That is not your password.")
	if w := post(t, h, "/account/providers/initech/connect", url.Values{"password": {"correct horse"}}, alice); w.Code != http.StatusNotFound {
		t.Errorf("an unknown provider: %d", w.Code)
	}

	w = post(t, h, "/account/providers/acme/disconnect", nil, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/account?notice=disconnected#providers" {
		t.Errorf("disconnect: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if got := lastCall(t, f, "user"); got.String() != "DELETE /v1/users/me/identities/acme" || got.Auth != "Bearer "+alice {
		t.Errorf("disconnect sent %v with %q", got, got.Auth)
	}
	w = post(t, h, "/account/providers/last/disconnect", nil, alice)
	if w.Code != http.StatusConflict {
		t.Errorf("the last way to sign in: %d", w.Code)
	}
	mustContain(t, "the last way to sign in", w.Body.String(), "This is the only way left to sign in to your account.")
}
