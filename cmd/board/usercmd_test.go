package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"board/internal/app"
	"board/internal/auth"
	"board/internal/snowflake"
	"board/internal/user"
)

// userFixture runs 'board user' commands on a test's engines and verifies tokens as the services would.
type userFixture struct {
	t     *testing.T
	flags []string
}

func newUserFixture(t *testing.T) userFixture {
	flags := testFlags(t, t.TempDir())
	return userFixture{t: t, flags: flags}
}

// run runs board user args with stdin and returns stdout.
func (f userFixture) run(stdin string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := userCommandIO(context.Background(), append(args, f.flags...), noEnv, strings.NewReader(stdin), &out, &errOut)
	return out.String(), err
}

func (f userFixture) mustRun(stdin string, args ...string) string {
	f.t.Helper()
	out, err := f.run(stdin, args...)
	if err != nil {
		f.t.Fatalf("board user %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// engines returns engines on the fixture's flags, closed at the end of the test.
func (f userFixture) engines() *app.Engines {
	f.t.Helper()
	cfg := app.Default()
	fs := app.NewFlagSet("test", "Usage", &bytes.Buffer{})
	cfg.EngineFlags(fs)
	if err := app.Parse(fs, f.flags, noEnv); err != nil {
		f.t.Fatal(err)
	}
	e := app.NewEngines(&cfg, discardLogger)
	f.t.Cleanup(func() { e.Close() })
	return e
}

// verify checks token against the JWK Set of a user service on the fixture's database, as a service that has just
// started would.
func (f userFixture) verify(token string) (auth.Principal, error) {
	f.t.Helper()
	ctx := context.Background()
	e := f.engines()
	db, err := e.OpenService(ctx, "user")
	if err != nil {
		f.t.Fatal(err)
	}
	ids, _ := snowflake.New(1, nil)
	svc, err := user.NewService(ctx, db, ids, user.Config{Hash: user.HashParams{Memory: 64, Time: 1, Threads: 1}})
	if err != nil {
		f.t.Fatal(err)
	}
	srv := httptest.NewServer(user.Routes(svc, e.Logger))
	defer srv.Close()
	v := auth.NewVerifier(auth.JWKS(http.DefaultClient, srv.URL+user.JWKSPath), auth.VerifierConfig{})
	return v.Verify(ctx, token)
}

type printedUser struct {
	UserID, Username, Role, CreatedAt string
}

func TestUserCommands(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	out := f.mustRun("s3cret-password\n", "create", "--username", "Operator_1", "--role", "moderator")
	var u printedUser
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatalf("create printed %q: %v", out, err)
	}
	if u.Username != "operator_1" || u.Role != "moderator" || u.UserID == "" || u.CreatedAt == "" {
		t.Errorf("create printed %+v", u)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("create printed the password: %q", out)
	}
	// A second user, whose password line ends in CRLF and has no more lines; then a duplicate, in another case.
	out = f.mustRun("another-password\r\nignored\n", "create", "--username", "plain")
	var plain printedUser
	_ = json.Unmarshal([]byte(out), &plain)
	if plain.Role != "user" {
		t.Errorf("create without --role printed %+v", plain)
	}
	if _, err := f.run("whatever-password\n", "create", "--username", "PLAIN"); err == nil || !strings.Contains(err.Error(), "USERNAME_TAKEN") {
		t.Errorf("duplicate create: %v", err)
	}

	// grant, and back.
	out = f.mustRun("", "grant", "--username", "Plain", "--role", "moderator")
	if !strings.Contains(out, `"role":"moderator"`) {
		t.Errorf("grant printed %q", out)
	}
	f.mustRun("", "grant", "--username", "plain", "--role", "user")

	// token by name carries the user's id and role; by id, the id and --role.
	token := strings.TrimSpace(f.mustRun("", "token", "--username", "OPERATOR_1"))
	if p, err := f.verify(token); err != nil || p.Role != auth.RoleModerator || u.UserID != strconv.FormatInt(p.UserID, 10) {
		t.Errorf("token by username verifies as %v, %v; want user %s, moderator", p, err, u.UserID)
	}
	token = strings.TrimSpace(f.mustRun("", "token", "--user-id", "77"))
	if p, err := f.verify(token); err != nil || p != (auth.Principal{UserID: 77, Role: auth.RoleUser}) {
		t.Errorf("token by id verifies as %v, %v", p, err)
	}
	token = strings.TrimSpace(f.mustRun("", "token", "--user-id", "78", "--role", "moderator", "--ttl", "5m"))
	if p, err := f.verify(token); err != nil || p != (auth.Principal{UserID: 78, Role: auth.RoleModerator}) {
		t.Errorf("moderator token by id verifies as %v, %v", p, err)
	}

	// Tokens carry the user's token epoch: once their sessions are ended, new tokens carry the new one.
	ctx := context.Background()
	db, err := f.engines().OpenService(ctx, "user")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := app.UserService(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	plainID, _ := strconv.ParseInt(plain.UserID, 10, 64)
	if _, err := svc.EndSessions(ctx, plainID); err != nil {
		t.Fatal(err)
	}
	for _, by := range [][]string{{"--username", "plain"}, {"--user-id", plain.UserID}} {
		epochToken := strings.TrimSpace(f.mustRun("", append([]string{"token"}, by...)...))
		if p, err := f.verify(epochToken); err != nil || p.UserID != plainID || p.TokenEpoch != 1 {
			t.Errorf("token %v after the sessions ended verifies as %+v, %v; want epoch 1", by, p, err)
		}
	}

	// rotate-key: the new key is published at once; the token signed before keeps verifying.
	out = f.mustRun("", "rotate-key")
	if !strings.HasPrefix(out, "new signing key ") {
		t.Errorf("rotate-key printed %q", out)
	}
	kid := strings.TrimSuffix(strings.Fields(out)[3], ",")
	if p, err := f.verify(token); err != nil || p.UserID != 78 {
		t.Errorf("a token from before the rotation: %v, %v", p, err)
	}
	keys, err := f.publishedKeys()
	if err != nil || len(keys) != 2 || !slices.Contains(keys, kid) {
		t.Errorf("after rotate-key the JWK Set has %v (%v); want two keys, %s among them", keys, err, kid)
	}
}

// publishedKeys returns the key ids a user service on the fixture's database publishes.
func (f userFixture) publishedKeys() ([]string, error) {
	e := f.engines()
	db, err := e.OpenService(context.Background(), "user")
	if err != nil {
		return nil, err
	}
	ring, err := user.NewKeyRing(db, user.Config{})
	if err != nil {
		return nil, err
	}
	if err := ring.Load(context.Background()); err != nil {
		return nil, err
	}
	var ids []string
	for _, k := range ring.Published() {
		ids = append(ids, k.ID)
	}
	return ids, nil
}

func TestUserCommandErrors(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	f.mustRun("password-one\n", "create", "--username", "exists")
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"", nil},
		{"", []string{"frobnicate"}},
		{"password-two\n", []string{"create"}},                     // no --username
		{"", []string{"create", "--username", "nopass"}},           // empty stdin
		{"\n", []string{"create", "--username", "nopass"}},         // empty first line
		{"short\n", []string{"create", "--username", "shortpass"}}, // too short
		{"password-two\n", []string{"create", "--username", "x"}},  // bad name
		{"password-two\n", []string{"create", "--username", "ok_name", "--role", "admin"}},
		{"", []string{"grant", "--username", "exists"}},                        // no --role
		{"", []string{"grant", "--username", "nobody", "--role", "moderator"}}, // no such user
		{"", []string{"token"}},                                                // neither
		{"", []string{"token", "--username", "exists", "--user-id", "5"}},      // both
		{"", []string{"token", "--username", "nobody"}},                        // no such user
		{"", []string{"token", "--user-id", "-3"}},                             //
		{"", []string{"token", "--user-id", "3", "--ttl", "24h"}},              // too long
		{"", []string{"rotate-key", "--no-such-flag"}},                         //
	} {
		_, err := f.run(tc.stdin, tc.args...)
		t.Logf("board user %s: %v", strings.Join(tc.args, " "), err)
		if err == nil {
			t.Errorf("board user %s with stdin %q: no error", strings.Join(tc.args, " "), tc.stdin)
		}
	}
}

func TestUserCommandHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"create", "--help"}, {"grant", "-h"}, {"token", "--help"}, {"rotate-key", "--help"}} {
		var out, errOut bytes.Buffer
		err := userCommandIO(context.Background(), args, noEnv, strings.NewReader(""), &out, &errOut)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Errorf("board user %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(out.String()+errOut.String(), "Usage") {
			t.Errorf("board user %s printed no usage", strings.Join(args, " "))
		}
	}
}

// The helpers tests and benchmarks mint tokens with: one minter, many tokens, all verifying.
func TestTokenMinter(t *testing.T) {
	t.Parallel()
	f := newUserFixture(t)
	ctx := context.Background()
	e := f.engines()
	m, err := app.NewTokenMinter(ctx, e, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		token, err := m.Mint(auth.Principal{UserID: id, Role: auth.RoleUser})
		if err != nil {
			t.Fatal(err)
		}
		if p, err := f.verify(token); err != nil || p.UserID != id {
			t.Errorf("minted token %d verifies as %v, %v", id, p, err)
		}
	}
	token, err := m.Mint(auth.Principal{UserID: 9, Role: auth.RoleModerator})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f.verify(token); err != nil || p != (auth.Principal{UserID: 9, Role: auth.RoleModerator}) {
		t.Errorf("a moderator's token verifies as %v, %v", p, err)
	}
}

// board user grant publishes the role change itself: a running board applies it to a token signed before it, within
// moments rather than at the relay's next poll or the token's expiry; and back.
func TestGrantReachesRunningServices(t *testing.T) {
	t.Parallel()
	flags := testFlags(t, t.TempDir())
	p := startProgram(t, flags)
	_, bobToken := signUp(t, p, "bob")
	_, erinToken := signUp(t, p, "erin")
	a := sendAs(t, bearer(bobToken), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "bob's", "content": "c", "boardId": 3})
	var art struct{ ArticleID string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &art) != nil {
		t.Fatalf("bob writes: %d %s", a.status, a.body)
	}
	articleURL := p.urls["article"] + "/v1/articles/" + art.ArticleID
	edit := func() int {
		return sendAs(t, bearer(erinToken), "PUT", articleURL, map[string]any{"title": "edited", "content": "c"}).status
	}
	if s := edit(); s != http.StatusForbidden {
		t.Fatalf("erin edits bob's article before the grant: %d", s)
	}
	grant := func(role string) {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"user", "grant", "--username", "erin", "--role", role, "--kafka-brokers",
			strings.Join(p.logs.kafkaAddrs(), ",")}, engineArgs(flags)...)
		if err := run(context.Background(), args, noEnv, &out, &errOut); err != nil {
			t.Fatalf("board user grant: %v\n%s", err, errOut.String())
		}
		if strings.Contains(errOut.String(), "not published") {
			t.Errorf("board user grant did not publish: %s", errOut.String())
		}
	}
	grant("moderator")
	eventually(t, func() string {
		if s := edit(); s != http.StatusOK {
			return fmt.Sprintf("erin, made a moderator, edits with her old token: %d", s)
		}
		return ""
	})
	grant("user")
	eventually(t, func() string {
		if s := edit(); s != http.StatusForbidden {
			return fmt.Sprintf("erin, a user again, edits with her old token: %d", s)
		}
		return ""
	})
}
