package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"

	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"

	"github.com/go-sql-driver/mysql"
)

func TestIsDuplicate(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, "CREATE TABLE pair (id BIGINT NOT NULL PRIMARY KEY, a BIGINT NOT NULL, b BIGINT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "CREATE UNIQUE INDEX pair_a_b ON pair (a, b)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO pair (id, a, b) VALUES (1, 1, 1)"); err != nil {
			t.Fatal(err)
		}
		exec := func(query string) error { _, err := db.ExecContext(ctx, query); return err }
		for _, tc := range []struct {
			name string
			err  error
			want bool
		}{
			{"unique key", exec("INSERT INTO pair (id, a, b) VALUES (2, 1, 1)"), true},
			{"primary key", exec("INSERT INTO pair (id, a, b) VALUES (1, 2, 2)"), true},
			{"wrapped", fmt.Errorf("insert: %w", exec("INSERT INTO pair (id, a, b) VALUES (3, 1, 1)")), true},
			{"not null", exec("INSERT INTO pair (id, a, b) VALUES (4, NULL, 1)"), false},
			{"no such table", exec("INSERT INTO nowhere (id) VALUES (1)"), false},
			{"other error", errors.New("duplicate entry"), false},
			{"nil", nil, false},
		} {
			if tc.err == nil && tc.name != "nil" {
				t.Fatalf("%s: the statement succeeded", tc.name)
			}
			if got := sqldb.IsDuplicate(tc.err); got != tc.want {
				t.Errorf("%s: IsDuplicate(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
			}
		}
	})
}

// TestIsStaleRead makes MariaDB refuse a write to a row changed after the writer's snapshot, as it does under
// innodb_snapshot_isolation (the default from MariaDB 11.8; settable per session from 10.6.18 and 10.11.8), and
// checks that Transact retries it like a deadlock.
func TestIsStaleRead(t *testing.T) {
	t.Parallel()
	if os.Getenv(sqldbtest.MySQLDSNEnv) == "" {
		t.Skip("needs MariaDB: set " + sqldbtest.MySQLDSNEnv)
	}
	db := sqldbtest.OpenMySQL(t, migrate)
	ctx := context.Background()
	var setting string
	if err := db.QueryRowContext(ctx, "SELECT @@innodb_snapshot_isolation").Scan(&setting); err != nil {
		t.Skipf("this server has no innodb_snapshot_isolation: %v", err)
	}
	// readThenWrite reads the row, lets another connection change it while conflicts > 0, then writes what it read.
	readThenWrite := func(conflicts *int) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "SET SESSION innodb_snapshot_isolation = ON"); err != nil {
				return err
			}
			var n int64
			if err := tx.QueryRowContext(ctx, "SELECT n FROM item WHERE id = 1").Scan(&n); err != nil { // takes the snapshot
				return err
			}
			if *conflicts > 0 {
				*conflicts--
				if _, err := db.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1"); err != nil { // another connection
					return err
				}
			}
			_, err := tx.ExecContext(ctx, "UPDATE item SET n = ? WHERE id = 1", n+10)
			return err
		}
	}
	always := sqldb.MaxAttempts
	if err := db.Transact(ctx, readThenWrite(&always)); !sqldb.IsStaleRead(err) {
		t.Errorf("write after a concurrent change, on every attempt: %v, want a stale read", err)
	}
	twice := 2
	if err := db.Transact(ctx, readThenWrite(&twice)); err != nil {
		t.Errorf("write after a concurrent change, twice: %v, want success on the third attempt", err)
	}
	var n int64
	want := int64(sqldb.MaxAttempts + 2 + 10)
	if err := db.QueryRowContext(ctx, "SELECT n FROM item WHERE id = 1").Scan(&n); err != nil || n != want {
		t.Errorf("n = %d, %v; want %d (%d + 2 changes by the other connection, then the retried write)", n, err, want, sqldb.MaxAttempts)
	}
	for _, err := range []error{nil, errors.New("record has changed"), sql.ErrNoRows} {
		if sqldb.IsStaleRead(err) {
			t.Errorf("IsStaleRead(%v) = true", err)
		}
	}
}

// A server that takes no more connections is a database too busy to answer (a 503), not a bug (a 500).
func TestRefusedConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv(sqldbtest.MySQLDSNEnv)
	if dsn == "" {
		t.Skip("needs MySQL: set " + sqldbtest.MySQLDSNEnv)
	}
	ctx := context.Background()
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	name := "board_busy_" + sqldbtest.RandomSuffix()
	dbDSN := sqldbtest.DatabaseDSN(t, name)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE USER '"+name+"'@'%' IDENTIFIED BY 'pw' WITH MAX_USER_CONNECTIONS 1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP USER '"+name+"'@'%'") })
	if _, err := admin.ExecContext(ctx, "GRANT ALL ON `"+name+"`.* TO '"+name+"'@'%'"); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dbDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = name, "pw"
	// The one connection the user may have is taken first; whatever needs a second one is refused, be it the open
	// (its ping) or a query after it.
	raw, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	held, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.OpenMySQL(ctx, cfg.FormatDSN(), 4)
	if err == nil {
		defer db.Close()
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
	if f, ok := fault.As(err); !ok || f.Kind != fault.Unavailable {
		t.Errorf("a connection beyond the user's limit: %v, want an Unavailable fault", err)
	}
}

func TestVitessUnavailableErrors(t *testing.T) {
	for _, c := range []struct {
		err  *mysql.MySQLError
		want bool
	}{
		{&mysql.MySQLError{Number: 1105, Message: "target: article.-80.primary: no healthy tablet available: vttablet: rpc error: code = Unavailable desc = ..."}, true},
		{&mysql.MySQLError{Number: 1317, Message: "vttablet: rpc error: code = Aborted desc = transaction 17 ended at 2026-11-25 (exceeded timeout: 30s)"}, true},
		{&mysql.MySQLError{Number: 1203, Message: "vttablet: rpc error: code = ResourceExhausted desc = transaction pool connection limit exceeded"}, true},
		{&mysql.MySQLError{Number: 1317, Message: "multi-db transaction attempted: [target:{keyspace:\"article\" shard:\"-80\"} code = Aborted]"}, false},
		{&mysql.MySQLError{Number: 1105, Message: "syntax error at position 12"}, false},
		// A tablet's connection to its MySQL lost under it (a Galera node killed behind HAProxy).
		{&mysql.MySQLError{Number: 2013, Message: "target: article.-80.primary: vttablet: rpc error: code = Canceled desc = EOF (errno 2013) (sqlstate HY000) (CallerID: userData1): Sql: \"commit\", BindVars: {}"}, true},
		{&mysql.MySQLError{Number: 2013, Message: "Lost connection to server during query"}, false},
	} {
		if got := fault.KindOf(sqldb.Classify(sqldb.MySQL, c.err)) == fault.Unavailable; got != c.want {
			t.Errorf("%d %q: unavailable = %v, want %v", c.err.Number, c.err.Message, got, c.want)
		}
	}
}

// TestRefreshVSchema checks, on vtgate, that a refresh of the VSchema it serves leaves the keyspace's as it was, also
// after a refresh cut short.
func TestRefreshVSchema(t *testing.T) {
	t.Parallel()
	if os.Getenv(sqldbtest.VitessPrefixesEnv) == "" {
		t.Skip("needs vtgate: set " + sqldbtest.VitessPrefixesEnv + " and " + sqldbtest.MySQLDSNEnv)
	}
	db := sqldbtest.OpenMySQL(t, migrate)
	ctx := context.Background()
	for _, leftover := range []bool{false, true, false} {
		if err := sqldb.RefreshVSchema(ctx, db, leftover); err != nil {
			t.Fatalf("refresh (leftover %v): %v", leftover, err)
		}
	}
	var columns, name, typ, params, owner string
	if err := db.QueryRowContext(ctx, "SHOW VSCHEMA VINDEXES ON schema_migrations").Scan(&columns, &name, &typ, &params, &owner); err != nil {
		t.Fatal(err)
	}
	if columns != "version" || name != "hash" {
		t.Errorf("schema_migrations after the refreshes: vindex %s(%s), want hash(version)", name, columns)
	}
	rows, err := db.QueryContext(ctx, "SHOW VSCHEMA VINDEXES")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var keyspace string
		if err := rows.Scan(&keyspace, &name, &typ, &params, &owner); err != nil {
			t.Fatal(err)
		}
		if keyspace == db.Name && name == sqldb.RefreshVindex {
			t.Errorf("the refreshes left vindex %s in keyspace %s", name, keyspace)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestGaleraErrors holds what a Galera node answers (as MariaDB 10.11 with galera-4 sends them; cmd/board's
// TestGaleraFailover provokes them on a real cluster) to the classification board acts on: a node cut off from the
// cluster's primary component is unavailable (503, the client tries again, by then through a healthy node), and a
// certification conflict is a deadlock, which Transact retries.
func TestGaleraErrors(t *testing.T) {
	t.Parallel()
	notReady := &mysql.MySQLError{Number: 1047, SQLState: [5]byte([]byte("08S01")), Message: "WSREP has not yet prepared node for application use"}
	certification := &mysql.MySQLError{Number: 1213, SQLState: [5]byte([]byte("40001")), Message: "Deadlock found when trying to get lock; try restarting transaction"}
	unknownCommand := &mysql.MySQLError{Number: 1047, SQLState: [5]byte([]byte("08S01")), Message: "Unknown command"}
	for _, c := range []struct {
		name                   string
		err                    error
		unavailable, retryable bool
	}{
		{"node not in the primary component", notReady, true, false},
		{"wrapped", fmt.Errorf("select: %w", notReady), true, false},
		{"certification conflict", certification, true, true},
		{"unknown command", unknownCommand, false, false},
	} {
		if got := fault.KindOf(sqldb.Classify(sqldb.MySQL, c.err)) == fault.Unavailable; got != c.unavailable {
			t.Errorf("%s: unavailable = %v, want %v", c.name, got, c.unavailable)
		}
		if got := sqldb.Retryable(c.err); got != c.retryable {
			t.Errorf("%s: retryable = %v, want %v", c.name, got, c.retryable)
		}
	}
}
