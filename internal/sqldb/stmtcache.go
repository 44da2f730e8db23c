package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
)

// maxCachedStmts bounds a pool's statement cache. The queries are fixed strings in the code, a few dozen per
// service; the bound holds whatever else comes, and a query past it runs unprepared, as it would without the cache.
const maxCachedStmts = 256

// stmtCache keeps a pool's statements prepared, one per query text, on SQLite: database/sql would otherwise compile
// a query again (sqlite3_prepare) on every call with arguments, which costs more than running a short one. A
// *sql.Stmt of a pool prepares itself once on each connection it runs on and keeps it. MySQL needs none: its DSN
// interpolates arguments, one round trip per query.
type stmtCache struct {
	pool   *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

func newStmtCache(pool *sql.DB) *stmtCache {
	return &stmtCache{pool: pool, stmts: map[string]*sql.Stmt{}}
}

// stmt returns query's statement, preparing it on first use, or nil when query is not cached: the cache is full or
// closed, or query has an IN list of two or more arguments, whose text varies with the list's length (see In). A nil
// cache (MySQL) caches nothing.
func (c *stmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	s, ok := c.stmts[query]
	full := c.closed || len(c.stmts) >= maxCachedStmts
	c.mu.Unlock()
	if ok || full || strings.Contains(query, " IN (?, ?") {
		return s, nil
	}
	// Prepared outside the lock: preparing waits for a connection, which a transaction may hold on the writer.
	s, err := c.pool.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had, ok := c.stmts[query]; ok || c.closed || len(c.stmts) >= maxCachedStmts {
		s.Close() // another call cached the query first, or the cache filled or closed meanwhile
		return had, nil
	}
	c.stmts[query] = s
	return s, nil
}

// close closes the cached statements; later calls run unprepared, and fail on the closed pool.
func (c *stmtCache) close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var err error
	for query, s := range c.stmts {
		err = errors.Join(err, s.Close())
		delete(c.stmts, query)
	}
	return err
}
