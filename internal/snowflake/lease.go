package snowflake

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoFreeNode means every leasable node id (0..MaxNode-1) is taken.
var ErrNoFreeNode = errors.New("snowflake: no free node id")

// minTTL keeps the renewal period (ttl/3) and the PX argument meaningful.
const minTTL = 30 * time.Millisecond

var (
	// renewScript extends the key's TTL only while it still holds our token,
	// so we never extend a key another instance has taken over.
	renewScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)
	// releaseScript deletes the key only while it still holds our token.
	releaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)
)

// Lease is a claim on one node id in Redis.
type Lease struct {
	rdb      redis.UniversalClient
	key      string
	token    string
	node     int64
	ttl      time.Duration
	now      func() time.Time
	acquired time.Time // clock reading just before the successful SET NX
}

// AcquireLease claims a free node id in 0..MaxNode-1 (MaxNode is reserved for
// the bulk seeder) by SET key token NX PX ttl, where key is
// keyPrefix + "snowflake::node::" + node and token is random. Probing starts at
// a random node so that instances starting together rarely collide. now is
// the clock used for deadlines (time.Now if nil); pass the generator's clock.
// It returns ErrNoFreeNode if all nodes are taken.
func AcquireLease(ctx context.Context, rdb redis.UniversalClient, keyPrefix string, ttl time.Duration, now func() time.Time) (*Lease, error) {
	if ttl < minTTL {
		return nil, fmt.Errorf("snowflake: lease ttl %v shorter than %v", ttl, minTTL)
	}
	if now == nil {
		now = time.Now
	}
	l := &Lease{rdb: rdb, token: rand.Text(), ttl: ttl, now: now}
	start := mathrand.Int64N(MaxNode)
	for i := range int64(MaxNode) {
		node := (start + i) % MaxNode
		key := keyPrefix + "snowflake::node::" + strconv.FormatInt(node, 10)
		t := now()
		ok, err := rdb.SetNX(ctx, key, l.token, ttl).Result()
		if err != nil {
			return nil, fmt.Errorf("snowflake: lease %s: %w", key, err)
		}
		if ok {
			l.key, l.node, l.acquired = key, node, t
			return l, nil
		}
	}
	return nil, ErrNoFreeNode
}

// NewLeased acquires a lease and returns a generator for its node, valid for
// the lease's first period. The caller must run l.Keep(ctx, g, logger) to
// keep the generator issuing, and call l.Release after Keep returned.
func NewLeased(ctx context.Context, rdb redis.UniversalClient, keyPrefix string, ttl time.Duration, now func() time.Time) (*Generator, *Lease, error) {
	l, err := AcquireLease(ctx, rdb, keyPrefix, ttl, now)
	if err != nil {
		return nil, nil, err
	}
	g := newGenerator(l.node, l.now)
	g.ExtendUntil(l.validUntil(l.acquired))
	return g, l, nil
}

// Node returns the leased node id.
func (l *Lease) Node() int64 { return l.node }

// validUntil is the generator deadline for a lease (re)set at start. It stops
// issuing ttl/3 before the key can expire, as a margin for Redis latency and
// clock differences between instances.
func (l *Lease) validUntil(start time.Time) time.Time {
	return start.Add(l.ttl - l.ttl/3)
}

// Keep renews the lease every ttl/3 until ctx is done, moving g's deadline
// forward after each renewal. If the key is gone or holds another token, it
// tries once to take it back with SET NX; if that fails the node belongs to
// someone else, so Keep logs and returns, and g refuses with ErrLeaseExpired
// once its deadline passes. Redis errors are logged and retried at the next
// tick: the deadline keeps g safe meanwhile. A nil logger means slog.Default().
func (l *Lease) Keep(ctx context.Context, g *Generator, logger *slog.Logger) {
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("key", l.key, "node", l.node)
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := l.now()
		ok, err := renewScript.Run(ctx, l.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Bool()
		if err == nil && !ok {
			ok, err = l.rdb.SetNX(ctx, l.key, l.token, l.ttl).Result()
			if err == nil && !ok {
				logger.Error("snowflake: node lease taken by another owner; generator will stop issuing")
				return
			}
			if ok {
				logger.Warn("snowflake: node lease had expired; re-acquired it")
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Warn("snowflake: renewing node lease failed; will retry", "err", err)
			continue
		}
		g.ExtendUntil(l.validUntil(start))
	}
}

// Release deletes the key if it still holds our token; a key someone else now
// owns is left alone. Call it once, after Keep returned and the generator is
// no longer used.
func (l *Lease) Release(ctx context.Context) error {
	if err := releaseScript.Run(ctx, l.rdb, []string{l.key}, l.token).Err(); err != nil {
		return fmt.Errorf("snowflake: release %s: %w", l.key, err)
	}
	return nil
}
