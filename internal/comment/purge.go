package comment

import (
	"context"
	"database/sql"

	"board/internal/sqldb"
)

// purgeBatchSize bounds the comments, of both versions together, that one batch of a purge removes: the time one
// batch holds the article's count row (and, on SQLite, the database's one writer).
const purgeBatchSize = 500

// purgeOrder is how a purge walks each version's comments of an article: along the index a list walks, backwards,
// so that replies go before their parents and what is left of the article is always whole trees.
var purgeOrder = []struct{ table, index, orderBy string }{
	{"comment", byParent, "parent_comment_id DESC, comment_id DESC"},
	{"comment_v2", byPath, "path DESC"},
}

// Purge removes one batch of the comments of a deleted article (existence.Purge), with their revisions, in one
// transaction: the count row goes down by what the batch removed, with a new version. Once no comment is left, the
// comments' moderation state goes, and then the count row and the article's lock, which is when Purge reports done.
// It writes no events (package comment).
//
// The batch takes the writes' locks in their order: the existence row (shared; it refuses an article not recorded
// as deleted), then the count row, so writes of the article are refused by then and purges of it by several
// instances take turns.
func (s *Store) Purge(ctx context.Context, articleID int64) (done bool, err error) {
	err = s.db.Transact(ctx, func(tx *sql.Tx) error {
		if err := s.articles.RequireDeleted(ctx, tx, articleID); err != nil {
			return err
		}
		if _, err := s.lockCount(ctx, tx, articleID); err != nil {
			return err
		}
		var removed int64
		done = true // unless a table has as many left as the batch asks of it
		for _, t := range purgeOrder {
			want := purgeBatchSize - removed
			ids, err := s.purgeBatch(ctx, tx, t.table, t.index, t.orderBy, articleID, want)
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				route, routeArgs := s.db.RouteBy("article_id", articleID)
				in, args := sqldb.In("comment_id", ids)
				res, err := tx.ExecContext(ctx, "DELETE FROM "+t.table+" WHERE "+route+in, append(routeArgs, args...)...)
				if err != nil {
					return err
				}
				n, err := res.RowsAffected()
				if err != nil {
					return err
				}
				removed += n
				if _, err := tx.ExecContext(ctx, "DELETE FROM comment_revision WHERE "+route+in, append(routeArgs, args...)...); err != nil {
					return err
				}
			}
			if int64(len(ids)) == want {
				done = false
				break
			}
		}
		if done {
			// The comments' moderation state goes after the comments, which it hides until then.
			want := purgeBatchSize - removed
			ids, err := s.purgeBatch(ctx, tx, "comment_moderation", byArticleComment, "comment_id DESC", articleID, want)
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				route, routeArgs := s.db.RouteBy("article_id", articleID)
				in, args := sqldb.In("comment_id", ids)
				if _, err := tx.ExecContext(ctx, "DELETE FROM comment_moderation WHERE "+route+in, append(routeArgs, args...)...); err != nil {
					return err
				}
			}
			done = int64(len(ids)) < want
		}
		if done {
			if _, err := tx.ExecContext(ctx, "DELETE FROM article_lock WHERE article_id = ?", articleID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "DELETE FROM article_comment_count WHERE article_id = ?", articleID)
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE article_comment_count SET comment_count = comment_count - ?, version = version + 1 WHERE article_id = ?",
			removed, articleID)
		return err
	})
	return done, err
}

// purgeBatch returns the ids of up to limit comments of an article in table, walking index in order. It is a plain
// read after the count row's lock (see rangeRead).
func (s *Store) purgeBatch(ctx context.Context, tx *sql.Tx, table, index, orderBy string, articleID, limit int64) ([]int64, error) {
	return sqldb.IDs(tx.QueryContext(ctx, "SELECT comment_id FROM "+table+s.db.ForceIndex(index)+
		" WHERE article_id = ? ORDER BY "+orderBy+" LIMIT ?", articleID, limit))
}
