package miniredis

import (
	"math"
	"time"
)

// expiry is a deadline of a key, or of a hash field, on the TTL clock. There
// is one per TTL, so the deadline is kept in Unix nanoseconds: smaller than a
// time.Time.
type expiry struct {
	at    int64
	key   string
	field string // only in fieldExpiries
}

func newExpiry(at time.Time, key, field string) expiry {
	return expiry{at: unixNano(at), key: key, field: field}
}

var (
	maxUnixNano = time.Unix(0, math.MaxInt64)
	minUnixNano = time.Unix(0, math.MinInt64)
)

// unixNano is t.UnixNano(), bounded: deadlines past the year 2262 never
// come, and those before 1678 are long past.
func unixNano(t time.Time) int64 {
	switch {
	case t.After(maxUnixNano):
		return math.MaxInt64
	case t.Before(minUnixNano):
		return math.MinInt64
	}
	return t.UnixNano()
}

// expiryQueue holds deadlines soonest first, so that finding what is due
// costs nothing per key that is not. Entries are not removed when a deadline
// changes or goes away: an entry that no longer matches its key's (or field's)
// deadline is stale, and skipped when it comes up. To keep the queue
// proportional to the deadlines in use, it is rebuilt from the live ones once
// the stale entries outnumber them.
type expiryQueue struct {
	entries []expiry // a binary min-heap on at
}

// add queues e. live is the number of deadlines in use, listLive lists them.
func (q *expiryQueue) add(e expiry, live int, listLive func() []expiry) {
	q.entries = append(q.entries, e)
	q.up(len(q.entries) - 1)
	if len(q.entries) > 2*live+64 {
		q.entries = listLive()
		for i := len(q.entries)/2 - 1; i >= 0; i-- {
			q.down(i)
		}
	}
}

// popDue removes and returns the soonest entry if it is at or before now.
func (q *expiryQueue) popDue(now time.Time) (expiry, bool) {
	if len(q.entries) == 0 || q.entries[0].at > unixNano(now) {
		return expiry{}, false
	}
	e := q.entries[0]
	last := len(q.entries) - 1
	q.entries[0] = q.entries[last]
	q.entries[last] = expiry{} // let the key be collected
	q.entries = q.entries[:last]
	q.down(0)
	return e, true
}

func (q *expiryQueue) up(i int) {
	h := q.entries
	for i > 0 {
		parent := (i - 1) / 2
		if h[i].at >= h[parent].at {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (q *expiryQueue) down(i int) {
	h := q.entries
	for {
		least, left, right := i, 2*i+1, 2*i+2
		if left < len(h) && h[left].at < h[least].at {
			least = left
		}
		if right < len(h) && h[right].at < h[least].at {
			least = right
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}
