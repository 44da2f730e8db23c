// Package snowflaketest holds the test doubles that stand in for a Snowflake generator and the clock behind it:
// id generators that issue known ids (or fail, as a generator whose clock went backwards), and a clock the test sets
// and moves. Every id carries the millisecond it was made, so a test's ids and times come from here together; the
// clock also drives whatever else takes a now func (token expiry, cache TTLs).
package snowflaketest

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a clock the test sets and moves; safe for concurrent use. Pass its Now where code takes a clock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d (backwards when d < 0).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// IDs issues consecutive ids from a first one; safe for concurrent use.
type IDs struct{ last atomic.Int64 }

// NewIDs returns a generator whose first id is first.
func NewIDs(first int64) *IDs {
	g := &IDs{}
	g.last.Store(first - 1)
	return g
}

// Next returns the next id.
func (g *IDs) Next() (int64, error) { return g.last.Add(1), nil }

// FailingIDs never issues an id, as a Snowflake generator whose clock went backwards.
type FailingIDs struct{}

// Next fails.
func (FailingIDs) Next() (int64, error) { return 0, errors.New("clock moved backwards") }
