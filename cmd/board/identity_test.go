package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"board/internal/auth"
)

// authAnswer is what a request with an explicit Authorization header got back.
type authAnswer struct {
	status int
	header http.Header
	body   []byte
}

// sendAs sends body as JSON with the given Authorization header, or none at all when it is "" (the test transport
// adds no token then).
func sendAs(t *testing.T, authorization, method, url string, body any) authAnswer {
	t.Helper()
	req := jsonRequest(t, method, url, body)
	if authorization == "" {
		req.Header.Set(noTokenHeader, "1")
	} else {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return authAnswer{resp.StatusCode, resp.Header, raw}
}

func (a authAnswer) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(a.body, &e)
	return e.Code
}

func bearer(token string) string { return "Bearer " + token }

// signUp creates a user through the user service and signs them in, returning their id and token.
func signUp(t *testing.T, p *program, name string) (int64, string) {
	t.Helper()
	var u struct{ UserID, Username, Role string }
	a := sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": name, "password": name + "-password"})
	if a.status != http.StatusCreated {
		t.Fatalf("sign up %s: %d %s", name, a.status, a.body)
	}
	if err := json.Unmarshal(a.body, &u); err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseInt(u.UserID, 10, 64)
	if err != nil || u.Username != name || u.Role != "user" {
		t.Fatalf("sign up %s: %s", name, a.body)
	}
	return id, signIn(t, p, name)
}

func signIn(t *testing.T, p *program, name string) string {
	t.Helper()
	a := sendAs(t, "", "POST", p.urls["user"]+"/v1/tokens", map[string]any{"username": name, "password": name + "-password"})
	var tok struct{ AccessToken, TokenType, ExpiresAt string }
	if a.status != http.StatusOK || json.Unmarshal(a.body, &tok) != nil || tok.TokenType != "Bearer" || tok.AccessToken == "" {
		t.Fatalf("sign in %s: %d %s", name, a.status, a.body)
	}
	return tok.AccessToken
}

// keyID is the kid of a token's header.
func keyID(t *testing.T, token string) string {
	t.Helper()
	header, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	var h struct{ Kid string }
	if err != nil || json.Unmarshal(raw, &h) != nil || h.Kid == "" {
		t.Fatalf("token header %q", header)
	}
	return h.Kid
}

// Every write of every producer refuses a request without a valid token, and writes nothing: no token, a scheme
// other than Bearer, a malformed, forged or expired token, alg none. A view from a signed-out reader is not counted.
func TestWritesNeedAValidToken(t *testing.T) {
	t.Parallel()
	flags := testFlags(t, t.TempDir())
	p := startProgram(t, flags)
	article := newArticle(t, p)
	var comment struct{ CommentID string }
	call(t, "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": article, "content": "c", "writerId": 1},
		http.StatusCreated, &comment)

	m := minterOf(t, p)
	key, err := m.ring.Signing()
	if err != nil {
		t.Fatal(err)
	}
	expired, _, err := auth.Sign(key, auth.Principal{UserID: 1, Role: auth.RoleUser}, time.Now().Add(-3*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	good := m.token(t, auth.Principal{UserID: 1, Role: auth.RoleUser})
	stranger, err := auth.NewKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	stranger.ID = keyID(t, good) // a forger who knows the key id but not the key
	forged, _, err := auth.Sign(stranger, auth.Principal{UserID: 1, Role: auth.RoleModerator}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	header, rest, _ := strings.Cut(good, ".")
	payload, _, _ := strings.Cut(rest, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"`+keyID(t, good)+`"}`)) + "." + payload + "."
	badTokens := map[string]string{"no token": "", "basic": "Basic dXNlcjpwYXNz", "malformed": "Bearer x.y.z",
		"expired": bearer(expired), "forged": bearer(forged), "alg none": bearer(none), "header only": bearer(header)}

	likes := p.urls["like"] + "/v1/article-likes/articles/" + article + "/users/1"
	writes := []struct{ method, url string }{
		{"POST", p.urls["article"] + "/v1/articles"},
		{"PUT", p.urls["article"] + "/v1/articles/" + article},
		{"DELETE", p.urls["article"] + "/v1/articles/" + article},
		{"POST", p.urls["comment"] + "/v1/comments"},
		{"POST", p.urls["comment"] + "/v2/comments"},
		{"DELETE", p.urls["comment"] + "/v2/comments/" + comment.CommentID},
		{"POST", likes}, {"POST", likes + "/pessimistic-lock-2"}, {"POST", likes + "/optimistic-lock"},
		{"DELETE", likes},
		{"POST", p.urls["view"] + "/v1/article-views/articles/" + article + "/users/1"},
	}
	body := map[string]any{"title": "t", "content": "c", "boardId": 3, "articleId": article}
	for _, w := range writes {
		for name, authz := range badTokens {
			a := sendAs(t, authz, w.method, w.url, body)
			if a.status != http.StatusUnauthorized || a.code() != "UNAUTHENTICATED" || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with %s: %d %v %s", w.method, w.url, name, a.status, a.header, a.body)
			}
		}
	}
	// Nothing was written.
	var counts struct{ likes, views, comments int64 }
	call(t, "GET", p.urls["like"]+"/v1/article-likes/articles/"+article+"/count", nil, http.StatusOK, &counts.likes)
	call(t, "GET", p.urls["view"]+"/v1/article-views/articles/"+article+"/count", nil, http.StatusOK, &counts.views)
	call(t, "GET", p.urls["comment"]+"/v2/comments/articles/"+article+"/count", nil, http.StatusOK, &counts.comments)
	if counts.likes != 0 || counts.views != 0 || counts.comments != 1 {
		t.Errorf("after the refused writes: %+v, want no like, no view, the one comment", counts)
	}
	call(t, "GET", p.urls["article"]+"/v1/articles/"+article, nil, http.StatusOK, nil)
	// The same writes with a good token go through (the view counts once).
	a := sendAs(t, bearer(good), "POST", p.urls["view"]+"/v1/article-views/articles/"+article+"/users/1", nil)
	if a.status != http.StatusOK || string(bytes.TrimSpace(a.body)) != "1" {
		t.Errorf("view with a good token: %d %s", a.status, a.body)
	}
	var v1 struct{ CommentID string }
	call(t, "POST", p.urls["comment"]+"/v1/comments", map[string]any{"articleId": article, "content": "c", "writerId": 1},
		http.StatusCreated, &v1)
	call(t, "GET", p.urls["comment"]+"/v1/comments/"+v1.CommentID, nil, http.StatusOK, nil)
	call(t, "DELETE", p.urls["comment"]+"/v1/comments/"+v1.CommentID, nil, http.StatusNoContent, nil)
	call(t, "GET", p.urls["comment"]+"/v2/comments/"+comment.CommentID, nil, http.StatusOK, nil)
	for _, strategy := range []string{"/pessimistic-lock-1", "/pessimistic-lock-2", "/optimistic-lock"} {
		call(t, "POST", likes+strategy, nil, http.StatusCreated, nil)
		call(t, "DELETE", likes+strategy, nil, http.StatusNoContent, nil)
	}
}

// A user signs up, signs in and writes as themselves; the writer of what they write is their id, named or not.
func TestSignUpSignInAndWrite(t *testing.T) {
	t.Parallel()
	p := startProgram(t, testFlags(t, t.TempDir()))
	alice, token := signUp(t, p, "alice")
	a := sendAs(t, bearer(token), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3})
	var art articleOut
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &art) != nil || art.WriterID != strconv.FormatInt(alice, 10) {
		t.Fatalf("article without writerId: %d %s, want writer %d", a.status, a.body, alice)
	}
	var got struct{ UserID, Username, Role, CreatedAt string }
	call(t, "GET", p.urls["user"]+"/v1/users/"+strconv.FormatInt(alice, 10), nil, http.StatusOK, &got)
	if got.Username != "alice" || got.Role != "user" || got.CreatedAt == "" {
		t.Errorf("GET user: %+v", got)
	}
	var many []struct{ UserID, Username string }
	call(t, "GET", p.urls["user"]+"/v1/users?ids=1,"+strconv.FormatInt(alice, 10), nil, http.StatusOK, &many)
	if len(many) != 1 || many[0].Username != "alice" {
		t.Errorf("GET users 1 and alice: %+v", many)
	}
	if a := sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": "ALICE", "password": "another-password"}); a.status != http.StatusConflict || a.code() != "USERNAME_TAKEN" {
		t.Errorf("sign up ALICE: %d %s", a.status, a.body)
	}
	for name, pw := range map[string]string{"alice": "wrong-password", "nobody": "alice-password"} {
		if a := sendAs(t, "", "POST", p.urls["user"]+"/v1/tokens", map[string]any{"username": name, "password": pw}); a.status != http.StatusUnauthorized || a.code() != "BAD_CREDENTIALS" {
			t.Errorf("sign in %s/%s: %d %s", name, pw, a.status, a.body)
		}
	}
}

// Nobody writes as someone else, and only a writer or a moderator changes what the writer wrote.
func TestOwnership(t *testing.T) {
	t.Parallel()
	flags := testFlags(t, t.TempDir())
	p := startProgram(t, flags)
	alice, aliceToken := signUp(t, p, "alice")
	_, bobToken := signUp(t, p, "bob")
	signUp(t, p, "mod")
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"user", "grant", "--username", "mod", "--role", "moderator"}, engineArgs(flags)...),
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatalf("board user grant: %v\n%s", err, out.String())
	}
	modToken := signIn(t, p, "mod")

	aliceID := strconv.FormatInt(alice, 10)
	a := sendAs(t, bearer(aliceToken), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "alice's", "content": "c", "boardId": 3})
	var art articleOut
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &art) != nil {
		t.Fatalf("alice writes: %d %s", a.status, a.body)
	}
	articleURL := p.urls["article"] + "/v1/articles/" + art.ArticleID
	forbidden := []struct {
		what, method, url string
		body              any
	}{
		{"bob writes as alice", "POST", p.urls["article"] + "/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3, "writerId": aliceID}},
		{"bob edits alice's article", "PUT", articleURL, map[string]any{"title": "bob was here", "content": "c"}},
		{"bob deletes alice's article", "DELETE", articleURL, nil},
		{"bob comments as alice", "POST", p.urls["comment"] + "/v2/comments", map[string]any{"articleId": art.ArticleID, "content": "c", "writerId": aliceID}},
		{"bob likes as alice", "POST", p.urls["like"] + "/v1/article-likes/articles/" + art.ArticleID + "/users/" + aliceID, nil},
		{"bob views as alice", "POST", p.urls["view"] + "/v1/article-views/articles/" + art.ArticleID + "/users/" + aliceID, nil},
	}
	for _, f := range forbidden {
		if a := sendAs(t, bearer(bobToken), f.method, f.url, f.body); a.status != http.StatusForbidden || a.code() != "FORBIDDEN" {
			t.Errorf("%s: %d %s, want 403 FORBIDDEN", f.what, a.status, a.body)
		}
	}
	var still articleOut
	call(t, "GET", articleURL, nil, http.StatusOK, &still)
	if still != art {
		t.Errorf("after bob's attempts the article is %+v, want %+v", still, art)
	}

	// Alice's comment: bob may not delete it, a moderator may.
	a = sendAs(t, bearer(aliceToken), "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": art.ArticleID, "content": "mine"})
	var comment struct{ CommentID, WriterID string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &comment) != nil || comment.WriterID != aliceID {
		t.Fatalf("alice comments: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(bobToken), "DELETE", p.urls["comment"]+"/v2/comments/"+comment.CommentID, nil); a.status != http.StatusForbidden {
		t.Errorf("bob deletes alice's comment: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(modToken), "DELETE", p.urls["comment"]+"/v2/comments/"+comment.CommentID, nil); a.status != http.StatusNoContent {
		t.Errorf("a moderator deletes alice's comment: %d %s", a.status, a.body)
	}

	// Alice edits her own; a moderator deletes it.
	if a := sendAs(t, bearer(aliceToken), "PUT", articleURL, map[string]any{"title": "edited", "content": "c"}); a.status != http.StatusOK {
		t.Errorf("alice edits her article: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(modToken), "DELETE", articleURL, nil); a.status != http.StatusNoContent {
		t.Errorf("a moderator deletes alice's article: %d %s", a.status, a.body)
	}
	call(t, "GET", articleURL, nil, http.StatusNotFound, nil)
}

// engineArgs are the flags of a program's engines (its data directory, databases and Redis), for a command run
// beside it.
func engineArgs(flags []string) []string {
	return pickFlags(flags, "--data-dir", "--mysql-dsn", "--mysql-db-prefix", "--redis-addr", "--redis-prefix")
}

// userDBArgs are the flags that find a program's user database, for a bench that mints tokens with its keys.
func userDBArgs(flags []string) []string {
	return pickFlags(flags, "--data-dir", "--mysql-dsn", "--mysql-db-prefix")
}

// pickFlags returns the named flags, with their values, of flags.
func pickFlags(flags []string, names ...string) []string {
	var out []string
	for i := 0; i+1 < len(flags); i++ {
		if slices.Contains(names, flags[i]) {
			out = append(out, flags[i], flags[i+1])
			i++
		}
	}
	return out
}

// secondInstance starts another program on the first one's databases, Redis and broker, as a second instance of
// every service.
func secondInstance(t *testing.T, first *program) *program {
	t.Helper()
	flags := append(append([]string{}, first.flags...), "--redis-addr", first.redisAddr(), "--kafka-brokers",
		strings.Join(first.logs.kafkaAddrs(), ","))
	return startProgram(t, flags)
}

// A key rotated while two instances run: both publish the new key before either signs with it, and tokens signed
// with the old key keep working on both until they expire.
func TestKeyRotationAcrossInstances(t *testing.T) {
	t.Parallel()
	// A reload each second, so a new key signs after 2 s: the rule holds while every instance's reload runs within the
	// second it has, which a machine busy with the other suites kept from a reload each 100 ms once.
	flags := append(testFlags(t, t.TempDir()), "--signing-key-reload", "1s")
	first := startProgram(t, flags)
	second := secondInstance(t, first)
	_, oldToken := signUp(t, first, "alice")

	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"user", "rotate-key"}, engineArgs(flags)...),
		func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatalf("board user rotate-key: %v\n%s", err, out.String())
	}
	var newToken string
	eventually(t, func() string {
		newToken = signIn(t, second, "alice")
		if keyID(t, newToken) == keyID(t, oldToken) {
			return "the second instance still signs with the old key"
		}
		return ""
	})
	for _, p := range []*program{first, second} {
		var set struct{ Keys []map[string]any }
		call(t, "GET", p.urls["user"]+"/.well-known/jwks.json", nil, http.StatusOK, &set)
		kids := map[string]bool{}
		for _, k := range set.Keys {
			kids[fmt.Sprint(k["kid"])] = true
			if _, private := k["d"]; private {
				t.Errorf("the JWK Set holds a private key: %v", k)
			}
		}
		if !kids[keyID(t, oldToken)] || !kids[keyID(t, newToken)] {
			t.Errorf("%s publishes %v, want the old key and the new", p.urls["user"], kids)
		}
		for name, tok := range map[string]string{"old": oldToken, "new": newToken} {
			a := sendAs(t, bearer(tok), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3})
			if a.status != http.StatusCreated {
				t.Errorf("%s token on %s: %d %s", name, p.urls["article"], a.status, a.body)
			}
		}
	}
}

// Rate limits are one budget across instances: sign-in attempts per client address and writes per user, with
// Retry-After on the refusal.
func TestRateLimitsAcrossInstances(t *testing.T) {
	t.Parallel()
	flags := append(testFlags(t, t.TempDir()), "--rate-limits=true", "--sign-in-rate-limit", "4/1m", "--write-rate-limit", "3/1m")
	first := startProgram(t, flags)
	second := secondInstance(t, first)
	_, token := signUp(t, first, "alice") // the first sign-in attempt
	for i, p := range []*program{first, second, second} {
		a := sendAs(t, "", "POST", p.urls["user"]+"/v1/tokens", map[string]any{"username": "alice", "password": "guess " + strconv.Itoa(i)})
		if a.status != http.StatusUnauthorized {
			t.Errorf("attempt %d: %d %s", i+2, a.status, a.body)
		}
	}
	for _, p := range []*program{first, second} {
		a := sendAs(t, "", "POST", p.urls["user"]+"/v1/tokens", map[string]any{"username": "alice", "password": "alice-password"})
		if retry, _ := strconv.Atoi(a.header.Get("Retry-After")); a.status != http.StatusTooManyRequests || a.code() != "RATE_LIMITED" || retry < 1 {
			t.Errorf("sign-in past the limit on %s: %d %s Retry-After %q", p.urls["user"], a.status, a.body, a.header.Get("Retry-After"))
		}
	}
	for i, p := range []*program{first, second, first, second} {
		a := sendAs(t, bearer(token), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3})
		want := http.StatusCreated
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if a.status != want {
			t.Errorf("write %d: %d %s, want %d", i+1, a.status, a.body, want)
		}
	}
	// Another service's budget is its own.
	if a := sendAs(t, bearer(token), "POST", second.urls["comment"]+"/v2/comments", map[string]any{"articleId": newArticle(t, first), "content": "c"}); a.status != http.StatusCreated {
		t.Errorf("comment after the article limit: %d %s", a.status, a.body)
	}
}

// signInFrom tries a sign-in as a client at addr behind a proxy that names it in X-Real-IP, and returns the status.
func signInFrom(t *testing.T, p *program, addr, name, password string) int {
	t.Helper()
	req := jsonRequest(t, "POST", p.urls["user"]+"/v1/tokens", map[string]string{"username": name, "password": password})
	req.Header.Set("X-Real-IP", addr)
	req.Header.Set(noTokenHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// Guesses at one account from many addresses, through two instances, share the account's budget; the addresses'
// own budgets (named by a trusted proxy's header) are not what stops them, and another account is untouched.
func TestSignInLimitPerAccount(t *testing.T) {
	t.Parallel()
	flags := append(testFlags(t, t.TempDir()), "--rate-limits=true", "--client-ip-header", "X-Real-IP",
		"--sign-in-rate-limit", "100/1m", "--sign-in-account-rate-limit", "4/1h")
	first := startProgram(t, flags)
	second := secondInstance(t, first)
	signUp(t, first, "alice") // one attempt at alice
	signUp(t, first, "bob")
	for i, p := range []*program{first, second, first} {
		if got := signInFrom(t, p, fmt.Sprintf("198.51.100.%d", i+1), "alice", "guess"); got != http.StatusUnauthorized {
			t.Errorf("guess %d: %d, want 401", i+1, got)
		}
	}
	for i, p := range []*program{second, first} {
		if got := signInFrom(t, p, fmt.Sprintf("2001:db8:%d::1", i+1), "alice", "alice-password"); got != http.StatusTooManyRequests {
			t.Errorf("sign-in past alice's budget from a new address: %d, want 429", got)
		}
	}
	if got := signInFrom(t, second, "198.51.100.1", "bob", "bob-password"); got != http.StatusOK {
		t.Errorf("bob from an address that guessed at alice: %d, want 200", got)
	}
}
