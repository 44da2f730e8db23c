package sqldb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// threadQuery is the shape of the comment service's thread page: a page of an index walked alone, joined back to
// its rows.
const threadQuery = `SELECT c.comment_id, c.content, c.article_id, c.writer_id, c.path, c.deleted, c.created_at
	FROM (SELECT comment_id FROM comment_v2 WHERE article_id = ? ORDER BY path LIMIT ? OFFSET ?) page
	JOIN comment_v2 c ON c.comment_id = page.comment_id
	ORDER BY c.path`

// migrateThread makes a comment_v2 table with 100 comments on article 1.
func migrateThread(ctx context.Context, db *sqldb.DB) error {
	for _, stmt := range []string{`CREATE TABLE comment_v2 (comment_id INTEGER NOT NULL PRIMARY KEY, content TEXT NOT NULL,
		article_id INTEGER NOT NULL, writer_id INTEGER NOT NULL, path TEXT NOT NULL COLLATE BINARY,
		deleted BOOLEAN NOT NULL DEFAULT FALSE, created_at DATETIME NOT NULL)`,
		"CREATE UNIQUE INDEX idx_article_id_path ON comment_v2 (article_id, path)"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	for i := range 100 {
		if _, err := db.ExecContext(ctx, "INSERT INTO comment_v2 (comment_id, content, article_id, writer_id, path, created_at) VALUES (?, ?, 1, 7, ?, ?)",
			i+1, "a comment", fmt.Sprintf("%05d", i), time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// readThread reads a page of 10 comments of article 1 and returns how many it read.
func readThread(ctx context.Context, db *sqldb.DB) (int, error) {
	rows, err := db.QueryContext(ctx, threadQuery, 1, 10, 20)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, article, writer int64
		var content, path string
		var deleted bool
		var created time.Time
		if err := rows.Scan(&id, &content, &article, &writer, &path, &deleted, &created); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

func BenchmarkThreadQuery(b *testing.B) {
	db := sqldbtest.OpenSQLite(b, migrateThread)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if n, err := readThread(ctx, db); err != nil || n != 10 {
			b.Fatalf("read %d comments, %v; want 10", n, err)
		}
	}
}
