package notification

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/sqldb"
)

// Leaving (docs/notifications.md, "A user who leaves"). USER_DELETED, whatever its content, forgets what the service
// keeps of the user: the likers it remembered for the user's articles, their bookmarks, their watches and mutes (and
// the index entries of those), their notifications and last their inbox row, which holds their preferences. Each
// step goes in batches of at most forgetBatchSize rows, each batch its own short transaction on the user's shard
// that reads what is left, so a handler cut off anywhere is redelivered and does the rest.

// forgetBatchSize bounds the rows one batch forgets (accounts contract: at most 500).
const forgetBatchSize = 500

// forgetBatchTimeout bounds one batch: a hung database stalls the handler (retried by the consumer), not for good.
const forgetBatchTimeout = 30 * time.Second

// LeavingHandlers are the service's handlers of the session topic, for its consumer group.
func (s *Service) LeavingHandlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.UserDeleted: s.userDeleted}
}

func (s *Service) userDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.UserDeletion](env)
	if err != nil {
		return err
	}
	if p.UserID <= 0 {
		return fault.Invalidf("INVALID_USER_ID", "%s without a valid userId", env.Type)
	}
	return s.forget(ctx, int64(p.UserID))
}

// forget forgets everything the service keeps of a user, a bounded batch at a time.
func (s *Service) forget(ctx context.Context, userID int64) error {
	for _, step := range []func(context.Context, int64) (bool, error){
		s.forgetLikers, s.forgetBookmarks, s.forgetWatches, s.forgetInbox, s.forgetUnsubscribeTokens, s.forgetEmail,
	} {
		for {
			bctx, cancel := context.WithTimeout(ctx, forgetBatchTimeout)
			done, err := step(bctx, userID)
			cancel()
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
	}
	s.publish(userID) // the user's open streams, if any, read an empty inbox
	return nil
}

// inLockedInbox runs fn in a transaction that first takes the user's inbox row, if there is one, as every change of
// the inbox does: the rows fn reads stay as they are until it ends. inbox tells whether the row was there.
func (s *Service) inLockedInbox(ctx context.Context, userID int64, fn func(tx *sql.Tx, inbox bool) error) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		var seq int64
		err := tx.QueryRowContext(ctx, "SELECT seq FROM inbox WHERE user_id = ?"+s.db.ForUpdate(), userID).Scan(&seq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return fn(tx, err == nil)
	})
}

// forgetLikers forgets a batch of the likers remembered for the user's articles.
func (s *Service) forgetLikers(ctx context.Context, userID int64) (done bool, err error) {
	err = s.inLockedInbox(ctx, userID, func(tx *sql.Tx, _ bool) error {
		var article, actor int64
		var n int
		rows, err := tx.QueryContext(ctx, "SELECT article_id, actor_id FROM like_actor WHERE user_id = ? ORDER BY article_id, actor_id LIMIT ?",
			userID, forgetBatchSize)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := rows.Scan(&article, &actor); err != nil {
				rows.Close()
				return err
			}
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if done = n == 0; done {
			return nil
		}
		// Up to the last row read, in key order: the rows read, no more (the inbox lock keeps new ones out).
		_, err = tx.ExecContext(ctx, "DELETE FROM like_actor WHERE user_id = ? AND (article_id < ? OR (article_id = ? AND actor_id <= ?))",
			userID, article, article, actor)
		return err
	})
	return done, err
}

// forgetBookmarks forgets a batch of the user's bookmarks.
func (s *Service) forgetBookmarks(ctx context.Context, userID int64) (done bool, err error) {
	ids, err := sqldb.IDs(s.db.QueryContext(ctx, "SELECT bookmark_id FROM bookmark WHERE user_id = ? ORDER BY bookmark_id LIMIT ?",
		userID, forgetBatchSize))
	if err != nil || len(ids) == 0 {
		return err == nil, err
	}
	in, args := sqldb.In("bookmark_id", ids)
	_, err = s.db.ExecContext(ctx, "DELETE FROM bookmark WHERE user_id = ? AND "+in, append([]any{userID}, args...)...)
	return false, err
}

// forgetUnsubscribeTokens forgets a batch of the user's unsubscribe tokens.
func (s *Service) forgetUnsubscribeTokens(ctx context.Context, userID int64) (done bool, err error) {
	rows, err := s.db.QueryContext(ctx, "SELECT token_hash FROM unsubscribe_token WHERE user_id = ? ORDER BY token_hash LIMIT ?",
		userID, forgetBatchSize)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	var last string
	n := 0
	for rows.Next() {
		if err := rows.Scan(&last); err != nil {
			return false, err
		}
		n++
	}
	if err := rows.Err(); err != nil || n == 0 {
		return err == nil, err
	}
	_, err = s.db.ExecContext(ctx, "DELETE FROM unsubscribe_token WHERE user_id = ? AND token_hash <= ?", userID, last)
	return false, err
}

// forgetEmail forgets the user's address, and leaves the highest emailVersion in its place: a USER_EMAIL_VERIFIED of
// theirs read after this (the account topic is another topic, read at its own pace) then changes nothing.
func (s *Service) forgetEmail(ctx context.Context, userID int64) (done bool, err error) {
	if _, err := s.db.ExecContext(ctx, s.insertIgnore()+" email_address (user_id) VALUES (?)", userID); err != nil {
		return false, err
	}
	_, err = s.db.ExecContext(ctx, "UPDATE email_address SET email = '', email_version = ?, digest_pending = FALSE WHERE user_id = ?",
		int64(math.MaxInt64), userID)
	return err == nil, err
}

// forgetWatches forgets a batch of the user's watches and mutes. Their index entries go first, then the watches:
// the reverse of DeleteWatch, so that a batch cut off between the two finds its watches again, and their entries
// with them, at the next delivery. Meanwhile a fan-out may miss the user: they have left.
func (s *Service) forgetWatches(ctx context.Context, userID int64) (done bool, err error) {
	ws, err := s.Watches(ctx, userID, 0, forgetBatchSize)
	if err != nil || len(ws) == 0 {
		return err == nil, err
	}
	unindex := func(exec interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}) error {
		for _, w := range ws {
			if _, err := exec.ExecContext(ctx, "DELETE FROM watcher WHERE target_id = ? AND target_type = ? AND user_id = ?",
				w.TargetID, w.TargetType, userID); err != nil {
				return err
			}
		}
		return nil
	}
	if s.db.Vitess() {
		err = unindex(s.db) // each entry on its target's shard: a statement each
	} else {
		err = s.db.Transact(ctx, func(tx *sql.Tx) error { return unindex(tx) })
	}
	if err != nil {
		return false, err
	}
	ids := make([]int64, len(ws))
	for i, w := range ws {
		ids[i] = w.id
	}
	in, args := sqldb.In("watch_id", ids)
	_, err = s.db.ExecContext(ctx, "DELETE FROM watch WHERE user_id = ? AND "+in, append([]any{userID}, args...)...)
	return false, err
}

// forgetInbox forgets a batch of the user's notifications, taking the unread ones off the inbox's count, and once
// none is left the inbox row itself (sequence, unread count, preferences).
func (s *Service) forgetInbox(ctx context.Context, userID int64) (done bool, err error) {
	err = s.inLockedInbox(ctx, userID, func(tx *sql.Tx, inbox bool) error {
		rows, err := tx.QueryContext(ctx, "SELECT notification_id, is_read FROM notification WHERE user_id = ? ORDER BY notification_id LIMIT ?",
			userID, forgetBatchSize)
		if err != nil {
			return err
		}
		var ids []int64
		var unread int64
		for rows.Next() {
			var id int64
			var read bool
			if err := rows.Scan(&id, &read); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			if !read {
				unread++
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			done = true
			if !inbox {
				return nil
			}
			_, err := tx.ExecContext(ctx, "DELETE FROM inbox WHERE user_id = ?", userID)
			return err
		}
		done = false
		in, args := sqldb.In("notification_id", ids)
		if _, err := tx.ExecContext(ctx, "DELETE FROM notification WHERE user_id = ? AND "+in, append([]any{userID}, args...)...); err != nil {
			return err
		}
		if !inbox || unread == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, "UPDATE inbox SET unread = CASE WHEN unread > ? THEN unread - ? ELSE 0 END WHERE user_id = ?",
			unread, unread, userID)
		return err
	})
	return done, err
}
