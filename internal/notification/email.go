package notification

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// E-mail (docs/notifications.md, "E-mail"). A user who asks for it (Preferences.Email) is mailed, at the verified
// address USER_EMAIL_VERIFIED gave, each new notification (immediate) or a daily digest of the unread ones. Mails
// are MAIL_REQUESTED rows of the service's outbox, written in the transaction that writes the inbox (or claims the
// digest); the mail service sends them. Every mail carries a one-click unsubscribe link.

// The values of Preferences.Email.
const (
	EmailOff       = "off"
	EmailImmediate = "immediate"
	EmailDaily     = "daily"
)

// validEmailMode reports whether m is one of the values of Preferences.Email.
func validEmailMode(m string) bool {
	return m == EmailOff || m == EmailImmediate || m == EmailDaily
}

// unsubscribeTTL is how long a mail's unsubscribe link works; older tokens are dropped as new mails are written.
const unsubscribeTTL = 90 * 24 * time.Hour

// emailVerified keeps the user's verified address, unless it knows a newer one (a higher emailVersion): the
// compacted topic may hand an older record after a newer one, and a record is delivered again after a crash.
func (s *Service) emailVerified(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.EmailVerified](env)
	if err != nil {
		return err
	}
	if p.UserID <= 0 {
		return fault.Invalidf("INVALID_USER_ID", "%s without a valid userId", env.Type)
	}
	user := int64(p.UserID)
	// Not an upsert that sets user_id: vtgate refuses any that touches the vindex column.
	if _, err := s.db.ExecContext(ctx, s.insertIgnore()+" email_address (user_id) VALUES (?)", user); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, "UPDATE email_address SET email = ?, email_version = ? WHERE user_id = ? AND email_version < ?",
		strings.ToLower(strings.TrimSpace(p.Email)), p.EmailVersion, user, p.EmailVersion)
	return err
}

// startDigests starts the user's digests after the inbox's sequence number seq: what came before is not news to a
// digest.
func (s *Service) startDigests(ctx context.Context, tx *sql.Tx, user, seq int64) error {
	if _, err := tx.ExecContext(ctx, s.insertIgnore()+" email_address (user_id) VALUES (?)", user); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "UPDATE email_address SET digest_seq = ? WHERE user_id = ?", seq, user)
	return err
}

// told is a user a transaction added a notification for, of kind, with the user's e-mail preference.
type told struct {
	user int64
	kind Kind
	mode string
}

// mailNew asks, in the transaction that added n (its kind chosen per user) to the users' inboxes, for the mails
// that follow: one each to those who want them at once, and a digest due for those on the daily digest. It reads
// the addresses of the whole batch in one query.
func (s *Service) mailNew(ctx context.Context, tx *sql.Tx, emit outbox.Emit, n Notification, users []told) error {
	var mailing []int64
	byUser := map[int64]told{}
	for _, t := range users {
		if t.mode == EmailImmediate || t.mode == EmailDaily {
			mailing = append(mailing, t.user)
			byUser[t.user] = t
		}
	}
	if len(mailing) == 0 {
		return nil
	}
	in, args := sqldb.In("user_id", mailing)
	var immediate []addressed
	var digests []int64
	if err := queryEach(ctx, tx, func(rows *sql.Rows) error {
		var a addressed
		var pending bool
		if err := rows.Scan(&a.user, &a.email, &pending); err != nil {
			return err
		}
		switch t := byUser[a.user]; {
		case t.mode == EmailImmediate:
			a.kind = t.kind
			immediate = append(immediate, a)
		case !pending:
			digests = append(digests, a.user)
		}
		return nil
	}, "SELECT user_id, email, digest_pending FROM email_address WHERE "+in+" AND email <> ''", args...); err != nil {
		return err
	}
	if len(digests) > 0 {
		c, cArgs := sqldb.In("user_id", digests)
		if _, err := tx.ExecContext(ctx, "UPDATE email_address SET digest_pending = TRUE WHERE "+c, cArgs...); err != nil {
			return err
		}
	}
	if len(immediate) == 0 {
		return nil
	}
	now := s.cfg.Now()
	links, err := s.unsubscribeLinks(ctx, tx, immediate, now)
	if err != nil {
		return err
	}
	for i, a := range immediate {
		m := n
		m.Kind = a.kind
		subject := subjectOf(m)
		text := subject + "\n\n" + s.linkOf(m) + "\n" + s.footer(links[i])
		if err := s.emitMail(emit, a, event.MailNotification, subject, text, links[i], now); err != nil {
			return err
		}
	}
	return nil
}

// addressed is a user to mail, at email, of a notification of kind.
type addressed struct {
	user  int64
	email string
	kind  Kind
}

func (s *Service) emitMail(emit outbox.Emit, a addressed, kind, subject, text, unsubscribe string, now time.Time) error {
	id, err := s.ids.Next()
	if err != nil {
		return snowflake.Unavailable(err)
	}
	// Keyed by the user: the row stays on the user's shard, with the inbox it is written with. The relay keys the
	// record by the address (event.Mail).
	return emit(event.MailRequested, a.user, event.Mail{MailID: apijson.ID(id), Kind: kind, UserID: apijson.ID(a.user),
		To: a.email, Subject: subject, Text: text, Unsubscribe: unsubscribe, At: apijson.Time(now)})
}

// unsubscribeLinks makes a one-click unsubscribe link for each mail to the users (one per mail: only the secret's
// hash is kept, so a secret cannot go in a later mail), and drops the users' tokens past unsubscribeTTL, in two
// statements for the batch.
func (s *Service) unsubscribeLinks(ctx context.Context, tx *sql.Tx, to []addressed, now time.Time) ([]string, error) {
	links := make([]string, len(to))
	rows := make([]string, len(to))
	args := make([]any, 0, 3*len(to))
	users := make([]int64, len(to))
	for i, a := range to {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		token := strconv.FormatInt(a.user, 10) + "." + base64.RawURLEncoding.EncodeToString(secret)
		links[i] = strings.TrimRight(s.cfg.PublicURL, "/") + "/unsubscribe/" + token
		rows[i] = "(?, ?, ?)"
		args = append(args, a.user, tokenHash(secret), millis(now))
		users[i] = a.user
	}
	in, inArgs := sqldb.In("user_id", users)
	if _, err := tx.ExecContext(ctx, "DELETE FROM unsubscribe_token WHERE "+in+" AND created_at < ?",
		append(inArgs, millis(now.Add(-unsubscribeTTL)))...); err != nil {
		return nil, err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO unsubscribe_token (user_id, token_hash, created_at) VALUES "+strings.Join(rows, ", "), args...)
	return links, err
}

func tokenHash(secret []byte) string {
	h := sha256.Sum256(secret)
	return hex.EncodeToString(h[:])
}

// errUnknownToken answers a token that names no mail's link (never made, or past unsubscribeTTL).
var errUnknownToken = fault.NotFoundf("UNSUBSCRIBE_TOKEN_NOT_FOUND", "this unsubscribe link is unknown or too old; change your e-mail settings on your account page")

// Unsubscribe turns off the e-mail of the user whose mail carried token. Clicking again is no error.
func (s *Service) Unsubscribe(ctx context.Context, token string) error {
	userPart, secretPart, ok := strings.Cut(token, ".")
	user, err := strconv.ParseInt(userPart, 10, 64)
	secret, decErr := base64.RawURLEncoding.DecodeString(secretPart)
	if !ok || err != nil || user <= 0 || decErr != nil || len(secret) != 32 {
		return fault.Invalidf("INVALID_TOKEN", "the unsubscribe token is malformed: copy the whole link from the mail")
	}
	want := tokenHash(secret)
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		var got string
		err := tx.QueryRowContext(ctx, "SELECT token_hash FROM unsubscribe_token WHERE user_id = ? AND token_hash = ? AND created_at >= ?",
			user, want, millis(s.cfg.Now().Add(-unsubscribeTTL))).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1) {
			return errUnknownToken
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE inbox SET email_mode = ? WHERE user_id = ?", EmailOff, user); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE email_address SET digest_pending = FALSE WHERE user_id = ?", user)
		return err
	})
}

// subjectOf says what n tells of, in the inbox's words, on one line (it is a mail's subject).
func subjectOf(n Notification) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, subjectLine(n))
}

func subjectLine(n Notification) string {
	title := `"` + n.ArticleTitle + `"`
	switch n.Kind {
	case ArticleComment:
		return "New comment on your article " + title
	case CommentReply:
		return "New reply to your comment on " + title
	case ArticleLike:
		return "Your article " + title + " was liked"
	case Mention:
		return "You were mentioned in " + title
	case WatchedComment:
		return "New comment on " + title
	case WatchedArticle:
		return "New article on a board you watch: " + title
	case Moderation:
		what := "your account"
		if n.CommentID != 0 {
			what = "your comment on " + title
		} else if n.ArticleID != 0 {
			what = "your article " + title
		}
		s := fmt.Sprintf("A moderator's action (%s) on %s", n.Action, what)
		if n.Reason != "" {
			s += ": " + n.Reason
		}
		return s
	}
	return "New notification"
}

// linkOf is the page that shows what n tells of, as the web's inbox links it.
func (s *Service) linkOf(n Notification) string {
	base := strings.TrimRight(s.cfg.PublicURL, "/")
	if n.ArticleID == 0 {
		return base + "/notifications"
	}
	link := base + "/articles/" + strconv.FormatInt(n.ArticleID, 10)
	if n.CommentID != 0 {
		link += "#c-" + strconv.FormatInt(n.CommentID, 10)
	}
	return link
}

// footer ends every mail: why it came, and how to stop it.
func (s *Service) footer(unsubscribe string) string {
	return "\n-- \nYou get this mail because you asked for notifications by e-mail. Settings: " +
		strings.TrimRight(s.cfg.PublicURL, "/") + "/account\nunsubscribe: " + unsubscribe + "\n"
}
