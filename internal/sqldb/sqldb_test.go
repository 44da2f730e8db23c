package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
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
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
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

// A MySQL migration whose ALTER TABLE took effect but was not recorded (its process died between the two, as DDL
// commits on its own) runs again without failing on the column or index it added.
func TestMigrateRerunsAnAlterThatTookEffect(t *testing.T) {
	t.Parallel()
	alter := fstest.MapFS{
		"migrations/mysql/001_things.sql":  {Data: []byte("CREATE TABLE IF NOT EXISTS thing (id BIGINT NOT NULL PRIMARY KEY);\n")},
		"migrations/mysql/002_alter.sql":   {Data: []byte("ALTER TABLE thing ADD COLUMN m BIGINT NOT NULL DEFAULT 0;\nCREATE INDEX idx_m ON thing (m);\n")},
		"migrations/sqlite/001_things.sql": {Data: []byte("CREATE TABLE thing (id INTEGER NOT NULL PRIMARY KEY);\n")},
		"migrations/sqlite/002_alter.sql":  {Data: []byte("ALTER TABLE thing ADD COLUMN m INTEGER NOT NULL DEFAULT 0;\nCREATE INDEX idx_m ON thing (m);\n")},
	}
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		if err := sqldb.Migrate(ctx, db, "alter", alter); err != nil {
			t.Fatal(err)
		}
		if db.Dialect != sqldb.MySQL {
			return // SQLite runs a migration in one transaction: its DDL never outlives a missing record
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM schema_migrations WHERE component = 'alter' AND version = 2"); err != nil {
			t.Fatal(err)
		}
		if err := sqldb.Migrate(ctx, db, "alter", alter); err != nil {
			t.Fatalf("the alter again: %v", err)
		}
	})
}

func TestMigrateRejectsBadFileNames(t *testing.T) {
	t.Parallel()
	db := sqldbtest.OpenSQLite(t, migrate)
	if err := sqldb.Migrate(context.Background(), db, "test", schema); err == nil {
		t.Error("a migration file without a version number was accepted")
	}
}

func TestTransactCommitsOrRollsBack(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
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
// a deadlock error; Transact runs it again, so both calls succeed. Each call's first attempt fails on an injected
// deadlock before that, so the transaction MySQL kills commits on its third attempt: one retry would not have done.
func TestTransactRetriesDeadlock(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		if db.Dialect != sqldb.MySQL {
			t.Skip("SQLite transactions take the one write lock at BEGIN and cannot deadlock")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a request's default deadline
		defer cancel()
		var runs atomic.Int32
		var locked sync.WaitGroup // both second attempts hold their first row
		locked.Add(2)
		lockBoth := func(first, second int, attempts *int) error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				runs.Add(1)
				*attempts++
				if *attempts == 1 {
					return deadlock
				}
				if _, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = ?", first); err != nil {
					return err
				}
				if *attempts == 2 {
					locked.Done()
					locked.Wait()
				}
				_, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = ?", second)
				return err
			})
		}
		var attempts [2]int
		errs := make(chan error, 2)
		go func() { errs <- lockBoth(1, 2, &attempts[0]) }()
		go func() { errs <- lockBoth(2, 1, &attempts[1]) }()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("Transact = %v, want the deadlock retried", err)
			}
		}
		if got := runs.Load(); got != 5 {
			t.Errorf("functions ran %d times, want 5 (2 injected deadlocks, 2 attempts that deadlocked each other, 1 retry)", got)
		}
		if most := max(attempts[0], attempts[1]); most != 3 {
			t.Errorf("attempts %v, want 3 for the transaction MySQL killed", attempts)
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

// TestAfterIsARangeScan checks that each dialect's cursor condition is planned as a range over the index's last two
// columns, not as a scan of everything after the first: what keeps a deep v1 comment scroll O(page).
func TestAfterIsARangeScan(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		for _, stmt := range []string{"CREATE TABLE pair (id BIGINT NOT NULL PRIMARY KEY, g BIGINT NOT NULL, a BIGINT NOT NULL, b BIGINT NOT NULL)",
			"CREATE INDEX idx_g_a_b ON pair (g, a, b)"} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 1000 {
			if _, err := db.ExecContext(ctx, "INSERT INTO pair (id, g, a, b) VALUES (?, 1, ?, ?)", i, i/10, i); err != nil {
				t.Fatal(err)
			}
		}
		after, args := db.After("a", "b", 50, 505)
		query := "SELECT id FROM pair" + db.ForceIndex("idx_g_a_b") + " WHERE g = ? AND " + after + " ORDER BY a, b LIMIT 3"
		args = append([]any{1}, args...)
		var ids []int64
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if rows.Err() != nil || len(ids) != 3 || ids[0] != 506 || ids[2] != 508 {
			t.Fatalf("after (50, 505): %v, %v; want 506 507 508", ids, rows.Err())
		}

		var plan string
		if db.Dialect == sqldb.MySQL {
			cols := make([]sql.NullString, 10) // id, select_type, table, type, possible_keys, key, key_len, ...
			dest := make([]any, len(cols))
			for i := range cols {
				dest[i] = &cols[i]
			}
			if err := db.QueryRowContext(ctx, "EXPLAIN "+query, args...).Scan(dest...); err != nil {
				t.Fatal(err)
			}
			plan = "type " + cols[3].String + " key_len " + cols[6].String
			if cols[3].String != "range" || cols[6].String != "24" {
				t.Errorf("MySQL plans the cursor as %s, want a range over all of (g, a, b): key_len 24", plan)
			}
		} else {
			var id, parent, notused int
			if err := db.QueryRowContext(ctx, "EXPLAIN QUERY PLAN "+query, args...).Scan(&id, &parent, &notused, &plan); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "(a,b)>(?,?)") {
				t.Errorf("SQLite plans the cursor as %q, want a range on (a,b)", plan)
			}
		}
		t.Log(plan)
	})
}

// TestReadsReportAnUnavailableDatabase: a single-row read that cannot finish (here: its deadline passes) is the
// fault the edge answers with 503, as for every other call, while "no rows" stays itself.
func TestReadsReportAnUnavailableDatabase(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		slow := "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) SELECT COUNT(*) FROM n"
		if db.Dialect == sqldb.MySQL {
			slow = "SELECT SLEEP(5)"
		}
		var n int64
		err := db.QueryRowContext(ctx, slow).Scan(&n)
		if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "DATABASE_UNAVAILABLE" {
			t.Errorf("read past its deadline: %v, want DATABASE_UNAVAILABLE", err)
		}
		if err := db.QueryRowContext(context.Background(), "SELECT n FROM item WHERE id = 99").Scan(&n); !errors.Is(err, sql.ErrNoRows) {
			t.Errorf("read of no row: %v, want sql.ErrNoRows", err)
		}
	})
}
