package user

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/ratelimit"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// verifiedAs gives user the verified address addr through the routes.
func (a accounts) verifiedAs(user int64, addr string) {
	a.t.Helper()
	httpiotest.WantStatus(a.t, a.as(user, "PUT", "/v1/users/me/email", `{"email":"`+addr+`","password":"correct horse"}`), http.StatusAccepted)
	httpiotest.WantStatus(a.t, a.as(0, "POST", "/v1/email-verifications/"+a.link("verify-email", addr), ""), http.StatusOK)
}

// An address has one spelling: lower-cased, the domain in ASCII (IDNA), the local part ASCII only.
func TestNormalizeEmailOneSpelling(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		" Ann@Example.ORG ":      "ann@example.org",
		"ann@exámple.org":        "ann@xn--exmple-qta.org",
		"ANN@EXÁMPLE.ORG":        "ann@xn--exmple-qta.org",
		"ann@xn--exmple-qta.org": "ann@xn--exmple-qta.org",
		"ann@bücher.example":     "ann@xn--bcher-kva.example",
	} {
		if got, err := NormalizeEmail(in); got != want || err != nil {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ánn@example.org", "аnn@example.org", "ann@exa_mple.org", "ann@xn--zz.org"} {
		if got, err := NormalizeEmail(bad); !isCode(err, "INVALID_EMAIL") {
			t.Errorf("NormalizeEmail(%q) = %q, %v; want INVALID_EMAIL", bad, got, err)
		}
	}
}

// A look-alike of ann's address (an accent in the domain) is another address: a reset asked for it finds no
// account and mails nothing, and no stored address matches it (on MySQL the columns are binary-collated).
func TestLookalikeAddressIsAnotherAddress(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ann := signUps(t, a.svc, "ann")[0]
		a.verifiedAs(ann, "ann@example.org")
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@example.org"}`), http.StatusAccepted)
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`), http.StatusAccepted)
		n := len(a.mails())
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@exámple.org"}`), http.StatusAccepted)
		if ms := a.mails(); len(ms) != n {
			t.Fatalf("a reset for a look-alike address mailed %+v", ms[len(ms)-1])
		}
		const lookalike = "ann@exámple.org" // as a row would hold it, had it come in unnormalized
		for _, q := range []string{"SELECT COUNT(*) FROM users WHERE email = ?", "SELECT COUNT(*) FROM users WHERE pending_email = ?",
			"SELECT COUNT(*) FROM account_token WHERE email = ?"} {
			var count int
			if err := db.QueryRowContext(context.Background(), q, lookalike).Scan(&count); err != nil || count != 0 {
				t.Errorf("%s with a look-alike: %d, %v; want no match", q, count, err)
			}
		}
	})
}

// Ending sessions (a reset, a password change, "end every session") voids every unused mailed link and drops the
// pending address: someone who knew the password and asked to move the account to their address loses that link.
func TestEndingSessionsVoidsPendingEmail(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ids := signUps(t, a.svc, "ann", "ben", "cat")
		ends := map[string]func(user int64, addr string){
			"reset": func(user int64, addr string) {
				httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"`+addr+`"}`), http.StatusAccepted)
				httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets/"+a.link("reset-password", addr), `{"new":"owner new horse"}`), http.StatusNoContent)
			},
			"password change": func(user int64, _ string) {
				httpiotest.WantStatus(t, a.as(user, "PUT", "/v1/users/me/password", `{"current":"correct horse","new":"owner new horse"}`), http.StatusOK)
			},
			"end every session": func(user int64, _ string) {
				httpiotest.WantStatus(t, a.as(user, "DELETE", "/v1/users/me/sessions", ""), http.StatusOK)
			},
		}
		i := 0
		for name, end := range ends {
			user := ids[i]
			i++
			addr := fmt.Sprintf("owner%d@example.org", i)
			a.verifiedAs(user, addr)
			httpiotest.WantStatus(t, a.as(user, "PUT", "/v1/users/me/email", `{"email":"mallory@evil.example","password":"correct horse"}`), http.StatusAccepted)
			evil := a.link("verify-email", "mallory@evil.example")
			end(user, addr)
			if acct, err := a.svc.Account(context.Background(), user); err != nil || acct.PendingEmail != "" || acct.Email != addr {
				t.Errorf("%s: account %+v, %v; want the pending address dropped", name, acct, err)
			}
			httpiotest.WantError(t, a.as(0, "POST", "/v1/email-verifications/"+evil, ""), 400, "INVALID_TOKEN")
		}
	})
}

// An account without a password (made by an identity provider): its token alone neither sets a password nor moves
// its address (409 NO_PASSWORD); a reset link mailed to its verified address sets one; leaving needs the token only.
func TestPasswordlessAccountNeedsResetLink(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ids := signUps(t, a.svc, "ann", "ben")
		ann, ben := ids[0], ids[1]
		a.verifiedAs(ann, "ann@example.org")
		if _, err := db.ExecContext(context.Background(), "UPDATE users SET password_hash = '' WHERE user_id IN (?, ?)", ann, ben); err != nil {
			t.Fatal(err)
		}
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/password", `{"current":"anything at all","new":"attacker horse"}`), http.StatusConflict, "NO_PASSWORD")
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"mallory@evil.example","password":""}`), http.StatusConflict, "NO_PASSWORD")
		if acct, err := a.svc.Account(context.Background(), ann); err != nil || acct.HasPassword || acct.PendingEmail != "" {
			t.Fatalf("after refused changes: %+v, %v", acct, err)
		}
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@example.org"}`), http.StatusAccepted)
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets/"+a.link("reset-password", "ann@example.org"), `{"new":"owner new horse"}`), http.StatusNoContent)
		if _, err := a.svc.SignIn(context.Background(), "ann", "owner new horse"); err != nil {
			t.Errorf("sign-in with the password set by the reset link: %v", err)
		}
		httpiotest.WantStatus(t, a.as(ben, "DELETE", "/v1/users/me", `{"content":"keep"}`), http.StatusAccepted)
	})
}

// With a token, passwords are guessed no faster than at sign-in: a password change, an address change and leaving
// draw from the account's sign-in budget.
func TestPasswordChecksShareSignInLimit(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		b := redisclienttest.Mini(t)
		limiter := ratelimit.New(b.Client, b.Prefix, map[string]ratelimit.Rule{
			SignInAccountLimit: {Limit: redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Hour}}}, httpiotest.Logger)
		a := newAccounts(t, db, Config{Limiter: limiter})
		ids := signUps(t, a.svc, "ann", "ben")
		ann, ben := ids[0], ids[1]
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/password", `{"current":"guess one","new":"attacker horse"}`), 401, "BAD_CREDENTIALS")
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"m@evil.example","password":"guess two"}`), 401, "BAD_CREDENTIALS")
		httpiotest.WantError(t, a.as(ann, "DELETE", "/v1/users/me", `{"password":"guess three","content":"keep"}`), 401, "BAD_CREDENTIALS")
		for _, r := range []httpiotest.Reply{
			a.as(ann, "PUT", "/v1/users/me/password", `{"current":"correct horse","new":"attacker horse"}`),
			a.as(ann, "PUT", "/v1/users/me/email", `{"email":"m@evil.example","password":"correct horse"}`),
			a.as(ann, "DELETE", "/v1/users/me", `{"password":"correct horse","content":"keep"}`),
		} {
			httpiotest.WantStatus(t, r, http.StatusTooManyRequests)
		}
		if _, err := a.svc.SignIn(context.Background(), "ann", "correct horse"); fault.KindOf(err) != fault.RateLimited {
			t.Errorf("sign-in after three guesses with a token: %v, want rate limited", err)
		}
		// Another account's budget is its own.
		httpiotest.WantStatus(t, a.as(ben, "PUT", "/v1/users/me/password", `{"current":"correct horse","new":"brand new horse"}`), http.StatusOK)
	})
}

// A new reset request voids only the links past the newest maxLiveResets, so whoever spends an address's mail budget
// cannot void the link its owner is about to open; using any link voids the others.
func TestResetRequestsKeepRecentLinks(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ann := signUps(t, a.svc, "ann")[0]
		a.verifiedAs(ann, "ann@example.org")
		request := func() string {
			t.Helper()
			a.clock.Add(time.Second)
			httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@example.org"}`), http.StatusAccepted)
			return a.link("reset-password", "ann@example.org")
		}
		var links []string
		for range maxLiveResets + 1 {
			links = append(links, request())
		}
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+links[0], `{"new":"owner new horse"}`), 400, "INVALID_TOKEN")
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets/"+links[1], `{"new":"owner new horse"}`), http.StatusNoContent)
		for _, l := range links[2:] {
			httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+l, `{"new":"other new horse"}`), 400, "INVALID_TOKEN")
		}
		if _, err := a.svc.SignIn(context.Background(), "ann", "owner new horse"); err != nil {
			t.Errorf("the password the owner's link set: %v", err)
		}
	})
}

func isCode(err error, code string) bool {
	e, ok := fault.As(err)
	return ok && e.Code == code
}
