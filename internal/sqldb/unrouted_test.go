package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"

	"board/internal/fault"
)

// Errors as vtgate (v0.24) sends them for a table the VSchema it serves does not route, and others.
var (
	unroutedSelect = &mysql.MySQLError{Number: 1105, SQLState: [5]byte([]byte("HY000")), Message: "table schema_migrations not found"}
	unroutedDML    = &mysql.MySQLError{Number: 1173, SQLState: [5]byte([]byte("42000")),
		Message: "VT09001: table 'board_article_count' does not have a primary vindex"}
	unroutedShow = &mysql.MySQLError{Number: 1146, SQLState: [5]byte([]byte("42S02")),
		Message: "VT05005: table 'board_article_count' does not exist in keyspace 't3_article'"}
	noSuchTable = &mysql.MySQLError{Number: 1146, SQLState: [5]byte([]byte("42S02")), Message: "Table 'board.nowhere' doesn't exist"}
)

func TestVitessUnrouted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"unknown table", unroutedSelect, true},
		{"no primary vindex", unroutedDML, true},
		{"show vindexes", unroutedShow, true},
		{"wrapped", fmt.Errorf("article migration 001_article.sql on article: %w", unroutedSelect), true},
		{"table MySQL lacks", noSuchTable, false},
		{"vindex defined already", &mysql.MySQLError{Number: 1815, SQLState: [5]byte([]byte("HY000")),
			Message: "vindex hash already defined on table board_article_count"}, false},
		{"text only", errors.New("table schema_migrations not found"), false},
		{"nil", nil, false},
	} {
		if got := vitessUnrouted(tc.err); got != tc.want {
			t.Errorf("%s: vitessUnrouted(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestTransactRetriesUnroutedBehindVitess checks that a table vtgate does not route for a moment is retried, and is a
// 503 when it stays so, behind Vitess only: on a SQLite database marked as behind Vitess, and on the same unmarked.
func TestTransactRetriesUnroutedBehindVitess(t *testing.T) {
	t.Parallel()
	db, err := OpenSQLite(filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, vitess := range []bool{true, false} {
		db.vitess = vitess
		attempts := 0
		err := db.Transact(ctx, func(*sql.Tx) error {
			if attempts++; attempts == 1 {
				return unroutedDML
			}
			return nil
		})
		if vitess && (err != nil || attempts != 2) {
			t.Errorf("behind Vitess, a table unrouted once: %v after %d attempts, want success after 2", err, attempts)
		}
		if !vitess && (!errors.Is(err, unroutedDML) || attempts != 1) {
			t.Errorf("without Vitess: %v after %d attempts, want the error after 1", err, attempts)
		}
		err = db.Transact(ctx, func(*sql.Tx) error { return unroutedSelect })
		if got := fault.KindOf(err) == fault.Unavailable; got != vitess {
			t.Errorf("vitess %v, a table that stays unrouted: %v; unavailable = %v, want %v", vitess, err, got, vitess)
		}
	}
}
