package like

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/outbox"
)

// Leaving (docs/likes.md, "A user who leaves"). USER_DELETED with content "remove" takes the user's likes away, of
// articles and of comments, in batches of at most leaveBatchSize likes, each batch one transaction that unlikes them
// as the user's own unlikes would: the count goes down by one and its version up by one, and ARTICLE_UNLIKED or
// COMMENT_UNLIKED carries both, so no reader sees a like gone with its count unchanged. A like of a deleted article
// goes as that article's purge takes its likes (count lowered, no event: see the package doc). A like of a deleted
// comment goes like any other, with its event: the comment stays in its thread, with its count.
//
// The handler loops batches until none is left, each batch reading what is left, so a handler cut off anywhere (a
// kill -9) is redelivered and does the rest, and a second delivery finds nothing to do.

// leaveBatchSize bounds the likes one batch of a departure removes (accounts contract: at most 500).
const leaveBatchSize = 500

// leaveBatchTimeout bounds one batch, its read and its transaction: a hung database stalls the handler (a 503,
// retried by the consumer) instead of holding it for good.
const leaveBatchTimeout = 30 * time.Second

// LeavingHandlers are the store's handlers of the session topic, for the like service's consumer group.
func (s *Store) LeavingHandlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.UserDeleted: s.userDeleted}
}

func (s *Store) userDeleted(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.UserDeletion](env)
	if err != nil {
		return err
	}
	if p.UserID <= 0 {
		return fault.Invalidf("INVALID_USER_ID", "%s without a valid userId", env.Type)
	}
	switch p.Content {
	case event.DeleteKeep:
		return nil // the likes stay, a deleted user's
	case event.DeleteRemove:
	default:
		return fault.Invalidf("INVALID_CONTENT", "%s with content %q, not keep or remove", env.Type, p.Content)
	}
	for {
		bctx, cancel := context.WithTimeout(ctx, leaveBatchTimeout)
		done, err := s.removeUserLikes(bctx, int64(p.UserID))
		cancel()
		if err != nil || done {
			return err
		}
	}
}

// removeUserLikes removes one batch of the user's likes, newest first, articles' before comments', and reports done
// when it found none left. Behind Vitess a batch holds the likes of one article only, so that its transaction stays
// on that article's shard.
func (s *Store) removeUserLikes(ctx context.Context, userID int64) (done bool, err error) {
	likes, err := s.userLikes(ctx, userID, articleTables, 0, leaveBatchSize)
	if err != nil {
		return false, err
	}
	if len(likes) < leaveBatchSize {
		more, err := s.userLikes(ctx, userID, commentTables, 0, leaveBatchSize-len(likes))
		if err != nil {
			return false, err
		}
		likes = append(likes, more...)
	}
	if len(likes) == 0 {
		return true, nil
	}
	if s.db.Vitess() {
		first := likes[0].ArticleID
		likes = slices.DeleteFunc(likes, func(l Like) bool { return l.ArticleID != first })
	}
	// In target order, so that two batches of one user (a redelivery meeting a handler still running elsewhere)
	// take their count rows in the same order and cannot deadlock each other.
	slices.SortFunc(likes, func(a, b Like) int {
		return cmp.Or(cmp.Compare(a.ArticleID, b.ArticleID), cmp.Compare(a.CommentID, b.CommentID))
	})
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		for _, l := range likes {
			if err := s.leave(ctx, tx, emit, l); err != nil {
				return err
			}
		}
		return nil
	})
	return false, err
}

// leave removes the like l, which its user may have removed meanwhile, within tx: an unlike on a live article (the
// default strategy's path, whose atomic count update never retries), else the purge's removal.
func (s *Store) leave(ctx context.Context, tx *sql.Tx, emit outbox.Emit, l Like) error {
	t := l.target()
	// Only the article is required live: a deleted comment's likes go too, with their events.
	err := s.articles.Require(ctx, tx, t.article)
	if err == nil {
		_, err = s.applyIn(ctx, tx, emit, PessimisticLock1, t, []change{{like: l, unlike: true}})
		return err
	}
	if fault.KindOf(err) != fault.NotFound {
		return err // ErrUnknown cannot be: a like was made on an article recorded live, and records stay
	}
	// A deleted article: its purge may be under way, in the same lock order (the count row, then the likes).
	tb := t.tables()
	c, err := readCount(ctx, tx, t, s.db.ForUpdate())
	if err != nil && !errors.Is(err, errNoCount) {
		return err
	}
	counted := err == nil
	route, routeArgs := s.db.RouteBy("article_id", t.article)
	res, err := tx.ExecContext(ctx, "DELETE FROM "+tb.likes+" WHERE "+route+tb.likeID+" = ?", append(routeArgs, l.ID)...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 || !counted || c.likes == 0 {
		return err
	}
	_, err = tx.ExecContext(ctx, "UPDATE "+tb.counts+" SET like_count = like_count - 1, version = version + 1 WHERE "+tb.key, t.args()...)
	return err
}

// userLikes returns up to n of the user's likes of one kind (tb), newest first (by id: like ids are Snowflake ids),
// older than the like before (0: from the newest).
func (s *Store) userLikes(ctx context.Context, userID int64, tb tables, before int64, n int) ([]Like, error) {
	t := target{}
	if tb.likes == commentTables.likes {
		t.comment = 1 // scanLike's kind
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+tb.columns+" FROM "+tb.likes+" WHERE user_id = ? AND "+tb.likeID+" < ? ORDER BY "+
		tb.likeID+" DESC LIMIT ?", userID, before, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Like
	for rows.Next() {
		l, err := scanLike(rows, t)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
