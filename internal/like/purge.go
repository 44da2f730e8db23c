package like

import (
	"context"
	"database/sql"
	"errors"

	"board/internal/sqldb"
)

// purgeBatchSize is how many likes one purge batch removes: few enough that a batch holds its locks for
// milliseconds, enough that an article with a million likes is gone in two thousand batches.
const purgeBatchSize = 500

// Purge removes one batch of a deleted article's likes, in one transaction: first those of its comments, a comment at
// a time, then the article's own. A batch removes the first purgeBatchSize likes of one target along its (target,
// user_id) index, taken off the target's count (whose version moves on) so that the count stays the number of likes
// left; a batch that finds fewer than that left removes them with the count row. The batch that does so for the
// article itself, with no comment's count row left, reports done. It writes no event (see the package doc). Cut off
// anywhere, it starts again from what is left; run by two instances at once, their batches take turns on the count
// rows. It refuses an article not recorded as deleted.
func (s *Store) Purge(ctx context.Context, articleID int64) (done bool, err error) {
	err = s.db.Transact(ctx, func(tx *sql.Tx) error {
		done = false
		// The writes' lock order (see Store): the existence row, shared; the count row; the likes. (A comment's
		// existence row, which its likes take shared after the article's, is not needed: the article's refuses them.)
		if err := s.articles.RequireDeleted(ctx, tx, articleID); err != nil {
			return err
		}
		var commentID int64
		err := tx.QueryRowContext(ctx, "SELECT comment_id FROM comment_like_count WHERE article_id = ? ORDER BY comment_id LIMIT 1"+
			s.db.ForUpdate(), articleID).Scan(&commentID)
		switch {
		case err == nil:
			_, err = s.purgeBatch(ctx, tx, target{article: articleID, comment: commentID})
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		done, err = s.purgeBatch(ctx, tx, target{article: articleID})
		return err
	})
	return done, err
}

// purgeBatch removes the first purgeBatchSize likes of t and lowers its count by as many, or, when that was the last
// of them, removes its count row too and reports last.
func (s *Store) purgeBatch(ctx context.Context, tx *sql.Tx, t target) (last bool, err error) {
	tb := t.tables()
	_, err = readCount(ctx, tx, t, s.db.ForUpdate())
	counted := err == nil
	if err != nil && !errors.Is(err, errNoCount) {
		return false, err
	}
	// The read walks the (target, user_id) index alone, which holds the likes of t.
	ids, err := sqldb.IDs(tx.QueryContext(ctx, "SELECT "+tb.likeID+" FROM "+tb.likes+" WHERE "+tb.key+" ORDER BY user_id LIMIT ?",
		t.args(purgeBatchSize)...))
	if err != nil {
		return false, err
	}
	var removed int64
	if len(ids) > 0 {
		// By primary key: the delete locks these rows and no gap, whatever the planner thinks of the index.
		route, routeArgs := s.db.RouteBy("article_id", t.article)
		in, args := sqldb.In(tb.likeID, ids)
		res, err := tx.ExecContext(ctx, "DELETE FROM "+tb.likes+" WHERE "+route+in, append(routeArgs, args...)...)
		if err != nil {
			return false, err
		}
		if removed, err = res.RowsAffected(); err != nil {
			return false, err
		}
	}
	if len(ids) < purgeBatchSize {
		_, err := tx.ExecContext(ctx, "DELETE FROM "+tb.counts+" WHERE "+tb.key, t.args()...)
		return err == nil, err
	}
	if !counted {
		return false, nil
	}
	_, err = tx.ExecContext(ctx, "UPDATE "+tb.counts+" SET like_count = like_count - ?, version = version + 1 WHERE "+tb.key,
		append([]any{removed}, t.args()...)...)
	return false, err
}
