package notification

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"time"

	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// inbox is a user's inbox row, as a transaction holds it.
type inbox struct {
	userID      int64
	seq, unread int64
	prefs       Preferences
}

// inInbox runs fn in one transaction on the user's shard that first takes the user's inbox row (made if missing),
// and then writes the row back if fn changed it. It reports whether it did, for the caller to tell the streams.
func (s *Service) inInbox(ctx context.Context, userID int64, fn func(tx *sql.Tx, in *inbox) error) (changed bool, err error) {
	return s.inInboxMailing(ctx, userID, func(tx *sql.Tx, _ outbox.Emit, in *inbox) error { return fn(tx, in) })
}

// inInboxMailing is inInbox whose fn may also ask for mails (emit writes them to the outbox in the transaction).
func (s *Service) inInboxMailing(ctx context.Context, userID int64, fn func(tx *sql.Tx, emit outbox.Emit, in *inbox) error) (changed bool, err error) {
	err = s.cfg.Outbox.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		changed = false
		in := inbox{userID: userID}
		p := &in.prefs
		lock := func() error {
			return tx.QueryRowContext(ctx, "SELECT seq, unread, "+prefColumns+" FROM inbox WHERE user_id = ?"+s.db.ForUpdate(),
				userID).Scan(append([]any{&in.seq, &in.unread}, p.fields()...)...)
		}
		// Most inboxes exist: one statement takes the row. A new one is made first (by another transaction at the
		// same time, perhaps: the insert then waits for it), then taken.
		err := lock()
		if errors.Is(err, sql.ErrNoRows) {
			// Not an upsert that sets user_id: vtgate refuses any that touches the vindex column.
			if _, err := tx.ExecContext(ctx, s.insertIgnore()+" inbox (user_id) VALUES (?)", userID); err != nil {
				return err
			}
			err = lock()
		}
		if err != nil {
			return err
		}
		before := in
		if err := fn(tx, emit, &in); err != nil {
			return err
		}
		if in == before {
			return nil
		}
		changed = true
		_, err = tx.ExecContext(ctx, "UPDATE inbox SET seq = ?, unread = ?, want_reply = ?, want_comment_reply = ?, want_like = ?, want_moderation = ?, want_mention = ?, want_watched = ?, auto_watch = ?, email_mode = ? WHERE user_id = ?",
			in.seq, in.unread, p.Reply, p.CommentReply, p.Like, p.Moderation, p.Mention, p.Watched, p.AutoWatch, p.Email, userID)
		return err
	})
	return changed, err
}

// add puts n in the user's inbox as a new unread notification unless its dedupe key is there already (the event
// was delivered before) or the user does not want its kind.
func (s *Service) add(ctx context.Context, userID int64, dedupeKey string, n Notification) error {
	if userID <= 0 || s.deleted(userID) {
		return nil // an event that names no writer, or a writer who left
	}
	changed, err := s.inInboxMailing(ctx, userID, func(tx *sql.Tx, emit outbox.Emit, in *inbox) error {
		if !in.prefs.wants(n.Kind) {
			return nil
		}
		added, err := s.insert(ctx, tx, userID, in.seq+1, dedupeKey, n)
		if err != nil || !added {
			return err
		}
		in.seq++
		in.unread++
		return s.mailNew(ctx, tx, emit, n, []told{{userID, n.Kind, in.prefs.Email}})
	})
	if changed {
		s.publish(userID)
	}
	return err
}

// addLike adds actor to the unread like group of the user's article, or starts one, the first time actor likes it.
func (s *Service) addLike(ctx context.Context, userID int64, n Notification) error {
	actor := n.ActorIDs[0]
	if userID <= 0 || s.deleted(userID) || s.blocks(userID, actor) {
		return nil
	}
	key := "l:" + strconv.FormatInt(n.ArticleID, 10)
	changed, err := s.inInboxMailing(ctx, userID, func(tx *sql.Tx, emit outbox.Emit, in *inbox) error {
		if !in.prefs.Like {
			return nil
		}
		if muted, err := s.muted(ctx, tx, userID, n.ArticleID); err != nil || muted {
			return err
		}
		res, err := tx.ExecContext(ctx, s.insertIgnore()+" like_actor (user_id, article_id, actor_id) VALUES (?, ?, ?)", userID, n.ArticleID, actor)
		if err != nil {
			return err
		}
		if first, err := res.RowsAffected(); err != nil || first == 0 {
			return err // this liker notified the writer already
		}
		in.seq++
		var id, count int64
		var actors string
		err = tx.QueryRowContext(ctx, "SELECT notification_id, actor_ids, actor_count FROM notification WHERE user_id = ? AND dedupe_key = ?",
			userID, key).Scan(&id, &actors, &count)
		if errors.Is(err, sql.ErrNoRows) {
			in.unread++
			// A new like group is mailed; the likes that join it are not.
			if _, err := s.insert(ctx, tx, userID, in.seq, key, n); err != nil {
				return err
			}
			return s.mailNew(ctx, tx, emit, n, []told{{userID, n.Kind, in.prefs.Email}})
		} else if err != nil {
			return err
		}
		ids := append([]int64{actor}, parseActors(actors)...)
		ids = ids[:min(len(ids), maxActors)]
		_, err = tx.ExecContext(ctx, "UPDATE notification SET seq = ?, actor_ids = ?, actor_count = ?, article_title = ?, updated_at = ? WHERE user_id = ? AND notification_id = ?",
			in.seq, formatActors(ids), count+1, n.ArticleTitle, n.UpdatedAt, userID, id)
		return err
	})
	if changed {
		s.publish(userID)
	}
	return err
}

// muted reports whether the user muted the article.
func (s *Service) muted(ctx context.Context, tx *sql.Tx, userID, articleID int64) (bool, error) {
	var level string
	err := tx.QueryRowContext(ctx, "SELECT level FROM watch WHERE user_id = ? AND target_type = ? AND target_id = ?",
		userID, TargetArticle, articleID).Scan(&level)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return level == LevelMuted, err
}

// insertIgnore begins an insert that adds nothing, rather than fail, where a unique key has the row already.
func (s *Service) insertIgnore() string {
	if s.db.Dialect == sqldb.MySQL {
		return "INSERT IGNORE INTO"
	}
	return "INSERT OR IGNORE INTO"
}

// insert adds n to the user's inbox at sequence number seq; added is false when the inbox has its dedupe key already.
func (s *Service) insert(ctx context.Context, tx *sql.Tx, userID, seq int64, key string, n Notification) (added bool, err error) {
	id, err := s.ids.Next()
	if err != nil {
		return false, snowflake.Unavailable(err)
	}
	res, err := tx.ExecContext(ctx, s.insertIgnore()+` notification (user_id, notification_id, seq, kind, dedupe_key, article_id,
		article_title, comment_id, actor_ids, actor_count, action, reason, is_read, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, FALSE, ?, ?)`,
		userID, id, seq, string(n.Kind), key, n.ArticleID, n.ArticleTitle, n.CommentID, formatActors(n.ActorIDs),
		len(n.ActorIDs), n.Action, n.Reason, millis(n.CreatedAt), millis(n.UpdatedAt))
	if err != nil {
		return false, err
	}
	rows, err := res.RowsAffected()
	return rows == 1, err
}

// retract deletes the user's unread notifications that match cond (with its args), which point at content no longer
// there for them.
func (s *Service) retract(ctx context.Context, userID int64, cond string, args ...any) error {
	changed, err := s.inInbox(ctx, userID, func(tx *sql.Tx, in *inbox) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM notification WHERE user_id = ? AND is_read = FALSE AND "+cond,
			append([]any{userID}, args...)...)
		if err != nil {
			return err
		}
		gone, err := res.RowsAffected()
		in.unread = max(0, in.unread-gone)
		return err
	})
	if changed {
		s.publish(userID)
	}
	return err
}

// MarkRead marks one of the user's notifications read: NOTIFICATION_NOT_FOUND when the user's inbox has no such
// notification (anyone else's is not in it).
func (s *Service) MarkRead(ctx context.Context, userID, notificationID int64) error {
	changed, err := s.inInbox(ctx, userID, func(tx *sql.Tx, in *inbox) error {
		// A like group that is read is closed: the next like starts another.
		res, err := tx.ExecContext(ctx, `UPDATE notification SET is_read = TRUE, dedupe_key = CASE WHEN kind = ? THEN NULL ELSE dedupe_key END
			WHERE user_id = ? AND notification_id = ? AND is_read = FALSE`, string(ArticleLike), userID, notificationID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			in.unread = max(0, in.unread-1)
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, "SELECT 1 FROM notification WHERE user_id = ? AND notification_id = ?", userID, notificationID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fault.NotFoundf("NOTIFICATION_NOT_FOUND", "your inbox has no notification %d", notificationID)
		}
		return err // read already
	})
	if changed {
		s.publish(userID)
	}
	return err
}

// MarkAllRead marks every notification of the user's inbox read.
func (s *Service) MarkAllRead(ctx context.Context, userID int64) error {
	changed, err := s.inInbox(ctx, userID, func(tx *sql.Tx, in *inbox) error {
		if in.unread == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, `UPDATE notification SET is_read = TRUE, dedupe_key = CASE WHEN kind = ? THEN NULL ELSE dedupe_key END
			WHERE user_id = ? AND is_read = FALSE`, string(ArticleLike), userID)
		in.unread = 0
		return err
	})
	if changed {
		s.publish(userID)
	}
	return err
}

// prefColumns are the inbox's columns of Preferences, in the order of its fields.
const prefColumns = "want_reply, want_comment_reply, want_like, want_moderation, want_mention, want_watched, auto_watch, email_mode"

// fields are where to scan prefColumns.
func (p *Preferences) fields() []any {
	return []any{&p.Reply, &p.CommentReply, &p.Like, &p.Moderation, &p.Mention, &p.Watched, &p.AutoWatch, &p.Email}
}

// Preferences returns the kinds the user wants.
func (s *Service) Preferences(ctx context.Context, userID int64) (Preferences, error) {
	p := defaultPreferences
	err := s.db.QueryRowContext(ctx, "SELECT "+prefColumns+" FROM inbox WHERE user_id = ?", userID).Scan(p.fields()...)
	if errors.Is(err, sql.ErrNoRows) {
		return p, nil
	}
	return p, err
}

// SetPreferences sets the kinds the user wants from now on: change is given the preferences as they are, and
// changes them.
func (s *Service) SetPreferences(ctx context.Context, userID int64, change func(*Preferences)) (Preferences, error) {
	var p Preferences
	_, err := s.inInbox(ctx, userID, func(tx *sql.Tx, in *inbox) error {
		was := in.prefs.Email
		change(&in.prefs)
		p = in.prefs
		if p.Email == EmailDaily && was != EmailDaily {
			return s.startDigests(ctx, tx, userID, in.seq)
		}
		return nil
	})
	return p, err
}

// state returns the user's inbox sequence and unread count.
func (s *Service) state(ctx context.Context, userID int64) (seq, unread int64, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT seq, unread FROM inbox WHERE user_id = ?", userID).Scan(&seq, &unread)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return seq, unread, err
}

// UnreadCount returns the number of the user's unread notifications.
func (s *Service) UnreadCount(ctx context.Context, userID int64) (int64, error) {
	_, unread, err := s.state(ctx, userID)
	return unread, err
}

const columns = `notification_id, seq, kind, article_id, article_title, comment_id, actor_ids, actor_count, action,
	reason, is_read, created_at, updated_at`

// List returns up to n of the user's notifications changed before sequence number before (0: from the newest),
// newest first.
func (s *Service) List(ctx context.Context, userID, before int64, n int) ([]Notification, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	return s.query(ctx, "SELECT "+columns+" FROM notification WHERE user_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?", userID, before, n)
}

// since returns up to n of the user's notifications changed after sequence number after, oldest first.
func (s *Service) since(ctx context.Context, userID, after int64, n int) ([]Notification, error) {
	return s.query(ctx, "SELECT "+columns+" FROM notification WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?", userID, after, n)
}

func (s *Service) query(ctx context.Context, query string, args ...any) ([]Notification, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Notification
	for rows.Next() {
		n, err := scanNotification(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// scanNotification scans a row of columns.
func scanNotification(rows *sql.Rows) (Notification, error) {
	var n Notification
	var kind, actors string
	err := rows.Scan(&n.ID, &n.Seq, &kind, &n.ArticleID, &n.ArticleTitle, &n.CommentID, &actors, &n.ActorCount,
		&n.Action, &n.Reason, &n.Read, &n.CreatedAt, &n.UpdatedAt)
	n.Kind, n.ActorIDs = Kind(kind), parseActors(actors)
	return n, err
}

// at is when an event says its act happened, or now if it does not say.
func (s *Service) at(t time.Time) time.Time {
	if t.IsZero() {
		return s.cfg.Now()
	}
	return t
}

// distinct returns ids without repeats and without skip.
func distinct(ids []int64, skip int64) []int64 {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id int64) bool { return id == skip || id <= 0 })
}
