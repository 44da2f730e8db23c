package sqldb

import (
	"context"
	"database/sql"
)

// What the external tests of this package look into.
var (
	Retryable      = retryable
	MaxAttempts    = maxAttempts
	Classify       = classify
	MaxCachedStmts = maxCachedStmts
	RefreshVindex  = refreshVindex
)

// RefreshVSchema runs refreshVSchema on db's keyspace under the VSchema lock, having first created the vindex it
// creates when leftover says so, as a refresh cut short leaves it.
func RefreshVSchema(ctx context.Context, db *DB, leftover bool) error {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := takeLock(ctx, conn, vschemaLock, "the VSchema lock"); err != nil {
		return err
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", vschemaLock) }()
	if leftover {
		if _, err := conn.ExecContext(ctx, "ALTER VSCHEMA CREATE VINDEX "+QuoteIdent(db.Name)+"."+QuoteIdent(refreshVindex)+" USING hash"); err != nil {
			return err
		}
	}
	return refreshVSchema(ctx, conn, db.Name)
}

// CachedStmts returns the statements db keeps prepared for its reads and for its writes, by query text.
func CachedStmts(db *DB) (read, write map[string]*sql.Stmt) {
	return db.readStmts.snapshot(), db.writeStmts.snapshot()
}

func (c *stmtCache) snapshot() map[string]*sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]*sql.Stmt, len(c.stmts))
	for query, s := range c.stmts {
		m[query] = s
	}
	return m
}
