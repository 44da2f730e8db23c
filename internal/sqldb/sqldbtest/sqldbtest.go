// Package sqldbtest runs one test suite on every SQL backend: an SQLite file always, and MariaDB/MySQL as well when
// BOARD_TEST_MYSQL_DSN is set (e.g. "root@tcp(127.0.0.1:3306)/"). Each test gets a database of its own, dropped
// when the test ends.
//
// BOARD_TEST_MYSQL_DSN may name Vitess's vtgate instead (scripts/vitess start --prefixes ...), whose keyspaces are
// made by Vitess, not by CREATE DATABASE: BOARD_TEST_VITESS_PREFIXES then lists the prefixes of its keyspace sets,
// and each test holds one set (all its databases) at a time, across processes, emptied before the test.
package sqldbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"board/internal/sqldb"
)

// MySQLDSNEnv names the environment variable that turns the MySQL backend on.
const MySQLDSNEnv = "BOARD_TEST_MYSQL_DSN"

// VitessPrefixesEnv names the environment variable that says MySQLDSNEnv is a vtgate, and lists the database prefixes
// of its keyspace sets, separated by commas.
const VitessPrefixesEnv = "BOARD_TEST_VITESS_PREFIXES"

// Run calls fn in a subtest per backend with a fresh database that migrate has prepared.
func Run(t *testing.T, migrate func(context.Context, *sqldb.DB) error, fn func(t *testing.T, db *sqldb.DB)) {
	t.Helper()
	RunIn(t, "article", migrate, fn)
}

// RunIn is Run for the tables of the service database named database: behind Vitess, its MySQL subtest takes that
// database's keyspace, sharded as the database is (the media keyspace is unsharded).
func RunIn(t *testing.T, database string, migrate func(context.Context, *sqldb.DB) error, fn func(t *testing.T, db *sqldb.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, OpenSQLite(t, migrate)) })
	if os.Getenv(MySQLDSNEnv) != "" {
		t.Run("mysql", func(t *testing.T) { fn(t, openMySQL(t, database, migrate)) })
	}
}

// OpenSQLite returns a migrated SQLite database in a temporary directory.
func OpenSQLite(t testing.TB, migrate func(context.Context, *sqldb.DB) error) *sqldb.DB {
	t.Helper()
	db, err := sqldb.OpenSQLite(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Commits on the one write connection, which lives as long as db, do not wait for the disk: a test proves nothing
	// about power loss, and what a process committed outlives the process all the same. With FULL every commit
	// waited for an fsync, and SQLite tests mostly waited on the disk.
	if _, err := db.ExecContext(context.Background(), "PRAGMA synchronous = OFF"); err != nil {
		t.Fatal(err)
	}
	if err := migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// OpenMySQL returns a migrated database of its own on the server BOARD_TEST_MYSQL_DSN names; it is dropped at the
// end of the test (behind Vitess: a keyspace of a set the test holds).
func OpenMySQL(t testing.TB, migrate func(context.Context, *sqldb.DB) error) *sqldb.DB {
	t.Helper()
	return openMySQL(t, "article", migrate)
}

// openMySQL is OpenMySQL in the keyspace of database behind Vitess.
func openMySQL(t testing.TB, database string, migrate func(context.Context, *sqldb.DB) error) *sqldb.DB {
	t.Helper()
	var dsn string
	if os.Getenv(VitessPrefixesEnv) != "" {
		dsn = DSN(t, Databases(t, "", database)+database)
	} else {
		dsn = DatabaseDSN(t, "board_test_"+RandomSuffix())
	}
	db, err := sqldb.OpenMySQL(context.Background(), dsn, 50)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// Databases returns a database prefix of the test's own under which it may use the databases names (prefix + name):
// on MySQL, base followed by a random suffix, whose databases are dropped when the test ends; behind Vitess, the
// prefix of a keyspace set that the test holds until it ends, emptied first.
func Databases(t testing.TB, base string, names ...string) string {
	t.Helper()
	if os.Getenv(VitessPrefixesEnv) != "" {
		return holdKeyspaceSet(t, names)
	}
	prefix := base + RandomSuffix() + "_"
	for _, name := range names {
		DatabaseDSN(t, prefix+name)
	}
	return prefix
}

// serverDSN returns BOARD_TEST_MYSQL_DSN pointed at database name.
func DSN(t testing.TB, name string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(os.Getenv(MySQLDSNEnv))
	if err != nil {
		t.Fatalf("%s: %v", MySQLDSNEnv, err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// DatabaseDSN returns BOARD_TEST_MYSQL_DSN pointed at database name, and drops that database when the test ends.
// Behind Vitess, name must be a keyspace of a set the test holds (see Databases), and stays.
func DatabaseDSN(t testing.TB, name string) string {
	if os.Getenv(VitessPrefixesEnv) != "" {
		return DSN(t, name)
	}
	t.Helper()
	cfg, err := mysql.ParseDSN(os.Getenv(MySQLDSNEnv))
	if err != nil {
		t.Fatalf("%s: %v", MySQLDSNEnv, err)
	}
	server := cfg.Clone()
	server.DBName = ""
	t.Cleanup(func() {
		conn, err := mysql.NewConnector(server)
		if err != nil {
			t.Error(err)
			return
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		if _, err := db.Exec("DROP DATABASE IF EXISTS " + sqldb.QuoteIdent(name)); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// RandomSuffix returns a short random string for test database names and key prefixes.
func RandomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SilentServer returns the address of a listener that accepts connections and never reads or writes on them: a
// database whose port is open but which does not answer. Its connections close when the test ends.
func SilentServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at the end of the test
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// FreezingProxy forwards TCP connections to a server until it is frozen. From then on it forwards nothing, either
// way, on the connections it has, and new connections are accepted but never forwarded; all stay open.
type FreezingProxy struct {
	ln     net.Listener
	target string
	frozen chan struct{}
	Freeze func() // makes the server go silent on every connection, open and new

	accepting chan struct{} // closed when the accept loop has ended
	mu        sync.Mutex
	conns     []net.Conn
	forwards  sync.WaitGroup
}

// NewFreezingProxy starts a proxy to target. Close it when done, before closing clients that may be waiting on it.
func NewFreezingProxy(t testing.TB, target string) *FreezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FreezingProxy{ln: ln, target: target, frozen: make(chan struct{}), accepting: make(chan struct{})}
	p.Freeze = sync.OnceFunc(func() { close(p.frozen) })
	go p.accept()
	return p
}

// Addr is where clients connect.
func (p *FreezingProxy) Addr() string { return p.ln.Addr().String() }

func (p *FreezingProxy) accept() {
	defer close(p.accepting)
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.track(client)
		select {
		case <-p.frozen:
			continue
		default:
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(server)
		p.forwards.Go(func() { p.forward(server, client) })
		p.forwards.Go(func() { p.forward(client, server) })
	}
}

func (p *FreezingProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

// forward copies src to dst until either ends, which ends the other, or until the proxy is frozen, which leaves both
// open and silent.
func (p *FreezingProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// Close closes the listener and every connection, and waits for the forwarding to stop.
func (p *FreezingProxy) Close() {
	p.ln.Close()
	<-p.accepting
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.forwards.Wait()
}

// HoldLock runs lockQuery (e.g. a SELECT ... FOR UPDATE) in a transaction of db and keeps that transaction open,
// with its locks, until release is called (at most once has effect). On SQLite the transaction also holds the one
// write connection, so every other write waits.
func HoldLock(t testing.TB, db *sqldb.DB, lockQuery string) (release func()) {
	t.Helper()
	ctx := context.Background()
	locked, released, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Transact(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, lockQuery)
			if err != nil {
				return err
			}
			if err := rows.Close(); err != nil {
				return err
			}
			close(locked)
			<-released
			return nil
		})
	}()
	select {
	case <-locked:
	case err := <-done:
		t.Fatalf("lock with %q: %v", lockQuery, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			close(released)
			if err := <-done; err != nil {
				t.Errorf("release the lock of %q: %v", lockQuery, err)
			}
		})
	}
}

// SwitchProxy forwards TCP connections to a server while it is up. Down makes it a server that is down: its listener
// and every connection close, and connecting is refused; Up listens again on the same address.
type SwitchProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	running      sync.WaitGroup // the accept loop and the forwarding
}

// NewSwitchProxy starts a proxy to target, up; it is brought down when the test ends.
func NewSwitchProxy(t testing.TB, target string) *SwitchProxy {
	t.Helper()
	p := &SwitchProxy{addr: "127.0.0.1:0", target: target}
	p.Up(t)
	t.Cleanup(p.Down)
	return p
}

// Addr is where clients connect.
func (p *SwitchProxy) Addr() string { return p.addr }

// Up listens on the proxy's address again (a new one the first time).
func (p *SwitchProxy) Up(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.running.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return // Down closed it
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			p.running.Go(func() { _, _ = io.Copy(server, client); server.Close() })
			p.running.Go(func() { _, _ = io.Copy(client, server); client.Close() })
		}
	})
}

// Down closes the listener and every connection, and waits for the forwarding to stop.
func (p *SwitchProxy) Down() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.running.Wait()
}
