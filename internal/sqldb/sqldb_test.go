package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"board/internal/sqldb"
	"board/internal/sqldb/sqltest"
)

// schema is a two-step migration set in both dialects.
var schema = fstest.MapFS{
	"migrations/mysql/001_items.sql":   {Data: []byte("-- items\nCREATE TABLE IF NOT EXISTS item (id BIGINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL);\n")},
	"migrations/mysql/002_seed.sql":    {Data: []byte("INSERT INTO item (id, n) VALUES (1, 0);\nINSERT INTO item (id, n) VALUES (2, 0);\n")},
	"migrations/sqlite/001_items.sql":  {Data: []byte("-- items\nCREATE TABLE item (id INTEGER NOT NULL PRIMARY KEY, n INTEGER NOT NULL);\n")},
	"migrations/sqlite/002_seed.sql":   {Data: []byte("INSERT INTO item (id, n) VALUES (1, 0);\nINSERT INTO item (id, n) VALUES (2, 0);\n")},
	"migrations/sqlite/README.txt.sql": {Data: []byte("")},
}

func migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "test", validSchema())
}

func validSchema() fstest.MapFS {
	fs := fstest.MapFS{}
	for k, v := range schema {
		if k != "migrations/sqlite/README.txt.sql" {
			fs[k] = v
		}
	}
	return fs
}

func TestMigrateIsIdempotent(t *testing.T) {
	sqltest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		// Concurrent runs (as from several instances starting at once) apply each migration once.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() { errs <- sqldb.Migrate(ctx, db, "test", validSchema()) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("migrate again: %v", err)
			}
		}
		var items, versions int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM item").Scan(&items); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&versions); err != nil {
			t.Fatal(err)
		}
		if items != 2 || versions != 2 {
			t.Errorf("after repeated migrations: %d items and %d versions, want 2 and 2", items, versions)
		}
	})
}

func TestMigrateRejectsBadFileNames(t *testing.T) {
	db := sqltest.OpenSQLite(t, migrate)
	if err := sqldb.Migrate(context.Background(), db, "test", schema); err == nil {
		t.Error("a migration file without a version number was accepted")
	}
}

func TestTransactCommitsOrRollsBack(t *testing.T) {
	sqltest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		boom := errors.New("boom")
		err := db.Transact(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE item SET n = 5 WHERE id = 1"); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Transact = %v, want the function's error", err)
		}
		if err := db.Transact(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 2")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var n1, n2 int
		if err := db.QueryRowContext(ctx, "SELECT (SELECT n FROM item WHERE id = 1), (SELECT n FROM item WHERE id = 2)").Scan(&n1, &n2); err != nil {
			t.Fatal(err)
		}
		if n1 != 0 || n2 != 1 {
			t.Errorf("n1, n2 = %d, %d; want 0 (rolled back), 1 (committed)", n1, n2)
		}
	})
}

// TestTransactRetriesDeadlock makes two transactions lock two rows in opposite orders. MySQL kills one of them with
// a deadlock error; Transact runs it again, so both calls succeed and one function runs twice.
func TestTransactRetriesDeadlock(t *testing.T) {
	sqltest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		if db.Dialect != sqldb.MySQL {
			t.Skip("SQLite transactions take the one write lock at BEGIN and cannot deadlock")
		}
		ctx := context.Background()
		var runs atomic.Int32
		var locked sync.WaitGroup // both first attempts hold their first row
		locked.Add(2)
		lockBoth := func(first, second int) error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				attempt := runs.Add(1)
				if _, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = ?", first); err != nil {
					return err
				}
				if attempt <= 2 {
					locked.Done()
					locked.Wait()
				}
				_, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = ?", second)
				return err
			})
		}
		errs := make(chan error, 2)
		go func() { errs <- lockBoth(1, 2) }()
		go func() { errs <- lockBoth(2, 1) }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("Transact = %v, want the deadlock retried", err)
			}
		}
		if got := runs.Load(); got != 3 {
			t.Errorf("functions ran %d times, want 3 (one retried)", got)
		}
		var sum int
		if err := db.QueryRowContext(ctx, "SELECT SUM(n) FROM item").Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if sum != 4 {
			t.Errorf("sum = %d, want 4: each transaction added 1 to both rows once", sum)
		}
	})
}
