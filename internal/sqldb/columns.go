package sqldb

import (
	"context"
	"strings"
	"time"
)

// AwaitColumns waits, behind Vitess, until vtgate plans statements that name columns of table, and returns at once
// elsewhere. vtgate checks a statement's columns against the schema it tracks, which learns a column that a migration
// has just added (ALTER TABLE ... ADD COLUMN) a moment after the migration ran: until then, every statement naming it
// fails with "column ... not found in table", which the edge would answer with 503. A component that adds columns to
// a table calls it after Migrate, so that it serves only once they can be used. It waits at most as long as Migrate
// waits for a table's VSchema.
func (db *DB) AwaitColumns(ctx context.Context, table string, columns ...string) error {
	if !db.vitess {
		return nil
	}
	query := "SELECT " + strings.Join(columns, ", ") + " FROM " + table + " LIMIT 1"
	for deadline := time.Now().Add(vschemaSettle); ; {
		rows, err := db.read.QueryContext(ctx, query)
		if err == nil {
			return rows.Close()
		}
		if !vitessUnrouted(err) || time.Now().After(deadline) {
			return db.classify(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
