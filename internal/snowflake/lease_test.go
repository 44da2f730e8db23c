package snowflake

import (
	"board/internal/redisclient/redisclienttest"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"
)

// backend is a Redis to run the lease tests against, with a key prefix that
// is unique to the test.
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
	t.Parallel()
	const n = 50
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		leases := make([]*Lease, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				l, err := AcquireLease(t.Context(), b.Client, b.Prefix, time.Minute, nil)
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
			if got := b.Client.Get(t.Context(), nodeKey(b.Prefix, l.Node())).Val(); got != l.token {
				t.Fatalf("node %d key holds %q, want our token", l.Node(), got)
			}
		}
	})
}

func TestReleaseFreesNode(t *testing.T) {
	t.Parallel()
	const free = 17
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := t.Context()
		// Take every leasable node but one, so the outcome is deterministic.
		pipe := b.Client.Pipeline()
		for node := range int64(MaxNode) {
			if node != free {
				pipe.Set(ctx, nodeKey(b.Prefix, node), "other", time.Minute)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}

		l, err := AcquireLease(ctx, b.Client, b.Prefix, time.Minute, nil)
		if err != nil || l.Node() != free {
			t.Fatalf("AcquireLease = %v, %v; want node %d", l, err, free)
		}
		if _, err := AcquireLease(ctx, b.Client, b.Prefix, time.Minute, nil); !errors.Is(err, ErrNoFreeNode) {
			t.Fatalf("AcquireLease with all nodes taken: %v, want ErrNoFreeNode", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l2, err := AcquireLease(ctx, b.Client, b.Prefix, time.Minute, nil)
		if err != nil || l2.Node() != free {
			t.Fatalf("AcquireLease after release = %v, %v; want node %d", l2, err, free)
		}
		if exists := b.Client.Exists(ctx, nodeKey(b.Prefix, MaxNode)).Val(); exists != 0 {
			t.Fatal("reserved node MaxNode was leased")
		}
	})
}

func TestReleaseKeepsForeignKey(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := t.Context()
		l, err := AcquireLease(ctx, b.Client, b.Prefix, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		key := nodeKey(b.Prefix, l.Node())
		b.Client.Set(ctx, key, "other", time.Minute)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.Client.Get(ctx, key).Val(); got != "other" {
			t.Fatalf("key holds %q after Release, want %q", got, "other")
		}
	})
}

func TestKeepExtendsDeadline(t *testing.T) {
	const ttl = 300 * time.Millisecond
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		t.Parallel()
		g, l, err := NewLeased(t.Context(), b.Client, b.Prefix, ttl, nil)
		if err != nil {
			t.Fatal(err)
		}
		keep(t, l, g)
		for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err := g.Next(); err != nil {
				t.Fatalf("Next while Keep runs: %v", err)
			}
		}
		if pttl := b.Client.PTTL(t.Context(), nodeKey(b.Prefix, l.Node())).Val(); pttl <= 0 {
			t.Fatalf("lease key PTTL %v, want positive", pttl)
		}
	})
}

func TestKeepStopsWhenStolen(t *testing.T) {
	const ttl = 300 * time.Millisecond
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		t.Parallel()
		g, l, err := NewLeased(t.Context(), b.Client, b.Prefix, ttl, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := keep(t, l, g)
		// Another owner holds the key, so Keep's SET NX cannot re-take it.
		key := nodeKey(b.Prefix, l.Node())
		b.Client.Set(t.Context(), key, "thief", time.Minute)

		if err := nextUntil(g, ErrLeaseExpired, 2*ttl); err != nil {
			t.Fatalf("Next after the key was stolen: %v, want ErrLeaseExpired", err)
		}
		select {
		case <-done:
		case <-time.After(ttl):
			t.Fatal("Keep still running after losing the key")
		}
		if got := b.Client.Get(t.Context(), key).Val(); got != "thief" {
			t.Fatalf("key holds %q, want the thief's value", got)
		}
	})
}

func TestKeepRetakesLostKey(t *testing.T) {
	const ttl = 300 * time.Millisecond
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		t.Parallel()
		g, l, err := NewLeased(t.Context(), b.Client, b.Prefix, ttl, nil)
		if err != nil {
			t.Fatal(err)
		}
		keep(t, l, g)
		key := nodeKey(b.Prefix, l.Node())
		b.Client.Del(t.Context(), key)

		for end := time.Now().Add(ttl + ttl/2); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err := g.Next(); err != nil {
				t.Fatalf("Next after the key vanished: %v", err)
			}
		}
		if got := b.Client.Get(t.Context(), key).Val(); got != l.token {
			t.Fatalf("key holds %q, want our token back", got)
		}
	})
}

func TestKeepRetriesRedisErrors(t *testing.T) {
	const ttl = 300 * time.Millisecond
	b := redisclienttest.Mini(t) // only miniredis can inject errors
	g, l, err := NewLeased(t.Context(), b.Client, b.Prefix, ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := keep(t, l, g)

	b.Mini.SetError("ERR injected failure")
	if err := nextUntil(g, ErrLeaseExpired, 2*ttl); err != nil {
		t.Fatalf("Next while Redis fails: %v, want ErrLeaseExpired", err)
	}
	b.Mini.SetError("")
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
	t.Parallel()
	b := redisclienttest.Mini(t)
	if _, err := AcquireLease(t.Context(), b.Client, b.Prefix, time.Millisecond, nil); err == nil {
		t.Fatal("AcquireLease with 1ms ttl succeeded")
	}
}
