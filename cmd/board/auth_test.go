package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/app"
	"board/internal/auth"
	"board/internal/user"
)

// The end-to-end tests write as the users they name, as a signed-in client would: a write a test sends without an
// Authorization header gets a token, minted from the program's own signing keys, for the user the request names —
// the body's writerId, or the path's /users/{userId} — and otherwise (an update or delete) for testModerator. The
// tests of authentication itself set their own header, which is left alone.

// testModerator acts for the tests' updates and deletes, which name no user.
var testModerator = auth.Principal{UserID: 999_999_999, Role: auth.RoleModerator}

// minter mints access tokens with the signing keys in one program's user database, each principal's once.
type minter struct {
	*app.TokenMinter
	ring   *user.KeyRing // the keys it signs with, for tests that sign tokens of their own
	mu     sync.Mutex
	tokens map[auth.Principal]string
}

// minters maps the host:port of every service of the running test programs to their minter.
var minters sync.Map

// registerMinter makes writes to urls (a program's services) carry tokens of the user database the program's flags
// name.
func registerMinter(t *testing.T, urls map[string]string, flags []string) *minter {
	t.Helper()
	cfg, err := app.ParseServe(flags, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("flags %v: %v", flags, err)
	}
	e := app.NewEngines(&cfg, discardLogger)
	t.Cleanup(func() { e.Close() })
	tm, err := app.NewTokenMinter(context.Background(), e, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	db, err := e.OpenService(context.Background(), "user")
	if err != nil {
		t.Fatal(err)
	}
	ring, err := user.NewKeyRing(db, user.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := &minter{TokenMinter: tm, ring: ring, tokens: map[auth.Principal]string{}}
	for _, u := range urls {
		if parsed, err := url.Parse(u); err == nil {
			minters.Store(parsed.Host, m)
		}
	}
	return m
}

// minterOf returns the minter of a program's services.
func minterOf(t *testing.T, p *program) *minter {
	t.Helper()
	m, ok := minters.Load(strings.TrimPrefix(p.urls["article"], "http://"))
	if !ok {
		t.Fatal("no minter for the program")
	}
	return m.(*minter)
}

// token returns an access token for p, valid for an hour.
func (m *minter) token(t testing.TB, p auth.Principal) string {
	t.Helper()
	tok, err := m.cached(p)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (m *minter) cached(p auth.Principal) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tok, ok := m.tokens[p]; ok {
		return tok, nil
	}
	tok, err := m.Mint(p)
	if err == nil {
		m.tokens[p] = tok
	}
	return tok, err
}

// userInPath finds the user a like or view path names.
var userInPath = regexp.MustCompile(`/users/(\d+)(/|$)`)

// actingUser is whom a test's write acts as: the user its path or body names, else testModerator.
func actingUser(req *http.Request) auth.Principal {
	if m := userInPath.FindStringSubmatch(req.URL.Path); m != nil {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		return auth.Principal{UserID: id, Role: auth.RoleUser}
	}
	if req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			var named struct{ WriterID apijson.ID }
			if json.NewDecoder(body).Decode(&named) == nil && named.WriterID > 0 {
				return auth.Principal{UserID: int64(named.WriterID), Role: auth.RoleUser}
			}
		}
	}
	return testModerator
}

// authorizing adds the token of the acting user to the writes sent to a registered program.
type authorizing struct{ next http.RoundTripper }

// noTokenHeader on a test's request asks the transport to send it without a token; it is not sent on.
const noTokenHeader = "X-Test-No-Token"

func (a authorizing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get(noTokenHeader) != "" {
		req = req.Clone(req.Context())
		req.Header.Del(noTokenHeader)
		return a.next.RoundTrip(req)
	}
	if req.Header.Get("Authorization") != "" || req.Method == http.MethodGet || req.Method == http.MethodHead {
		return a.next.RoundTrip(req)
	}
	m, ok := minters.Load(req.URL.Host)
	if !ok {
		return a.next.RoundTrip(req)
	}
	tok, err := m.(*minter).cached(actingUser(req))
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return a.next.RoundTrip(req)
}

// testServeDefaults come before a test's own flags for every `board serve` the tests start: cheap password hashes
// keep sign-ups fast (the real parameters' cost is measured by the user package's benchmarks), and the rate limits
// are off but for the tests of them, which turn them on, as the tests write far faster than any person.
var testServeDefaults = []string{"--password-hash", "64,1,1", "--rate-limits=false"}

var discardLogger = slog.New(slog.DiscardHandler)
