package user

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-redis/redis_rate/v10"

	"board/internal/auth"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/ratelimit"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// OIDCProviderEnv names the test OIDC provider's binary (scripts/oidc-provider build prints it). CI sets it; without
// it the tests build the provider themselves when the Go toolchain can.
const OIDCProviderEnv = "BOARD_TEST_OIDC_PROVIDER"

var providerBuild struct {
	once sync.Once
	bin  string
	err  error
}

// providerBinary returns the path of zitadel/oidc's example server.
func providerBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(OIDCProviderEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: %v", OIDCProviderEnv, bin, err)
		}
		return bin
	}
	providerBuild.once.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			providerBuild.err = err
			return
		}
		out, err := exec.Command("../../scripts/oidc-provider", "build", "--build-dir", filepath.Join(cache, "board-oidc-provider")).Output()
		if err != nil {
			providerBuild.err = fmt.Errorf("scripts/oidc-provider build: %w", err)
			return
		}
		_, providerBuild.bin, _ = strings.Cut(strings.TrimSpace(string(out)), "=")
	})
	if providerBuild.err != nil {
		t.Skipf("%s is not set, and the provider could not be built here: %v", OIDCProviderEnv, providerBuild.err)
	}
	return providerBuild.bin
}

// providerUser is a user of the test provider's users file.
type providerUser struct {
	ID, Username, Password, Email string
	EmailVerified                 bool
	PreferredLanguage             string
}

// testProvider is a running instance of the provider.
type testProvider struct {
	issuer string
	stop   func() // kills it, at once
}

const testRedirect = "http://localhost:8080/oidc/zit/callback"

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProvider runs the provider on port with users, until the test ends.
func startProvider(t *testing.T, port int, users ...providerUser) *testProvider {
	t.Helper()
	bin := providerBinary(t)
	dir := t.TempDir()
	byID := map[string]providerUser{}
	for _, u := range users {
		u.PreferredLanguage = "en"
		byID[u.ID] = u
	}
	raw, err := json.Marshal(byID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "USERS_FILE="+filepath.Join(dir, "users.json"), "REDIRECT_URI="+testRedirect)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(stop)
	p := &testProvider{issuer: fmt.Sprintf("http://localhost:%d/", port), stop: stop}
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := http.Get(p.issuer + ".well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("the OIDC provider exited: %s", log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OIDC provider did not come up: %v %s", err, log.String())
		}
	}
}

// login signs in at the provider as a browser would, headless, from the authorization URL, and returns the query
// the provider sends back to the redirect URI (code and state).
func login(t *testing.T, authURL, username, password string) url.Values {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// redirect sends req and returns where the answer, which must be a redirect, points.
	redirect := func(req *http.Request) *url.URL {
		t.Helper()
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			t.Fatalf("%s %s: %d %s, want a redirect", req.Method, req.URL, resp.StatusCode, b.String())
		}
		loc, err := req.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	get := func(u string) *url.URL {
		t.Helper()
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return redirect(req)
	}
	loginPage := get(authURL) // /login/username?authRequestID=ID
	id := loginPage.Query().Get("authRequestID")
	form := url.Values{"id": {id}, "username": {username}, "password": {password}}
	req, err := http.NewRequest("POST", loginPage.Scheme+"://"+loginPage.Host+"/login/username", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	back := get(redirect(req).String()) // /auth/callback?id=ID, then the redirect URI
	if got := back.Scheme + "://" + back.Host + back.Path; got != testRedirect {
		t.Fatalf("the provider sent the browser to %s, want %s", back, testRedirect)
	}
	return back.Query()
}

// oidcRig is a user service with providers, served over HTTP as Routes serves it.
type oidcRig struct {
	t     *testing.T
	svc   *Service
	db    *sqldb.DB
	clock *snowflaketest.Clock
}

func newOIDCRig(t *testing.T, db *sqldb.DB, providers ...OIDCProvider) *oidcRig {
	t.Helper()
	return newOIDCRigWith(t, db, Config{OIDC: providers})
}

// newOIDCRigWith is newOIDCRig with more of the service's configuration (its clock, hash and logger are the rig's).
func newOIDCRigWith(t *testing.T, db *sqldb.DB, cfg Config) *oidcRig {
	t.Helper()
	clock := snowflaketest.NewClock(time.Now())
	cfg.Hash, cfg.Now, cfg.Logger = cheap, clock.Now, httpiotest.Logger
	svc, err := NewService(context.Background(), db, snowflaketest.NewIDs(firstID), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &oidcRig{t: t, svc: svc, db: db, clock: clock}
}

func zit(issuer string) OIDCProvider {
	return OIDCProvider{Name: "zit", Issuer: issuer, ClientID: "web", ClientSecret: "secret", RedirectURL: testRedirect}
}

// start calls GET /v1/oidc/{provider}/start in JSON mode, or when user is not 0 POST /v1/oidc/{provider}/link as
// user (epoch 0) with signUps' password, and returns the authorization URL and the state cookie's value.
func (r *oidcRig) start(provider string, user int64) (authURL, cookie string) {
	r.t.Helper()
	if user != 0 {
		return r.began(r.link(provider, auth.Principal{UserID: user, Role: auth.RoleUser}, `{"password":"correct horse"}`))
	}
	req, _ := http.NewRequest("GET", "/v1/oidc/"+provider+"/start", nil)
	req.Header.Set("Accept", "application/json")
	return r.began(recordTo(Routes(r.svc, httpiotest.Logger), req))
}

// link calls POST /v1/oidc/{provider}/link as p with body, in JSON mode.
func (r *oidcRig) link(provider string, p auth.Principal, body string) recorded {
	req, _ := http.NewRequest("POST", "/v1/oidc/"+provider+"/link", strings.NewReader(body))
	req.Header.Set("Accept", "application/json")
	return recordTo(Routes(r.svc, httpiotest.Logger), req.WithContext(auth.NewContext(req.Context(), p)))
}

// began returns the authorization URL and the state cookie of a start's or a link's answer.
func (r *oidcRig) began(rec recorded) (authURL, cookie string) {
	r.t.Helper()
	if rec.status != http.StatusOK {
		r.t.Fatalf("start or link: %d %s", rec.status, rec.body)
	}
	for _, c := range rec.cookies {
		if c.Name == OIDCStateCookie {
			if !c.HttpOnly || c.MaxAge != int(OIDCStateTTL.Seconds()) {
				r.t.Errorf("state cookie %+v: want HttpOnly, Max-Age %v", c, OIDCStateTTL)
			}
			cookie = c.Value
		}
	}
	if cookie == "" {
		r.t.Fatalf("start set no %s cookie", OIDCStateCookie)
	}
	return decode[struct{ AuthorizationURL string }](r.t, []byte(rec.body)).AuthorizationURL, cookie
}

type recorded struct {
	status  int
	header  http.Header
	body    string
	cookies []*http.Cookie
}

func recordTo(h http.Handler, req *http.Request) recorded {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	return recorded{resp.StatusCode, resp.Header, rec.Body.String(), resp.Cookies()}
}

// callback calls GET /v1/oidc/{provider}/callback with query and the state cookie.
func (r *oidcRig) callback(provider string, query url.Values, cookie string) recorded {
	r.t.Helper()
	req, _ := http.NewRequest("GET", "/v1/oidc/"+provider+"/callback?"+query.Encode(), nil)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: OIDCStateCookie, Value: cookie})
	}
	return recordTo(Routes(r.svc, httpiotest.Logger), req)
}

type signInBody struct {
	AccessToken, TokenType, ExpiresAt, UserID string
	Created, Linked                           bool
}

// signIn runs a whole sign-in as the provider's user and returns the callback's answer.
func (r *oidcRig) signIn(provider, username string, asUser int64) recorded {
	r.t.Helper()
	authURL, cookie := r.start(provider, asUser)
	return r.callback(provider, login(r.t, authURL, username, "pw-"+username), cookie)
}

func (r *oidcRig) wantSignIn(rec recorded, created, linked bool) signInBody {
	r.t.Helper()
	if rec.status != http.StatusOK {
		r.t.Fatalf("callback: %d %s", rec.status, rec.body)
	}
	b := decode[signInBody](r.t, []byte(rec.body))
	if b.Created != created || b.Linked != linked || b.TokenType != "Bearer" || b.AccessToken == "" {
		r.t.Errorf("callback: %s, want created %v, linked %v, a Bearer token", rec.body, created, linked)
	}
	// The token names the user, at their token epoch.
	part := strings.Split(b.AccessToken, ".")
	payload, err := base64.RawURLEncoding.DecodeString(part[1])
	if err != nil {
		r.t.Fatal(err)
	}
	claims := decode[struct {
		Sub string
		Sep int64
	}](r.t, payload)
	var epoch int64
	if err := r.db.QueryRowContext(context.Background(), "SELECT token_epoch FROM users WHERE user_id = ?", b.UserID).Scan(&epoch); err != nil {
		r.t.Fatal(err)
	}
	if claims.Sub != b.UserID || claims.Sep != epoch {
		r.t.Errorf("token claims %s, want sub %s, sep %d", payload, b.UserID, epoch)
	}
	return b
}

func wantCode(t *testing.T, rec recorded, status int, code string) {
	t.Helper()
	if rec.status != status || !strings.Contains(rec.body, `"code":"`+code+`"`) {
		t.Errorf("got %d %s, want %d %s", rec.status, rec.body, status, code)
	}
}

func (r *oidcRig) exec(query string, args ...any) {
	r.t.Helper()
	if _, err := r.db.ExecContext(context.Background(), query, args...); err != nil {
		r.t.Fatal(err)
	}
}

func provUser(name, email string, verified bool) providerUser {
	return providerUser{ID: "sub-" + name, Username: name, Password: "pw-" + name, Email: email, EmailVerified: verified}
}

// Sign-in with a real OIDC provider (zitadel/oidc's example server): a first sign-in makes a user (the name taken is
// suffixed; no password; the verified e-mail is theirs, with its event), the next signs in as them; a verified
// e-mail links to the account that has it; an unverified one is refused; signed in, the identity links to the
// account, and an identity of another account is refused.
func TestOIDCAccounts(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t),
		provUser("ann", "Ann@Example.com", true), provUser("ben", "ben@example.com", true),
		provUser("cat", "cat@example.com", false), provUser("dan", "dan@example.com", true))
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		r := newOIDCRig(t, db, zit(p.issuer))
		ctx := context.Background()
		taken := signUps(t, r.svc, "ann", "ben_board", "dan_board", "eve")

		first := r.wantSignIn(r.signIn("zit", "ann", 0), true, false)
		var name, hash string
		var email sql.NullString
		var version int64
		if err := db.QueryRowContext(ctx, "SELECT username, password_hash, email, email_version FROM users WHERE user_id = ?", first.UserID).
			Scan(&name, &hash, &email, &version); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "ann") || name == "ann" || hash != "" || email.String != "ann@example.com" || version != 1 {
			t.Errorf("made user %q, hash %q, email %v v%d; want ann + digits, no password, ann@example.com v1", name, hash, email, version)
		}
		if _, err := r.svc.SignIn(ctx, name, ""); err == nil {
			t.Error("a password sign-in of a user without a password succeeded")
		}
		var payload string
		if err := db.QueryRowContext(ctx, "SELECT payload FROM outbox WHERE event_type = ?", string(event.UserEmailVerified)).Scan(&payload); err != nil {
			t.Fatal(err)
		}
		if ev := decode[event.EmailVerified](t, []byte(payload)); fmt.Sprint(ev.UserID) != first.UserID || ev.Email != "ann@example.com" || ev.EmailVersion != 1 {
			t.Errorf("USER_EMAIL_VERIFIED %s", payload)
		}

		again := r.wantSignIn(r.signIn("zit", "ann", 0), false, false)
		if again.UserID != first.UserID {
			t.Errorf("second sign-in as user %s, want %s", again.UserID, first.UserID)
		}

		// ben_board verified ben@example.com; the epoch shows in the token.
		r.exec("UPDATE users SET email = ?, token_epoch = 3 WHERE user_id = ?", "ben@example.com", taken[1])
		if b := r.wantSignIn(r.signIn("zit", "ben", 0), false, true); b.UserID != fmt.Sprint(taken[1]) {
			t.Errorf("ben signed in as %s, want ben_board %d", b.UserID, taken[1])
		}

		if m := r.mails(); len(m) != 1 || m[0].To != "ben@example.com" || int64(m[0].UserID) != taken[1] {
			t.Errorf("mails %+v, want the notice of the link to ben@example.com", m)
		}

		wantCode(t, r.signIn("zit", "cat", 0), http.StatusForbidden, "EMAIL_NOT_VERIFIED")

		if b := r.wantSignIn(r.signIn("zit", "dan", taken[2]), false, true); b.UserID != fmt.Sprint(taken[2]) {
			t.Errorf("dan linked to %s, want dan_board %d", b.UserID, taken[2])
		}
		if b := r.wantSignIn(r.signIn("zit", "dan", 0), false, false); b.UserID != fmt.Sprint(taken[2]) {
			t.Errorf("dan signed in as %s, want dan_board %d", b.UserID, taken[2])
		}
		wantCode(t, r.signIn("zit", "dan", taken[3]), http.StatusConflict, "IDENTITY_TAKEN")
		if acc, err := r.svc.Account(ctx, taken[2]); err != nil || len(acc.Identities) != 1 || acc.Identities[0].Provider != "zit" ||
			acc.Identities[0].Email != "dan@example.com" || !acc.HasPassword {
			t.Errorf("dan_board's account %+v, %v: want the identity zit, dan@example.com", acc, err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM user_identity WHERE provider = 'zit'").Scan(&n); err != nil || n != 3 {
			t.Errorf("%d identities (%v), want ann's, ben's and dan's", n, err)
		}
	})
}

// First sign-ins of one identity at once make one user, and each signs in as it.
func TestOIDCConcurrentFirstSignIns(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true))
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		r := newOIDCRig(t, db, zit(p.issuer))
		const n = 4
		backs, cookies := make([]url.Values, n), make([]string, n)
		for i := range n {
			authURL, cookie := r.start("zit", 0)
			backs[i], cookies[i] = login(t, authURL, "ann", "pw-ann"), cookie
		}
		answers := make([]recorded, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { answers[i] = r.callback("zit", backs[i], cookies[i]) })
		}
		wg.Wait()
		users, created := map[string]bool{}, 0
		for _, a := range answers {
			if a.status != http.StatusOK {
				t.Fatalf("callback: %d %s", a.status, a.body)
			}
			b := decode[signInBody](t, []byte(a.body))
			users[b.UserID] = true
			if b.Created {
				created++
			}
		}
		var rows int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM users").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if len(users) != 1 || created != 1 || rows != 1 {
			t.Errorf("%d users signed in, %d made, %d rows; want one", len(users), created, rows)
		}
	})
}

// The state: bound to the browser by its cookie, single use, 10 minutes; the provider's refusal; the nonce; a 302
// to the provider without Accept: application/json; an unknown provider.
func TestOIDCStateAndNonce(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true))
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		r := newOIDCRig(t, db, zit(p.issuer))

		authURL, cookie := r.start("zit", 0)
		back := login(t, authURL, "ann", "pw-ann")
		wantCode(t, r.callback("zit", back, ""), http.StatusBadRequest, "INVALID_STATE")
		wantCode(t, r.callback("zit", back, "another-browsers-state"), http.StatusBadRequest, "INVALID_STATE")
		forged := url.Values{"code": back["code"], "state": {"forged"}}
		wantCode(t, r.callback("zit", forged, "forged"), http.StatusBadRequest, "INVALID_STATE")
		r.wantSignIn(r.callback("zit", back, cookie), true, false)
		wantCode(t, r.callback("zit", back, cookie), http.StatusBadRequest, "INVALID_STATE") // replayed

		authURL, cookie = r.start("zit", 0)
		back = login(t, authURL, "ann", "pw-ann")
		r.clock.Add(OIDCStateTTL)
		wantCode(t, r.callback("zit", back, cookie), http.StatusBadRequest, "INVALID_STATE") // expired

		_, cookie = r.start("zit", 0)
		denied := url.Values{"error": {"access_denied"}, "state": {cookie}}
		wantCode(t, r.callback("zit", denied, cookie), http.StatusBadRequest, "OIDC_DENIED")

		// A nonce other than the one asked for, as a replayed ID token would carry.
		authURL, cookie = r.start("zit", 0)
		hash := sha256.Sum256([]byte(cookie))
		r.exec("UPDATE oidc_state SET nonce = 'forged' WHERE state_hash = ?", hash[:])
		wantCode(t, r.callback("zit", login(t, authURL, "ann", "pw-ann"), cookie), http.StatusBadRequest, "INVALID_NONCE")

		rec := recordTo(Routes(r.svc, httpiotest.Logger), httptest.NewRequest("GET", "/v1/oidc/zit/start", nil))
		loc, _ := url.Parse(rec.header.Get("Location"))
		if q := loc.Query(); rec.status != http.StatusFound || !strings.HasPrefix(loc.String(), p.issuer+"auth?") ||
			q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" ||
			q.Get("state") == "" || q.Get("client_id") != "web" || q.Get("redirect_uri") != testRedirect {
			t.Errorf("start: %d to %s, want a 302 to the provider with PKCE S256, nonce and state", rec.status, loc)
		}
		wantCode(t, recordTo(Routes(r.svc, httpiotest.Logger), httptest.NewRequest("GET", "/v1/oidc/nope/start", nil)),
			http.StatusNotFound, "OIDC_PROVIDER_NOT_FOUND")
		wantCode(t, r.callback("nope", back, cookie), http.StatusNotFound, "OIDC_PROVIDER_NOT_FOUND")
	})
}

// ID tokens the provider really signed, but not for this client or not by this issuer, are refused: one issued to
// the client api, and one from a second instance of the provider (same client, another issuer) whose endpoints
// the configured issuer's discovery was swapped for.
func TestOIDCForeignIDTokens(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true))
	other := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true))
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		r := newOIDCRig(t, db, zit(p.issuer))
		zp := r.svc.oidc["zit"]
		e, err := zp.endpoints(context.Background(), r.clock.Now())
		if err != nil {
			t.Fatal(err)
		}

		api := *e
		api.oauth.ClientID = "api" // the code is asked for and exchanged as api; the verifier still wants web
		zp.ready = &api
		wantCode(t, r.signIn("zit", "ann", 0), http.StatusUnauthorized, "INVALID_ID_TOKEN")

		ctx := oidc.InsecureIssuerURLContext(oidc.ClientContext(context.Background(), zp.client), p.issuer)
		swapped, err := oidc.NewProvider(ctx, other.issuer)
		if err != nil {
			t.Fatal(err)
		}
		if zp.ready, err = zp.use(swapped); err != nil {
			t.Fatal(err)
		}
		wantCode(t, r.signIn("zit", "ann", 0), http.StatusUnauthorized, "INVALID_ID_TOKEN")

		zp.ready = e
		r.wantSignIn(r.signIn("zit", "ann", 0), true, false)
	})
}

// A provider down at start answers 503 at a sign-in, and is discovered once it is up, without a restart.
func TestOIDCProviderDown(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	db := sqldbtest.OpenSQLite(t, Migrate)
	r := newOIDCRig(t, db, zit(fmt.Sprintf("http://localhost:%d/", port)))
	rec := recordTo(Routes(r.svc, httpiotest.Logger), httptest.NewRequest("GET", "/v1/oidc/zit/start", nil))
	wantCode(t, rec, http.StatusServiceUnavailable, "OIDC_PROVIDER_UNAVAILABLE")
	startProvider(t, port, provUser("ann", "ann@example.com", true))
	r.clock.Add(oidcRetry)
	r.wantSignIn(r.signIn("zit", "ann", 0), true, false)
}

// A provider that goes down between the browser's visit and the callback: 503, and the state is spent.
func TestOIDCProviderDownMidSignIn(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true))
	r := newOIDCRig(t, sqldbtest.OpenSQLite(t, Migrate), zit(p.issuer))
	authURL, cookie := r.start("zit", 0)
	back := login(t, authURL, "ann", "pw-ann")
	p.stop()
	wantCode(t, r.callback("zit", back, cookie), http.StatusServiceUnavailable, "OIDC_PROVIDER_UNAVAILABLE")
}

// The provider's keys out of reach when the ID token is verified: 503, not a bad token.
func TestOIDCKeysUnreachable(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true))
	r := newOIDCRig(t, sqldbtest.OpenSQLite(t, Migrate), zit(p.issuer))
	r.svc.oidc["zit"].client = &http.Client{Transport: keysRefused{http.DefaultTransport}}
	wantCode(t, r.signIn("zit", "ann", 0), http.StatusServiceUnavailable, "OIDC_PROVIDER_UNAVAILABLE")
}

// keysRefused fails every request for the provider's keys as a connection refused would, and sends the others.
type keysRefused struct{ http.RoundTripper }

func (k keysRefused) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/keys" {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return k.RoundTripper.RoundTrip(req)
}

// Expired states are swept; live ones stay.
func TestOIDCStateSweep(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	r := newOIDCRig(t, db)
	now := r.clock.Now().UTC()
	for i, expires := range []time.Time{now.Add(-time.Second), now.Add(-time.Hour), now.Add(time.Minute)} {
		r.exec("INSERT INTO oidc_state (state_hash, provider, nonce, code_verifier, expires_at) VALUES (?, 'zit', 'n', 'v', ?)",
			[]byte{byte(i)}, expires)
	}
	if err := r.svc.sweepOIDCStates(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM oidc_state").Scan(&n); err != nil || n != 1 {
		t.Errorf("%d states left (%v), want the live one", n, err)
	}
}

func TestUsernameBase(t *testing.T) {
	for hint, want := range map[string]string{"Ann.Lee@example.com": "ann_lee", "a": "user", "": "user", "-x-": "user",
		"x-y": "x_y", "Łukasz Nowak": "ukasz_nowak", strings.Repeat("long", 10): strings.Repeat("long", 10)[:MaxUsername]} {
		if got := usernameBase(hint); got != want {
			t.Errorf("usernameBase(%q) = %q, want %q", hint, got, want)
		}
	}
}

func TestParseOIDCProvider(t *testing.T) {
	p, err := ParseOIDCProvider("name=corp,issuer=https://id.example.com,client-id=board,client-secret=s3cret")
	if err != nil || p != (OIDCProvider{Name: "corp", Issuer: "https://id.example.com", ClientID: "board", ClientSecret: "s3cret"}) {
		t.Errorf("got %+v, %v", p, err)
	}
	if strings.Contains(fmt.Sprint(p), "s3cret") {
		t.Errorf("%v shows the secret", p)
	}
	for _, bad := range []string{"", "name=Corp,issuer=https://x,client-id=a", "name=c,issuer=ftp://x,client-id=a",
		"name=c,issuer=https://x", "name=c,issuer=https://x,client-id=a,scope=x", "name=c,issuer=https://x,client-id=a,redirect-url=nope"} {
		if _, err := ParseOIDCProvider(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// mails returns the MAIL_REQUESTED payloads in the outbox, oldest first.
func (r *oidcRig) mails() []event.Mail {
	r.t.Helper()
	rows, err := r.db.QueryContext(context.Background(), "SELECT payload FROM outbox WHERE event_type = ? ORDER BY outbox_id", string(event.MailRequested))
	if err != nil {
		r.t.Fatal(err)
	}
	defer rows.Close()
	var out []event.Mail
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, decode[event.Mail](r.t, payload))
	}
	if err := rows.Err(); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// identities returns the providers of the user's identities.
func (r *oidcRig) identities(user int64) []string {
	r.t.Helper()
	acc, err := r.svc.Account(context.Background(), user)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, id := range acc.Identities {
		out = append(out, id.Provider+":"+id.Email)
	}
	return out
}

func principal(user, epoch int64) auth.Principal {
	return auth.Principal{UserID: user, Role: auth.RoleUser, TokenEpoch: epoch}
}

// Linking needs more than a token: start ignores one (it only signs in); link takes the account's password, or,
// for an account without one, a fresh sign-in at the provider. A link lands only while the session that began it
// lasts, and the account's verified address is told of it.
func TestOIDCLinking(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true), provUser("ben", "ben@example.com", true),
		provUser("cat", "cat@example.com", true), provUser("dan", "dan@example.com", true))
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		r := newOIDCRig(t, db, zit(p.issuer))
		ctx := context.Background()
		ids := signUps(t, r.svc, "ann_board", "ben_board", "cat_board")
		annB, benB, catB := ids[0], ids[1], ids[2]
		r.exec("UPDATE users SET email = 'annb@example.org' WHERE user_id = ?", annB)

		// A token on start is ignored: ann signs in as herself, a new user, and nothing is linked to ann_board.
		req := httptest.NewRequest("GET", "/v1/oidc/zit/start", nil)
		req.Header.Set("Accept", "application/json")
		authURL, cookie := r.began(recordTo(httpiotest.As(Routes(r.svc, httpiotest.Logger), annB), req))
		made := r.wantSignIn(r.callback("zit", login(t, authURL, "ann", "pw-ann"), cookie), true, false)
		if made.UserID == fmt.Sprint(annB) || len(r.identities(annB)) != 0 {
			t.Fatalf("start with ann_board's token signed in as %s and linked %v", made.UserID, r.identities(annB))
		}
		madeID, _ := strconv.ParseInt(made.UserID, 10, 64)

		wantCode(t, r.link("zit", principal(annB, 0), `{}`), http.StatusBadRequest, "MISSING_FIELD")
		wantCode(t, r.link("zit", principal(annB, 0), `{"password":"wrong"}`), http.StatusUnauthorized, "BAD_CREDENTIALS")
		wantCode(t, r.link("nope", principal(annB, 0), `{"password":"correct horse"}`), http.StatusNotFound, "OIDC_PROVIDER_NOT_FOUND")
		if b := r.wantSignIn(r.signIn("zit", "ben", annB), false, true); b.UserID != fmt.Sprint(annB) {
			t.Errorf("ben linked to %s, want ann_board %d", b.UserID, annB)
		}
		mails := r.mails()
		if len(mails) != 1 || mails[0].To != "annb@example.org" || int64(mails[0].UserID) != annB || mails[0].Kind != event.MailNotification ||
			mails[0].Subject != "A sign-in was connected to your account" || !strings.Contains(mails[0].Text, "zit (ben@example.com)") {
			t.Errorf("mails %+v, want one notice of the link to annb@example.org", mails)
		}

		// The session that began the link ends before the callback: nothing is linked.
		authURL, cookie = r.start("zit", benB)
		back := login(t, authURL, "cat", "pw-cat")
		if _, err := r.svc.EndSessions(ctx, benB); err != nil {
			t.Fatal(err)
		}
		wantCode(t, r.callback("zit", back, cookie), http.StatusUnauthorized, "UNAUTHENTICATED")
		wantCode(t, r.link("zit", principal(benB, 0), `{"password":"correct horse"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
		r.began(r.link("zit", principal(benB, 1), `{"password":"correct horse"}`)) // the new session may
		// The account is deleted meanwhile (a deletion bumps the epoch too: deleted_at alone must do).
		authURL, cookie = r.start("zit", catB)
		back = login(t, authURL, "cat", "pw-cat")
		r.exec("UPDATE users SET deleted_at = ? WHERE user_id = ?", r.clock.Now().UTC(), catB)
		wantCode(t, r.callback("zit", back, cookie), http.StatusUnauthorized, "UNAUTHENTICATED")
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM user_identity WHERE user_id IN (?, ?)", benB, catB).Scan(&n); err != nil || n != 0 {
			t.Errorf("%d identities (%v) linked by ended sessions", n, err)
		}

		// An account without a password: no password, and the provider is asked for a fresh sign-in.
		wantCode(t, r.link("zit", principal(madeID, 0), `{"password":"x"}`), http.StatusConflict, "NO_PASSWORD")
		authURL, cookie = r.began(r.link("zit", principal(madeID, 0), `{}`))
		if u, _ := url.Parse(authURL); u.Query().Get("prompt") != "login" || u.Query().Get("max_age") != "0" {
			t.Errorf("authorization URL %s, want prompt=login and max_age=0", authURL)
		}
		r.wantSignIn(r.callback("zit", login(t, authURL, "dan", "pw-dan"), cookie), false, true)
		if got := r.identities(madeID); len(got) != 2 {
			t.Errorf("identities %v, want ann's and dan's", got)
		}
		if m := r.mails(); len(m) != 2 || m[1].To != "ann@example.com" || !strings.Contains(m[1].Text, "dan@example.com") {
			t.Errorf("mails %+v, want a notice to ann@example.com", m)
		}
		// A provider that answered from an older sign-in than the link's: refused.
		authURL, cookie = r.began(r.link("zit", principal(madeID, 0), `{}`))
		hash := sha256.Sum256([]byte(cookie))
		r.exec("UPDATE oidc_state SET expires_at = ? WHERE state_hash = ?", r.clock.Now().Add(time.Hour).UTC(), hash[:])
		wantCode(t, r.callback("zit", login(t, authURL, "cat", "pw-cat"), cookie), http.StatusUnauthorized, "REAUTHENTICATION_REQUIRED")
	})
}

// DELETE /v1/users/me/identities/{provider} removes the caller's identity there, unless it is their last way in.
func TestOIDCUnlink(t *testing.T) {
	t.Parallel()
	p := startProvider(t, freePort(t), provUser("ann", "ann@example.com", true), provUser("ben", "ben@example.com", true))
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		r := newOIDCRig(t, db, zit(p.issuer))
		unlink := func(user int64, provider string) recorded {
			return recordTo(httpiotest.As(Routes(r.svc, httpiotest.Logger), user), httptest.NewRequest("DELETE", "/v1/users/me/identities/"+provider, nil))
		}
		made, _ := strconv.ParseInt(r.wantSignIn(r.signIn("zit", "ann", 0), true, false).UserID, 10, 64)
		wantCode(t, unlink(made, "zit"), http.StatusConflict, "LAST_SIGN_IN")
		wantCode(t, unlink(made, "other"), http.StatusNotFound, "IDENTITY_NOT_FOUND")
		r.exec("INSERT INTO user_identity (identity_hash, provider, subject, user_id, linked_at) VALUES (?, 'other', 's', ?, ?)",
			identityHash("other", "s"), made, r.clock.Now().UTC())
		if rec := unlink(made, "zit"); rec.status != http.StatusNoContent {
			t.Errorf("unlink with another identity left: %d %s", rec.status, rec.body)
		}
		wantCode(t, unlink(made, "other"), http.StatusConflict, "LAST_SIGN_IN")

		ann := signUps(t, r.svc, "ann_board")[0]
		r.wantSignIn(r.signIn("zit", "ben", ann), false, true)
		if rec := unlink(ann, "zit"); rec.status != http.StatusNoContent || len(r.identities(ann)) != 0 {
			t.Errorf("unlink of an account with a password: %d %s, identities %v", rec.status, rec.body, r.identities(ann))
		}
		wantCode(t, unlink(ann, "zit"), http.StatusNotFound, "IDENTITY_NOT_FOUND")
	})
}

// The OIDC routes share a per-client budget; a link's password is held to the per-account sign-in limit too.
func TestOIDCRateLimits(t *testing.T) {
	t.Parallel()
	b := redisclienttest.Mini(t)
	perHour := func(n int) ratelimit.Rule {
		return ratelimit.Rule{Limit: redis_rate.Limit{Rate: n, Burst: n, Period: time.Hour}}
	}
	limiter := ratelimit.New(b.Client, b.Prefix, map[string]ratelimit.Rule{OIDCLimit: perHour(4), SignInAccountLimit: perHour(2)}, httpiotest.Logger)
	r := newOIDCRigWith(t, sqldbtest.OpenSQLite(t, Migrate), Config{Limiter: limiter})
	ann := signUps(t, r.svc, "ann")[0]
	routes := Routes(r.svc, httpiotest.Logger)
	from := func(method, target, addr string) recorded {
		req := httptest.NewRequest(method, target, strings.NewReader(`{"password":"wrong"}`))
		req.RemoteAddr = addr + ":4000"
		return recordTo(httpiotest.As(routes, ann), req)
	}
	wantCode(t, from("GET", "/v1/oidc/nope/start", "192.0.2.1"), http.StatusNotFound, "OIDC_PROVIDER_NOT_FOUND")
	wantCode(t, from("GET", "/v1/oidc/nope/callback?state=s", "192.0.2.1"), http.StatusNotFound, "OIDC_PROVIDER_NOT_FOUND")
	r.svc.oidc["zit"] = &oidcProvider{} // known, so that the password is checked; never reached
	wantCode(t, from("POST", "/v1/oidc/zit/link", "192.0.2.1"), http.StatusUnauthorized, "BAD_CREDENTIALS")
	wantCode(t, from("POST", "/v1/oidc/zit/link", "192.0.2.1"), http.StatusUnauthorized, "BAD_CREDENTIALS")
	wantCode(t, from("GET", "/v1/oidc/nope/start", "192.0.2.1"), http.StatusTooManyRequests, "RATE_LIMITED")
	wantCode(t, from("GET", "/v1/oidc/nope/callback?state=s", "192.0.2.1"), http.StatusTooManyRequests, "RATE_LIMITED")
	// Another client has its own budget, but ann's password has had its two guesses.
	wantCode(t, from("GET", "/v1/oidc/nope/start", "192.0.2.2"), http.StatusNotFound, "OIDC_PROVIDER_NOT_FOUND")
	wantCode(t, from("POST", "/v1/oidc/zit/link", "192.0.2.2"), http.StatusTooManyRequests, "RATE_LIMITED")
}
