package notification

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"board/internal/event"
	"board/internal/outbox"
	"board/internal/sqldb"
)

// The daily digest. A user on it whose inbox gains a notification is marked digest_pending (mailNew); each
// DigestEvery the worker reads, through idx_digest_due, the pending users whose last digest is a day old or more, in
// batches of digestBatch, and for each, in one transaction on the user's shard, claims the digest by an UPDATE of
// last_digest_at (an instance that raced it updates nothing and sends nothing) and writes the mail: the unread
// notifications that came after the last digest (digest_seq), digestItems of them listed.

const (
	DefaultDigestEvery = time.Hour
	digestPeriod       = 24 * time.Hour
	digestBatch        = 100
	digestItems        = 20 // listed in a digest; the rest are counted
	digestTimeout      = time.Minute
)

// dueQuery reads, through idx_digest_due, the pending users whose last digest is before a time, oldest first.
const dueQuery = "SELECT user_id FROM email_address WHERE digest_pending = TRUE AND last_digest_at <= ? ORDER BY last_digest_at LIMIT ?"

// RunDigests sends the digests due every DigestEvery until ctx ends.
func (s *Service) RunDigests(ctx context.Context) {
	t := time.NewTicker(s.cfg.DigestEvery)
	defer t.Stop()
	for {
		pass, cancel := context.WithTimeout(ctx, digestTimeout)
		if _, err := s.sendDigests(pass); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("notification: the digests' pass failed; the next one takes up what is left", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sendDigests writes the digests due now, and returns how many it wrote.
func (s *Service) sendDigests(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	sent := 0
	for {
		users, err := sqldb.IDs(s.db.QueryContext(ctx, dueQuery, millis(now.Add(-digestPeriod)), digestBatch))
		if err != nil {
			return sent, err
		}
		// One user whose digest fails must not hold up the others behind them: the pass goes on past them, and ends
		// when a batch reads only users whose digests fail (the next pass tries them again).
		var failed error
		progressed := false
		for _, u := range users {
			ok, err := s.sendDigest(ctx, u, now)
			if err != nil {
				if ctx.Err() != nil {
					return sent, err
				}
				failed = err
				s.cfg.Logger.Warn("notification: a digest failed; the next pass tries it again", "user", u, "err", err)
				continue
			}
			progressed = true // claimed or cleared, here or by another instance: the next batch reads others
			if ok {
				sent++
			}
		}
		if len(users) < digestBatch || !progressed {
			return sent, failed
		}
	}
}

// sendDigest writes the user's digest if it is still due, and reports whether it did.
func (s *Service) sendDigest(ctx context.Context, user int64, now time.Time) (sent bool, err error) {
	dayAgo := millis(now.Add(-digestPeriod))
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		sent = false
		// The inbox row first, as every change to the user's notifications takes it.
		var mode string
		var seq int64
		err := tx.QueryRowContext(ctx, "SELECT email_mode, seq FROM inbox WHERE user_id = ?"+s.db.ForUpdate(), user).Scan(&mode, &seq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var email string
		var since int64 // the inbox's sequence at the last digest: what came after is new to it
		if err := tx.QueryRowContext(ctx, "SELECT email, digest_seq FROM email_address WHERE user_id = ?"+s.db.ForUpdate(), user).Scan(&email, &since); err != nil {
			return err
		}
		var count int64
		if mode == EmailDaily && email != "" {
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM notification WHERE user_id = ? AND seq > ? AND is_read = FALSE",
				user, since).Scan(&count); err != nil {
				return err
			}
		}
		if count == 0 {
			// Nothing to send (read meanwhile, or no longer wanted): not pending until the next notification.
			_, err := tx.ExecContext(ctx, "UPDATE email_address SET digest_pending = FALSE WHERE user_id = ? AND digest_pending = TRUE AND last_digest_at <= ?",
				user, dayAgo)
			return err
		}
		// The claim: an instance that sent it meanwhile moved last_digest_at, and this one updates nothing.
		res, err := tx.ExecContext(ctx, "UPDATE email_address SET digest_pending = FALSE, last_digest_at = ?, digest_seq = ? WHERE user_id = ? AND digest_pending = TRUE AND last_digest_at <= ?",
			millis(now), seq, user, dayAgo)
		if err != nil {
			return err
		}
		if claimed, err := res.RowsAffected(); err != nil || claimed != 1 {
			return err
		}
		items, err := queryNotifications(ctx, tx, "SELECT "+columns+" FROM notification WHERE user_id = ? AND seq > ? AND is_read = FALSE ORDER BY seq DESC LIMIT ?",
			user, since, digestItems)
		if err != nil {
			return err
		}
		a := addressed{user: user, email: email}
		links, err := s.unsubscribeLinks(ctx, tx, []addressed{a}, now)
		if err != nil {
			return err
		}
		subject := strconv.FormatInt(count, 10) + plural(count, " new notification", " new notifications")
		var text strings.Builder
		text.WriteString("Your " + subject + ", unread:\n\n")
		for _, n := range items {
			text.WriteString("- " + subjectOf(n) + "\n  " + s.linkOf(n) + "\n")
		}
		if more := count - int64(len(items)); more > 0 {
			text.WriteString("\nand " + strconv.FormatInt(more, 10) + " more: " + strings.TrimRight(s.cfg.PublicURL, "/") + "/notifications\n")
		}
		text.WriteString(s.footer(links[0]))
		sent = true
		return s.emitMail(emit, a, event.MailDigest, subject, text.String(), links[0], now)
	})
	return sent, err
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// queryNotifications runs a query of notifications' columns in tx.
func queryNotifications(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]Notification, error) {
	var out []Notification
	err := queryEach(ctx, tx, func(rows *sql.Rows) error {
		n, err := scanNotification(rows)
		out = append(out, n)
		return err
	}, query, args...)
	return out, err
}
