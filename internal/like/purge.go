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

// Purge removes one batch of a deleted article's likes, in one transaction: the first purgeBatchSize of them along
// the (article_id, user_id) index, taken off the article's count (whose version moves on) so that the count stays
// the number of likes left. A batch that finds fewer than that left removes them with the count row, and reports
// done. It writes no event (see the package doc). Cut off anywhere, it starts again from what is left; run by two
// instances at once, their batches take turns on the count row. It refuses an article not recorded as deleted.
func (s *Store) Purge(ctx context.Context, articleID int64) (done bool, err error) {
	err = s.db.Transact(ctx, func(tx *sql.Tx) error {
		done = false
		// The writes' lock order (see Store): the existence row, shared; the count row; the likes.
		if err := s.articles.RequireDeleted(ctx, tx, articleID); err != nil {
			return err
		}
		_, err := readCount(ctx, tx, articleID, s.db.ForUpdate())
		counted := err == nil
		if err != nil && !errors.Is(err, errNoCount) {
			return err
		}
		ids, err := batchOfLikes(ctx, tx, articleID)
		if err != nil {
			return err
		}
		var removed int64
		if len(ids) > 0 {
			// By primary key: the delete locks these rows and no gap, whatever the planner thinks of the index.
			route, routeArgs := s.db.RouteBy("article_id", articleID)
			in, args := sqldb.In("article_like_id", ids)
			res, err := tx.ExecContext(ctx, "DELETE FROM article_like WHERE "+route+in, append(routeArgs, args...)...)
			if err != nil {
				return err
			}
			if removed, err = res.RowsAffected(); err != nil {
				return err
			}
		}
		if len(ids) < purgeBatchSize {
			_, err := tx.ExecContext(ctx, "DELETE FROM article_like_count WHERE article_id = ?", articleID)
			done = err == nil
			return err
		}
		if !counted {
			return nil
		}
		_, err = tx.ExecContext(ctx, "UPDATE article_like_count SET like_count = like_count - ?, version = version + 1 WHERE article_id = ?",
			removed, articleID)
		return err
	})
	return done, err
}

// batchOfLikes returns the ids of the first purgeBatchSize likes of an article, in the order of the (article_id,
// user_id) index, which holds them: the read walks that index alone.
func batchOfLikes(ctx context.Context, tx *sql.Tx, articleID int64) ([]int64, error) {
	return sqldb.IDs(tx.QueryContext(ctx, "SELECT article_like_id FROM article_like WHERE article_id = ? ORDER BY user_id LIMIT ?",
		articleID, purgeBatchSize))
}
