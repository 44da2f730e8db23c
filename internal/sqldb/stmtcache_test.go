package sqldb_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/fault"
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

// TestStatementsArePreparedOncePerQuery: on SQLite, each query text that reads or writes keeps one prepared statement,
// however often and however concurrently it runs, and closing the database closes them. MySQL keeps none.
func TestStatementsArePreparedOncePerQuery(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		const (
			count  = "SELECT COUNT(*) FROM item WHERE n >= ?"
			list   = "SELECT id FROM item WHERE n >= ? ORDER BY id"
			update = "UPDATE item SET n = n + ? WHERE id = ?"
		)
		_, writesBefore := sqldb.CachedStmts(db)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					var n int
					if err := db.QueryRowContext(ctx, count, 0).Scan(&n); err != nil || n != 2 {
						t.Errorf("count: %d, %v; want 2", n, err)
						return
					}
					if ids, err := sqldb.IDs(db.QueryContext(ctx, list, 0)); err != nil || len(ids) != 2 {
						t.Errorf("list: %v, %v; want 2 ids", ids, err)
						return
					}
					if _, err := db.ExecContext(ctx, update, 1, 1); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT n FROM item WHERE id = 1").Scan(&n); err != nil || n != 80 {
			t.Fatalf("n = %d, %v; want 80 updates", n, err)
		}
		reads, writes := sqldb.CachedStmts(db)
		if db.Dialect == sqldb.MySQL {
			if len(reads)+len(writes) != 0 {
				t.Errorf("MySQL caches %d + %d statements, want none: its DSN interpolates arguments", len(reads), len(writes))
			}
			return
		}
		if len(reads) != 3 || reads[count] == nil || reads[list] == nil {
			t.Fatalf("read statements %v, want one for each of the 3 read queries", keys(reads))
		}
		if len(writes) != len(writesBefore)+1 || writes[update] == nil {
			t.Errorf("write statements %v, want one more than before (%d), for the update", keys(writes), len(writesBefore))
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err := reads[count].QueryRowContext(ctx, 0).Scan(&n); err == nil || !strings.Contains(err.Error(), "statement is closed") {
			t.Errorf("a cached statement after Close: %v, want it closed", err)
		}
		if reads, writes := sqldb.CachedStmts(db); len(reads)+len(writes) != 0 {
			t.Errorf("Close left %d + %d statements cached", len(reads), len(writes))
		}
	})
}

// TestStatementCacheIsBounded: queries whose text varies with a list's length are not cached, and the cache stops
// growing at its bound while the queries past it still run.
func TestStatementCacheIsBounded(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, migrate)
	ctx := context.Background()
	for _, ids := range [][]int64{{1}, {1, 2}, {1, 2, 3}} {
		in, args := sqldb.In("id", ids)
		if got, err := sqldb.IDs(db.QueryContext(ctx, "SELECT id FROM item WHERE "+in, args...)); err != nil || len(got) != min(len(ids), 2) {
			t.Fatalf("in %v: %v, %v", ids, got, err)
		}
	}
	reads, _ := sqldb.CachedStmts(db)
	if len(reads) != 1 || reads["SELECT id FROM item WHERE id IN (?)"] == nil {
		t.Errorf("read statements %v, want only the IN list of one id", keys(reads))
	}
	for i := range sqldb.MaxCachedStmts + 10 {
		var n int
		if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT %d + ?", i), 1).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("query %d: %d, %v", i, n, err)
		}
	}
	if reads, _ := sqldb.CachedStmts(db); len(reads) != sqldb.MaxCachedStmts {
		t.Errorf("%d read statements cached, want the bound, %d", len(reads), sqldb.MaxCachedStmts)
	}
}

// TestCachedStatementKeepsErrorClasses: SQLite's BUSY, met by a cached write statement, is still the retryable
// fault the edge answers with 503; an error of preparing a query comes back from the read it failed.
func TestCachedStatementKeepsErrorClasses(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, migrate)
	ctx := context.Background()
	const update = "UPDATE item SET n = n + 1 WHERE id = 1"
	// The writer is one connection: from now on it fails at once on a lock another connection holds.
	for _, stmt := range []string{"PRAGMA busy_timeout = 0", update} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, writes := sqldb.CachedStmts(db); writes[update] == nil {
		t.Fatal("the update is not cached")
	}
	other, err := sql.Open("sqlite", "file:"+db.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, update)
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || !sqldb.Retryable(err) {
		t.Errorf("update while another connection holds the write lock: %v, want a retryable DATABASE_UNAVAILABLE", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	var n int
	err = db.QueryRowContext(ctx, "SELECT n FROM missing").Scan(&n)
	if err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("read of a missing table: %v, want no such table", err)
	}
	if _, ok := fault.As(err); ok {
		t.Errorf("read of a missing table: %v, a fault; want a plain error (a bug, not an outage)", err)
	}
}

func keys(m map[string]*sql.Stmt) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
