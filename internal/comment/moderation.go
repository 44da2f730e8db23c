package comment

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"unicode/utf8"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/sqldb"
)

// maxReasonChars bounds a stored removedReason (the column's size); a longer one is cut, not refused, so that one
// long reason cannot hold up the topic.
const maxReasonChars = 1000

// byArticleComment names the index the purge walks to remove an article's comment_moderation rows.
const byArticleComment = "idx_article_id_comment_id"

// errLocked is the answer to a new comment on a locked article.
var errLocked = &fault.Error{Kind: fault.Forbidden, Code: "LOCKED", Message: "this article is locked: no new comments"}

// Handlers are the comment service's handlers of the moderation topic (whether an article is locked, and whether a
// comment is hidden), of the like topic's comment events (like counts, likes.go) and USER_DELETED (leaving.go). The
// service's consumer group runs them with the existence registry's handlers of the article topic, in one consumer.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	handlers := map[event.Type]kafka.Handler{event.ArticleModerated: s.applyArticleModerated, event.CommentModerated: s.applyCommentModerated,
		event.UserDeleted: s.applyUserDeleted}
	maps.Copy(handlers, s.likeHandlers())
	return handlers
}

func (s *Service) applyArticleModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.ArticleModeration](env)
	if err != nil {
		return err
	}
	if err := checkModeration(env, p.ArticleID, p.ArticleID, p.ModerationVersion, event.Visible); err != nil {
		return err
	}
	return s.store.ApplyLock(ctx, int64(p.ArticleID), p.Locked, p.ModerationVersion)
}

func (s *Service) applyCommentModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.CommentModeration](env)
	if err != nil {
		return err
	}
	if err := checkModeration(env, p.ArticleID, p.CommentID, p.ModerationVersion, p.Hidden); err != nil {
		return err
	}
	reason := p.RemovedReason
	if utf8.RuneCountInString(reason) > maxReasonChars {
		reason = string([]rune(reason)[:maxReasonChars])
	}
	return s.store.ApplyCommentModeration(ctx, int64(p.ArticleID), int64(p.CommentID), p.Hidden, reason, p.ModerationVersion)
}

// checkModeration refuses a moderation event without the ids and version it must carry, or with an unknown hidden.
func checkModeration(env event.Envelope, articleID, targetID apijson.ID, version int64, hidden event.Hidden) error {
	switch {
	case articleID <= 0 || targetID <= 0:
		return fault.Invalidf("INVALID_ID", "%s without a valid articleId or commentId", env.Type)
	case version <= 0:
		return fault.Invalidf("INVALID_VERSION", "%s without a positive moderationVersion", env.Type)
	case hidden != event.Visible && hidden != event.Pending && hidden != event.Removed:
		return fault.Invalidf("INVALID_HIDDEN", "%s with hidden %q", env.Type, hidden)
	}
	return nil
}

// applyModeration runs upsert, which records an article's or a comment's moderation state, unless the article is
// recorded deleted here: then its purge removes (or has removed) what the article left, and a late event must not
// leave a row behind it. The article's existence row is read under a shared lock, as writes do (package comment),
// so the delete is recorded either after this transaction, and purges what it wrote, or before it. An article not
// heard of yet here is moderated all the same: its moderation events may overtake its ARTICLE_CREATED.
func (s *Store) applyModeration(ctx context.Context, articleID int64, upsert func(tx *sql.Tx) error) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		switch err := s.articles.Require(ctx, tx, articleID); {
		case fault.KindOf(err) == fault.NotFound:
			return nil
		case err != nil && !errors.Is(err, existence.ErrUnknown):
			return err
		}
		return upsert(tx)
	})
}

// ApplyLock records whether an article is locked, at version, unless what is recorded is as new or newer.
func (s *Store) ApplyLock(ctx context.Context, articleID int64, locked bool, version int64) error {
	return s.applyModeration(ctx, articleID, func(tx *sql.Tx) error {
		// Insert if absent (an upsert that changes nothing sets a column to itself), then replace an older state.
		if _, err := tx.ExecContext(ctx, "INSERT INTO article_lock (article_id, locked, moderation_version) VALUES (?, ?, ?)"+
			s.db.OnConflictUpdate("article_id", "moderation_version = moderation_version"), articleID, locked, version); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE article_lock SET locked = ?, moderation_version = ? WHERE article_id = ? AND moderation_version < ?",
			locked, version, articleID, version)
		return err
	})
}

// ApplyCommentModeration records whether a comment is hidden, and why, at version, unless what is recorded is as
// new or newer.
func (s *Store) ApplyCommentModeration(ctx context.Context, articleID, commentID int64, hidden event.Hidden, reason string,
	version int64) error {
	return s.applyModeration(ctx, articleID, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO comment_moderation (comment_id, article_id, hidden, removed_reason,
				moderation_version) VALUES (?, ?, ?, ?, ?)`+s.db.OnConflictUpdate("comment_id", "moderation_version = moderation_version"),
			commentID, articleID, hidden, reason, version); err != nil {
			return err
		}
		route, routeArgs := s.db.RouteBy("article_id", articleID)
		_, err := tx.ExecContext(ctx, "UPDATE comment_moderation SET hidden = ?, removed_reason = ?, moderation_version = ? WHERE "+
			route+"comment_id = ? AND moderation_version < ?", append(append([]any{hidden, reason, version}, routeArgs...), commentID, version)...)
		return err
	})
}

// checkUnlocked refuses a new comment on a locked article, inside its create transaction. It is a plain read (see
// rangeRead): a lock recorded while the comment is being written may let that one comment in.
func (s *Store) checkUnlocked(ctx context.Context, tx *sql.Tx, articleID int64) error {
	var locked bool
	err := tx.QueryRowContext(ctx, "SELECT locked FROM article_lock WHERE article_id = ?", articleID).Scan(&locked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	case locked:
		return errLocked
	}
	return nil
}

// mayPassLock reports whether the principal of ctx may comment on a locked article: moderators may (to say why it
// is locked, say); everyone else is refused with LOCKED.
func mayPassLock(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && p.Role == auth.RoleModerator
}

// withModeration fills in the moderation state of comments of one article, with one query for them all.
func (s *Store) withModeration(ctx context.Context, articleID int64, comments []Comment) error {
	if len(comments) == 0 {
		return nil
	}
	ids := make([]int64, len(comments))
	for i, c := range comments {
		ids[i] = c.ID
	}
	in, args := sqldb.In("comment_id", ids)
	rows, err := s.db.QueryContext(ctx, "SELECT comment_id, hidden, removed_reason FROM comment_moderation WHERE article_id = ? AND "+in,
		append([]any{articleID}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type state struct {
		hidden event.Hidden
		reason string
	}
	states := make(map[int64]state)
	for rows.Next() {
		var id int64
		var st state
		if err := rows.Scan(&id, &st.hidden, &st.reason); err != nil {
			return err
		}
		states[id] = st
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range comments {
		st := states[comments[i].ID]
		comments[i].Hidden, comments[i].RemovedReason = st.hidden, st.reason
	}
	return nil
}

// withModerationOne is withModeration for one comment.
func (s *Store) withModerationOne(ctx context.Context, c Comment, err error) (Comment, error) {
	if err != nil {
		return Comment{}, err
	}
	one := []Comment{c}
	err = s.withModeration(ctx, c.ArticleID, one)
	return one[0], err
}
