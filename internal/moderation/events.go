package moderation

import (
	"context"
	"database/sql"
	"errors"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
)

// Handlers are the service's handlers of the article and comment topics, for its own consumer group: a deleted
// target's reports and row go with it. Both are idempotent (a second delivery finds nothing to delete) and write no
// event: the consumers of the moderation topic drop a deleted article or comment on its own delete event.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.ArticleDeleted: s.articleDeleted, event.CommentDeleted: s.commentDeleted}
}

// articleDeleted forgets an article and its comments, giving back its board's pin place if it held one.
func (s *Service) articleDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Article](env)
	if err != nil {
		return err
	}
	if p.ArticleID <= 0 {
		return fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
	}
	id, board := int64(p.ArticleID), int64(p.BoardID)
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		t, err := s.lockTarget(ctx, tx, Article, id, board)
		switch {
		case err == nil && t.pinned:
			if err := unpinOne(ctx, tx, t.boardID); err != nil {
				return err
			}
		case err != nil && !errors.Is(err, errNoTarget):
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM report WHERE board_id = ? AND article_id = ?", board, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM moderation_target WHERE board_id = ? AND article_id = ?", board, id)
		return err
	})
}

// commentDeleted forgets a comment. COMMENT_DELETED says deleted whether the comment's row was removed or only marked
// deleted (it had replies): either way its content is gone, there is nothing left to moderate, and a report of it is
// refused from now on (TARGET_NOT_FOUND), so its row never comes back to restart its version.
func (s *Service) commentDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Comment](env)
	if err != nil {
		return err
	}
	if p.CommentID <= 0 {
		return fault.Invalidf("INVALID_COMMENT_ID", "%s without a valid commentId", env.Type)
	}
	id := int64(p.CommentID)
	board, err := s.boardOf(ctx, Comment, id)
	if errors.Is(err, errNoTarget) {
		return nil // never reported, or forgotten already: a report makes the row first
	} else if err != nil {
		return err
	}
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM report WHERE board_id = ? AND target_type = ? AND target_id = ?", board, string(Comment), id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM moderation_target WHERE board_id = ? AND target_type = ? AND target_id = ?", board, string(Comment), id)
		return err
	})
}
