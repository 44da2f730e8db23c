package sqldb

import "database/sql"

// What the external tests of this package look into.
var (
	Retryable      = retryable
	MaxAttempts    = maxAttempts
	Classify       = classify
	MaxCachedStmts = maxCachedStmts
)

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
