package article

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SeedArticle is one generated article of a bulk load.
type SeedArticle struct {
	ID        int64
	CreatedAt time.Time
}

// SeedChunk inserts generated articles on a board with one multi-row insert, and counts them, in one transaction:
// a chunk is either all there or not at all, which is what makes a bulk load resumable. Bulk loads are for
// experiments on the article database alone: they write no events.
func (s *Store) SeedChunk(ctx context.Context, boardID int64, chunk []SeedArticle) error {
	var q strings.Builder
	q.WriteString("INSERT INTO article (" + columns + ") VALUES ")
	args := make([]any, 0, len(chunk)*7)
	for i, a := range chunk {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, 1, NULL, NULL)") // no HTML: seeded articles read as plain text
		n := strconv.FormatInt(a.ID, 10)
		args = append(args, a.ID, "seeded article "+n, "content of seeded article "+n, boardID, int64(1), a.CreatedAt, a.CreatedAt)
	}
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		_, err := s.changeBoardCount(ctx, tx, boardID, int64(len(chunk)))
		return err
	})
}

// Exists reports whether an article is stored.
func (s *Store) Exists(ctx context.Context, id int64) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, "SELECT 1 FROM article WHERE article_id = ?", id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
