package logicalttl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"board/internal/fault"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake/snowflaketest"
)

var (
	start     = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	discard   = slog.New(slog.DiscardHandler)
	errOrigin = errors.New("view service down")
)

// origin is a load function that counts its calls; the nth call returns 10*n unless fail is set.
type origin struct {
	calls atomic.Int64
	fail  error
}

func (o *origin) load(context.Context) (int64, error) {
	n := o.calls.Add(1)
	if o.fail != nil {
		return 0, o.fail
	}
	return 10 * n, nil
}

func newCache(b redisclienttest.Backend, clock *snowflaketest.Clock, cfg Config) *Cache[int64] {
	cfg.Now, cfg.Logger = clock.Now, discard
	return New[int64](b.Client, b.Prefix, cfg)
}

// stored returns the entry Redis holds for key.
func stored(t *testing.T, c *Cache[int64], key string) entry[int64] {
	t.Helper()
	raw, err := c.rdb.Get(t.Context(), c.keysFor(key).value).Bytes()
	if err != nil {
		t.Fatalf("GET entry %s: %v", key, err)
	}
	var e entry[int64]
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("entry %s = %s: %v", key, raw, err)
	}
	return e
}

func wantNoLock(t *testing.T, c *Cache[int64], key string) {
	t.Helper()
	if n, err := c.rdb.Exists(t.Context(), c.keysFor(key).lock).Result(); err != nil || n != 0 {
		t.Errorf("lock of %s: exists=%d err=%v, want released", key, n, err)
	}
}

// getAll runs n concurrent Gets of key and returns how many returned each value; any error fails the test.
func getAll(t *testing.T, c *Cache[int64], key string, n int, load func(context.Context) (int64, error)) map[int64]int {
	t.Helper()
	var mu sync.Mutex
	got := map[int64]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			v, err := c.Get(t.Context(), key, load)
			if err != nil {
				t.Errorf("Get: %v", err)
			}
			mu.Lock()
			got[v]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func TestFreshHitAndPhysicalExpiry(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		clock := snowflaketest.NewClock(start)
		c := newCache(b, clock, Config{})
		var o origin
		for i, want := range []int64{10, 10} {
			if got, err := c.Get(t.Context(), "7", o.load); err != nil || got != want {
				t.Fatalf("Get #%d = %d, %v; want %d", i+1, got, err, want)
			}
		}
		if n := o.calls.Load(); n != 1 {
			t.Errorf("origin calls = %d, want 1: the second Get is a fresh hit", n)
		}
		if diff := cmp.Diff(entry[int64]{Value: 10, Expiry: start.Add(DefaultLogicalTTL).UnixMilli()}, stored(t, c, "7")); diff != "" {
			t.Errorf("stored entry (-want +got):\n%s", diff)
		}
		wantNoLock(t, c, "7")

		valueKey := c.keysFor("7").value
		pttl, err := b.Client.PTTL(t.Context(), valueKey).Result()
		if err != nil || pttl <= 0 || pttl > DefaultPhysicalTTL {
			t.Fatalf("PTTL %s = %v, %v; want in (0, %v]", valueKey, pttl, err, DefaultPhysicalTTL)
		}
		if b.Mini != nil {
			b.Mini.FastForward(DefaultPhysicalTTL)
		} else { // a real Redis cannot be fast-forwarded; the PTTL above says when it drops the key
			b.Client.Del(t.Context(), valueKey)
		}
		if got, err := c.Get(t.Context(), "7", o.load); err != nil || got != 20 {
			t.Errorf("Get after the physical expiry = %d, %v; want 20 from a new load", got, err)
		}
	})
}

// TestLogicalExpiryRefreshesOnce holds the refresher's origin call open until every other caller has returned:
// they are served the stale value without waiting, and only one of them calls the origin.
func TestLogicalExpiryRefreshesOnce(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		clock := snowflaketest.NewClock(start)
		c := newCache(b, clock, Config{})
		var o origin
		if _, err := c.Get(t.Context(), "7", o.load); err != nil {
			t.Fatal(err)
		}
		clock.Add(DefaultLogicalTTL)

		const callers = 100
		proceed := make(chan struct{})
		blockedLoad := func(ctx context.Context) (int64, error) {
			<-proceed
			return o.load(ctx)
		}
		results := make(chan int64, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				v, err := c.Get(t.Context(), "7", blockedLoad)
				if err != nil {
					t.Errorf("Get: %v", err)
				}
				results <- v
			})
		}
		for range callers - 1 {
			if v := <-results; v != 10 {
				t.Errorf("a caller during the refresh got %d, want the stale 10", v)
			}
		}
		close(proceed)
		wg.Wait()
		if v := <-results; v != 20 {
			t.Errorf("the refresher got %d, want the fresh 20", v)
		}
		if n := o.calls.Load(); n != 2 {
			t.Errorf("origin calls = %d, want 2 (the first fill and one refresh)", n)
		}
		wantNoLock(t, c, "7")
		if got, err := c.Get(t.Context(), "7", o.load); err != nil || got != 20 || o.calls.Load() != 2 {
			t.Errorf("Get after the refresh = %d, %v (origin calls %d); want the fresh 20 without a call", got, err, o.calls.Load())
		}
	})
}

func TestConcurrentMissesCollapse(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		t.Run("one process", func(t *testing.T) {
			c := newCache(b, snowflaketest.NewClock(start), Config{})
			var o origin
			got := getAll(t, c, "one", 1000, o.load)
			if diff := cmp.Diff(map[int64]int{10: 1000}, got); diff != "" {
				t.Errorf("values returned (-want +got):\n%s", diff)
			}
			if n := o.calls.Load(); n != 1 {
				t.Errorf("origin calls = %d, want 1", n)
			}
		})
		t.Run("two processes", func(t *testing.T) {
			// A long LockTTL keeps a slow machine from making a waiter give up on the holder.
			clock := snowflaketest.NewClock(start)
			caches := []*Cache[int64]{newCache(b, clock, Config{LockTTL: time.Minute}), newCache(b, clock, Config{LockTTL: time.Minute})}
			var o origin
			var mu sync.Mutex
			got := map[int64]int{}
			var wg sync.WaitGroup
			for _, c := range caches {
				wg.Go(func() {
					n := getAll(t, c, "two", 200, o.load)
					mu.Lock()
					defer mu.Unlock()
					for v, count := range n {
						got[v] += count
					}
				})
			}
			wg.Wait()
			if diff := cmp.Diff(map[int64]int{10: 400}, got); diff != "" {
				t.Errorf("values returned (-want +got):\n%s", diff)
			}
			if n := o.calls.Load(); n != 1 {
				t.Errorf("origin calls = %d, want 1 across both processes", n)
			}
			wantNoLock(t, caches[0], "two")
		})
	})
}

// lockRefusals signals on refused when a lock attempt (SET NX) finds the lock taken.
type lockRefusals struct{ refused chan struct{} }

func (h lockRefusals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h lockRefusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if setNX, ok := cmd.(*redis.BoolCmd); ok && cmd.Name() == "set" && err == nil && !setNX.Val() {
			select {
			case h.refused <- struct{}{}:
			default:
			}
		}
		return err
	}
}

func (h lockRefusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFillWaitsForLockHolder plays another process that holds the lock of a missing entry.
func TestFillWaitsForLockHolder(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		t.Run("holder stores a value", func(t *testing.T) {
			refusals := lockRefusals{refused: make(chan struct{}, 1)}
			b.Client.AddHook(refusals)
			clock := snowflaketest.NewClock(start)
			c := newCache(b, clock, Config{LockTTL: time.Minute})
			holder := newCache(b, clock, Config{})
			k := c.keysFor("held")
			if err := b.Client.Set(t.Context(), k.lock, "holder-token", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			var o origin
			done := make(chan struct{})
			var got int64
			var err error
			go func() {
				defer close(done)
				got, err = c.Get(t.Context(), "held", o.load)
			}()
			<-refusals.refused // the Get found nothing stored and the lock taken: from here it must wait
			holder.store(t.Context(), k, 42)
			<-done
			if err != nil || got != 42 || o.calls.Load() != 0 {
				t.Errorf("Get = %d, %v (origin calls %d); want the holder's 42 without a call", got, err, o.calls.Load())
			}
		})
		t.Run("holder never stores", func(t *testing.T) {
			c := newCache(b, snowflaketest.NewClock(start), Config{LockTTL: 50 * time.Millisecond})
			k := c.keysFor("stuck")
			if err := b.Client.Set(t.Context(), k.lock, "holder-token", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			var o origin
			if got, err := c.Get(t.Context(), "stuck", o.load); err != nil || got != 10 || o.calls.Load() != 1 {
				t.Errorf("Get = %d, %v (origin calls %d); want 10 from its own load after LockTTL", got, err, o.calls.Load())
			}
			if token, err := b.Client.Get(t.Context(), k.lock).Result(); err != nil || token != "holder-token" {
				t.Errorf("lock = %q, %v; want the holder's lock untouched", token, err)
			}
		})
	})
}

// TestLockBelongsToItsOwner lets the lock expire while its holder loads and another caller take it: the holder's
// release must leave the new owner's lock alone.
func TestLockBelongsToItsOwner(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		c := newCache(b, snowflaketest.NewClock(start), Config{})
		lockKey := c.keysFor("7").lock
		load := func(ctx context.Context) (int64, error) {
			token, err := b.Client.Get(ctx, lockKey).Result()
			if err != nil || token == "" {
				t.Errorf("lock while loading = %q, %v; want a token", token, err)
			}
			pttl, err := b.Client.PTTL(ctx, lockKey).Result()
			if err != nil || pttl <= 0 || pttl > DefaultLockTTL {
				t.Errorf("lock PTTL while loading = %v, %v; want in (0, %v]", pttl, err, DefaultLockTTL)
			}
			if b.Mini != nil {
				b.Mini.FastForward(DefaultLockTTL)
				if b.Mini.Exists(lockKey) {
					t.Errorf("lock still held after LockTTL")
				}
			} else { // the PTTL above says when a real Redis drops it
				b.Client.Del(ctx, lockKey)
			}
			if err := b.Client.Set(ctx, lockKey, "next-owner", time.Minute).Err(); err != nil {
				t.Error(err)
			}
			return 10, nil
		}
		if got, err := c.Get(t.Context(), "7", load); err != nil || got != 10 {
			t.Fatalf("Get = %d, %v; want 10", got, err)
		}
		if token, err := b.Client.Get(t.Context(), lockKey).Result(); err != nil || token != "next-owner" {
			t.Errorf("lock after the first holder released it = %q, %v; want the next owner's", token, err)
		}
	})
}

func TestOriginDown(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		t.Run("stale value served", func(t *testing.T) {
			clock := snowflaketest.NewClock(start)
			c := newCache(b, clock, Config{})
			var o origin
			if _, err := c.Get(t.Context(), "7", o.load); err != nil {
				t.Fatal(err)
			}
			before := stored(t, c, "7")
			clock.Add(DefaultLogicalTTL)
			o.fail = errOrigin
			if got, err := c.Get(t.Context(), "7", o.load); err != nil || got != 10 {
				t.Errorf("Get = %d, %v; want the stale 10", got, err)
			}
			if n := o.calls.Load(); n != 2 {
				t.Errorf("origin calls = %d, want 2 (the fill and the failed refresh)", n)
			}
			if diff := cmp.Diff(before, stored(t, c, "7")); diff != "" {
				t.Errorf("stored entry changed (-before +after):\n%s", diff)
			}
			wantNoLock(t, c, "7")
		})
		t.Run("nothing cached", func(t *testing.T) {
			c := newCache(b, snowflaketest.NewClock(start), Config{})
			notFound := fault.NotFoundf("ARTICLE_NOT_FOUND", "no such article")
			for _, o := range []*origin{{fail: errOrigin}, {fail: notFound}} {
				_, err := c.Get(t.Context(), "8", o.load)
				if !errors.Is(err, o.fail) {
					t.Errorf("Get = %v, want the origin's error %v", err, o.fail)
				}
				wantNoLock(t, c, "8")
			}
		})
	})
}

// TestRedisDown: a Redis that cannot serve makes Get call the origin directly.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T) redis.UniversalClient {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	}
	loading := func(t *testing.T) redis.UniversalClient {
		mr := miniredis.RunT(t)
		mr.SetError("LOADING Redis is loading the dataset in memory")
		return redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	}
	for name, dial := range map[string]func(*testing.T) redis.UniversalClient{"refused": refused, "loading": loading} {
		t.Run(name, func(t *testing.T) {
			rdb := dial(t)
			t.Cleanup(func() { rdb.Close() })
			c := New[int64](rdb, "down:", Config{Logger: discard})

			var o origin
			if got, err := c.Get(t.Context(), "7", o.load); err != nil || got != 10 {
				t.Errorf("Get = %d, %v; want 10 straight from the origin", got, err)
			}

			_, err := c.Get(t.Context(), "7", (&origin{fail: errOrigin}).load)
			if !errors.Is(err, errOrigin) || fault.KindOf(err) != fault.Unavailable {
				t.Errorf("Get with the origin down too = %v (kind %v); want the origin's error, Unavailable", err, fault.KindOf(err))
			}
			notFound := fault.NotFoundf("ARTICLE_NOT_FOUND", "no such article")
			if _, err := c.Get(t.Context(), "7", (&origin{fail: notFound}).load); fault.KindOf(err) != fault.NotFound {
				t.Errorf("Get with the origin answering NotFound = %v; want kind NotFound", err)
			}

			ended, cancel := context.WithCancel(t.Context())
			cancel()
			var late origin
			if _, err := c.Get(ended, "7", late.load); fault.KindOf(err) != fault.Unavailable || late.calls.Load() != 0 {
				t.Errorf("Get with an ended context = %v (origin calls %d); want Unavailable without a call", err, late.calls.Load())
			}
		})
	}
}

func TestBadStoredValue(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		c := newCache(b, snowflaketest.NewClock(start), Config{})
		t.Run("undecodable value is replaced", func(t *testing.T) {
			if err := b.Client.Set(t.Context(), c.keysFor("old").value, `{"v":"not a number"}`, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			var o origin
			if got, err := c.Get(t.Context(), "old", o.load); err != nil || got != 10 {
				t.Errorf("Get = %d, %v; want 10 from the origin", got, err)
			}
			if got := stored(t, c, "old").Value; got != 10 {
				t.Errorf("stored value = %d, want 10", got)
			}
		})
		t.Run("wrong type is a bug", func(t *testing.T) {
			if err := b.Client.HSet(t.Context(), c.keysFor("hash").value, "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
			var o origin
			_, err := c.Get(t.Context(), "hash", o.load)
			if err == nil || fault.KindOf(err) != 0 || o.calls.Load() != 0 {
				t.Errorf("Get = %v (kind %v, origin calls %d); want an internal error without a call", err, fault.KindOf(err), o.calls.Load())
			}
		})
	})
}

// TestCallerLeavingDoesNotFailOthers cancels the caller whose Get started a shared fill: the fill goes on, and the
// other callers get its value.
func TestCallerLeavingDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		c := newCache(b, snowflaketest.NewClock(start), Config{})
		var o origin
		entered, proceed := make(chan struct{}), make(chan struct{})
		var enter sync.Once
		load := func(ctx context.Context) (int64, error) {
			enter.Do(func() { close(entered) })
			select {
			case <-proceed:
				return o.load(ctx)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		first, leave := context.WithCancel(t.Context())
		firstErr := make(chan error, 1)
		go func() {
			_, err := c.Get(first, "7", load)
			firstErr <- err
		}()
		<-entered
		secondDone := make(chan struct{})
		var got int64
		var err error
		go func() {
			defer close(secondDone)
			got, err = c.Get(t.Context(), "7", load)
		}()
		leave()
		if err := <-firstErr; !errors.Is(err, context.Canceled) {
			t.Errorf("the leaving caller's Get = %v, want context.Canceled", err)
		}
		close(proceed)
		<-secondDone
		if err != nil || got != 10 || o.calls.Load() != 1 {
			t.Errorf("the other caller's Get = %d, %v (origin calls %d); want 10 from the one load", got, err, o.calls.Load())
		}
	})
}

func TestNewRejectsLogicalTTLNotShorter(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New accepted LogicalTTL == PhysicalTTL")
		}
	}()
	New[int64](nil, "", Config{LogicalTTL: time.Second, PhysicalTTL: time.Second})
}

// TestCached reads entries as a caller reads them in a round trip of its own: a fresh entry is served, a logically
// expired one is served as stale and refreshed in the background, a missing or undecodable one is left to Get.
func TestCached(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		clock := snowflaketest.NewClock(start)
		c := newCache(b, clock, Config{})
		var o origin
		fresh := func(key string) (int64, bool) {
			raw, err := b.Client.Get(t.Context(), c.EntryKey(key)).Result()
			if errors.Is(err, redis.Nil) {
				return 0, false
			}
			if err != nil {
				t.Fatal(err)
			}
			v, expiry, ok := c.Cached(raw)
			return v, ok && c.Fresh(expiry)
		}
		if v, ok := fresh("7"); ok {
			t.Errorf("a missing entry = %d, true", v)
		}
		if _, err := c.Get(t.Context(), "7", o.load); err != nil {
			t.Fatal(err)
		}
		if v, ok := fresh("7"); !ok || v != 10 {
			t.Errorf("a fresh entry = %d, %v; want 10, true", v, ok)
		}
		if v, _, ok := c.Cached("not json"); ok {
			t.Errorf("an undecodable entry = %d, true", v)
		}
		clock.Add(DefaultLogicalTTL)
		if v, ok := fresh("7"); ok {
			t.Errorf("a logically expired entry = %d, fresh", v)
		}
		if n := o.calls.Load(); n != 1 {
			t.Errorf("origin calls = %d, want 1: Cached never loads", n)
		}
		for range 5 { // one refresh, however many callers ask for it
			c.RefreshSoon("7", o.load)
		}
		polltest.Until(t, 5*time.Second, func() (bool, string) {
			v, ok := fresh("7")
			return ok && v == 20, fmt.Sprintf("after RefreshSoon the entry is %d, fresh %v; want 20, fresh", v, ok)
		})
		if n := o.calls.Load(); n != 2 {
			t.Errorf("origin calls = %d, want 2: one refresh", n)
		}
	})
}

// TestDecodeIntegers reads integer entries as encoding/json reads them, through the path without reflection, and
// leaves anything else to encoding/json.
func TestDecodeIntegers(t *testing.T) {
	for _, want := range []entry[int64]{{0, 0}, {7, 1_700_000_000_123}, {-3, 5}, {math.MaxInt64, math.MinInt64}} {
		raw, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := parseIntEntry(string(raw)); !ok {
			t.Errorf("%s is not read without reflection", raw)
		}
		var got entry[int64]
		if err := decode(string(raw), &got); err != nil || got != want {
			t.Errorf("decode(%s) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{`{"exp":5,"v":7}`, `{"v": 7, "exp": 5}`} {
		var got entry[int64]
		if err := decode(raw, &got); err != nil || got != (entry[int64]{7, 5}) {
			t.Errorf("decode(%s) = %+v, %v; want {7 5} through encoding/json", raw, got, err)
		}
	}
	var bad entry[int64]
	if err := decode(`{"v":"7","exp":5}`, &bad); err == nil {
		t.Errorf("decode of a string value = %+v, want an error", bad)
	}
}
