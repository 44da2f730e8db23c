package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// Conflicts as a client receives them, to inject where a real one is hard to make. The Vitess ones are what vtgate
// sends a MySQL client when a shard's MySQL reports the conflict: vttablet keeps "(errno N) (sqlstate S)" in its
// error's text, and vtgate reads the number and state back out of it into the error packet.
var (
	deadlock = &mysql.MySQLError{Number: 1213, SQLState: [5]byte([]byte("40001")),
		Message: "Deadlock found when trying to get lock; try restarting transaction"}
	lockWaitTimeout = &mysql.MySQLError{Number: 1205, SQLState: [5]byte([]byte("HY000")),
		Message: "Lock wait timeout exceeded; try restarting transaction"}
	vitessDeadlock = &mysql.MySQLError{Number: 1213, SQLState: [5]byte([]byte("40001")),
		Message: "target: board.-80.primary: vttablet: rpc error: code = Aborted desc = Deadlock found when trying to get lock; " +
			"try restarting transaction (errno 1213) (sqlstate 40001) (CallerID: root): Sql: \"update item set n = n + 1 where id = :vtg1\", BindVars: {}"}
	vitessLockWaitTimeout = &mysql.MySQLError{Number: 1205, SQLState: [5]byte([]byte("HY000")),
		Message: "target: board.80-.primary: vttablet: rpc error: code = DeadlineExceeded desc = Lock wait timeout exceeded; " +
			"try restarting transaction (errno 1205) (sqlstate HY000) (CallerID: root): Sql: \"update item set n = n + 1 where id = :vtg1\", BindVars: {}"}
	serializationFailure = &mysql.MySQLError{Number: 1105, SQLState: [5]byte([]byte("40001")), Message: "serialization failure"}
)

func TestRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"deadlock", deadlock, true},
		{"lock wait timeout", lockWaitTimeout, true},
		{"snapshot conflict", &mysql.MySQLError{Number: 1020, SQLState: [5]byte([]byte("HY000")), Message: "Record has changed since last read"}, true},
		{"deadlock through vtgate", vitessDeadlock, true},
		{"lock wait timeout through vtgate", vitessLockWaitTimeout, true},
		{"SQLSTATE 40001", serializationFailure, true},
		{"wrapped", fault.Unavailablef(fmt.Errorf("update: %w", deadlock), "X", "x"), true},
		{"sqlite busy", sqliteBusy(t), true},
		{"duplicate key", &mysql.MySQLError{Number: 1062, SQLState: [5]byte([]byte("23000")), Message: "Duplicate entry"}, false},
		{"query interrupted through vtgate", &mysql.MySQLError{Number: 1317, SQLState: [5]byte([]byte("70100")),
			Message: "vttablet: rpc error: code = Aborted desc = transaction 1: ended at 2025-01-01 00:00:00.000 UTC (exceeded timeout: 30s)"}, false},
		{"unknown vtgate error", &mysql.MySQLError{Number: 1105, SQLState: [5]byte([]byte("HY000")), Message: "Keyspace does not have exactly one shard"}, false},
		{"text only", errors.New("Deadlock found when trying to get lock (errno 1213) (sqlstate 40001)"), false},
		{"deadline", context.DeadlineExceeded, false},
		{"nil", nil, false},
	} {
		if got := sqldb.Retryable(tc.err); got != tc.want {
			t.Errorf("%s: retryable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// sqliteBusy returns the error SQLite gives a second writer that does not wait for the first one.
func sqliteBusy(t *testing.T) error {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "busy.db")+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback() }()
	second, err := db.BeginTx(ctx, nil)
	if err == nil {
		_ = second.Rollback()
		t.Fatal("a second writer began while the first held the write lock")
	}
	return err
}

// conflictFirst returns a function for Transact that adds 1 to item 1 and then fails with conflict on its first
// failures runs, and counts its runs in runs.
func conflictFirst(ctx context.Context, failures int, conflict error, runs *int) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		*runs++
		if _, err := tx.ExecContext(ctx, "UPDATE item SET n = n + 1 WHERE id = 1"); err != nil {
			return err
		}
		if *runs <= failures {
			return fmt.Errorf("update item: %w", conflict)
		}
		return nil
	}
}

func itemN(t *testing.T, db *sqldb.DB, id int) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), "SELECT n FROM item WHERE id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTransactRetriesUntilItSucceeds: a transaction that conflicts several times in a row, more than the one retry
// Transact used to make, commits once, on the attempt after the last conflict.
func TestTransactRetriesUntilItSucceeds(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a request's default deadline
		defer cancel()
		const failures = 4
		conflicts := map[string]error{"deadlock": deadlock, "lock wait timeout": lockWaitTimeout, "deadlock through vtgate": vitessDeadlock,
			"lock wait timeout through vtgate": vitessLockWaitTimeout, "SQLSTATE 40001": serializationFailure}
		for name, conflict := range conflicts {
			runs := 0
			if err := db.Transact(ctx, conflictFirst(ctx, failures, conflict, &runs)); err != nil {
				t.Errorf("%s, %d times: Transact = %v, want success", name, failures, err)
			}
			if runs != failures+1 {
				t.Errorf("%s, %d times: ran %d times, want %d", name, failures, runs, failures+1)
			}
		}
		if n := itemN(t, db, 1); n != int64(len(conflicts)) {
			t.Errorf("n = %d, want %d: each transaction committed once, its failed attempts rolled back", n, len(conflicts))
		}
	})
}

// TestTransactBackoffEndsAtTheDeadline: a transaction that conflicts every time stops being retried by its context's
// deadline and answers "unavailable", after more attempts than one retry. Nothing here fails on how long that took:
// a machine too busy to run a third attempt within the 50 ms is allowed to make fewer.
func TestTransactBackoffEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		const timeout = 50 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		deadline, _ := ctx.Deadline()
		var ends []time.Time // when each run of the function returned
		err := returnsWithin(t, time.Minute, func() error {
			return db.Transact(ctx, func(tx *sql.Tx) error {
				ends = append(ends, time.Now())
				return deadlock
			})
		})
		t.Logf("%d attempts under a %v deadline; returned %v before it", len(ends), timeout, time.Until(deadline))
		if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "DATABASE_UNAVAILABLE" {
			t.Errorf("Transact, always in conflict: %v, want DATABASE_UNAVAILABLE", err)
		}
		// After a run that left most of the time, only a rollback and a wait of at most a few ms stood between it and
		// the next: stopping there is not the deadline's doing, unless the deadline cut a later attempt short.
		if runs := len(ends); runs <= 2 {
			if left := deadline.Sub(ends[runs-1]); left > timeout*4/5 && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("ran %d times, the last one returning %v before the deadline; want more than 2", runs, left)
			} else {
				t.Logf("ran only %d times: the machine was too busy for more within %v", runs, timeout)
			}
		}
	})
}

// TestTransactBoundsAttemptsWithoutADeadline: with no deadline, a transaction that conflicts every time is given up
// after the bound on attempts.
func TestTransactBoundsAttemptsWithoutADeadline(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		runs := 0
		err := returnsWithin(t, time.Minute, func() error { return db.Transact(ctx, conflictFirst(ctx, 1<<30, lockWaitTimeout, &runs)) })
		checkUnavailable(t, "Transact, always in conflict", err, lockWaitTimeout)
		if runs != sqldb.MaxAttempts {
			t.Errorf("ran %d times, want the bound, %d", runs, sqldb.MaxAttempts)
		}
	})
}

// TestTransactStopsRetryingWhenTheContextEnds: a conflict after the caller went away is not retried.
func TestTransactStopsRetryingWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		runs := 0
		err := db.Transact(ctx, func(tx *sql.Tx) error {
			runs++
			cancel()
			return deadlock
		})
		checkUnavailable(t, "Transact cancelled in conflict", err, deadlock)
		if runs != 1 {
			t.Errorf("ran %d times, want 1", runs)
		}
	})
}

// TestTransactDoesNotRetryOtherErrors: any other failure is the function's, returned at once and as it is.
func TestTransactDoesNotRetryOtherErrors(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		duplicate := &mysql.MySQLError{Number: 1062, SQLState: [5]byte([]byte("23000")), Message: "Duplicate entry '1' for key 'PRIMARY'"}
		for _, failure := range []error{errors.New("boom"), duplicate, sql.ErrNoRows} {
			runs := 0
			err := db.Transact(ctx, conflictFirst(ctx, 1<<30, failure, &runs))
			if !errors.Is(err, failure) {
				t.Errorf("Transact = %v, want %v", err, failure)
			}
			if _, ok := fault.As(err); ok {
				t.Errorf("Transact = %v, a fault; want the function's own error", err)
			}
			if runs != 1 {
				t.Errorf("%v: ran %d times, want 1", failure, runs)
			}
		}
		runs := 0
		err := db.Transact(ctx, func(tx *sql.Tx) error { // a real duplicate key
			runs++
			_, err := tx.ExecContext(ctx, "INSERT INTO item (id, n) VALUES (1, 0)")
			return err
		})
		if !sqldb.IsDuplicate(err) || runs != 1 {
			t.Errorf("duplicate insert: %v after %d runs, want a duplicate key after 1", err, runs)
		}
		if n := itemN(t, db, 1); n != 0 {
			t.Errorf("n = %d, want 0: every attempt rolled back", n)
		}
	})
}
