package snowflake

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// backend is a Redis to run the lease tests against, with a key prefix that
// is unique to the test.
type backend struct {
	name   string
	rdb    redis.UniversalClient
	prefix string
	mr     *miniredis.Miniredis // nil for a real Redis
}

// backends returns a fresh miniredis and, if BOARD_TEST_REDIS_ADDR is set, the
// real Redis there. Keys made under the prefix are deleted at cleanup.
func backends(t *testing.T) []backend {
	t.Helper()
	prefix := "test:" + rand.Text() + ":"
	mr := miniredis.RunT(t)
	mini := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { mini.Close() })
	bs := []backend{{name: "miniredis", rdb: mini, prefix: prefix, mr: mr}}

	addr := os.Getenv("BOARD_TEST_REDIS_ADDR")
	if addr == "" {
		return bs
	}
	live := redis.NewClient(&redis.Options{Addr: addr})
	if err := live.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("BOARD_TEST_REDIS_ADDR=%s: %v", addr, err)
	}
	t.Cleanup(func() {
		defer live.Close()
		ctx := context.Background()
		iter := live.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("scan %s*: %v", prefix, err)
		}
		if len(keys) > 0 {
			if err := live.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("del: %v", err)
			}
		}
	})
	return append(bs, backend{name: "redis", rdb: live, prefix: prefix})
}

func nodeKey(prefix string, node int64) string {
	return prefix + "snowflake::node::" + strconv.FormatInt(node, 10)
}

// keep runs l.Keep in the background; the returned channel closes when Keep
// returns. Keep is stopped before the test ends.
func keep(t *testing.T, l *Lease, g *Generator) <-chan struct{} {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Keep(ctx, g, slog.New(slog.NewTextHandler(t.Output(), nil)))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return done
}

// nextUntil calls g.Next until it returns wantErr (nil: succeeds) or the
// timeout passes.
func nextUntil(g *Generator, wantErr error, timeout time.Duration) error {
	var err error
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err = g.Next(); errors.Is(err, wantErr) {
			return nil
		}
	}
	return err
}

func TestAcquireLeaseConcurrent(t *testing.T) {
	const n = 50
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			leases := make([]*Lease, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					l, err := AcquireLease(t.Context(), b.rdb, b.prefix, time.Minute, nil)
					if err != nil {
						t.Error(err)
						return
					}
					leases[i] = l
				})
			}
			wg.Wait()
			seen := map[int64]bool{}
			for _, l := range leases {
				if l == nil {
					t.FailNow()
				}
				if seen[l.Node()] || l.Node() < 0 || l.Node() >= MaxNode {
					t.Fatalf("node %d duplicate or out of 0..%d", l.Node(), MaxNode-1)
				}
				seen[l.Node()] = true
				if got := b.rdb.Get(t.Context(), nodeKey(b.prefix, l.Node())).Val(); got != l.token {
					t.Fatalf("node %d key holds %q, want our token", l.Node(), got)
				}
			}
		})
	}
}

func TestReleaseFreesNode(t *testing.T) {
	const free = 17
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			// Take every leasable node but one, so the outcome is deterministic.
			pipe := b.rdb.Pipeline()
			for node := range int64(MaxNode) {
				if node != free {
					pipe.Set(ctx, nodeKey(b.prefix, node), "other", time.Minute)
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}

			l, err := AcquireLease(ctx, b.rdb, b.prefix, time.Minute, nil)
			if err != nil || l.Node() != free {
				t.Fatalf("AcquireLease = %v, %v; want node %d", l, err, free)
			}
			if _, err := AcquireLease(ctx, b.rdb, b.prefix, time.Minute, nil); !errors.Is(err, ErrNoFreeNode) {
				t.Fatalf("AcquireLease with all nodes taken: %v, want ErrNoFreeNode", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l2, err := AcquireLease(ctx, b.rdb, b.prefix, time.Minute, nil)
			if err != nil || l2.Node() != free {
				t.Fatalf("AcquireLease after release = %v, %v; want node %d", l2, err, free)
			}
			if exists := b.rdb.Exists(ctx, nodeKey(b.prefix, MaxNode)).Val(); exists != 0 {
				t.Fatal("reserved node MaxNode was leased")
			}
		})
	}
}

func TestReleaseKeepsForeignKey(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			l, err := AcquireLease(ctx, b.rdb, b.prefix, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			key := nodeKey(b.prefix, l.Node())
			b.rdb.Set(ctx, key, "other", time.Minute)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if got := b.rdb.Get(ctx, key).Val(); got != "other" {
				t.Fatalf("key holds %q after Release, want %q", got, "other")
			}
		})
	}
}

func TestKeepExtendsDeadline(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			g, l, err := NewLeased(t.Context(), b.rdb, b.prefix, ttl, nil)
			if err != nil {
				t.Fatal(err)
			}
			keep(t, l, g)
			for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if _, err := g.Next(); err != nil {
					t.Fatalf("Next while Keep runs: %v", err)
				}
			}
			if pttl := b.rdb.PTTL(t.Context(), nodeKey(b.prefix, l.Node())).Val(); pttl <= 0 {
				t.Fatalf("lease key PTTL %v, want positive", pttl)
			}
		})
	}
}

func TestKeepStopsWhenStolen(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			g, l, err := NewLeased(t.Context(), b.rdb, b.prefix, ttl, nil)
			if err != nil {
				t.Fatal(err)
			}
			done := keep(t, l, g)
			// Another owner holds the key, so Keep's SET NX cannot re-take it.
			key := nodeKey(b.prefix, l.Node())
			b.rdb.Set(t.Context(), key, "thief", time.Minute)

			if err := nextUntil(g, ErrLeaseExpired, 2*ttl); err != nil {
				t.Fatalf("Next after the key was stolen: %v, want ErrLeaseExpired", err)
			}
			select {
			case <-done:
			case <-time.After(ttl):
				t.Fatal("Keep still running after losing the key")
			}
			if got := b.rdb.Get(t.Context(), key).Val(); got != "thief" {
				t.Fatalf("key holds %q, want the thief's value", got)
			}
		})
	}
}

func TestKeepRetakesLostKey(t *testing.T) {
	const ttl = 300 * time.Millisecond
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			g, l, err := NewLeased(t.Context(), b.rdb, b.prefix, ttl, nil)
			if err != nil {
				t.Fatal(err)
			}
			keep(t, l, g)
			key := nodeKey(b.prefix, l.Node())
			b.rdb.Del(t.Context(), key)

			for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if _, err := g.Next(); err != nil {
					t.Fatalf("Next after the key vanished: %v", err)
				}
			}
			if got := b.rdb.Get(t.Context(), key).Val(); got != l.token {
				t.Fatalf("key holds %q, want our token back", got)
			}
		})
	}
}

func TestKeepRetriesRedisErrors(t *testing.T) {
	const ttl = 300 * time.Millisecond
	b := backends(t)[0] // only miniredis can inject errors
	g, l, err := NewLeased(t.Context(), b.rdb, b.prefix, ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := keep(t, l, g)

	b.mr.SetError("ERR injected failure")
	if err := nextUntil(g, ErrLeaseExpired, 2*ttl); err != nil {
		t.Fatalf("Next while Redis fails: %v, want ErrLeaseExpired", err)
	}
	b.mr.SetError("")
	if err := nextUntil(g, nil, ttl); err != nil {
		t.Fatalf("Next after Redis recovered: %v", err)
	}
	select {
	case <-done:
		t.Fatal("Keep returned on a Redis error")
	default:
	}
}

func TestAcquireLeaseRejectsShortTTL(t *testing.T) {
	b := backends(t)[0]
	if _, err := AcquireLease(t.Context(), b.rdb, b.prefix, time.Millisecond, nil); err == nil {
		t.Fatal("AcquireLease with 1ms ttl succeeded")
	}
}
