// Package logicalttl is a read-through Redis cache for values that may be a little out of date, such as view counts:
// however many requests want a value, its origin is called about once per refresh.
//
// Every entry has two expiries. The logical one (Config.LogicalTTL, stored inside the entry) says when the value
// should be refreshed; the physical one (Config.PhysicalTTL, the key's own TTL) says when Redis drops it, and it is
// the longer of the two. In between, the value is stale but still served: the one caller that takes the entry's
// lock (SET NX PX LockTTL with a random token) calls the origin and stores what it got, and every other caller
// returns the stale value at once instead of waiting. This is request collapsing. The refresh happens inside the
// winning caller's Get, not in a background goroutine, so that caller returns the fresh value.
//
// When nothing is stored (the first read, or after the physical expiry) there is nothing to serve meanwhile, so
// callers wait instead. In one process they share one fill per key (singleflight), which goes on, within its own
// deadlines, if the caller that started it leaves. Across processes the lock holder loads while the others poll
// for its value for up to LockTTL; only if none appears do they load it themselves.
//
// Failures degrade rather than spread. An origin error while a stale value exists serves the stale value; with
// nothing stored the origin's error is returned. When Redis cannot serve (redisclient.Unavailable classifies it
// Unavailable), Get calls the origin directly, once per key at a time in a process; any other Redis error, such as a
// key of the wrong type, is a bug and is returned.
package logicalttl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"board/internal/fault"
	"board/internal/redisclient"
	"board/internal/redislock"
)

// Defaults for the zero fields of Config (SPEC §3.6).
const (
	DefaultLogicalTTL  = time.Second
	DefaultPhysicalTTL = 6 * time.Second
	DefaultLockTTL     = 3 * time.Second
)

const (
	// waitPoll is how often a fill waiting on another process's lock holder looks for the value it stores.
	waitPoll = 20 * time.Millisecond
	// cleanupTimeout bounds storing a loaded value and releasing the lock. Both run even after the caller's
	// context ended, so that a finished load is not wasted and other callers need not wait for the lock to expire.
	cleanupTimeout = time.Second
)

// Config tunes a Cache; zero fields take the defaults.
type Config struct {
	LogicalTTL  time.Duration    // after it, one caller refreshes the value while the others are served the stale one
	PhysicalTTL time.Duration    // the key's TTL: after it, the value is gone; longer than LogicalTTL
	LockTTL     time.Duration    // how long a refresher holds the entry's lock, and the budget of one origin call
	Now         func() time.Time // the clock of the logical expiry; nil means time.Now (waits use real time)
	Logger      *slog.Logger     // reports failures Get hides (stale served, a failed store); nil: slog.Default()
}

// Cache caches values of type V, which must survive a JSON round trip, under keys of one prefix. Safe for
// concurrent use. A value handed to several callers by one shared fill is the same value: treat it as read-only.
type Cache[V any] struct {
	rdb     redis.UniversalClient
	prefix  string
	cfg     Config
	flights singleflight.Group
	soon    sync.Map // keys whose RefreshSoon runs in this process
}

// New returns a cache storing entry key at keyPrefix+"{"+key+"}" and its lock at the same name plus "::lock", so
// the two share a Redis Cluster hash tag. It panics if cfg.LogicalTTL is not shorter than cfg.PhysicalTTL: there
// would be no window in which a stale value can be served.
func New[V any](rdb redis.UniversalClient, keyPrefix string, cfg Config) *Cache[V] {
	if cfg.LogicalTTL <= 0 {
		cfg.LogicalTTL = DefaultLogicalTTL
	}
	if cfg.PhysicalTTL <= 0 {
		cfg.PhysicalTTL = DefaultPhysicalTTL
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = DefaultLockTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogicalTTL >= cfg.PhysicalTTL {
		panic(fmt.Sprintf("logicalttl: LogicalTTL %v must be shorter than PhysicalTTL %v", cfg.LogicalTTL, cfg.PhysicalTTL))
	}
	return &Cache[V]{rdb: rdb, prefix: keyPrefix, cfg: cfg}
}

// entry is what a key holds, as JSON.
type entry[V any] struct {
	Value  V     `json:"v"`
	Expiry int64 `json:"exp"` // logical expiry, Unix milliseconds
}

// keys names the Redis keys of one cache entry.
type keys struct{ value, lock string }

func (c *Cache[V]) keysFor(key string) keys {
	value := c.EntryKey(key)
	return keys{value: value, lock: value + "::lock"}
}

// Get returns the value for key, calling load (the origin) only when the cached value is logically expired and
// this caller won the lock, or when nothing is cached; see the package doc. A load runs for at most LockTTL. The
// context bounds every Redis call and the caller's wait. A load shared with other callers runs on a context that
// keeps the values of the first caller's but not its cancellation, so their wait is not cut short by it.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(ctx context.Context) (V, error)) (V, error) {
	k := c.keysFor(key)
	e, found, err := c.read(ctx, k)
	var v V
	switch {
	case err != nil && ctx.Err() != nil: // no time left to try the origin
		err = redisclient.Unavailable(err, cacheDownCode, cacheDownMessage)
	case err != nil:
		redisErr := err
		v, err = c.shared(ctx, "origin:"+key, func(ctx context.Context) (V, error) { return c.withoutRedis(ctx, redisErr, load) })
	case !found:
		v, err = c.shared(ctx, "fill:"+key, func(ctx context.Context) (V, error) { return c.fill(ctx, k, load) })
	case c.fresh(e):
		return e.Value, nil
	default:
		return c.refresh(ctx, k, e, load), nil
	}
	if err != nil {
		var zero V
		return zero, fmt.Errorf("logicalttl: get %s: %w", key, err)
	}
	return v, nil
}

// EntryKey is the Redis key that holds key's entry, for a caller that reads it in a round trip of its own (a
// pipeline with other keys, a client-side cache) and hands what it read to Cached.
func (c *Cache[V]) EntryKey(key string) string { return c.prefix + "{" + key + "}" }

// Cached decodes an entry as EntryKey's key holds it: its value and its logical expiry (Unix ms, by the cache's
// clock), which Fresh judges. ok is false when it does not decode: the caller then goes through Get, which fills it.
// A caller may serve a logically expired value while RefreshSoon refreshes it, as Get serves it to all but the one
// caller that refreshes.
func (c *Cache[V]) Cached(raw string) (v V, expiry int64, ok bool) {
	var e entry[V]
	if decode(raw, &e) != nil {
		return v, 0, false
	}
	return e.Value, e.Expiry, true
}

// Fresh reports whether a value of the logical expiry Cached returned is fresh now: a caller that kept what it
// decoded asks again each time it serves it.
func (c *Cache[V]) Fresh(expiry int64) bool { return c.fresh(entry[V]{Expiry: expiry}) }

// RefreshSoon refreshes key's entry in the background, as a Get that finds it logically expired does, for a caller
// that serves the stale value meanwhile rather than wait for a round trip. One runs per key in a process at a time.
func (c *Cache[V]) RefreshSoon(key string, load func(ctx context.Context) (V, error)) {
	if _, running := c.soon.LoadOrStore(key, struct{}{}); running {
		return
	}
	go func() {
		defer c.soon.Delete(key)
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.LockTTL+cleanupTimeout)
		defer cancel()
		_, _ = c.Get(ctx, key, load) // a failed refresh leaves the stale value, which the next one retries
	}()
}

// decode reads an entry as store wrote it. An integer value, such as the counts read with every article, is read
// without reflection.
func decode[V any](raw string, e *entry[V]) error {
	if n, isInt := any(&e.Value).(*int64); isInt {
		if v, exp, ok := parseIntEntry(raw); ok {
			*n, e.Expiry = v, exp
			return nil
		}
	}
	return json.Unmarshal([]byte(raw), e)
}

// parseIntEntry reads {"v":<int>,"exp":<int>}, an entry of an int64 as encoding/json writes it.
func parseIntEntry(raw string) (v, exp int64, ok bool) {
	rest, ok1 := strings.CutPrefix(raw, `{"v":`)
	value, rest, ok2 := strings.Cut(rest, `,"exp":`)
	expiry, ok3 := strings.CutSuffix(rest, "}")
	v, err1 := strconv.ParseInt(value, 10, 64)
	exp, err2 := strconv.ParseInt(expiry, 10, 64)
	return v, exp, ok1 && ok2 && ok3 && err1 == nil && err2 == nil
}

// refresh serves a logically expired entry: the caller that takes the lock loads and returns a fresh value, every
// other caller returns the stale one at once, as does the refresher when its load fails.
func (c *Cache[V]) refresh(ctx context.Context, k keys, stale entry[V], load func(context.Context) (V, error)) V {
	held, err := c.lock(ctx, k)
	if err != nil || held == nil {
		return stale.Value
	}
	v, _ := c.loadLocked(ctx, k, held, &stale, load) // with a stale value to fall back on, it cannot fail
	return v
}

// fill serves a missing entry. It runs once per key at a time in a process (see shared), so callers in one
// process cost one lock attempt and at most one load. If another process holds the lock, fill polls for the value
// it stores; after LockTTL without one, the holder is slow or gone, and fill loads without the lock.
func (c *Cache[V]) fill(ctx context.Context, k keys, load func(context.Context) (V, error)) (V, error) {
	waitCtx, stopWaiting := context.WithTimeout(ctx, c.cfg.LockTTL)
	defer stopWaiting()
	for {
		held, err := c.lock(waitCtx, k)
		if err == nil && held != nil {
			return c.loadLocked(ctx, k, held, nil, load)
		}
		if err == nil {
			var e entry[V]
			var found bool
			if e, found, err = c.poll(waitCtx, k); found {
				return e.Value, nil
			}
		}
		if waitCtx.Err() != nil {
			break
		}
		if err != nil {
			return c.withoutRedis(ctx, err, load)
		}
	}
	// LockTTL passed and no value appeared: the holder is slow or gone, or holders keep failing.
	v, err := c.loadBounded(ctx, load)
	if err != nil {
		return v, err
	}
	c.store(ctx, k, v)
	return v, nil
}

// poll waits one poll interval and reads the entry.
func (c *Cache[V]) poll(ctx context.Context, k keys) (entry[V], bool, error) {
	t := time.NewTimer(waitPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return entry[V]{}, false, ctx.Err()
	case <-t.C:
	}
	return c.read(ctx, k)
}

// loadLocked is the lock holder's work, done within the lock's lifetime: read the entry again, since another
// caller may have stored a fresh value between this caller's read and its lock, and otherwise load and store. A
// failed load returns the stale value when there is one, and the load's error otherwise. The lock is released in
// any case, by its owner only.
func (c *Cache[V]) loadLocked(ctx context.Context, k keys, held *redislock.Lock, stale *entry[V], load func(context.Context) (V, error)) (V, error) {
	defer c.unlock(ctx, k, held)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LockTTL)
	defer cancel()
	if e, found, err := c.read(ctx, k); err == nil && found {
		if c.fresh(e) {
			return e.Value, nil
		}
		stale = &e
	}
	v, err := load(ctx)
	if err != nil {
		if stale != nil {
			c.cfg.Logger.WarnContext(ctx, "logicalttl: refresh failed; serving the stale value", "key", k.value, "err", err)
			return stale.Value, nil
		}
		var zero V
		return zero, fmt.Errorf("load: %w", err)
	}
	c.store(ctx, k, v)
	return v, nil
}

// Code and message of the fault.Unavailable error for a Redis that cannot serve.
const (
	cacheDownCode    = "CACHE_UNAVAILABLE"
	cacheDownMessage = "the cache cannot be reached"
)

// withoutRedis answers from the origin when Redis failed with redisErr because it cannot serve. A Redis that
// rejected a command (a wrong type, a script error) is a bug, returned as it is. If the origin fails too, the error
// carries the origin's error first, then Redis's as fault.Unavailable, so fault.KindOf reports the origin's kind
// when it has one and Unavailable otherwise.
func (c *Cache[V]) withoutRedis(ctx context.Context, redisErr error, load func(context.Context) (V, error)) (V, error) {
	cacheDown := redisclient.Unavailable(redisErr, cacheDownCode, cacheDownMessage)
	if fault.KindOf(cacheDown) != fault.Unavailable {
		var zero V
		return zero, cacheDown
	}
	v, err := c.loadBounded(ctx, load)
	if err != nil {
		return v, errors.Join(err, cacheDown)
	}
	return v, nil
}

// loadBounded calls the origin for at most LockTTL: a load that outlives the lock would overlap the next holder's.
func (c *Cache[V]) loadBounded(ctx context.Context, load func(context.Context) (V, error)) (V, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.LockTTL)
	defer cancel()
	v, err := load(ctx)
	if err != nil {
		var zero V
		return zero, fmt.Errorf("load: %w", err)
	}
	return v, nil
}

// shared runs work once per flight name at a time in this process, however many callers ask meanwhile, and each
// caller waits for its result until its own ctx ends. The work runs on a context detached from the first caller's
// cancellation, so that caller leaving does not fail the others; every step of the work carries its own deadline
// (LockTTL or cleanupTimeout), so it still ends.
func (c *Cache[V]) shared(ctx context.Context, flight string, work func(context.Context) (V, error)) (V, error) {
	results := c.flights.DoChan(flight, func() (any, error) {
		return work(context.WithoutCancel(ctx))
	})
	select {
	case r := <-results:
		v, _ := r.Val.(V) // r.Val is nil, not a V, when V is an interface type and the value is nil
		return v, r.Err
	case <-ctx.Done():
		var zero V
		return zero, context.Cause(ctx)
	}
}

// fresh reports whether e is before its logical expiry.
func (c *Cache[V]) fresh(e entry[V]) bool {
	return c.cfg.Now().UnixMilli() < e.Expiry
}

// read returns the stored entry. A value that does not decode (left by another version of V) counts as missing;
// the next store overwrites it.
func (c *Cache[V]) read(ctx context.Context, k keys) (entry[V], bool, error) {
	raw, err := c.rdb.Get(ctx, k.value).Bytes()
	if errors.Is(err, redis.Nil) {
		return entry[V]{}, false, nil
	}
	if err != nil {
		return entry[V]{}, false, fmt.Errorf("read %s: %w", k.value, err)
	}
	var e entry[V]
	if err := decode(string(raw), &e); err != nil {
		return entry[V]{}, false, nil
	}
	return e, true, nil
}

// store writes v with a logical expiry of now+LogicalTTL and a physical one of PhysicalTTL. It is best effort: the
// caller returns v either way, and a value that was not stored is loaded again by the next Get.
func (c *Cache[V]) store(ctx context.Context, k keys, v V) {
	raw, err := json.Marshal(entry[V]{Value: v, Expiry: c.cfg.Now().Add(c.cfg.LogicalTTL).UnixMilli()})
	if err != nil {
		c.cfg.Logger.ErrorContext(ctx, "logicalttl: cannot encode a value; it is never cached", "key", k.value, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.rdb.Set(ctx, k.value, raw, c.cfg.PhysicalTTL).Err(); err != nil {
		c.cfg.Logger.WarnContext(ctx, "logicalttl: cannot store a loaded value", "key", k.value, "err", err)
	}
}

// lock tries to take the entry's lock for LockTTL; nil when another caller holds it.
func (c *Cache[V]) lock(ctx context.Context, k keys) (*redislock.Lock, error) {
	return redislock.TryAcquire(ctx, c.rdb, k.lock, c.cfg.LockTTL)
}

// unlock releases the lock, if this caller still holds it (a lock that expired during a slow load and was taken by
// another caller stays theirs). If that fails, the lock expires after LockTTL.
func (c *Cache[V]) unlock(ctx context.Context, k keys, held *redislock.Lock) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := held.Release(ctx); err != nil {
		c.cfg.Logger.WarnContext(ctx, "logicalttl: cannot release a lock; it expires by itself", "lock", k.lock, "err", err)
	}
}
