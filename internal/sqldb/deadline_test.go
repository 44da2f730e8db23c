package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// returnsWithin runs call and fails the test if it has not returned after limit: far longer than any bound under
// test, so only a hang trips it.
func returnsWithin[T any](t *testing.T, limit time.Duration, call func() T) T {
	t.Helper()
	result := make(chan T, 1)
	go func() { result <- call() }()
	select {
	case r := <-result:
		return r
	case <-time.After(limit):
		t.Fatalf("still waiting after %v", limit)
		panic("unreachable")
	}
}

// checkUnavailable fails unless err is the fault the edge answers with 503 and its cause is cause.
func checkUnavailable(t *testing.T, what string, err, cause error) {
	t.Helper()
	if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "DATABASE_UNAVAILABLE" {
		t.Errorf("%s: %v, want DATABASE_UNAVAILABLE", what, err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("%s: %v, want it caused by %v", what, err, cause)
	}
}

// TestOpenMySQLGivesUpOnASilentServer points OpenMySQL at a port that accepts connections and never answers. It
// must fail, as a database that is unavailable, by the caller's deadline or else by the driver's read timeout.
func TestOpenMySQLGivesUpOnASilentServer(t *testing.T) {
	t.Parallel()
	addr := sqldbtest.SilentServer(t)
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		err := returnsWithin(t, time.Minute, func() error {
			_, err := sqldb.OpenMySQL(ctx, "root@tcp("+addr+")/board", 4)
			return err
		})
		checkUnavailable(t, "open by a deadline", err, context.DeadlineExceeded)
	})
	t.Run("read timeout", func(t *testing.T) {
		t.Parallel()
		err := returnsWithin(t, time.Minute, func() error {
			_, err := sqldb.OpenMySQL(context.Background(), "root@tcp("+addr+")/board?readTimeout=500ms", 4)
			return err
		})
		checkUnavailable(t, "open without a deadline", err, mysql.ErrInvalidConn)
	})
}

// TestDeadlineEndsAWaitForTheWriter holds what a write needs (the row on MySQL, the one write connection on SQLite)
// in another transaction: writes with a short deadline give up as "unavailable" when it passes, and Transact does
// not run its function again after it.
func TestDeadlineEndsAWaitForTheWriter(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		release := holdRow(t, db)
		defer release()
		short := func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}

		ctx, cancel := short()
		defer cancel()
		var runs atomic.Int32
		err := returnsWithin(t, time.Minute, func() error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				runs.Add(1)
				_, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1")
				return err
			})
		})
		checkUnavailable(t, "Transact", err, context.DeadlineExceeded)
		if n := runs.Load(); n > 1 {
			t.Errorf("Transact ran its function %d times, want it not retried past the deadline", n)
		}

		ctx, cancel = short()
		defer cancel()
		err = returnsWithin(t, time.Minute, func() error {
			_, err := db.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1")
			return err
		})
		checkUnavailable(t, "ExecContext", err, context.DeadlineExceeded)

		if db.Dialect == sqldb.MySQL { // SQLite's readers never wait for its writer
			ctx, cancel = short()
			defer cancel()
			err = returnsWithin(t, time.Minute, func() error {
				rows, err := db.QueryContext(ctx, "SELECT n FROM item WHERE id = 1 FOR UPDATE")
				if err == nil {
					rows.Close()
				}
				return err
			})
			checkUnavailable(t, "QueryContext", err, context.DeadlineExceeded)
		}
	})
}

// holdRow locks item 1 in a transaction until release is called.
func holdRow(t *testing.T, db *sqldb.DB) (release func()) {
	return sqldbtest.HoldLock(t, db, "SELECT n FROM item WHERE id = 1"+db.ForUpdate())
}

// TestSilentMySQL opens a database through a proxy that then stops forwarding anything, as a server does whose
// process hangs or whose route is lost while connections stay open.
func TestSilentMySQL(t *testing.T) {
	t.Parallel()
	if os.Getenv(sqldbtest.MySQLDSNEnv) == "" {
		t.Skip("needs MariaDB: set " + sqldbtest.MySQLDSNEnv)
	}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 500*time.Millisecond)
	}
	t.Run("calls end at their deadline", func(t *testing.T) {
		t.Parallel()
		db, proxy := openBehindProxy(t, "")
		proxy.Freeze()
		ctx, cancel := short()
		defer cancel()
		var n int64
		err := returnsWithin(t, time.Minute, func() error { return db.QueryRowContext(ctx, "SELECT n FROM item WHERE id = 1").Scan(&n) })
		checkUnavailable(t, "read", err, context.DeadlineExceeded)
		ctx, cancel = short()
		defer cancel()
		err = returnsWithin(t, time.Minute, func() error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1")
				return err
			})
		})
		checkUnavailable(t, "transaction", err, context.DeadlineExceeded)
	})
	t.Run("commit ends at its deadline", func(t *testing.T) {
		t.Parallel()
		db, proxy := openBehindProxy(t, "")
		ctx, cancel := short()
		defer cancel()
		err := returnsWithin(t, time.Minute, func() error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1")
				proxy.Freeze() // the server goes silent before the commit reaches it
				return err
			})
		})
		checkUnavailable(t, "commit", err, context.DeadlineExceeded)
	})
	t.Run("rollback ends at its deadline", func(t *testing.T) {
		t.Parallel()
		db, proxy := openBehindProxy(t, "readTimeout=10m") // longer than returnsWithin waits
		ctx, cancel := short()
		defer cancel()
		boom := errors.New("boom")
		err := returnsWithin(t, time.Minute, func() error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1"); err != nil {
					return err
				}
				proxy.Freeze() // the server goes silent before the rollback reaches it
				return boom
			})
		})
		if !errors.Is(err, boom) {
			t.Errorf("Transact = %v, want the function's error", err)
		}
	})
	t.Run("calls without a deadline end at the read timeout", func(t *testing.T) {
		t.Parallel()
		db, proxy := openBehindProxy(t, "readTimeout=500ms")
		proxy.Freeze()
		var n int64
		err := returnsWithin(t, time.Minute, func() error {
			return db.QueryRowContext(context.Background(), "SELECT n FROM item WHERE id = 1").Scan(&n)
		})
		checkUnavailable(t, "read", err, mysql.ErrInvalidConn)
	})
}

// openBehindProxy opens and migrates a database of its own on the test server, connected through a proxy; params
// are added to its DSN.
func openBehindProxy(t *testing.T, params string) (*sqldb.DB, *sqldbtest.FreezingProxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(sqldbtest.DatabaseDSN(t, "board_test_"+sqldbtest.RandomSuffix()))
	if err != nil {
		t.Fatal(err)
	}
	proxy := sqldbtest.NewFreezingProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	dsn := cfg.FormatDSN()
	if params != "" {
		dsn += "?" + params
	}
	db, err := sqldb.OpenMySQL(context.Background(), dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	// The proxy closes first: a call still waiting on a silent connection then ends, and Close does not wait for it.
	t.Cleanup(func() {
		proxy.Close()
		db.Close()
	})
	if err := migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db, proxy
}
