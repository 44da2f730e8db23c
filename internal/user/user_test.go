package user

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// t0 has sub-millisecond digits and a non-UTC zone: stores must keep milliseconds in UTC.
var t0 = time.Date(2026, 3, 4, 14, 5, 6, 7_891_234, time.FixedZone("KST", 9*60*60))

// firstID is above 2^53, so a float64 on the way would lose digits.
var firstID = snowflake.Compose(t0, 1, 0)

func newTestService(t *testing.T, db *sqldb.DB, clock *snowflaketest.Clock, logger *slog.Logger) *Service {
	t.Helper()
	cfg := Config{Hash: cheap, Now: clock.Now, Logger: logger}
	svc, err := NewService(context.Background(), db, snowflaketest.NewIDs(firstID), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// client calls a test server of Routes and keeps every answer body it got.
type client struct {
	t      *testing.T
	url    string
	bodies *answers
}

// answers are the bodies of every answer a client got; requests may run at once.
type answers struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *answers) Write(p []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.buf.Write(p)
}

func (a *answers) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.String()
}

func newClient(t *testing.T, svc *Service, logger *slog.Logger) client {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := httptest.NewServer(Routes(svc, logger))
	t.Cleanup(srv.Close)
	return client{t: t, url: srv.URL, bodies: &answers{}}
}

// do sends body (a string is sent as is, anything else as JSON) and returns the status, headers and body.
func (c client) do(method, path string, body any) (int, http.Header, []byte) {
	c.t.Helper()
	var in io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		in = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		in = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.url+path, in)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	c.bodies.Write(out)
	return resp.StatusCode, resp.Header, out
}

type creds struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type userBody struct {
	UserID    string `json:"userId"`
	Username  string `json:"username"`
	Role      string `json:"role"`
	CreatedAt string `json:"createdAt"`
}

type tokenBody struct {
	AccessToken string `json:"accessToken"`
	TokenType   string `json:"tokenType"`
	ExpiresAt   string `json:"expiresAt"`
}

type errorBody struct{ Code, Message string }

func decode[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// wantError checks an error answer's status and code.
func (c client) wantError(method, path string, body any, status int, code string) {
	c.t.Helper()
	got, _, raw := c.do(method, path, body)
	if e := decode[errorBody](c.t, raw); got != status || e.Code != code {
		c.t.Errorf("%s %s %v: %d %s, want %d %s", method, path, body, got, raw, status, code)
	}
}

func TestSignUpSignInGet(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		clock := snowflaketest.NewClock(t0)
		svc := newTestService(t, db, clock, nil)
		c := newClient(t, svc, nil)

		status, _, raw := c.do("POST", "/v1/users", creds{"Alice_01", "correct horse"})
		if status != http.StatusCreated {
			t.Fatalf("sign up: %d %s", status, raw)
		}
		u := decode[userBody](t, raw)
		want := userBody{UserID: fmt.Sprint(firstID), Username: "alice_01", Role: "user", CreatedAt: "2026-03-04T05:05:06.007Z"}
		if u != want {
			t.Errorf("sign up answered %+v, want %+v", u, want)
		}
		status, _, raw = c.do("GET", "/v1/users/"+u.UserID, nil)
		if got := decode[userBody](t, raw); status != http.StatusOK || got != want {
			t.Errorf("get: %d %+v, want %+v", status, got, want)
		}

		for _, name := range []string{"alice_01", "ALICE_01", "Alice_01"} {
			status, h, raw := c.do("POST", "/v1/tokens", creds{name, "correct horse"})
			if status != http.StatusOK {
				t.Fatalf("sign in as %s: %d %s", name, status, raw)
			}
			tok := decode[tokenBody](t, raw)
			if tok.TokenType != "Bearer" || tok.AccessToken == "" || h.Get("Cache-Control") != "no-store" {
				t.Errorf("sign in answered %s with Cache-Control %q", raw, h.Get("Cache-Control"))
			}
			// Tokens are dated in whole seconds: expiresAt is the token's exp.
			if want := "2026-03-04T06:05:06.000Z"; tok.ExpiresAt != want {
				t.Errorf("expiresAt %s, want %s (an hour from now)", tok.ExpiresAt, want)
			}
		}
	})
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		c := newClient(t, svc, nil)
		if status, _, raw := c.do("POST", "/v1/users", creds{"bob", "password1"}); status != http.StatusCreated {
			t.Fatalf("sign up: %d %s", status, raw)
		}
		for _, tc := range []struct {
			method, path string
			body         any
			status       int
			code         string
		}{
			{"POST", "/v1/users", creds{"ab", "password1"}, 400, "INVALID_USERNAME"},
			{"POST", "/v1/users", creds{strings.Repeat("a", 31), "password1"}, 400, "INVALID_USERNAME"},
			{"POST", "/v1/users", creds{"with space", "password1"}, 400, "INVALID_USERNAME"},
			{"POST", "/v1/users", creds{"dash-name", "password1"}, 400, "INVALID_USERNAME"},
			{"POST", "/v1/users", creds{"\u212Aelvin", "password1"}, 400, "INVALID_USERNAME"}, // the Kelvin sign lowers to k
			{"POST", "/v1/users", creds{"héllo", "password1"}, 400, "INVALID_USERNAME"},
			{"POST", "/v1/users", creds{"carol", "short"}, 400, "INVALID_PASSWORD"},
			{"POST", "/v1/users", creds{"carol", "1234567"}, 400, "INVALID_PASSWORD"},
			{"POST", "/v1/users", creds{"carol", strings.Repeat("p", 129)}, 400, "INVALID_PASSWORD"},
			{"POST", "/v1/users", creds{"carol", strings.Repeat("비", 129)}, 400, "INVALID_PASSWORD"},
			{"POST", "/v1/users", `{"username":"carol"}`, 400, "MISSING_FIELD"},
			{"POST", "/v1/users", `{"password":"password1"}`, 400, "MISSING_FIELD"},
			{"POST", "/v1/users", `{"username":1,"password":"password1"}`, 400, "INVALID_JSON"},
			{"POST", "/v1/users", `not json`, 400, "INVALID_JSON"},
			{"POST", "/v1/users", ``, 400, "INVALID_JSON"},
			{"POST", "/v1/users", `{"username":"x","password":"` + strings.Repeat("p", 70000) + `"}`, 413, "BODY_TOO_LARGE"},
			{"POST", "/v1/users", creds{"bob", "password1"}, 409, "USERNAME_TAKEN"},
			{"POST", "/v1/users", creds{"BOB", "other password"}, 409, "USERNAME_TAKEN"},
			{"POST", "/v1/tokens", creds{"bob", "password2"}, 401, "BAD_CREDENTIALS"},
			{"POST", "/v1/tokens", creds{"nobody", "password1"}, 401, "BAD_CREDENTIALS"},
			{"POST", "/v1/tokens", creds{"x", "password1"}, 401, "BAD_CREDENTIALS"}, // not even a valid name
			{"POST", "/v1/tokens", creds{"bob", ""}, 401, "BAD_CREDENTIALS"},
			{"POST", "/v1/tokens", `{"username":"bob"}`, 400, "MISSING_FIELD"},
			{"POST", "/v1/tokens", `[]`, 400, "INVALID_JSON"},
			{"GET", "/v1/users/12345", nil, 404, "USER_NOT_FOUND"},
			{"GET", "/v1/users/abc", nil, 400, "INVALID_USER_ID"},
			{"GET", "/v1/users/-1", nil, 400, "INVALID_USER_ID"},
		} {
			c.wantError(tc.method, tc.path, tc.body, tc.status, tc.code)
		}
		// A wrong password and an unknown user read the same.
		_, _, wrong := c.do("POST", "/v1/tokens", creds{"bob", "password2"})
		_, _, unknown := c.do("POST", "/v1/tokens", creds{"nobody", "password1"})
		if !bytes.Equal(wrong, unknown) {
			t.Errorf("wrong password answered %s, unknown user %s", wrong, unknown)
		}
	})
}

func TestUsernamesAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		ctx := context.Background()
		u, err := svc.SignUp(ctx, "MiXeD_Case", "password1")
		if err != nil {
			t.Fatal(err)
		}
		if u.Username != "mixed_case" {
			t.Errorf("stored %q", u.Username)
		}
		for _, name := range []string{"mixed_case", "MIXED_CASE", "Mixed_Case"} {
			if _, err := svc.SignUp(ctx, name, "password2"); fault.KindOf(err) != fault.Conflict {
				t.Errorf("sign up as %s: %v, want a conflict", name, err)
			}
			if got, err := svc.ByUsername(ctx, name); err != nil || got != u {
				t.Errorf("by username %s: %+v, %v", name, got, err)
			}
		}
		// The unique index holds by itself, without the check before the insert.
		_, err = db.ExecContext(ctx, "INSERT INTO users (user_id, username, password_hash, role, created_at) VALUES (1, 'mixed_case', 'x', 'user', ?)", t0)
		if !sqldb.IsDuplicate(err) {
			t.Errorf("second row of one name: %v, want a duplicate", err)
		}
	})
}

// Many sign-ups of one name at once, in different cases: one wins, the rest get 409, none a 500.
func TestConcurrentSignUpsOfOneName(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		c := newClient(t, svc, nil)
		const n = 12
		statuses := make(chan int, n)
		var wg sync.WaitGroup
		for i := range n {
			name := "racer"
			if i%2 == 1 {
				name = "RACER"
			}
			wg.Go(func() {
				status, _, _ := c.do("POST", "/v1/users", creds{name, fmt.Sprintf("password%d", i)})
				statuses <- status
			})
		}
		wg.Wait()
		close(statuses)
		count := map[int]int{}
		for s := range statuses {
			count[s]++
		}
		if count[201] != 1 || count[409] != n-1 {
			t.Errorf("statuses %v, want one 201 and %d 409", count, n-1)
		}
	})
}

// A token from sign-in verifies with the shared verifier fed by the service's own JWK Set, and names the user.
func TestTokenVerifiesWithJWKS(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		clock := snowflaketest.NewClock(t0)
		svc := newTestService(t, db, clock, nil)
		c := newClient(t, svc, nil)
		_, _, raw := c.do("POST", "/v1/users", creds{"dora", "password1"})
		u := decode[userBody](t, raw)
		if _, err := svc.Grant(context.Background(), "DORA", auth.RoleModerator); err != nil {
			t.Fatal(err)
		}
		_, _, raw = c.do("POST", "/v1/tokens", creds{"dora", "password1"})
		tok := decode[tokenBody](t, raw)

		v := auth.NewVerifier(auth.JWKS(http.DefaultClient, c.url+JWKSPath), auth.VerifierConfig{Now: clock.Now})
		p, err := v.Verify(context.Background(), tok.AccessToken)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(p.UserID) != u.UserID || p.Role != auth.RoleModerator {
			t.Errorf("token names %v, want user %s, moderator", p, u.UserID)
		}
		// The claims as written: sub a string, role, iat and exp.
		var claims map[string]any
		payload, _ := decodeSegment(t, tok.AccessToken, 1)
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		if claims["sub"] != u.UserID || claims["role"] != "moderator" || claims["iat"] == nil || claims["exp"] == nil {
			t.Errorf("claims %v", claims)
		}
		header, _ := decodeSegment(t, tok.AccessToken, 0)
		if h := decode[map[string]any](t, header); h["alg"] != "EdDSA" || h["kid"] != svc.keys.Published()[0].ID {
			t.Errorf("header %v", h)
		}
	})
}

func TestJWKSHoldsPublicKeysOnly(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		clock := snowflaketest.NewClock(t0)
		svc := newTestService(t, db, clock, nil)
		if _, err := Rotate(context.Background(), db, clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := svc.keys.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := newClient(t, svc, nil)
		status, h, raw := c.do("GET", JWKSPath, nil)
		if status != http.StatusOK || h.Get("Cache-Control") != "public, max-age=5" {
			t.Errorf("jwks: %d, Cache-Control %q", status, h.Get("Cache-Control"))
		}
		var set struct{ Keys []map[string]any }
		if err := json.Unmarshal(raw, &set); err != nil {
			t.Fatal(err)
		}
		if len(set.Keys) != 2 {
			t.Fatalf("%d keys, want 2: %s", len(set.Keys), raw)
		}
		for _, k := range set.Keys {
			if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["kid"] == "" || k["x"] == "" {
				t.Errorf("key %v", k)
			}
			if _, ok := k["d"]; ok {
				t.Errorf("the JWK Set holds a private key: %v", k)
			}
		}
		for _, k := range svc.keys.Published() {
			if bytes.Contains(raw, []byte(b64(k.Private.Seed()))) {
				t.Error("the JWK Set holds a private key's seed")
			}
		}
	})
}

// Every sign-in path costs exactly one hash: the unknown user's (against the dummy hash), the wrong password's and
// the right one's. Counting them tells what timing would, without a clock.
func TestSignInCostsOneHashEitherWay(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		ctx := context.Background()
		if _, err := svc.SignUp(ctx, "erin", "password1"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, username, password string
			ok                       bool
		}{
			{"unknown user", "nobody", "password1", false},
			{"invalid username", "-", "password1", false},
			{"wrong password", "erin", "password2", false},
			{"right password", "erin", "password1", true},
		} {
			before := svc.hasher.computed.Load()
			_, err := svc.SignIn(ctx, tc.username, tc.password)
			if got := svc.hasher.computed.Load() - before; got != 1 {
				t.Errorf("%s: %d hashes, want 1", tc.name, got)
			}
			if (err == nil) != tc.ok {
				t.Errorf("%s: %v", tc.name, err)
			}
			if !tc.ok {
				if fe, _ := fault.As(err); fe == nil || fe.Code != "BAD_CREDENTIALS" || fe != errBadCredentials {
					t.Errorf("%s: %v, want BAD_CREDENTIALS", tc.name, err)
				}
			}
		}
	})
}

// TestSignInTiming measures sign-ins for an unknown user and for a known user with a wrong password at the default
// hash parameters, and logs both: it never fails on the figures (a shared machine's timing proves nothing), but
// `go test -run SignInTiming -v` shows them.
func TestSignInTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("measures hashes at the default parameters")
	}
	db := sqldbtest.OpenSQLite(t, Migrate)
	svc, err := NewService(context.Background(), db, snowflaketest.NewIDs(firstID), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := svc.SignUp(ctx, "frank", "password1"); err != nil {
		t.Fatal(err)
	}
	const rounds = 8
	var unknown, wrong []time.Duration
	for range rounds { // interleaved, so that a noisy neighbour hits both alike
		for _, tc := range []struct {
			name string
			into *[]time.Duration
		}{{"nobody", &unknown}, {"frank", &wrong}} {
			start := time.Now()
			if _, err := svc.SignIn(ctx, tc.name, "password2"); fault.KindOf(err) != fault.Unauthenticated {
				t.Fatalf("sign in as %s: %v", tc.name, err)
			}
			*tc.into = append(*tc.into, time.Since(start))
		}
	}
	t.Logf("sign-in at m=%d KiB, t=%d, p=%d, median of %d: unknown user %v, wrong password %v",
		DefaultHashParams.Memory, DefaultHashParams.Time, DefaultHashParams.Threads, rounds, median(unknown), median(wrong))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// Neither a password nor a hash appears in any answer or log line, across sign-up, sign-in (right, wrong, unknown),
// get, a conflict and a request that fails inside (a cancelled wait for a hash).
func TestNoSecretsInLogsOrAnswers(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		var logs bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		svc := newTestService(t, db, snowflaketest.NewClock(t0), logger)
		c := newClient(t, svc, logger)
		const password = "Tr0ub4dor&3-secret"
		_, _, raw := c.do("POST", "/v1/users", creds{"grace", password})
		u := decode[userBody](t, raw)
		c.do("POST", "/v1/users", creds{"grace", password})
		c.do("POST", "/v1/users", creds{"shorty", "short"})
		c.do("POST", "/v1/tokens", creds{"grace", password})
		c.do("POST", "/v1/tokens", creds{"grace", password + "x"})
		c.do("POST", "/v1/tokens", creds{"nobody", password})
		c.do("GET", "/v1/users/"+u.UserID, nil)
		c.do("GET", JWKSPath, nil)
		// A failure that is logged: every turn to hash taken, so the request's wait ends in a 503.
		for range cap(svc.hasher.sem) {
			svc.hasher.sem <- struct{}{}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		req := httptest.NewRequestWithContext(ctx, "POST", "/v1/tokens", strings.NewReader(`{"username":"grace","password":"`+password+`"}`))
		rec := httptest.NewRecorder()
		Routes(svc, logger).ServeHTTP(rec, req)
		cancel()
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("sign-in with no turn to hash: %d %s, want 503", rec.Code, rec.Body)
		}
		c.bodies.Write(rec.Body.Bytes())
		for range cap(svc.hasher.sem) {
			<-svc.hasher.sem
		}

		var hash string
		if err := db.QueryRowContext(context.Background(), "SELECT password_hash FROM users WHERE username = 'grace'").Scan(&hash); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "request failed") {
			t.Errorf("the 503 was not logged; logs:\n%s", logs.String())
		}
		for what, text := range map[string]string{"answers": c.bodies.String(), "logs": logs.String()} {
			for _, secret := range []string{password, "$argon2id$", hash, strings.Split(hash, "$")[5]} {
				if strings.Contains(text, secret) {
					t.Errorf("the %s hold %q:\n%s", what, secret, text)
				}
			}
		}
	})
}

func TestGrant(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := newTestService(t, db, snowflaketest.NewClock(t0), nil)
		ctx := context.Background()
		u, err := svc.SignUp(ctx, "heidi", "password1")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := svc.Grant(ctx, "Heidi", auth.RoleModerator); err != nil || got.Role != auth.RoleModerator || got.ID != u.ID {
			t.Errorf("grant: %+v, %v", got, err)
		}
		if got, _ := svc.Get(ctx, u.ID); got.Role != auth.RoleModerator {
			t.Errorf("after grant: %+v", got)
		}
		if _, err := svc.Grant(ctx, "heidi", "admin"); fault.KindOf(err) != fault.Invalid {
			t.Errorf("grant admin: %v", err)
		}
		if _, err := svc.Grant(ctx, "nobody", auth.RoleModerator); fault.KindOf(err) != fault.NotFound {
			t.Errorf("grant to nobody: %v", err)
		}
		if m, err := svc.Create(ctx, "ivan", "password1", auth.RoleModerator); err != nil || m.Role != auth.RoleModerator {
			t.Errorf("create a moderator: %+v, %v", m, err)
		}

		// Each grant wrote its event, with the version the user's row holds, in its transaction.
		if _, err := svc.Grant(ctx, "heidi", auth.RoleUser); err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(ctx, "SELECT event_type, record_key, payload FROM outbox ORDER BY outbox_id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var typ, payload string
			var key int64
			if err := rows.Scan(&typ, &key, &payload); err != nil {
				t.Fatal(err)
			}
			r := decode[event.Role](t, []byte(payload))
			if key != u.ID || int64(r.UserID) != u.ID {
				t.Errorf("event of user %d keyed %d: %s", u.ID, key, payload)
			}
			got = append(got, fmt.Sprintf("%s %s %d", typ, r.Role, r.RoleVersion))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := []string{"USER_ROLE_CHANGED moderator 1", "USER_ROLE_CHANGED user 2"}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("outbox holds %v, want %v", got, want)
		}
		var version int64
		if err := db.QueryRowContext(ctx, "SELECT role_version FROM users WHERE user_id = ?", u.ID).Scan(&version); err != nil || version != 2 {
			t.Errorf("role_version %d, %v", version, err)
		}
	})
}

// banned is a standing table that bans one user.
type banned struct {
	userID int64
	ban    auth.Ban
	err    error
}

func (b banned) Lookup(userID int64) (auth.Role, *auth.Ban, error) {
	if b.err != nil {
		return "", nil, b.err
	}
	if userID == b.userID {
		return "", &b.ban, nil
	}
	return "", nil, nil
}

// A banned user's sign-in answers 403 BANNED with the reason and end; a wrong password still answers 401, so that
// nobody but the user learns of the ban.
func TestSignInBanned(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	ctx := context.Background()
	until := time.Date(2031, 1, 2, 3, 4, 5, 600e6, time.UTC)
	standing := &banned{ban: auth.Ban{Reason: "spam", Until: &until}}
	svc, err := NewService(ctx, db, snowflaketest.NewIDs(firstID), Config{Hash: cheap, Standing: standing})
	if err != nil {
		t.Fatal(err)
	}
	judy, err := svc.SignUp(ctx, "judy", "password1")
	if err != nil {
		t.Fatal(err)
	}
	standing.userID = judy.ID
	c := newClient(t, svc, nil)
	status, _, raw := c.do("POST", "/v1/tokens", creds{"judy", "password1"})
	body := decode[map[string]any](t, raw)
	if status != 403 || body["code"] != "BANNED" || body["reason"] != "spam" || body["until"] != "2031-01-02T03:04:05.600Z" {
		t.Errorf("sign-in of a banned user: %d %s", status, raw)
	}
	c.wantError("POST", "/v1/tokens", creds{"judy", "wrong-password"}, 401, "BAD_CREDENTIALS")
	if _, err := svc.SignUp(ctx, "kim", "password1"); err != nil {
		t.Fatal(err)
	}
	if status, _, raw := c.do("POST", "/v1/tokens", creds{"kim", "password1"}); status != 200 {
		t.Errorf("sign-in of another user: %d %s", status, raw)
	}
	standing.err = fault.Unavailablef(nil, "STANDING_UNAVAILABLE", "loading")
	c.wantError("POST", "/v1/tokens", creds{"kim", "password1"}, 503, "STANDING_UNAVAILABLE")
}

func TestConfigChecks(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{TokenTTL: 13 * time.Hour}, {Reload: time.Second, Activation: time.Millisecond},
		{Hash: HashParams{Memory: 1, Time: 1, Threads: 1}}} {
		if _, err := NewKeyRing(nil, cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}
