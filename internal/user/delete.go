package user

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/outbox"
)

// Leaving (SPEC §3.14, docs/identity.md "Leaving"): a user deletes their account. The row stays, marked deleted, so
// that their id keeps naming "a deleted user" wherever their content is kept, and their username stays taken for
// a grace period, so that nobody can pass for them in the threads they were in.

// DefaultUsernameGrace is how long a deleted account's username stays taken by default.
const DefaultUsernameGrace = 720 * time.Hour

// DeletedName is what a deleted account's username reads as.
const DeletedName = "[deleted]"

// Delete deletes user's account, confirmed by its password (an account without one, made by an identity provider's
// sign-in, is confirmed by the token alone): content says what becomes of what they wrote, event.DeleteKeep or
// event.DeleteRemove (400 INVALID_CONTENT otherwise); a wrong password is 401 BAD_CREDENTIALS. In one transaction the
// account is marked deleted, its password hash, e-mail addresses and mailed tokens are cleared, its token epoch is
// bumped (every token of it is void), the blocks it made end (USER_UNBLOCKED each, at most MaxBlocks), and
// USER_DELETED is written, which each service that holds the user's data acts on. Deleting a deleted account again
// changes nothing.
func (s *Service) Delete(ctx context.Context, userID int64, password, content string) error {
	if content != event.DeleteKeep && content != event.DeleteRemove {
		return fault.Invalidf("INVALID_CONTENT", "content must be %q or %q", event.DeleteKeep, event.DeleteRemove)
	}
	u, hash, err := scanUser(s.db.QueryRowContext(ctx, "SELECT "+userColumns+" FROM users WHERE user_id = ?", userID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return notFound(userID)
	case err != nil:
		return err
	case u.Deleted:
		return nil
	}
	if hash != "" {
		if err := s.passwordGuess(ctx, u); err != nil {
			return err
		}
		ok, err := s.hasher.verify(ctx, hash, password)
		if err != nil {
			return err
		}
		if !ok {
			return errBadCredentials
		}
	}
	now := apijson.Millis(s.cfg.Now())
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		// The password checked must still be the account's: a change in between makes it a wrong one.
		res, err := tx.ExecContext(ctx, `UPDATE users SET deleted_at = ?, password_hash = '', email = NULL, pending_email = NULL,
			email_version = email_version + 1, token_epoch = token_epoch + 1 WHERE user_id = ? AND deleted_at IS NULL AND password_hash = ?`, now, userID, hash)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return cmp.Or[error](err, errBadCredentials)
		}
		for _, table := range []string{"account_token", "user_identity"} {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE user_id = ?", userID); err != nil {
				return err
			}
		}
		if err := s.endBlocks(ctx, tx, emit, userID, now); err != nil {
			return err
		}
		var epoch, emailVersion int64
		if err := tx.QueryRowContext(ctx, "SELECT token_epoch, email_version FROM users WHERE user_id = ?", userID).Scan(&epoch, &emailVersion); err != nil {
			return err
		}
		// The account topic keeps each user's latest address for good (compacted): a blank one in its place is what
		// lets compaction drop the address.
		if err := emit(event.UserEmailVerified, userID, event.EmailVerified{UserID: apijson.ID(userID), EmailVersion: emailVersion,
			At: apijson.Time(now)}); err != nil {
			return err
		}
		return emit(event.UserDeleted, userID, event.UserDeletion{UserID: apijson.ID(userID), Content: content,
			TokenEpoch: epoch, At: apijson.Time(now)})
	})
	if err != nil {
		return fmt.Errorf("delete user %d: %w", userID, err)
	}
	return nil
}

// endBlocks ends every block user makes, as Unblock would, within tx: at most MaxBlocks rows, on user's shard.
func (s *Service) endBlocks(ctx context.Context, tx *sql.Tx, emit outbox.Emit, user int64, now time.Time) error {
	rows, err := tx.QueryContext(ctx, "SELECT blocked_user_id, version FROM block WHERE user_id = ? AND blocked = TRUE", user)
	if err != nil {
		return err
	}
	type pair struct{ other, version int64 }
	var blocks []pair
	for rows.Next() {
		var b pair
		if err := rows.Scan(&b.other, &b.version); err != nil {
			rows.Close()
			return err
		}
		blocks = append(blocks, b)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, b := range blocks {
		if _, err := tx.ExecContext(ctx, "UPDATE block SET blocked = FALSE, version = ? WHERE user_id = ? AND blocked_user_id = ?",
			b.version+1, user, b.other); err != nil {
			return err
		}
		if err := emit(event.UserUnblocked, user, event.Block{UserID: apijson.ID(user), BlockedUserID: apijson.ID(b.other),
			At: apijson.Time(now), BlockVersion: b.version + 1}); err != nil {
			return err
		}
	}
	return nil
}

// releaseName frees the username of held, an account found holding a name a sign-up wants, when held was deleted
// more than the grace ago: the old row's name becomes "#<its id>", which no username can be. It reports whether the
// name is free now. The release is its own statement, before the sign-up's insert: behind Vitess the two rows live on
// different shards. A sign-up that then fails has still freed a name whose grace is over, which changes nothing.
func (s *Service) releaseName(ctx context.Context, held User) (bool, error) {
	if !held.Deleted {
		return false, nil
	}
	grace := s.cfg.UsernameGrace
	if grace <= 0 {
		grace = DefaultUsernameGrace
	}
	res, err := s.db.ExecContext(ctx, "UPDATE users SET username = ? WHERE user_id = ? AND username = ? AND deleted_at <= ?",
		"#"+strconv.FormatInt(held.ID, 10), held.ID, held.Username, apijson.Millis(s.cfg.Now().Add(-grace)))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// deleteMe answers DELETE /v1/users/me {password, content}: 202, the account deleted; what the other services hold of
// it goes as they handle USER_DELETED.
func (h handlers) deleteMe(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Password string  `json:"password"`
		Content  *string `json:"content"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if in.Content == nil {
		return fault.Invalidf("INVALID_CONTENT", "content must be %q or %q", event.DeleteKeep, event.DeleteRemove)
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), p.UserID, in.Password, *in.Content); err != nil {
		return err
	}
	httpio.Write(w, http.StatusAccepted, struct{}{})
	return nil
}
