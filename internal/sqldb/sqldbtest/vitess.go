package sqldbtest

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"board/internal/sqldb"
)

// holdKeyspaceSet waits for a keyspace set of BOARD_TEST_VITESS_PREFIXES that no test, in this process or another,
// holds; holds it until the test ends (an exclusive flock on a file per prefix, which a killed process lets go); and
// drops the tables of its keyspaces names, so that the test migrates them afresh. It returns the set's prefix.
func holdKeyspaceSet(t testing.TB, names []string) string {
	t.Helper()
	prefixes := strings.Split(os.Getenv(VitessPrefixesEnv), ",")
	deadline := time.Now().Add(10 * time.Minute)
	for {
		for _, prefix := range prefixes {
			lock, err := os.OpenFile(filepath.Join(os.TempDir(), "board-test-vitess-"+prefix+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				lock.Close()
				continue
			}
			t.Cleanup(func() { lock.Close() }) // closing the file lets the lock go
			for _, name := range names {
				dropTables(t, prefix+name)
			}
			return prefix
		}
		if time.Now().After(deadline) {
			t.Fatalf("no keyspace set of %s=%s came free within 10 minutes", VitessPrefixesEnv, os.Getenv(VitessPrefixesEnv))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dropTables drops every table of keyspace; its VSchema stays, and the migrations that create the tables again
// find their vindexes in place.
func dropTables(t testing.TB, keyspace string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(DSN(t, keyspace))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	rows, err := db.Query("SHOW TABLES")
	if err != nil {
		t.Fatalf("list the tables of keyspace %s: %v", keyspace, err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, sqldb.QuoteIdent(name))
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(tables) == 0 {
		return
	}
	if _, err := db.Exec("DROP TABLE IF EXISTS " + strings.Join(tables, ", ")); err != nil {
		t.Fatalf("empty keyspace %s: %v", keyspace, err)
	}
}
