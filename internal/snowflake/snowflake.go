// Package snowflake issues 64-bit, roughly time-ordered unique IDs.
//
// Layout, most significant bit first:
//
//	1 bit   unused sign bit, always 0, so IDs are positive int64s
//	41 bits milliseconds since Epoch (2024-01-01T00:00:00Z), enough until 2093
//	10 bits node id, 0..MaxNode
//	12 bits sequence within the millisecond, 0..MaxSeq
//
// A Generator is monotonic: it waits for the next millisecond when the
// sequence is exhausted and refuses (ErrClockBackwards) rather than issue an
// ID while the clock is behind the last issued one.
//
// Uniqueness across processes requires that no two live generators share a
// node id. Instances lease one in Redis: AcquireLease claims the key
// "<prefix>snowflake::node::<n>" with SET NX PX ttl and a random owner token,
// and Lease.Keep renews it every ttl/3 with a compare-and-extend Lua script.
// Each successful renewal moves the generator's deadline to
// renewalStart + ttl - ttl/3; past the deadline Next returns ErrLeaseExpired.
// The deadline is thus always ttl/3 before the key can expire, so an instance
// that loses contact with Redis stops issuing before another instance could
// take over its node id. Node MaxNode is never leased: it is reserved for
// offline tools such as the bulk seeder, which build IDs with Compose.
package snowflake

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"board/internal/fault"
)

// Epoch is the zero point of the ID time field.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	nodeBits = 10
	seqBits  = 12
	timeBits = 41

	// MaxNode is the largest node id; it is reserved for the bulk seeder.
	MaxNode = 1<<nodeBits - 1
	// MaxSeq is the largest sequence number within one millisecond.
	MaxSeq = 1<<seqBits - 1

	maxMillis = 1<<timeBits - 1
	// maxSkew is how far the clock may be behind before Next gives up at
	// once instead of sleeping it off (e.g. a small NTP step).
	maxSkew = 5 * time.Millisecond
	// pollInterval is the real sleep between clock reads while waiting for
	// the next millisecond after a sequence overflow.
	pollInterval = 50 * time.Microsecond
)

var (
	// ErrClockBackwards means the clock is behind the time of the last issued ID.
	ErrClockBackwards = errors.New("snowflake: clock moved backwards")
	// ErrLeaseExpired means the node lease was not renewed in time, so the
	// node id may already belong to another instance.
	ErrLeaseExpired = errors.New("snowflake: node lease expired")
)

// Unavailable is how a request answers an error of Next: the lease lapsed or the clock moved back, and a retry
// soon is expected to succeed, so it is a 503 ID_UNAVAILABLE rather than a 500.
func Unavailable(err error) error {
	return fault.Unavailablef(err, "ID_UNAVAILABLE", "cannot issue an id right now; try again")
}

// Generator issues IDs for one node id. It is safe for concurrent use.
// Create it with New or NewLeased.
type Generator struct {
	node int64
	now  func() time.Time

	mu       sync.Mutex
	lastMs   int64     // time field of the last issued ID, -1 before the first
	seq      int64     // sequence of the last issued ID
	deadline time.Time // zero: no lease, issue forever
}

// New returns a generator for node (0..MaxNode) that reads the time from now
// (time.Now if nil). It has no deadline; use it directly only when the node
// id is assigned by other means than a lease.
func New(node int64, now func() time.Time) (*Generator, error) {
	if node < 0 || node > MaxNode {
		return nil, fmt.Errorf("snowflake: node %d outside 0..%d", node, MaxNode)
	}
	return newGenerator(node, now), nil
}

func newGenerator(node int64, now func() time.Time) *Generator {
	if now == nil {
		now = time.Now
	}
	return &Generator{node: node, now: now, lastMs: -1}
}

// ExtendUntil sets the time from which Next refuses with ErrLeaseExpired.
// The zero time removes the deadline. The value is set as given, not only
// moved forward: the lease owner decides.
func (g *Generator) ExtendUntil(t time.Time) {
	g.mu.Lock()
	g.deadline = t
	g.mu.Unlock()
}

// Next returns a new ID, greater than every ID this generator issued before.
// It holds the generator's lock while it sleeps, which is fine because no
// other caller could be served in the meantime either.
func (g *Generator) Next() (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	slept := false
	for {
		t := g.now()
		if !g.deadline.IsZero() && !t.Before(g.deadline) {
			return 0, ErrLeaseExpired
		}
		if t.Before(Epoch) {
			return 0, fmt.Errorf("snowflake: clock %v is before the epoch", t)
		}
		ms := t.Sub(Epoch).Milliseconds()
		if ms > maxMillis {
			return 0, fmt.Errorf("snowflake: clock %v is past the end of the id range", t)
		}
		switch {
		case ms < g.lastMs:
			behind := Epoch.Add(time.Duration(g.lastMs) * time.Millisecond).Sub(t)
			if slept || behind > maxSkew {
				return 0, fmt.Errorf("%w by %v", ErrClockBackwards, behind)
			}
			slept = true
			time.Sleep(behind)
		case ms == g.lastMs && g.seq == MaxSeq:
			time.Sleep(pollInterval)
		case ms == g.lastMs:
			g.seq++
			return compose(ms, g.node, g.seq), nil
		default:
			g.lastMs, g.seq = ms, 0
			return compose(ms, g.node, 0), nil
		}
	}
}

// Compose builds an ID from its parts, e.g. for deterministic IDs in a bulk
// seeder (which should use node MaxNode). Preconditions: Epoch <= t <
// Epoch+2^41 ms, 0 <= node <= MaxNode, 0 <= seq <= MaxSeq. t is truncated to
// the millisecond. Each part is masked to its field width, so out-of-range
// input yields a well-formed but meaningless ID instead of corrupting the
// neighbouring fields or the sign bit.
func Compose(t time.Time, node, seq int64) int64 {
	return compose(t.Sub(Epoch).Milliseconds(), node, seq)
}

func compose(ms, node, seq int64) int64 {
	return (ms&maxMillis)<<(nodeBits+seqBits) | (node&MaxNode)<<seqBits | seq&MaxSeq
}

// Timestamp returns the millisecond the ID was issued in, in UTC.
func Timestamp(id int64) time.Time {
	return Epoch.Add(time.Duration(id>>(nodeBits+seqBits)&maxMillis) * time.Millisecond)
}

// nodeOf returns the node id part of id.
func nodeOf(id int64) int64 { return id >> seqBits & MaxNode }

// seqOf returns the sequence part of id.
func seqOf(id int64) int64 { return id & MaxSeq }
