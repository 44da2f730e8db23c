package httpio

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
	"board/internal/fault"
)

// recordingLimiter refuses keys in over and records what it was asked.
type recordingLimiter struct {
	mu    sync.Mutex
	asked []string
	over  map[string]bool
}

func (l *recordingLimiter) Allow(_ context.Context, limit, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, limit+" "+key)
	if l.over[key] {
		return &fault.Error{Kind: fault.RateLimited, Code: "RATE_LIMITED", Message: "slow down", RetryAfter: 1500 * time.Millisecond}
	}
	return nil
}

// guardedServer serves routes that echo the acting user, behind a Guard whose tokens are "token-<id>" for users and
// "mod-<id>" for moderators, both of user 7 and 9 at epoch 0, and "sep<n>" of user 7 signed at epoch n.
func guardedServer(t *testing.T, limiter *recordingLimiter, standing Standing, sessions Sessions) string {
	api := http.NewServeMux()
	echo := func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		Write(w, http.StatusOK, map[string]any{"acting": ok, "user": p.UserID, "role": p.Role, "epoch": p.TokenEpoch})
	}
	api.HandleFunc("GET /v1/things", echo)
	api.HandleFunc("POST /v1/things", echo)
	api.HandleFunc("DELETE /v1/things/{id}", echo)
	api.HandleFunc("POST /v1/sign-in", echo)
	api.HandleFunc("DELETE /v1/me", echo)
	verify := func(_ context.Context, token string) (auth.Principal, error) {
		switch {
		case token == "keys-down":
			return auth.Principal{}, fault.Unavailablef(nil, "KEYS_UNAVAILABLE", "down")
		case strings.HasPrefix(token, "token-"):
			return auth.Principal{UserID: 7, Role: auth.RoleUser}, nil
		case strings.HasPrefix(token, "mod-"):
			return auth.Principal{UserID: 9, Role: auth.RoleModerator}, nil
		case strings.HasPrefix(token, "sep"):
			epoch, err := strconv.ParseInt(strings.TrimPrefix(token, "sep"), 10, 64)
			if err != nil {
				return auth.Principal{}, auth.ErrBadToken
			}
			return auth.Principal{UserID: 7, Role: auth.RoleUser, TokenEpoch: epoch}, nil
		}
		return auth.Principal{}, auth.ErrBadToken
	}
	srv := testServer(t, func(s *Server) {
		s.API = api
		s.Guard = &Guard{Verify: verify, Standing: standing, Sessions: sessions, Limiter: limiter,
			Open: map[string]string{"POST /v1/sign-in": "sign-in"}, Unbanned: map[string]bool{"DELETE /v1/me": true}}
	})
	return srv.URL
}

type guardAnswer struct {
	status int
	header http.Header
	body   map[string]any
}

func guardRequest(t *testing.T, method, url, authorization string) guardAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := guardAnswer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: %s", method, url, raw)
	}
	return a
}

func TestGuard(t *testing.T) {
	t.Parallel()
	limiter := &recordingLimiter{over: map[string]bool{}}
	base := guardedServer(t, limiter, nil, nil)

	// Reads are public; a read with a token acts for its user, and a bad token is refused.
	if a := guardRequest(t, "GET", base+"/v1/things", ""); a.status != 200 || a.body["acting"] != false {
		t.Errorf("GET without a token: %d %v", a.status, a.body)
	}
	if a := guardRequest(t, "GET", base+"/v1/things", "Bearer mod-9"); a.status != 200 || a.body["user"] != 9.0 || a.body["role"] != "moderator" {
		t.Errorf("GET with a token: %d %v", a.status, a.body)
	}
	if a := guardRequest(t, "GET", base+"/v1/things", "Bearer forged"); a.status != 401 || a.body["code"] != "UNAUTHENTICATED" {
		t.Errorf("GET with a bad token: %d %v", a.status, a.body)
	}

	// Writes need a valid token: the answers to a missing, malformed and rejected one are 401s that say Bearer.
	for _, authz := range []string{"", "token-7", "Basic dG9rZW4tNw==", "Bearer ", "Bearer forged"} {
		a := guardRequest(t, "POST", base+"/v1/things", authz)
		if a.status != 401 || a.body["code"] != "UNAUTHENTICATED" || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("POST with Authorization %q: %d %v %v", authz, a.status, a.body, a.header)
		}
	}
	if a := guardRequest(t, "POST", base+"/v1/things", "Bearer keys-down"); a.status != 503 {
		t.Errorf("POST while the keys are down: %d %v", a.status, a.body)
	}
	// A route that does not exist is 404 whatever the token.
	if a := guardRequest(t, "POST", base+"/v1/nothing", ""); a.status != 404 {
		t.Errorf("POST to no route: %d %v", a.status, a.body)
	}
	if a := guardRequest(t, "PUT", base+"/v1/things", ""); a.status != 405 || a.header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("PUT to a route without it: %d %v Allow %q", a.status, a.body, a.header.Get("Allow"))
	}

	a := guardRequest(t, "POST", base+"/v1/things", "Bearer token-7")
	if a.status != 200 || a.body["user"] != 7.0 || a.body["role"] != "user" {
		t.Errorf("POST with a good token: %d %v", a.status, a.body)
	}
	a = guardRequest(t, "DELETE", base+"/v1/things/1", "bearer mod-9")
	if a.status != 200 || a.body["user"] != 9.0 || a.body["role"] != "moderator" {
		t.Errorf("DELETE with a moderator's token (lower-case scheme): %d %v", a.status, a.body)
	}

	// Over the user's write limit: 429 with a Retry-After in whole seconds, rounded up.
	limiter.over["test:7"] = true
	a = guardRequest(t, "POST", base+"/v1/things", "Bearer token-7")
	if a.status != 429 || a.body["code"] != "RATE_LIMITED" || a.header.Get("Retry-After") != "2" {
		t.Errorf("POST over the limit: %d %v Retry-After %q", a.status, a.body, a.header.Get("Retry-After"))
	}

	// An open route takes no token and is held to its own limit per client address.
	if a := guardRequest(t, "POST", base+"/v1/sign-in", ""); a.status != 200 || a.body["acting"] != false {
		t.Errorf("open route: %d %v", a.status, a.body)
	}
	limiter.over["127.0.0.1"] = true
	if a := guardRequest(t, "POST", base+"/v1/sign-in", ""); a.status != 429 {
		t.Errorf("open route over its limit: %d %v", a.status, a.body)
	}
	want := []string{"write test:7", "write test:9", "write test:7", "sign-in 127.0.0.1", "sign-in 127.0.0.1"}
	if strings.Join(limiter.asked, ",") != strings.Join(want, ",") {
		t.Errorf("limiter asked %v, want %v", limiter.asked, want)
	}
}

// fakeStanding is a table of bans and roles by user id; loading answers as a table not caught up yet.
type fakeStanding struct {
	mu      sync.Mutex
	loading bool
	roles   map[int64]auth.Role
	bans    map[int64]auth.Ban
}

func (f *fakeStanding) Lookup(userID int64) (auth.Role, *auth.Ban, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loading {
		return "", nil, fault.Unavailablef(nil, "STANDING_UNAVAILABLE", "loading")
	}
	if b, ok := f.bans[userID]; ok {
		return f.roles[userID], &b, nil
	}
	return f.roles[userID], nil, nil
}

func (f *fakeStanding) set(fn func()) { f.mu.Lock(); defer f.mu.Unlock(); fn() }

// A banned user's writes answer 403 BANNED with the ban's reason and end; their reads go on. The role the user holds
// now replaces the token's, on writes and on reads with a token.
func TestGuardStanding(t *testing.T) {
	t.Parallel()
	limiter := &recordingLimiter{over: map[string]bool{}}
	standing := &fakeStanding{roles: map[int64]auth.Role{}, bans: map[int64]auth.Ban{}}
	base := guardedServer(t, limiter, standing, nil)

	until := time.Date(2031, 2, 3, 4, 5, 6, 789e6, time.UTC)
	standing.set(func() { standing.bans[7] = auth.Ban{Reason: "spam", Until: &until} })
	a := guardRequest(t, "POST", base+"/v1/things", "Bearer token-7")
	if a.status != 403 || a.body["code"] != "BANNED" || a.body["reason"] != "spam" || a.body["until"] != "2031-02-03T04:05:06.789Z" ||
		!strings.Contains(a.body["message"].(string), "spam") {
		t.Errorf("a banned user's write: %d %v", a.status, a.body)
	}
	standing.set(func() { standing.bans[7] = auth.Ban{Reason: "abuse"} })
	if a := guardRequest(t, "DELETE", base+"/v1/things/1", "Bearer token-7"); a.status != 403 || a.body["code"] != "BANNED" ||
		a.body["until"] != nil || len(a.body) != 4 {
		t.Errorf("a write of a user banned for good: %d %v", a.status, a.body)
	}
	if a := guardRequest(t, "GET", base+"/v1/things", "Bearer token-7"); a.status != 200 || a.body["user"] != 7.0 {
		t.Errorf("a banned user's read: %d %v", a.status, a.body)
	}
	if len(limiter.asked) != 0 {
		t.Errorf("a banned user's writes were counted against their limit: %v", limiter.asked)
	}
	// A ban does not keep a user from leaving.
	if a := guardRequest(t, "DELETE", base+"/v1/me", "Bearer token-7"); a.status != 200 || a.body["user"] != 7.0 {
		t.Errorf("a banned user leaving: %d %v", a.status, a.body)
	}
	limiter.asked = nil

	// A demoted moderator: a user on writes and on reads, whatever the token says; a promoted user the other way.
	standing.set(func() {
		standing.roles[9], standing.roles[7] = auth.RoleUser, auth.RoleModerator
		delete(standing.bans, 7)
	})
	for _, method := range []string{"GET", "POST"} {
		if a := guardRequest(t, method, base+"/v1/things", "Bearer mod-9"); a.status != 200 || a.body["role"] != "user" {
			t.Errorf("%s of a demoted moderator: %d %v", method, a.status, a.body)
		}
		if a := guardRequest(t, method, base+"/v1/things", "Bearer token-7"); a.status != 200 || a.body["role"] != "moderator" {
			t.Errorf("%s of a promoted user: %d %v", method, a.status, a.body)
		}
	}

	// Until the table has read the bans, writes answer 503 and reads go on with the token's role.
	standing.set(func() { standing.loading = true })
	if a := guardRequest(t, "POST", base+"/v1/things", "Bearer token-7"); a.status != 503 || a.body["code"] != "STANDING_UNAVAILABLE" {
		t.Errorf("a write while the table loads: %d %v", a.status, a.body)
	}
	if a := guardRequest(t, "GET", base+"/v1/things", "Bearer mod-9"); a.status != 200 || a.body["role"] != "moderator" {
		t.Errorf("a read while the table loads: %d %v", a.status, a.body)
	}
	// Open routes and reads without a token never ask.
	if a := guardRequest(t, "POST", base+"/v1/sign-in", ""); a.status != 200 {
		t.Errorf("open route while the table loads: %d %v", a.status, a.body)
	}
	if a := guardRequest(t, "GET", base+"/v1/things", ""); a.status != 200 || a.body["acting"] != false {
		t.Errorf("a read without a token while the table loads: %d %v", a.status, a.body)
	}
}

// fakeSessions holds users' token epochs and deletions; loading answers as a table not caught up yet.
type fakeSessions struct {
	mu      sync.Mutex
	loading bool
	epochs  map[int64]int64
	deleted map[int64]bool
}

func (f *fakeSessions) Ended(p auth.Principal) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loading {
		return false, fault.Unavailablef(nil, "STANDING_UNAVAILABLE", "loading")
	}
	return f.deleted[p.UserID] || p.TokenEpoch < f.epochs[p.UserID], nil
}

func (f *fakeSessions) set(fn func()) { f.mu.Lock(); defer f.mu.Unlock(); fn() }

// A token of a session that has ended is refused with 401 on writes and on reads (no writer's view for it), as an
// expired one; a token at the user's epoch goes on, and so does one without the claim (epoch 0) while the user's
// epoch is 0. While the sessions cannot be told, writes answer 503 and reads go on.
func TestGuardSessions(t *testing.T) {
	t.Parallel()
	limiter := &recordingLimiter{over: map[string]bool{}}
	sessions := &fakeSessions{epochs: map[int64]int64{}, deleted: map[int64]bool{}}
	base := guardedServer(t, limiter, nil, sessions)
	ended := func(what, method, token string) {
		t.Helper()
		a := guardRequest(t, method, base+"/v1/things", "Bearer "+token)
		if a.status != 401 || a.body["code"] != "UNAUTHENTICATED" || a.body["message"] != "this session has ended; sign in again" ||
			!strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") || a.body["user"] != nil {
			t.Errorf("%s: %s: %d %v %v", what, method, a.status, a.body, a.header)
		}
	}
	passes := func(what, method, token string, epoch float64) {
		t.Helper()
		if a := guardRequest(t, method, base+"/v1/things", "Bearer "+token); a.status != 200 || a.body["user"] != 7.0 || a.body["epoch"] != epoch {
			t.Errorf("%s: %s: %d %v", what, method, a.status, a.body)
		}
	}
	for _, method := range []string{"GET", "POST"} {
		passes("a token without the claim, user at epoch 0", method, "token-7", 0)
		passes("a token at epoch 0, user at epoch 0", method, "sep0", 0)
	}

	sessions.set(func() { sessions.epochs[7] = 2 })
	for _, method := range []string{"GET", "POST"} {
		ended("a token without the claim, user at epoch 2", method, "token-7")
		ended("a token of epoch 1, user at epoch 2", method, "sep1")
		passes("a token of epoch 2, user at epoch 2", method, "sep2", 2)
		if a := guardRequest(t, method, base+"/v1/things", "Bearer mod-9"); a.status != 200 || a.body["user"] != 9.0 {
			t.Errorf("another user's token: %s: %d %v", method, a.status, a.body)
		}
	}
	if a := guardRequest(t, "DELETE", base+"/v1/things/1", "Bearer sep1"); a.status != 401 {
		t.Errorf("a DELETE with an ended token: %d %v", a.status, a.body)
	}

	// A deleted user's tokens are all void, whatever their epoch.
	sessions.set(func() { sessions.deleted[7] = true })
	for _, method := range []string{"GET", "POST"} {
		ended("a deleted user's token", method, "sep2")
		ended("a deleted user's token from the future", method, "sep3")
	}

	// Until the sessions are read, a write waits and a read goes on.
	sessions.set(func() { sessions.loading = true })
	if a := guardRequest(t, "POST", base+"/v1/things", "Bearer sep1"); a.status != 503 || a.body["code"] != "STANDING_UNAVAILABLE" {
		t.Errorf("a write while the sessions load: %d %v", a.status, a.body)
	}
	passes("a read while the sessions load", "GET", "sep1", 1)
	// Open routes and reads without a token never ask.
	if a := guardRequest(t, "POST", base+"/v1/sign-in", ""); a.status != 200 {
		t.Errorf("open route while the sessions load: %d %v", a.status, a.body)
	}
	// Only the writes that went on were counted against the limits: none with an ended token.
	want := []string{"write test:7", "write test:7", "write test:7", "write test:9", "sign-in 127.0.0.1"}
	if strings.Join(limiter.asked, ",") != strings.Join(want, ",") {
		t.Errorf("limiter asked %v, want %v", limiter.asked, want)
	}
}

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"openapi":"3.1.0"}`)
	srv := testServer(t, func(s *Server) { s.OpenAPI = doc })
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(raw) != string(doc) || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json: %d %q %v", resp.StatusCode, raw, resp.Header)
	}
	if a := guardRequest(t, "POST", srv.URL+"/openapi.json", ""); a.status != 405 {
		t.Errorf("POST /openapi.json: %d", a.status)
	}
}

// The open routes' budgets are per IPv4 address and per IPv6 /64.
func TestGuardClientAddr(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"203.0.113.7:5000":                 "203.0.113.7",
		"[::ffff:203.0.113.7]:5000":        "203.0.113.7",
		"[2001:db8:1:2:aaaa::1]:5000":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff::9]:5000": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:5000":           "2001:db8:1:3::/64",
		"[fe80::1%eth0]:5000":              "fe80::/64",
		"not an address":                   "not an address",
	} {
		r := &http.Request{RemoteAddr: addr}
		if got := (&Guard{}).clientAddr(r); got != want {
			t.Errorf("clientAddr(%q) = %q, want %q", addr, got, want)
		}
	}
	proxied := &Guard{ClientAddr: func(*http.Request) string { return "2001:db8::5" }}
	if got := proxied.clientAddr(&http.Request{RemoteAddr: "10.0.0.1:80"}); got != "2001:db8::/64" {
		t.Errorf("through a proxy: %q", got)
	}
}
