package comment

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// SeedChunk inserts generated comments of an article with one multi-row insert, and counts them, in one transaction:
// a chunk is either all there or not at all, which is what makes a bulk load resumable. v1 comments need a ParentID
// (their own ID for a root), v2 comments a Path; the generator is trusted to keep the tree rules. Bulk loads are for
// experiments on the comment database alone: they write no events and do not ask whether the article exists.
func (s *Store) SeedChunk(ctx context.Context, articleID int64, chunk []Comment) error {
	// No HTML: seeded comments read as plain text.
	table, columns, row := "comment", columnsV1, "(?, ?, ?, ?, 1, FALSE, ?, NULL, NULL)"
	if chunk[0].Path != "" {
		table, columns, row = "comment_v2", columnsV2, "(?, ?, ?, 1, ?, FALSE, ?, NULL, NULL)"
	}
	var q strings.Builder
	q.WriteString("INSERT INTO " + table + " (" + columns + ") VALUES ")
	args := make([]any, 0, len(chunk)*5)
	for i, c := range chunk {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(row)
		structure := any(c.ParentID)
		if table == "comment_v2" {
			structure = c.Path
		}
		args = append(args, c.ID, "seeded comment "+strconv.FormatInt(c.ID, 10), articleID, structure, c.CreatedAt)
	}
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		_, err := s.changeCount(ctx, tx, articleID, int64(len(chunk)))
		return err
	})
}

// Exists reports whether a comment of either version is stored. One query per table: behind Vitess each finds its
// shard through its own lookup vindex.
func (s *Store) Exists(ctx context.Context, id int64) (bool, error) {
	for _, table := range []string{"comment", "comment_v2"} {
		var n int
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE comment_id = ?", id).Scan(&n); err != nil || n > 0 {
			return n > 0, err
		}
	}
	return false, nil
}
