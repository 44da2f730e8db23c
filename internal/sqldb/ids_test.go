package sqldb_test

import (
	"context"
	"slices"
	"testing"

	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// IDs and In round-trip a list of ids through a query on both engines.
func TestIDsAndIn(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, func(context.Context, *sqldb.DB) error { return nil }, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, "CREATE TABLE ids_test (id BIGINT NOT NULL PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO ids_test (id) VALUES (1), (2), (9223372036854775807)"); err != nil {
			t.Fatal(err)
		}
		in, args := sqldb.In("id", []int64{2, 9223372036854775807, 5})
		if in != "id IN (?, ?, ?)" {
			t.Errorf("In = %q", in)
		}
		got, err := sqldb.IDs(db.QueryContext(ctx, "SELECT id FROM ids_test WHERE "+in+" ORDER BY id", args...))
		if err != nil || !slices.Equal(got, []int64{2, 9223372036854775807}) {
			t.Errorf("IDs = %v, %v", got, err)
		}
		if _, err := sqldb.IDs(db.QueryContext(ctx, "SELECT id FROM no_such_table")); err == nil {
			t.Error("IDs of a failed query returned no error")
		}
	})
}
