package comment

import (
	"context"
	"database/sql"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
)

// Like counts (SPEC §3.13). The like service counts a comment's likes and says the new count, with its version, in
// every COMMENT_LIKED and COMMENT_UNLIKED on the like topic; the comment service keeps the latest on the comment's
// row (like_count, like_count_version), where the top order's index reads it. A count is applied only over an older
// version, so a duplicate, or an event overtaken by a newer one, changes nothing.
//
// A like of a comment not held here changes nothing either. Comments are written here before anyone can like them
// (the comment is committed before its id is answered or its COMMENT_CREATED is published), so such a comment has
// been removed since, with its article's purge or its own delete, and its count goes with it; ids are never issued
// again, so no later comment could pick a kept count up. Keeping it would leave rows that nothing removes.

// likeHandlers are the handlers of the like topic's comment events.
func (s *Service) likeHandlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.CommentLiked: s.applyCommentLike, event.CommentUnliked: s.applyCommentLike}
}

func (s *Service) applyCommentLike(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.CommentLike](env)
	if err != nil {
		return err
	}
	switch {
	case p.ArticleID <= 0 || p.CommentID <= 0:
		return fault.Invalidf("INVALID_ID", "%s without a valid articleId or commentId", env.Type)
	case p.CommentLikeCountVersion <= 0:
		return fault.Invalidf("INVALID_VERSION", "%s without a positive commentLikeCountVersion", env.Type)
	case p.CommentLikeCount < 0:
		return fault.Invalidf("INVALID_COUNT", "%s with a negative commentLikeCount", env.Type)
	}
	return s.store.ApplyLikeCount(ctx, int64(p.ArticleID), int64(p.CommentID), p.CommentLikeCount, p.CommentLikeCountVersion)
}

// ApplyLikeCount records a comment's like count at version, unless what is recorded is as new or newer or the
// comment is not here. The event does not say which version the comment is of: it tries both tables, each by its
// primary key (and the article, the shard key), in a transaction of its own. Each locks only the comment's row (or,
// on MariaDB, the gap where a missing one would be) and nothing else, so it cannot deadlock with the writes (package
// comment), and holds no gap lock of one table while it waits for a row of the other.
func (s *Store) ApplyLikeCount(ctx context.Context, articleID, commentID, count, version int64) error {
	for _, table := range []string{"comment_v2", "comment"} {
		var updated int64
		if err := s.db.Transact(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, "UPDATE "+table+" SET like_count = ?, like_count_version = ?"+
				" WHERE article_id = ? AND comment_id = ? AND like_count_version < ?", count, version, articleID, commentID, version)
			if err == nil {
				updated, err = res.RowsAffected()
			}
			return err
		}); err != nil || updated > 0 {
			return err
		}
	}
	return nil
}
