// Package sqldb opens the SQL engines a service keeps its source of truth in — MySQL/MariaDB or an SQLite file —
// and hides their few real differences: connection settings, upserts, row locks and retryable errors.
package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"board/internal/backoff"
	"board/internal/fault"
)

// Dialect names the SQL engine.
type Dialect string

const (
	MySQL  Dialect = "mysql"
	SQLite Dialect = "sqlite"
)

// DB is a service's database. Reads go to a pool of readers; writes go through Transact. On MySQL both are the same
// pool. On SQLite the writer is a single connection: SQLite admits one writer at a time anyway, and queueing writers
// in Go is faster and fairer than letting them spin on the file lock.
type DB struct {
	Dialect Dialect
	Name    string // database name (MySQL) or file path (SQLite), for logs
	vitess  bool   // the MySQL server is Vitess's vtgate, and the database a keyspace
	read    *sql.DB
	write   *sql.DB
	// The pools' prepared statements, on SQLite (see stmtCache); nil on MySQL.
	readStmts, writeStmts *stmtCache
}

// OpenSQLite opens (creating it if needed) the SQLite database file at path in WAL mode.
func OpenSQLite(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	// busy_timeout makes a connection wait for a lock instead of failing; _txlock=immediate takes the write lock
	// at BEGIN, so a transaction never fails halfway when it upgrades from reading to writing.
	// synchronous(FULL): a commit acknowledged to a client survives a power loss, not just a process crash.
	base := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_time_format=sqlite"
	write, err := sql.Open("sqlite", base+"&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	read, err := sql.Open("sqlite", base+"&_pragma=query_only(1)")
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(8)
	read.SetMaxIdleConns(8)
	db := &DB{Dialect: SQLite, Name: path, read: read, write: write, readStmts: newStmtCache(read), writeStmts: newStmtCache(write)}
	// The first connection creates the file and switches it to WAL before readers open it read-only.
	if err := db.write.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}

// Timeouts of the MySQL driver, for a DSN that sets none (its timeout, readTimeout and writeTimeout parameters).
// A context's deadline ends a call sooner; these bound what no context reaches: work that runs without a deadline
// (migrations at start, the relays) and a connection whose server stopped answering. A read times out when the
// server sends nothing for that long, so ReadTimeout must exceed the longest statement, such as a migration that
// builds an index on a large table.
const (
	DefaultMySQLDialTimeout  = 5 * time.Second
	DefaultMySQLReadTimeout  = 30 * time.Second
	DefaultMySQLWriteTimeout = 30 * time.Second
)

// OpenMySQL connects to the database named in dsn, creating it first when it does not exist. Behind Vitess's vtgate
// the database is a keyspace, which Vitess makes (scripts/vitess does). A server that cannot be reached or does not
// answer is a fault.Unavailable error, within the DSN's timeouts (see DefaultMySQLReadTimeout) when ctx has no
// earlier deadline.
func OpenMySQL(ctx context.Context, dsn string, maxConns int) (*DB, error) {
	cfg, err := mysqlConfig(dsn)
	if err != nil {
		return nil, err
	}
	vitess, err := createDatabase(ctx, *cfg)
	if err != nil {
		return nil, classify(MySQL, err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	pool := sql.OpenDB(conn)
	pool.SetMaxOpenConns(maxConns)
	pool.SetMaxIdleConns(maxConns)
	pool.SetConnMaxLifetime(5 * time.Minute)
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		if vitess {
			err = fmt.Errorf("%w (behind vtgate, a database is a keyspace that Vitess must have)", err)
		}
		return nil, classify(MySQL, fmt.Errorf("connect to mysql database %s: %w", cfg.DBName, err))
	}
	return &DB{Dialect: MySQL, Name: cfg.DBName, vitess: vitess, read: pool, write: pool}, nil
}

// mysqlConfig parses dsn and sets what every connection needs: UTC times, one round trip per query, matched-row
// counts, and the default timeouts where dsn sets none.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("mysql dsn names no database")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true // one round trip per query instead of prepare + execute + close
	cfg.ClientFoundRows = true   // RowsAffected counts matched rows, so an update that changes nothing still "found" its row
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultMySQLDialTimeout
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultMySQLReadTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultMySQLWriteTimeout
	}
	return cfg, nil
}

// createDatabase creates cfg's database unless the server is a vtgate, which it reports: there, CREATE DATABASE
// would make an unsharded keyspace.
func createDatabase(ctx context.Context, cfg mysql.Config) (vitess bool, err error) {
	name := cfg.DBName
	cfg.DBName = ""
	conn, err := mysql.NewConnector(&cfg)
	if err != nil {
		return false, err
	}
	server := sql.OpenDB(conn)
	defer server.Close()
	if vitess, err = isVitess(ctx, server); err != nil || vitess {
		return vitess, err
	}
	_, err = server.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+QuoteIdent(name)+" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
	if err != nil {
		return false, fmt.Errorf("create mysql database %s: %w", name, err)
	}
	return false, nil
}

// Vitess reports whether the database is a keyspace behind Vitess's vtgate.
func (db *DB) Vitess() bool { return db.vitess }

// QuoteIdent quotes a MySQL identifier.
func QuoteIdent(name string) string {
	out := []byte{'`'}
	for i := 0; i < len(name); i++ {
		if name[i] == '`' {
			out = append(out, '`')
		}
		out = append(out, name[i])
	}
	return string(append(out, '`'))
}

// Close closes both pools and their statements.
func (db *DB) Close() error {
	err := errors.Join(db.readStmts.close(), db.writeStmts.close(), db.read.Close())
	if db.write != db.read {
		err = errors.Join(err, db.write.Close())
	}
	return err
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.read.PingContext(ctx) }

// QueryContext runs a read query.
func (db *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := db.readStmts.stmt(ctx, query)
	if err != nil {
		return nil, db.classify(err)
	}
	var rows *sql.Rows
	if s != nil {
		rows, err = s.QueryContext(ctx, args...)
	} else {
		rows, err = db.read.QueryContext(ctx, query, args...)
	}
	return rows, db.classify(err)
}

// QueryRowContext runs a read query expected to return at most one row; its error surfaces on Scan.
func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) Row {
	s, err := db.readStmts.stmt(ctx, query)
	switch {
	case err != nil:
		return Row{err: err, db: db}
	case s != nil:
		return Row{row: s.QueryRowContext(ctx, args...), db: db}
	}
	return Row{row: db.read.QueryRowContext(ctx, query, args...), db: db}
}

// Row is the result of QueryRowContext. Its Scan reports a database that cannot be reached or is too busy as the
// same fault as every other call here; sql.ErrNoRows passes through unchanged.
type Row struct {
	row *sql.Row
	err error // of preparing the query, when that failed
	db  *DB
}

// Scan copies the row's columns into dest.
func (r Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.db.classify(r.err)
	}
	return r.db.classify(r.row.Scan(dest...))
}

// ExecContext runs one write statement outside a transaction (schema changes, bulk loads).
func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := db.writeStmts.stmt(ctx, query)
	if err != nil {
		return nil, db.classify(err)
	}
	var res sql.Result
	if s != nil {
		res, err = s.ExecContext(ctx, args...)
	} else {
		res, err = db.write.ExecContext(ctx, query, args...)
	}
	return res, db.classify(err)
}

// Transact runs fn in a transaction and commits it when fn returns nil. A transaction that fails on a conflict with
// another one (see retryable: a deadlock, a lock wait timeout, a snapshot conflict, SQLSTATE 40001 as Vitess passes
// them on, a busy or locked SQLite database; behind Vitess, also a shard that a reshard's switch moved under it, see
// vitessCutover) is rolled back and fn runs again in a new one, here, so no caller needs its own retry loop: fn must
// therefore be safe to run again, any number of times, each run starting from what the database holds then (effects
// of a failed run outside the transaction must be reset or harmless).
//
// Before each retry Transact waits a random time below a ceiling that starts at retryBase and doubles up to retryMax
// ("full jitter": the transactions that collided do not meet again at once, and a crowd spreads out). It makes at
// most maxAttempts attempts, with or without a deadline, and stops as soon as the next wait would end after ctx's
// deadline: the conflict is then a fault.Unavailable error (a 503), returned while the request can still answer.
// ctx bounds every step, the commit included: when it ends first, the call returns a fault.Unavailable error whose
// transaction may or may not take effect, as with any commit whose answer is lost.
func (db *DB) Transact(ctx context.Context, fn func(tx *sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := db.transactOnce(ctx, fn)
		if err == nil || !(retryable(err) || db.vitess && (vitessUnrouted(err) || vitessCutover(err))) || ctx.Err() != nil {
			return db.classify(err)
		}
		if attempt == maxAttempts {
			return db.classify(fmt.Errorf("transaction retried up to its bound of %d attempts: %w", attempt, err))
		}
		wait := backoff.Jitter(attempt, retryBase, retryMax)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return db.classify(fmt.Errorf("transaction not retried after attempt %d: no time for another before the deadline: %w", attempt, err))
		}
		if serr := backoff.Sleep(ctx, wait); serr != nil {
			return db.classify(fmt.Errorf("transaction not retried after attempt %d: %w (%w)", attempt, err, serr))
		}
	}
}

// Transact's retry policy. A conflict is over as soon as the transaction that won it commits, a few milliseconds on
// an idle server, so the first wait is short; the ceiling doubles so that many writers colliding on one row spread
// out, and stops at retryMax so that all the attempts fit well inside a request's deadline (5 s by default): the
// backoff of a hopeless transaction is about 0.3 s in all (at most 0.64 s). The attempt bound holds with a deadline
// and without one (migrations, relays); a short deadline, or slow attempts, end the retries sooner.
const (
	maxAttempts = 10
	retryBase   = 4 * time.Millisecond
	retryMax    = 128 * time.Millisecond
)

func (db *DB) transactOnce(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = untilDone(ctx, tx.Rollback) // the transaction failed already; its rollback error adds nothing
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return untilDone(ctx, tx.Commit)
}

// untilDone runs end, a transaction's Commit or Rollback, but stops waiting for it when ctx ends: database/sql's
// Tx takes no context for them, and the MySQL driver waits for a server that stopped answering until its read
// timeout. end goes on in the background.
func untilDone(ctx context.Context, end func() error) error {
	result := make(chan error, 1)
	go func() { result <- end() }()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		select {
		case err := <-result: // finished as ctx ended: its own outcome is the true one
			return err
		default:
			return fmt.Errorf("transaction end outlived its context: %w", ctx.Err())
		}
	}
}

// retryable reports a conflict between transactions that another attempt is expected to get past: MySQL's deadlock
// (1213) and lock wait timeout (1205), MariaDB's snapshot conflict (1020, see IsStaleRead), any other error of
// SQLSTATE 40001 (serialization failure), and SQLite's BUSY and LOCKED. Vitess's vtgate passes a shard's deadlock
// or lock wait timeout on with the MySQL error number and SQLSTATE (it reads them back out of the tablet's
// "(errno 1213) (sqlstate 40001)"), so the same numbers cover it.
func retryable(err error) bool {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1213, 1205: // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
			return true
		}
		return IsStaleRead(err) || string(my.SQLState[:]) == "40001"
	}
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		code := lite.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// refusesConnections reports a MySQL server that is up but takes no more connections for now: too many in all
// (1040), or too many of this user's (1203 in MySQL, 1226 in MariaDB).
func refusesConnections(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == 1040 || my.Number == 1203 || my.Number == 1226)
}

// vitessUnavailable reports an error of vtgate's own that means a shard cannot be reached or is too busy for now: it
// passes a tablet's gRPC status on as error 1105 (UNAVAILABLE: no healthy tablet, a tablet restarting) or 1317
// (ABORTED, DEADLINE_EXCEEDED: a transaction its tablet ended, a timeout), naming the status in the message. A
// transaction refused for spanning shards is 1317 too, and stays a bug. A tablet whose own connection to MySQL broke
// (its server killed, or a proxy in front of it cutting the connection) is passed on as the client error 2013
// (CR_SERVER_LOST: "vttablet: rpc error: code = Canceled desc = EOF"), or 2006 (CR_SERVER_GONE_ERROR): as on a
// connection of board's own that broke, a statement or COMMIT may or may not have taken effect, and the client's
// retry (with its Idempotency-Key) settles it.
func vitessUnavailable(err error) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return false
	}
	if (my.Number == 2013 || my.Number == 2006) && strings.Contains(my.Message, "vttablet: ") {
		return true
	}
	if (my.Number != 1105 && my.Number != 1317) || strings.Contains(my.Message, "multi-db transaction") {
		return false
	}
	for _, status := range []string{"code = Unavailable", "code = Aborted", "code = DeadlineExceeded", "code = ResourceExhausted"} {
		if strings.Contains(my.Message, status) {
			return true
		}
	}
	return false
}

// vitessUnrouted reports vtgate's answer for a table that the VSchema it serves does not route, although the
// migrations declared it: "table T not found" (a table it does not know), VT09001 (one it knows only from schema
// tracking, without vindexes), VT05005 (SHOW VSCHEMA VINDEXES). vtgate (v0.24) can serve an older VSchema for a
// while: its watch of the topology can deliver an older record after the one an ALTER VSCHEMA just wrote, a rebuild
// for schema tracking that raced an ALTER keeps what it read before it, and an ALTER of another keyspace in such a
// moment writes this one's older VSchema back until a migration mends it (see refreshVSchema). It is a state that
// passes, not a bug of the statement. Only behind Vitess: elsewhere these words mean other things.
func vitessUnrouted(err error) bool {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return false
	}
	m := my.Message
	return strings.Contains(m, "VT05005") || strings.Contains(m, "VT09001") ||
		strings.Contains(m, "table ") && strings.Contains(m, " not found")
}

// classify turns "the database cannot be reached or is too busy" into a fault the edge answers with 503; behind
// Vitess, so is a table that vtgate does not route for now (see vitessUnrouted), and a shard that a reshard moved
// under a transaction whose retries ran out (see vitessCutover).
func (db *DB) classify(err error) error {
	err = classify(db.Dialect, err)
	if _, ok := fault.As(err); !ok && db.vitess && (vitessUnrouted(err) || vitessCutover(err)) {
		return fault.Unavailablef(err, "DATABASE_UNAVAILABLE", "the %s database is unavailable or too busy; try again", db.Dialect)
	}
	return err
}

// classify is DB.classify for a database not open yet. A deadline that ends a call is "too busy"; the MySQL driver
// reports a connection that timed out or broke as ErrInvalidConn.
func classify(dialect Dialect, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := fault.As(err); ok {
		return err
	}
	if errors.Is(err, mysql.ErrInvalidConn) || fault.IsDependencyDown(err) || retryable(err) || refusesConnections(err) ||
		vitessUnavailable(err) || galeraNotReady(err) {
		return fault.Unavailablef(err, "DATABASE_UNAVAILABLE", "the %s database is unavailable or too busy; try again", dialect)
	}
	return err
}

// OnConflictUpdate is the dialect's upsert tail: on a duplicate key (whose columns SQLite needs named), apply set.
// In set, a bare column name means the existing row's value, in both dialects.
func (db *DB) OnConflictUpdate(keyColumns, set string) string {
	if db.Dialect == MySQL {
		return " ON DUPLICATE KEY UPDATE " + set
	}
	return " ON CONFLICT(" + keyColumns + ") DO UPDATE SET " + set
}

// ForUpdate is the dialect's row-lock suffix for a SELECT inside Transact. SQLite needs none: its write
// transactions already hold the database's single write lock from BEGIN.
func (db *DB) ForUpdate() string {
	if db.Dialect == MySQL {
		return " FOR UPDATE"
	}
	return ""
}

// ForShare is the dialect's shared-lock suffix for a SELECT inside Transact: the row cannot change until the
// transaction ends, while other readers that take it too go on. SQLite needs none (see ForUpdate).
func (db *DB) ForShare() string {
	if db.Dialect == MySQL {
		return " LOCK IN SHARE MODE" // MariaDB does not know FOR SHARE
	}
	return ""
}

// RouteBy is the condition "column = value AND " that routes a statement to the shard of value behind Vitess, with
// its argument, for a statement whose other conditions do not name the shard key; elsewhere it is empty, because
// on MariaDB the extra condition can steer the planner off the primary key (a delete by a list of ids would walk
// the shard key's index over all of its rows instead).
func (db *DB) RouteBy(column string, value any) (string, []any) {
	if db.vitess {
		return column + " = ? AND ", []any{value}
	}
	return "", nil
}

// ForceIndex is the dialect's hint that a query must walk the named index. MariaDB otherwise plans
// "board_id = ? AND article_id < ? ORDER BY article_id DESC LIMIT n" as a ref on board_id alone and reads every
// entry newer than the cursor (docs/paging.md); SQLite's planner picks the range scan by itself.
func (db *DB) ForceIndex(name string) string {
	if db.Dialect == MySQL {
		return " FORCE INDEX (" + name + ")"
	}
	return ""
}

// After is the dialect's cursor condition "(a, b) > (x, y)", in the form its planner turns into one range scan of an
// index ending in (a, b): SQLite plans a row-value comparison as a range (but with bound parameters scans the whole
// prefix for the equivalent OR), MariaDB plans the OR as a range (but not the row value). It returns the condition
// and its arguments.
func (db *DB) After(a, b string, x, y any) (string, []any) {
	if db.Dialect == MySQL {
		return "(" + a + " > ? OR (" + a + " = ? AND " + b + " > ?))", []any{x, x, y}
	}
	return "(" + a + ", " + b + ") > (?, ?)", []any{x, y}
}

// IDs returns the one int64 column of every row of a query's result (pass the query's two results straight in), and
// closes the rows.
func IDs(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// In is the condition "column IN (ids...)" with its arguments; ids must not be empty.
func In(column string, ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return column + " IN (?" + strings.Repeat(", ?", len(ids)-1) + ")", args
}
