package user

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"

	"board/internal/event"
	"board/internal/httpio"
	"board/internal/httpio/httpiotest"
	"board/internal/ratelimit"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

const publicURL = "https://board.example"

// accounts drives the account routes of one service.
type accounts struct {
	t     *testing.T
	db    *sqldb.DB
	clock *snowflaketest.Clock
	svc   *Service
	api   http.Handler
}

func newAccounts(t *testing.T, db *sqldb.DB, cfg Config) accounts {
	t.Helper()
	clock := snowflaketest.NewClock(t0)
	cfg.Hash, cfg.Now, cfg.PublicURL = cheap, clock.Now, publicURL+"/"
	svc, err := NewService(context.Background(), db, snowflaketest.NewIDs(firstID), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return accounts{t: t, db: db, clock: clock, svc: svc, api: Routes(svc, httpiotest.Logger)}
}

// as calls the API as user; user 0 calls it without a token.
func (a accounts) as(user int64, method, path, body string) httpiotest.Reply {
	h := a.api
	if user != 0 {
		h = httpiotest.As(h, user)
	}
	return httpiotest.Call(h, method, path, body)
}

// outboxEvent is an outbox row.
type outboxEvent struct {
	key     int64
	payload []byte
}

// events returns the outbox rows of type typ, oldest first.
func (a accounts) events(typ event.Type) []outboxEvent {
	a.t.Helper()
	rows, err := a.db.QueryContext(context.Background(), "SELECT record_key, payload FROM outbox WHERE event_type = ? ORDER BY outbox_id", string(typ))
	if err != nil {
		a.t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var e outboxEvent
		if err := rows.Scan(&e.key, &e.payload); err != nil {
			a.t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		a.t.Fatal(err)
	}
	return out
}

// mails returns the MAIL_REQUESTED payloads, oldest first, each checked to be keyed by its user.
func (a accounts) mails() []event.Mail {
	a.t.Helper()
	var out []event.Mail
	for _, e := range a.events(event.MailRequested) {
		m := decode[event.Mail](a.t, e.payload)
		if e.key != int64(m.UserID) || m.MailID == 0 || m.Text == "" || m.HTML == "" || m.Subject == "" {
			a.t.Errorf("mail keyed %d: %s", e.key, e.payload)
		}
		out = append(out, m)
	}
	return out
}

var linkPattern = regexp.MustCompile(regexp.QuoteMeta(publicURL) + `/(verify-email|reset-password)/([0-9]+\.[A-Za-z0-9_-]{43})\n`)

// link returns the token of the newest mail's link to page (verify-email or reset-password), checking that the mail
// went to addr.
func (a accounts) link(page, addr string) string {
	a.t.Helper()
	ms := a.mails()
	if len(ms) == 0 {
		a.t.Fatal("no mail")
	}
	m := ms[len(ms)-1]
	match := linkPattern.FindStringSubmatch(m.Text)
	if m.To != addr || match == nil || match[1] != page || !strings.Contains(m.HTML, `href="`+publicURL+"/"+page+"/"+match[2]+`"`) {
		a.t.Fatalf("newest mail is not a %s link to %s: %+v", page, addr, m)
	}
	return match[2]
}

// epochOf returns the token epoch an access token carries.
func epochOf(t *testing.T, token string) int64 {
	t.Helper()
	seg, err := decodeSegment(t, token, 1)
	if err != nil {
		t.Fatal(err)
	}
	return decode[struct {
		Sep int64 `json:"sep"`
	}](t, seg).Sep
}

func (a accounts) dbEpoch(user int64) int64 {
	a.t.Helper()
	var epoch int64
	if err := a.db.QueryRowContext(context.Background(), "SELECT token_epoch FROM users WHERE user_id = ?", user).Scan(&epoch); err != nil {
		a.t.Fatal(err)
	}
	return epoch
}

// sessionEvents returns the USER_PASSWORD_CHANGED events as "user epoch reason", each checked to be keyed by its user.
func (a accounts) sessionEvents() []string {
	a.t.Helper()
	var out []string
	for _, e := range a.events(event.UserPasswordChanged) {
		s := decode[event.Session](a.t, e.payload)
		if e.key != int64(s.UserID) || time.Time(s.At).IsZero() {
			a.t.Errorf("session event keyed %d: %s", e.key, e.payload)
		}
		out = append(out, fmt.Sprintf("%d %d %s", s.UserID, s.TokenEpoch, s.Reason))
	}
	return out
}

func TestEmailVerification(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ids := signUps(t, a.svc, "ann", "ben")
		ann, ben := ids[0], ids[1]
		me := func(user int64) map[string]any {
			r := a.as(user, "GET", "/v1/users/me", "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			return decode[map[string]any](t, []byte(r.Body))
		}
		if m := me(ann); m["email"] != nil || m["pendingEmail"] != nil || m["hasPassword"] != true || m["username"] != "ann" ||
			fmt.Sprint(m["identities"]) != "[]" || m["deleted"] != nil {
			t.Errorf("a new account: %v", m)
		}

		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"Ann@Example.org","password":"wrong horse"}`), 401, "BAD_CREDENTIALS")
		for _, bad := range []string{"not an address", "Ann <ann@example.org>", "ann@", strings.Repeat("a", 250) + "@b.cd"} {
			httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"`+bad+`","password":"correct horse"}`), 400, "INVALID_EMAIL")
		}
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org"}`), 400, "MISSING_FIELD")
		httpiotest.WantError(t, a.as(0, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`), 401, "UNAUTHENTICATED")
		httpiotest.WantError(t, a.as(0, "GET", "/v1/users/me", ""), 401, "UNAUTHENTICATED")
		if n := len(a.mails()); n != 0 {
			t.Fatalf("%d mails after refused requests", n)
		}

		r := a.as(ann, "PUT", "/v1/users/me/email", `{"email":"  Ann@Example.org ","password":"correct horse"}`)
		if r.Status != http.StatusAccepted || r.Body != "{}\n" {
			t.Fatalf("change e-mail: %d %q", r.Status, r.Body)
		}
		if m := me(ann); m["pendingEmail"] != "ann@example.org" || m["email"] != nil {
			t.Errorf("after the request: %v", m)
		}
		first := a.link("verify-email", "ann@example.org")
		// A second request voids the first link.
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`), http.StatusAccepted)
		token := a.link("verify-email", "ann@example.org")
		httpiotest.WantError(t, a.as(0, "POST", "/v1/email-verifications/"+first, ""), 400, "INVALID_TOKEN")

		// Forged: another user's id, a changed secret, garbage, the secret's other spelling.
		id, secret, _ := strings.Cut(token, ".")
		last := secret[42]
		other := byte('A')
		if last == 'A' {
			other = 'B'
		}
		sibling := byte(strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", last) ^ 1)
		for _, forged := range []string{
			fmt.Sprint(ben) + "." + secret, id + "." + secret[:42] + string(other), "x", id + ".", "." + secret,
			id + "." + secret[:42] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[sibling]),
			"-1." + secret, id + "." + secret + "A",
		} {
			httpiotest.WantError(t, a.as(0, "POST", "/v1/email-verifications/"+forged, ""), 400, "INVALID_TOKEN")
		}

		r = a.as(0, "POST", "/v1/email-verifications/"+token, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if got := decode[map[string]string](t, []byte(r.Body)); got["userId"] != fmt.Sprint(ann) || got["email"] != "ann@example.org" {
			t.Errorf("verify: %s", r.Body)
		}
		if m := me(ann); m["email"] != "ann@example.org" || m["pendingEmail"] != nil {
			t.Errorf("after the verification: %v", m)
		}
		httpiotest.WantError(t, a.as(0, "POST", "/v1/email-verifications/"+token, ""), 400, "INVALID_TOKEN") // replayed

		verified := a.events(event.UserEmailVerified)
		if len(verified) != 1 {
			t.Fatalf("%d USER_EMAIL_VERIFIED, want 1", len(verified))
		}
		if v := decode[event.EmailVerified](t, verified[0].payload); verified[0].key != ann || int64(v.UserID) != ann ||
			v.Email != "ann@example.org" || v.EmailVersion != 1 {
			t.Errorf("USER_EMAIL_VERIFIED keyed %d: %s", verified[0].key, verified[0].payload)
		}

		// A link lives 24 hours.
		httpiotest.WantStatus(t, a.as(ben, "PUT", "/v1/users/me/email", `{"email":"ben@example.org","password":"correct horse"}`), http.StatusAccepted)
		late := a.link("verify-email", "ben@example.org")
		a.clock.Add(VerifyTTL)
		httpiotest.WantError(t, a.as(0, "POST", "/v1/email-verifications/"+late, ""), 400, "INVALID_TOKEN")
	})
}

// An address verified by another account meanwhile: 409 EMAIL_TAKEN, and the link stays unused.
func TestEmailTakenOnVerify(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ids := signUps(t, a.svc, "ann", "ben")
		ann, ben := ids[0], ids[1]
		body := `{"email":"shared@example.org","password":"correct horse"}`
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", body), http.StatusAccepted)
		annToken := a.link("verify-email", "shared@example.org")
		httpiotest.WantStatus(t, a.as(ben, "PUT", "/v1/users/me/email", body), http.StatusAccepted)
		benToken := a.link("verify-email", "shared@example.org")
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/email-verifications/"+benToken, ""), http.StatusOK)
		httpiotest.WantError(t, a.as(0, "POST", "/v1/email-verifications/"+annToken, ""), http.StatusConflict, "EMAIL_TAKEN")
		var used int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM account_token WHERE user_id = ? AND used_at IS NULL", ann).Scan(&used); err != nil || used != 1 {
			t.Errorf("ann's unused tokens: %d, %v; want the link still unused", used, err)
		}
		if n := len(a.events(event.UserEmailVerified)); n != 1 {
			t.Errorf("%d USER_EMAIL_VERIFIED, want ben's only", n)
		}
	})
}

// Neither a reset nor an e-mail change tells whether an address has an account: the same status and body, after
// the same work (counted: transactions that issue a token, and hashes), for a known address and an unknown one.
func TestNoAccountEnumeration(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ids := signUps(t, a.svc, "ann", "ben")
		ann, ben := ids[0], ids[1]
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`), http.StatusAccepted)
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/email-verifications/"+a.link("verify-email", "ann@example.org"), ""), http.StatusOK)
		mailsBefore := len(a.mails())

		type cost struct{ txs, hashes int64 }
		measure := func(fn func() httpiotest.Reply) (httpiotest.Reply, cost) {
			txs, hashes := a.svc.tokenTxs.Load(), a.svc.hasher.computed.Load()
			r := fn()
			return r, cost{a.svc.tokenTxs.Load() - txs, a.svc.hasher.computed.Load() - hashes}
		}
		reset := func(addr string) func() httpiotest.Reply {
			return func() httpiotest.Reply { return a.as(0, "POST", "/v1/password-resets", `{"email":"`+addr+`"}`) }
		}
		known, knownCost := measure(reset("ANN@example.org"))
		unknown, unknownCost := measure(reset("nobody@example.org"))
		if known.Status != http.StatusAccepted || known.Status != unknown.Status || known.Body != unknown.Body || knownCost != unknownCost ||
			knownCost != (cost{1, 0}) {
			t.Errorf("reset: known %d %q %+v, unknown %d %q %+v", known.Status, known.Body, knownCost, unknown.Status, unknown.Body, unknownCost)
		}
		if ms := a.mails(); len(ms) != mailsBefore+1 || ms[len(ms)-1].To != "ann@example.org" || ms[len(ms)-1].Kind != event.MailPasswordReset {
			t.Errorf("after the resets: %d mails (want one more, to ann): %+v", len(ms), ms[len(ms)-1])
		}
		var rows int
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM account_token WHERE email = ?", "nobody@example.org").Scan(&rows); err != nil || rows != 0 {
			t.Errorf("tokens for the unknown address: %d, %v", rows, err)
		}

		// Ben asks for ann's verified address, then for a free one: the same answer and cost. Ann's address gets a
		// note without a link; the free one its link.
		change := func(addr string) func() httpiotest.Reply {
			return func() httpiotest.Reply {
				return a.as(ben, "PUT", "/v1/users/me/email", `{"email":"`+addr+`","password":"correct horse"}`)
			}
		}
		taken, takenCost := measure(change("ann@example.org"))
		note := a.mails()[len(a.mails())-1]
		free, freeCost := measure(change("ben@example.org"))
		if taken.Status != http.StatusAccepted || taken.Status != free.Status || taken.Body != free.Body || takenCost != freeCost ||
			takenCost != (cost{1, 1}) {
			t.Errorf("change: taken %d %q %+v, free %d %q %+v", taken.Status, taken.Body, takenCost, free.Status, free.Body, freeCost)
		}
		if note.To != "ann@example.org" || strings.Contains(note.Text, "/verify-email/") || !strings.Contains(note.Text, publicURL+"/forgot-password") {
			t.Errorf("the note to a taken address: %+v", note)
		}
		a.link("verify-email", "ben@example.org")
	})
}

func TestPasswordReset(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ann := signUps(t, a.svc, "ann")[0]
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`), http.StatusAccepted)
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/email-verifications/"+a.link("verify-email", "ann@example.org"), ""), http.StatusOK)
		// Only a verified address is mailed: a pending one is not the account's yet.
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets", `{"email":"no address"}`), 400, "INVALID_EMAIL")
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets", `{}`), 400, "MISSING_FIELD")

		request := func() string {
			t.Helper()
			httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@example.org"}`), http.StatusAccepted)
			return a.link("reset-password", "ann@example.org")
		}
		older := request() // stays live beside the newer (TestResetRequestsKeepRecentLinks) until one is used
		token := request()
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+token, `{"new":"short"}`), 400, "INVALID_PASSWORD")
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+token, `{}`), 400, "MISSING_FIELD")

		// Valid until 30 minutes have passed.
		a.clock.Add(ResetTTL - time.Millisecond)
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets/"+token, `{"new":"brand new horse"}`), http.StatusNoContent)
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+token, `{"new":"other new horse"}`), 400, "INVALID_TOKEN") // replayed
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+older, `{"new":"other new horse"}`), 400, "INVALID_TOKEN") // voided by the reset
		if _, err := a.svc.SignIn(context.Background(), "ann", "correct horse"); !errors.Is(err, errBadCredentials) {
			t.Errorf("the old password: %v", err)
		}
		tok, err := a.svc.SignIn(context.Background(), "ann", "brand new horse")
		if err != nil || epochOf(t, tok.AccessToken) != 1 || a.dbEpoch(ann) != 1 {
			t.Errorf("the new password: %v; token epoch %d, stored %d, want 1", err, epochOf(t, tok.AccessToken), a.dbEpoch(ann))
		}
		if got, want := a.sessionEvents(), []string{fmt.Sprintf("%d 1 password-reset", ann)}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("session events %v, want %v", got, want)
		}

		expired := request()
		a.clock.Add(ResetTTL)
		httpiotest.WantError(t, a.as(0, "POST", "/v1/password-resets/"+expired, `{"new":"brand new horse"}`), 400, "INVALID_TOKEN")
	})
}

// Two redemptions of one link at once: exactly one wins; the other is told the link is not valid.
func TestTokenSingleUseUnderConcurrency(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ann := signUps(t, a.svc, "ann")[0]
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`), http.StatusAccepted)
		verify := a.link("verify-email", "ann@example.org")
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@example.org"}`), http.StatusAccepted)
		if len(a.mails()) != 1 {
			t.Fatal("a reset for a pending address was mailed")
		}
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/email-verifications/"+verify, ""), http.StatusOK)
		for round := range 3 {
			httpiotest.WantStatus(t, a.as(0, "POST", "/v1/password-resets", `{"email":"ann@example.org"}`), http.StatusAccepted)
			token := a.link("reset-password", "ann@example.org")
			const n = 4
			statuses := make(chan int, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					statuses <- a.as(0, "POST", "/v1/password-resets/"+token, fmt.Sprintf(`{"new":"new horse %d"}`, i)).Status
				})
			}
			close(start)
			wg.Wait()
			close(statuses)
			count := map[int]int{}
			for s := range statuses {
				count[s]++
			}
			if count[http.StatusNoContent] != 1 || count[http.StatusBadRequest] != n-1 {
				t.Errorf("round %d: statuses %v, want one 204 and %d 400", round, count, n-1)
			}
			if epoch := a.dbEpoch(ann); epoch != int64(round+1) {
				t.Errorf("round %d: epoch %d, want %d (one bump per link)", round, epoch, round+1)
			}
		}
	})
}

func TestChangePasswordAndEndSessions(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ann := signUps(t, a.svc, "ann")[0]
		tok, err := a.svc.SignIn(context.Background(), "ann", "correct horse")
		if err != nil || epochOf(t, tok.AccessToken) != 0 {
			t.Fatalf("sign-in: %v, epoch %d", err, epochOf(t, tok.AccessToken))
		}
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/password", `{"current":"wrong horse","new":"brand new horse"}`), 401, "BAD_CREDENTIALS")
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/password", `{"current":"correct horse","new":"short"}`), 400, "INVALID_PASSWORD")
		httpiotest.WantError(t, a.as(ann, "PUT", "/v1/users/me/password", `{"new":"brand new horse"}`), 400, "MISSING_FIELD")
		httpiotest.WantError(t, a.as(0, "PUT", "/v1/users/me/password", `{"current":"correct horse","new":"brand new horse"}`), 401, "UNAUTHENTICATED")
		if a.dbEpoch(ann) != 0 || len(a.sessionEvents()) != 0 {
			t.Fatal("a refused change bumped the epoch or wrote an event")
		}

		r := a.as(ann, "PUT", "/v1/users/me/password", `{"current":"correct horse","new":"brand new horse"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		changed := decode[tokenBody](t, []byte(r.Body))
		if changed.TokenType != "Bearer" || epochOf(t, changed.AccessToken) != 1 || r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("change: %s", r.Body)
		}
		if _, err := a.svc.SignIn(context.Background(), "ann", "brand new horse"); err != nil {
			t.Errorf("sign-in with the new password: %v", err)
		}

		r = a.as(ann, "DELETE", "/v1/users/me/sessions", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if ended := decode[tokenBody](t, []byte(r.Body)); epochOf(t, ended.AccessToken) != 2 || a.dbEpoch(ann) != 2 {
			t.Errorf("end sessions: epoch %d, stored %d; want 2", epochOf(t, ended.AccessToken), a.dbEpoch(ann))
		}
		httpiotest.WantError(t, a.as(0, "DELETE", "/v1/users/me/sessions", ""), 401, "UNAUTHENTICATED")
		want := []string{fmt.Sprintf("%d 1 password-changed", ann), fmt.Sprintf("%d 2 sessions-ended", ann)}
		if got := a.sessionEvents(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("session events %v, want %v", got, want)
		}
		if tok, _ := a.svc.SignIn(context.Background(), "ann", "brand new horse"); epochOf(t, tok.AccessToken) != 2 {
			t.Errorf("a sign-in after: epoch %d, want 2", epochOf(t, tok.AccessToken))
		}
	})
}

// failingIDs issues ids until fail is set: the outbox cannot name an event, so its transaction fails.
type failingIDs struct {
	IDGenerator
	fail atomic.Bool
}

func (f *failingIDs) Next() (int64, error) {
	if f.fail.Load() {
		return 0, errors.New("no ids")
	}
	return f.IDGenerator.Next()
}

// The epoch bump, the password and the event are one transaction: when the event cannot be written, none is.
func TestEpochAndEventsAreOneTransaction(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		ids := &failingIDs{IDGenerator: snowflaketest.NewIDs(firstID)}
		svc, err := NewService(context.Background(), db, ids, Config{Hash: cheap})
		if err != nil {
			t.Fatal(err)
		}
		ann := signUps(t, svc, "ann")[0]
		a := accounts{t: t, db: db, svc: svc}
		ids.fail.Store(true)
		if _, err := svc.ChangePassword(context.Background(), ann, "correct horse", "brand new horse"); err == nil {
			t.Fatal("the change succeeded without its event")
		}
		if _, err := svc.EndSessions(context.Background(), ann); err == nil {
			t.Fatal("the sessions ended without the event")
		}
		ids.fail.Store(false)
		if a.dbEpoch(ann) != 0 || len(a.sessionEvents()) != 0 {
			t.Errorf("epoch %d, events %v after failed transactions", a.dbEpoch(ann), a.sessionEvents())
		}
		if _, err := svc.SignIn(context.Background(), "ann", "correct horse"); err != nil {
			t.Errorf("the old password after a failed change: %v", err)
		}
	})
}

// Mails per address are limited whoever asks: over the limit the answer is the same 202, and nothing is mailed.
// The open routes are limited per client address by the guard, under their own limits.
func TestAccountRateLimits(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, Migrate)
	b := redisclienttest.Mini(t)
	perHour := func(n int) ratelimit.Rule {
		return ratelimit.Rule{Limit: redis_rate.Limit{Rate: n, Burst: n, Period: time.Hour}}
	}
	limiter := ratelimit.New(b.Client, b.Prefix, map[string]ratelimit.Rule{
		MailAddressLimit: perHour(3), "password-reset": perHour(5), "email-verification": perHour(2)}, httpiotest.Logger)
	a := newAccounts(t, db, Config{Limiter: limiter})
	ann := signUps(t, a.svc, "ann")[0]
	for i := range 4 {
		r := a.as(ann, "PUT", "/v1/users/me/email", `{"email":"ann@example.org","password":"correct horse"}`)
		if r.Status != http.StatusAccepted || r.Body != "{}\n" {
			t.Errorf("change %d: %d %s", i, r.Status, r.Body)
		}
	}
	if n := len(a.mails()); n != 3 {
		t.Errorf("%d mails to one address, want 3", n)
	}
	httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", `{"email":"other@example.org","password":"correct horse"}`), http.StatusAccepted)
	if n := len(a.mails()); n != 4 {
		t.Errorf("another address was not mailed: %d mails", n)
	}

	edge := httpio.Server{Service: "user", API: Routes(a.svc, httpiotest.Logger), Logger: httpiotest.Logger,
		Gatherer: prometheus.NewRegistry(), Metrics: httpio.NewMetrics(prometheus.NewRegistry()),
		Guard: &httpio.Guard{Open: OpenRoutes, Limiter: limiter}}.Handler()
	for i := range 6 {
		r := httpiotest.Call(edge, "POST", "/v1/password-resets", fmt.Sprintf(`{"email":"user%d@example.org"}`, i))
		if want := map[bool]int{true: http.StatusAccepted, false: http.StatusTooManyRequests}[i < 5]; r.Status != want {
			t.Errorf("reset %d from one client: %d %s, want %d", i, r.Status, r.Body, want)
		}
	}
	for i := range 3 {
		r := httpiotest.Call(edge, "POST", "/v1/email-verifications/1.x", "")
		if want := map[bool]int{true: http.StatusBadRequest, false: http.StatusTooManyRequests}[i < 2]; r.Status != want {
			t.Errorf("verification %d from one client: %d %s, want %d", i, r.Status, r.Body, want)
		}
	}
}

// Run deletes the expired mailed tokens, used or not, and keeps the live ones.
func TestExpiredTokensArePurged(t *testing.T) {
	t.Parallel()
	sqldbtest.RunIn(t, "user", Migrate, func(t *testing.T, db *sqldb.DB) {
		a := newAccounts(t, db, Config{})
		ann := signUps(t, a.svc, "ann")[0]
		change := `{"email":"ann@example.org","password":"correct horse"}`
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", change), http.StatusAccepted)
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", change), http.StatusAccepted) // voids the first
		a.clock.Add(VerifyTTL)
		httpiotest.WantStatus(t, a.as(ann, "PUT", "/v1/users/me/email", change), http.StatusAccepted)
		live := a.link("verify-email", "ann@example.org")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.svc.purgeTokensEvery(ctx, time.Millisecond); close(done) }()
		count := func() (n int) {
			if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM account_token").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		for deadline := time.Now().Add(10 * time.Second); count() != 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d tokens after 10 s of purges, want the live one", count())
			}
		}
		cancel()
		<-done
		httpiotest.WantStatus(t, a.as(0, "POST", "/v1/email-verifications/"+live, ""), http.StatusOK)
	})
}
