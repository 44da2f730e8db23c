package user

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// E-mail addresses, password changes and resets, and the token epoch that ends sessions (SPEC §3.14;
// docs/identity.md, "E-mail and passwords").

// MaxEmail is the longest e-mail address accepted (RFC 5321's path limit).
const MaxEmail = 254

// How long the mailed links live.
const (
	VerifyTTL = 24 * time.Hour
	ResetTTL  = 30 * time.Minute
)

// MailAddressLimit names the limit of verification and reset mails per recipient address, whoever asks: an address
// over it is answered as any other but mailed nothing, so the limit tells nothing of which addresses have accounts.
const MailAddressLimit = "mail-address"

// Purposes of an account_token row.
const (
	purposeVerify = "verify-email"
	purposeReset  = "password-reset"
)

// maxLiveResets is how many unused reset links an account keeps at once: a new request voids only the older ones
// past it, so that whoever spends an address's mail budget (MailAddressLimit, 3 an hour) cannot void the link its
// owner is about to open.
const maxLiveResets = 3

// secretBytes is the randomness of a mailed token: 32 bytes, 43 characters of base64url.
const secretBytes = 32

var (
	// errInvalidToken is the one answer to a used, expired, voided or made-up link, so it tells nothing of which.
	errInvalidToken  = fault.Invalidf("INVALID_TOKEN", "this link is not valid: it was used already, it expired, or it was never sent")
	errWrongPassword = fault.Unauthenticatedf("BAD_CREDENTIALS", "wrong password")
	errEmailTaken    = fault.Conflictf("EMAIL_TAKEN", "this address is the verified address of another account")
	// errNoPassword: an account made by an identity provider's sign-in has no password, so its token alone would
	// be all it takes to set one or to move its address (and then reset the password through it).
	errNoPassword = fault.Conflictf("NO_PASSWORD", "this account has no password: set a password with a reset link sent to your verified address")
	// errDiscard rolls back the transaction of a reset for an address no account has (see RequestPasswordReset).
	errDiscard = errors.New("discarded")
	// tokenEncoding refuses the other spellings of a secret (the last character's two spare bits), so that one
	// secret has one token.
	tokenEncoding = base64.RawURLEncoding.Strict()
)

// NormalizeEmail checks an address and returns it trimmed and lower-cased: a bare address as net/mail reads it
// (no display name), its local part ASCII and its domain in ASCII (IDNA's Lookup profile: an internationalized
// domain in its xn-- form), at most MaxEmail characters. One spelling per address, compared byte for byte (the
// columns are binary-collated): a look-alike such as ann@exámple.org is another address than ann@example.org.
func NormalizeEmail(email string) (string, error) {
	invalid := fault.Invalidf("INVALID_EMAIL", "email must be an address such as name@example.com, at most %d characters, the part before the @ in ASCII", MaxEmail)
	addr := strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(addr)
	if err != nil || a.Address != addr {
		return "", invalid
	}
	at := strings.LastIndexByte(addr, '@')
	local := addr[:at]
	for i := range len(local) {
		if local[i] >= 0x80 {
			return "", invalid
		}
	}
	domain, err := idna.Lookup.ToASCII(addr[at+1:])
	if err != nil {
		return "", invalid
	}
	if addr = local + "@" + domain; len(addr) > MaxEmail { // Lookup lower-cases the domain too
		return "", invalid
	}
	return addr, nil
}

// Identity is an identity provider's account linked to a user (OIDC).
type Identity struct {
	Provider string
	Email    string
	LinkedAt time.Time
}

// Account is what a user sees of their own account.
type Account struct {
	User
	Email        string // the verified address; "" when none
	PendingEmail string // the address waiting for its link; "" when none
	HasPassword  bool   // false for an account made by an identity provider's sign-in, or deleted
	Deleted      bool
	Identities   []Identity
}

// Account returns the user's own account.
func (s *Service) Account(ctx context.Context, userID int64) (Account, error) {
	var a Account
	var email, pending sql.NullString
	var deleted sql.NullTime
	row := s.db.QueryRowContext(ctx, "SELECT "+userColumns+", email, pending_email, deleted_at FROM users WHERE user_id = ?", userID)
	u, hash, err := scanUser(row, &email, &pending, &deleted)
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, notFound(userID)
	} else if err != nil {
		return Account{}, err
	}
	a.User, a.Email, a.PendingEmail, a.HasPassword, a.Deleted = u, email.String, pending.String, hash != "", deleted.Valid
	if a.Identities, err = s.identitiesOf(ctx, userID); err != nil {
		return Account{}, err
	}
	return a, nil
}

// identitiesOf returns the identities linked to a user (the OIDC sign-in's user_identity), oldest link first.
func (s *Service) identitiesOf(ctx context.Context, userID int64) ([]Identity, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT provider, email, linked_at FROM user_identity WHERE user_id = ? ORDER BY linked_at", userID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := []Identity{}
	for rows.Next() {
		var id Identity
		var email sql.NullString
		if err := rows.Scan(&id.Provider, &email, &id.LinkedAt); err != nil {
			return nil, err
		}
		id.Email, id.LinkedAt = email.String, id.LinkedAt.UTC()
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// withPassword returns the user and its password hash, checking password against it: 401 BAD_CREDENTIALS when it
// does not match, 409 NO_PASSWORD for an account without one (an identity provider's).
func (s *Service) withPassword(ctx context.Context, userID int64, password string) (User, string, error) {
	u, hash, err := scanUser(s.db.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE user_id = ? AND deleted_at IS NULL", userID))
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, "", notFound(userID)
	} else if err != nil {
		return User{}, "", err
	}
	if hash == "" {
		return User{}, "", errNoPassword
	}
	if err := s.passwordGuess(ctx, u); err != nil {
		return User{}, "", err
	}
	ok, err := s.hasher.verify(ctx, hash, password)
	if err != nil {
		return User{}, "", err
	}
	if !ok {
		return User{}, "", errWrongPassword
	}
	return u, hash, nil
}

// passwordGuess takes one guess from u's SignInAccountLimit, the budget sign-in draws from too: with a token, a
// password is guessed no faster than without one.
func (s *Service) passwordGuess(ctx context.Context, u User) error {
	if s.cfg.Limiter == nil {
		return nil
	}
	return s.cfg.Limiter.Allow(ctx, SignInAccountLimit, u.Username)
}

// RequestEmailChange makes email the user's pending address and mails it a link that verifies it. It answers
// alike, after the same work, whether or not the address is another account's: that account's address is mailed a
// note instead of the link (a link would let the requester's account take an address its owner did not mean to
// give it). An address over MailAddressLimit changes nothing and is mailed nothing; the answer is the same.
func (s *Service) RequestEmailChange(ctx context.Context, userID int64, email, password string) error {
	addr, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	u, _, err := s.withPassword(ctx, userID, password)
	if err != nil {
		return err
	}
	if ok, err := s.mailAllowed(ctx, addr); !ok {
		return err
	}
	owner, ownerAddr, err := s.byEmail(ctx, addr) // before the transaction: behind Vitess the owner's row is on another shard
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	takenByOther := err == nil && owner != userID
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if _, err := tx.ExecContext(ctx, "UPDATE users SET pending_email = ? WHERE user_id = ?", addr, userID); err != nil {
			return err
		}
		token, err := s.issueToken(ctx, tx, userID, purposeVerify, addr, VerifyTTL)
		if err != nil {
			return err
		}
		m := s.verifyMail(u, addr, token)
		if takenByOther {
			m = s.takenMail(ownerAddr)
		}
		return s.emitMail(emit, userID, m)
	})
	if err != nil {
		return fmt.Errorf("request an e-mail change: %w", err)
	}
	return nil
}

// VerifyEmail redeems a verification token: its address becomes the user's verified one, with USER_EMAIL_VERIFIED
// in the same transaction. 400 INVALID_TOKEN for a used, expired or made-up token; 409 EMAIL_TAKEN when another
// account verified the address meanwhile (the token stays unused).
func (s *Service) VerifyEmail(ctx context.Context, token string) (userID int64, email string, err error) {
	t, err := s.findToken(ctx, token, purposeVerify)
	if err != nil {
		return 0, "", err
	}
	now := apijson.Millis(s.cfg.Now())
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.claimToken(ctx, tx, t, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE users SET email = ?, email_version = email_version + 1,
			pending_email = CASE WHEN pending_email = ? THEN NULL ELSE pending_email END
			WHERE user_id = ? AND deleted_at IS NULL`, t.email, t.email, t.userID)
		if sqldb.IsDuplicate(err) {
			return errEmailTaken
		}
		if err := oneRow(res, err); errors.Is(err, errNoRow) {
			return errInvalidToken // the account was deleted
		} else if err != nil {
			return err
		}
		var version int64
		if err := tx.QueryRowContext(ctx, "SELECT email_version FROM users WHERE user_id = ?", t.userID).Scan(&version); err != nil {
			return err
		}
		return emit(event.UserEmailVerified, t.userID, event.EmailVerified{UserID: apijson.ID(t.userID), Email: t.email,
			EmailVersion: version, At: apijson.Time(now)})
	})
	if err != nil {
		return 0, "", fmt.Errorf("verify an e-mail address: %w", err)
	}
	return t.userID, t.email, nil
}

// ChangePassword sets a new password after checking the current one, and ends every session: the user's token
// epoch is bumped and USER_PASSWORD_CHANGED written in the same transaction. It returns a token at the new epoch,
// so that the session that made the change goes on.
func (s *Service) ChangePassword(ctx context.Context, userID int64, current, next string) (Token, error) {
	if err := checkPassword(next); err != nil {
		return Token{}, err
	}
	_, old, err := s.withPassword(ctx, userID, current)
	if err != nil {
		return Token{}, err
	}
	fresh, err := s.hasher.hash(ctx, next)
	if err != nil {
		return Token{}, err
	}
	var u User
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		// The hash checked above must still be the user's: a password changed meanwhile was not the one given.
		res, err := tx.ExecContext(ctx, "UPDATE users SET password_hash = ? WHERE user_id = ? AND password_hash = ?", fresh, userID, old)
		if err := oneRow(res, err); errors.Is(err, errNoRow) {
			return errWrongPassword
		} else if err != nil {
			return err
		}
		u, err = s.endSessions(ctx, tx, emit, userID, event.SessionPasswordChanged)
		return err
	})
	if err != nil {
		return Token{}, fmt.Errorf("change the password: %w", err)
	}
	return s.tokenFor(u)
}

// EndSessions ends every session of the user (the token epoch bumped, USER_PASSWORD_CHANGED written) and returns a
// token at the new epoch for the session that asked.
func (s *Service) EndSessions(ctx context.Context, userID int64) (Token, error) {
	var u User
	err := s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) (err error) {
		u, err = s.endSessions(ctx, tx, emit, userID, event.SessionsEnded)
		return err
	})
	if err != nil {
		return Token{}, fmt.Errorf("end the sessions: %w", err)
	}
	return s.tokenFor(u)
}

// endSessions bumps the user's token epoch in tx, voids their unused mailed links of every kind, drops their pending
// address (whoever asked for it may be who the sessions end for), and writes USER_PASSWORD_CHANGED with the new
// epoch and reason; it returns the user as it is now. 404 for a user deleted or unknown.
func (s *Service) endSessions(ctx context.Context, tx *sql.Tx, emit outbox.Emit, userID int64, reason string) (User, error) {
	u, err := s.bumpEpoch(ctx, tx, userID)
	if err != nil {
		return User{}, err
	}
	now := apijson.Millis(s.cfg.Now())
	if _, err := tx.ExecContext(ctx, "UPDATE account_token SET used_at = ? WHERE user_id = ? AND used_at IS NULL", now, userID); err != nil {
		return User{}, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE users SET pending_email = NULL WHERE user_id = ?", userID); err != nil {
		return User{}, err
	}
	return u, emit(event.UserPasswordChanged, userID, event.Session{UserID: apijson.ID(userID), TokenEpoch: u.TokenEpoch,
		Reason: reason, At: apijson.Time(now)})
}

// bumpEpoch adds one to the user's token epoch in tx, so that every token minted before is refused everywhere once
// the transaction's event is read, and returns the user with the new epoch. 404 for a user deleted or unknown.
func (s *Service) bumpEpoch(ctx context.Context, tx *sql.Tx, userID int64) (User, error) {
	res, err := tx.ExecContext(ctx, "UPDATE users SET token_epoch = token_epoch + 1 WHERE user_id = ? AND deleted_at IS NULL", userID)
	if err := oneRow(res, err); err != nil {
		if errors.Is(err, errNoRow) {
			return User{}, notFound(userID)
		}
		return User{}, err
	}
	u, _, err := scanUser(tx.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE user_id = ?", userID))
	return u, err
}

// tokenFor mints an access token for u at its token epoch.
func (s *Service) tokenFor(u User) (Token, error) {
	token, expires, err := s.keys.Sign(auth.Principal{UserID: u.ID, Role: u.Role, TokenEpoch: u.TokenEpoch})
	if err != nil {
		return Token{}, err
	}
	return Token{AccessToken: token, ExpiresAt: expires}, nil
}

// RequestPasswordReset mails a reset link, valid for ResetTTL, to email when it is the verified address of an
// account: to the address as the account's row holds it, never as the request spelled it. It answers alike whether or not one has it, after the same work: the same lookup and the same
// transaction (a new token stored and the mail written), which for an unknown address is rolled back at its end
// (docs/identity.md says what differs). An address over MailAddressLimit is mailed nothing.
func (s *Service) RequestPasswordReset(ctx context.Context, email string) error {
	addr, err := NormalizeEmail(email)
	if err != nil {
		return err
	}
	if ok, err := s.mailAllowed(ctx, addr); !ok {
		return err
	}
	userID, stored, err := s.byEmail(ctx, addr)
	known := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if !known { // an id no user holds, on whatever shard it falls
		if userID, err = s.ids.Next(); err != nil {
			return snowflake.Unavailable(err)
		}
		stored = addr
	}
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		token, err := s.issueToken(ctx, tx, userID, purposeReset, stored, ResetTTL)
		if err != nil {
			return err
		}
		if err := s.emitMail(emit, userID, s.resetMail(stored, token)); err != nil {
			return err
		}
		if !known {
			return errDiscard
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDiscard) {
		return fmt.Errorf("request a password reset: %w", err)
	}
	return nil
}

// ResetPassword redeems a reset token: the new password is set, the epoch bumped (every session ends),
// USER_PASSWORD_CHANGED written and the token used, in one transaction. 400 INVALID_TOKEN for a used, expired or
// made-up token, or one mailed to an address that is no longer the account's.
func (s *Service) ResetPassword(ctx context.Context, token, next string) error {
	t, err := s.findToken(ctx, token, purposeReset)
	if err != nil {
		return err
	}
	if err := checkPassword(next); err != nil {
		return err
	}
	fresh, err := s.hasher.hash(ctx, next)
	if err != nil {
		return err
	}
	now := apijson.Millis(s.cfg.Now())
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.claimToken(ctx, tx, t, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "UPDATE users SET password_hash = ? WHERE user_id = ? AND email = ? AND deleted_at IS NULL",
			fresh, t.userID, t.email)
		if err := oneRow(res, err); err != nil {
			if errors.Is(err, errNoRow) {
				return errInvalidToken
			}
			return err
		}
		_, err = s.endSessions(ctx, tx, emit, t.userID, event.SessionPasswordReset)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset the password: %w", err)
	}
	return nil
}

// byEmail returns the id of the account whose verified address is addr, and that address as its row holds it (what
// mails go to); sql.ErrNoRows when there is none.
func (s *Service) byEmail(ctx context.Context, addr string) (int64, string, error) {
	var id int64
	var stored string
	err := s.db.QueryRowContext(ctx, "SELECT user_id, email FROM users WHERE email = ? AND deleted_at IS NULL", addr).Scan(&id, &stored)
	return id, stored, err
}

// mailAllowed takes one mail from addr's MailAddressLimit budget: false, with a nil error, when it is spent.
func (s *Service) mailAllowed(ctx context.Context, addr string) (bool, error) {
	if s.cfg.Limiter == nil {
		return true, nil
	}
	err := s.cfg.Limiter.Allow(ctx, MailAddressLimit, addr)
	if fault.KindOf(err) == fault.RateLimited {
		s.cfg.Logger.InfoContext(ctx, "an address's mail budget is spent; answering without mailing it")
		return false, nil
	}
	return err == nil, err
}

// storedToken is an account_token row found for a token.
type storedToken struct {
	userID  int64
	digest  []byte
	purpose string
	email   string
}

// newToken returns a fresh token of the user, "<userId>.<secret>", and the digest stored for it.
func newToken(userID int64) (token string, digest []byte) {
	secret := make([]byte, secretBytes)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	sum := sha256.Sum256(secret)
	return strconv.FormatInt(userID, 10) + "." + tokenEncoding.EncodeToString(secret), sum[:]
}

// parseToken reads a token newToken made: its user and the digest of its secret.
func parseToken(token string) (userID int64, digest []byte, ok bool) {
	id, secret, found := strings.Cut(token, ".")
	raw, err := tokenEncoding.DecodeString(secret)
	if !found || err != nil || len(raw) != secretBytes {
		return 0, nil, false
	}
	if userID, err = strconv.ParseInt(id, 10, 64); err != nil || userID <= 0 {
		return 0, nil, false
	}
	sum := sha256.Sum256(raw)
	return userID, sum[:], true
}

// findToken returns the unused, unexpired token of purpose that token is, or errInvalidToken. The user's live
// tokens of that purpose are read (a newer one voids the older, but for maxLiveResets reset links, so there are few) and the digest compared with each
// in constant time, so the time taken tells nothing of how near a guess came.
func (s *Service) findToken(ctx context.Context, token, purpose string) (storedToken, error) {
	userID, digest, ok := parseToken(token)
	if !ok {
		return storedToken{}, errInvalidToken
	}
	rows, err := s.db.QueryContext(ctx, "SELECT token_hash, email FROM account_token WHERE user_id = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?",
		userID, purpose, apijson.Millis(s.cfg.Now()))
	if err != nil {
		return storedToken{}, err
	}
	defer rows.Close()
	found := storedToken{}
	for rows.Next() {
		var stored []byte
		var email string
		if err := rows.Scan(&stored, &email); err != nil {
			return storedToken{}, err
		}
		if subtle.ConstantTimeCompare(stored, digest) == 1 {
			found = storedToken{userID: userID, digest: stored, purpose: purpose, email: email}
		}
	}
	if err := rows.Err(); err != nil {
		return storedToken{}, err
	}
	if found.digest == nil {
		return storedToken{}, errInvalidToken
	}
	return found, nil
}

// claimToken marks t used in tx, once: of two redemptions at once, the second finds it used and gets
// errInvalidToken.
func (s *Service) claimToken(ctx context.Context, tx *sql.Tx, t storedToken, now time.Time) error {
	res, err := tx.ExecContext(ctx, "UPDATE account_token SET used_at = ? WHERE user_id = ? AND token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?",
		now, t.userID, t.digest, t.purpose, now)
	if err := oneRow(res, err); err != nil {
		if errors.Is(err, errNoRow) {
			return errInvalidToken
		}
		return err
	}
	return nil
}

// issueToken stores a new token of purpose for the user in tx, valid for ttl, and voids their unused older ones
// of that purpose: all of them, but for the maxLiveResets-1 newest reset links. It returns the token, which only
// the mail holds.
func (s *Service) issueToken(ctx context.Context, tx *sql.Tx, userID int64, purpose, email string, ttl time.Duration) (string, error) {
	s.tokenTxs.Add(1)
	now := apijson.Millis(s.cfg.Now())
	if err := s.voidOlder(ctx, tx, userID, purpose, now); err != nil {
		return "", err
	}
	token, digest := newToken(userID)
	if _, err := tx.ExecContext(ctx, "INSERT INTO account_token (user_id, token_hash, purpose, email, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
		userID, digest, purpose, email, now, now.Add(ttl)); err != nil {
		return "", err
	}
	return token, nil
}

// voidOlder marks used, in tx, the user's unused tokens of purpose that a new one replaces: every one, or for reset
// links those past the maxLiveResets-1 newest. They are read first, without a lock, and updated one by one by key:
// an UPDATE by purpose that finds none would take a gap lock on the user's range of the primary key, and two
// requests of neighbouring users, each then inserting into that gap, would deadlock (seen on MariaDB in a burst of
// resets).
func (s *Service) voidOlder(ctx context.Context, tx *sql.Tx, userID int64, purpose string, now time.Time) error {
	keep := 0
	if purpose == purposeReset {
		keep = maxLiveResets - 1
	}
	rows, err := tx.QueryContext(ctx, "SELECT token_hash FROM account_token WHERE user_id = ? AND purpose = ? AND used_at IS NULL ORDER BY created_at DESC, token_hash",
		userID, purpose)
	if err != nil {
		return err
	}
	var older [][]byte
	for n := 1; rows.Next(); n++ {
		var digest []byte
		if err := rows.Scan(&digest); err != nil {
			rows.Close()
			return err
		}
		if n > keep {
			older = append(older, digest)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, digest := range older {
		if _, err := tx.ExecContext(ctx, "UPDATE account_token SET used_at = ? WHERE user_id = ? AND token_hash = ?", now, userID, digest); err != nil {
			return err
		}
	}
	return nil
}

// tokenPurgeEvery is how often each instance deletes the expired mailed tokens, so that the table holds about a
// day's worth. Every instance does; a delete that finds nothing costs little.
const tokenPurgeEvery = time.Hour

// purgeTokensEvery deletes the expired mailed tokens every interval until ctx ends. A failure is logged; the next
// round deletes them.
func (s *Service) purgeTokensEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		purgeCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := s.purgeTokens(purgeCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("deleting expired mailed tokens failed", "err", err)
		}
	}
}

// purgeTokens deletes the mailed tokens that have expired: used or not, they can no longer be redeemed. Behind
// Vitess each shard deletes its own by itself (MULTI_SHARD_AUTOCOMMIT): the rows are independent.
func (s *Service) purgeTokens(ctx context.Context) error {
	directive := ""
	if s.db.Vitess() {
		directive = "/*vt+ MULTI_SHARD_AUTOCOMMIT=1 */ "
	}
	_, err := s.db.ExecContext(ctx, "DELETE "+directive+"FROM account_token WHERE expires_at <= ?", apijson.Millis(s.cfg.Now()))
	return err
}

// errNoRow is what oneRow returns when the statement changed no row.
var errNoRow = errors.New("no row changed")

// oneRow checks that a statement changed a row.
func oneRow(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return errNoRow
	}
	return nil
}

// A mail to write: its kind, recipient and texts.
type outMail struct {
	kind, to, subject, text, html string
}

// emitMail writes m as MAIL_REQUESTED, keyed by the user it concerns (the relay keys the record by it).
func (s *Service) emitMail(emit outbox.Emit, userID int64, m outMail) error {
	id, err := s.ids.Next()
	if err != nil {
		return snowflake.Unavailable(err)
	}
	return emit(event.MailRequested, userID, event.Mail{MailID: apijson.ID(id), Kind: m.kind, UserID: apijson.ID(userID),
		To: m.to, Subject: m.subject, Text: m.text, HTML: m.html, At: apijson.Time(apijson.Millis(s.cfg.Now()))})
}

// link is the address of a page of the site.
func (s *Service) link(path string) string { return strings.TrimRight(s.cfg.PublicURL, "/") + path }

// paragraphs renders a mail's text paragraphs as its plain text and as simple HTML, the link made clickable.
func paragraphs(link string, ps ...string) (text, body string) {
	var t, h strings.Builder
	for _, p := range ps {
		t.WriteString(p + "\n\n")
		if p == link {
			h.WriteString(`<p><a href="` + html.EscapeString(p) + `">` + html.EscapeString(p) + "</a></p>\n")
		} else {
			h.WriteString("<p>" + html.EscapeString(p) + "</p>\n")
		}
	}
	return t.String(), h.String()
}

func (s *Service) verifyMail(u User, addr, token string) outMail {
	link := s.link("/verify-email/" + token)
	text, body := paragraphs(link,
		"Hello "+u.Username+",",
		"to make "+addr+" the e-mail address of your account, open this link within 24 hours:",
		link,
		"If you did not ask for this, ignore this mail: nothing changes.")
	return outMail{event.MailVerifyEmail, addr, "Confirm your e-mail address", text, body}
}

// takenMail is the note to an address another account asked to add while it is already an account's.
func (s *Service) takenMail(addr string) outMail {
	forgot := s.link("/forgot-password")
	text, body := paragraphs(forgot,
		"Hello,",
		"someone asked to add "+addr+" to an account, but it is already the address of an account here, so nothing changed.",
		"If you forgot that account's password, you can reset it here:",
		forgot,
		"Otherwise, ignore this mail.")
	return outMail{event.MailVerifyEmail, addr, "Your e-mail address is already in use", text, body}
}

func (s *Service) resetMail(addr, token string) outMail {
	link := s.link("/reset-password/" + token)
	text, body := paragraphs(link,
		"Hello,",
		"to choose a new password for the account of "+addr+", open this link within 30 minutes:",
		link,
		"It works once, and every session of the account ends when you use it. If you did not ask for this, ignore this mail: your password stays as it is.")
	return outMail{event.MailPasswordReset, addr, "Reset your password", text, body}
}
