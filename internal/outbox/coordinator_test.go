package outbox

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake/snowflaketest"
)

func TestAssign(t *testing.T) {
	t.Parallel()
	live := []string{"a", "b", "c"}
	for _, tc := range []struct {
		shards   int
		instance string
		want     []int
	}{
		{4, "a", []int{0}}, {4, "b", []int{1}}, {4, "c", []int{2, 3}},
		{3, "b", []int{1}}, {2, "a", nil}, {2, "b", []int{0}}, {2, "c", []int{1}},
		{4, "zombie", nil}, // an instance not (or no longer) in the set owns nothing
	} {
		if got := Assign(tc.shards, live, tc.instance); !slices.Equal(got, tc.want) {
			t.Errorf("Assign(%d, %v, %s) = %v, want %v", tc.shards, live, tc.instance, got, tc.want)
		}
	}
}

// checkPartition fails unless the coordinators' shards are disjoint and cover 0..shards-1.
func checkPartition(t *testing.T, shards int, cs ...*Coordinator) {
	t.Helper()
	var all []int
	for _, c := range cs {
		all = append(all, c.Owned()...)
	}
	slices.Sort(all)
	want := make([]int, shards)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(all, want) {
		t.Errorf("owned shards together = %v, want each of %v once", all, want)
	}
}

// TestCoordinatorSplitsAndTakesOver runs on every Redis backend: the heartbeat's MULTI touches one key, which a
// cluster accepts.
func TestCoordinatorSplitsAndTakesOver(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, r redisclienttest.Backend) {
		rdb, prefix := r.Client, r.Prefix
		ctx := context.Background()
		clock := snowflaketest.NewClock(time.Now())
		coordinator := func() *Coordinator {
			c := NewCoordinator(rdb, prefix, "article", 8, CoordinatorConfig{}, quiet, nil) // SPEC timing: 3 s / 9 s
			c.now = clock.Now
			return c
		}
		a, b, c := coordinator(), coordinator(), coordinator()
		beat := func(cs ...*Coordinator) {
			t.Helper()
			for _, x := range cs {
				if _, err := x.heartbeat(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		beat(a, b, c)
		beat(a, b, c) // the first round saw fewer members
		checkPartition(t, 8, a, b, c)
		for _, x := range []*Coordinator{a, b, c} {
			if n := len(x.Owned()); n < 2 || n > 3 {
				t.Errorf("%s owns %v; 8 shards over 3 instances is 2 or 3 each", x.id, x.Owned())
			}
		}

		// Each names the moment the oldest other ping turns 9 s old.
		lastPing := clock.Now()
		clock.Add(time.Second)
		for _, x := range []*Coordinator{a, b} {
			expiry, err := x.heartbeat(ctx)
			if want := lastPing.Add(9 * time.Second).Truncate(time.Millisecond); err != nil || !expiry.Equal(want) {
				t.Errorf("%s: next expiry %v, %v; want %v", x.id, expiry, err, want)
			}
		}

		// c dies without leaving: after 9 s of silence the others split everything.
		clock.Add(5 * time.Second)
		beat(a, b)
		if len(a.Owned())+len(b.Owned()) == 8 {
			t.Error("c's shards were taken over before it had been silent for 9 s")
		}
		clock.Add(4 * time.Second)
		beat(a, b)
		checkPartition(t, 8, a, b)

		// b leaves on shutdown: a takes over at its next ping, without waiting for the dead timeout.
		b.leave()
		if len(b.Owned()) != 0 {
			t.Errorf("b still owns %v after leaving", b.Owned())
		}
		beat(a)
		checkPartition(t, 8, a)
	})
}

// killable is a relay whose process can die: its Redis connection goes with it, so it cannot leave the set.
type killable struct {
	coord *Coordinator
	rdb   *redis.Client
	stop  func()
}

func (h *harness) killableRelay(cfg RelayConfig, coord CoordinatorConfig) killable {
	rdb := redis.NewClient(&redis.Options{Addr: h.rdb.(*redis.Client).Options().Addr})
	c := NewCoordinator(rdb, h.prefix, "article", DefaultShards, coord, quiet, nil)
	r := NewRelay(h.db, h.producer, c, cfg, quiet, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	var once sync.Once
	k := killable{coord: c, rdb: rdb, stop: func() { once.Do(func() { cancel(); <-done; rdb.Close() }) }}
	h.t.Cleanup(k.stop)
	return k
}

// kill stops the instance the way a crash would: no goodbye to the coordinator set.
func (k killable) kill() {
	k.rdb.Close()
	k.stop()
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	polltest.Until(t, within, func() (bool, string) { return cond(), "waiting for " + what })
}

func covers(shards int, cs ...*Coordinator) bool {
	var all []int
	for _, c := range cs {
		all = append(all, c.Owned()...)
	}
	slices.Sort(all)
	return len(all) == shards && len(slices.Compact(all)) == shards
}

// A survivor takes over when the dead member's silence passes DeadAfter, not at its own next ping.
func TestTakeoverAtTheDeadMembersExpiry(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, r redisclienttest.Backend) {
		cfg := CoordinatorConfig{Ping: time.Hour, DeadAfter: 200 * time.Millisecond}
		dead := NewCoordinator(r.Client, r.Prefix, "article", 8, cfg, quiet, nil)
		if _, err := dead.heartbeat(context.Background()); err != nil { // its one ping
			t.Fatal(err)
		}
		survivor := NewCoordinator(r.Client, r.Prefix, "article", 8, cfg, quiet, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			survivor.Run(ctx)
		}()
		defer func() { cancel(); <-done }()
		waitFor(t, "the survivor to take every shard", 5*time.Second, func() bool { return len(survivor.Owned()) == 8 })
	})
}

func TestKilledRelaysShardsAreTakenOver(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		r1, r2, r3 := h.killableRelay(testRelay, testCoordinator), h.killableRelay(testRelay, testCoordinator),
			h.killableRelay(testRelay, testCoordinator)
		waitFor(t, "three relays to split the shards", 5*time.Second, func() bool {
			return covers(DefaultShards, r1.coord, r2.coord, r3.coord) && len(r3.coord.Owned()) > 0 &&
				len(r1.coord.Owned()) > 0 && len(r2.coord.Owned()) > 0
		})
		checkPartition(t, DefaultShards, r1.coord, r2.coord, r3.coord)

		r3.kill()
		// Written without a fast path, so only the pollers of the shards' owners can publish them.
		writer := New(h.db, DefaultShards, ids, time.Now, nil, nil)
		written := capture(writer)
		write(t, writer, 400)
		waitFor(t, "the survivors to take over", 5*time.Second, func() bool {
			return covers(DefaultShards, r1.coord, r2.coord)
		})
		// While the survivors re-split (each at its own ping) their ranges can overlap for a moment: duplicates are
		// allowed then, losses never.
		want := written()
		dups := checkAtLeastOnce(t, h.consume(want, 20*time.Second), want)
		h.waitEmpty(5 * time.Second)
		t.Logf("takeover: %d of %d events published twice, none lost", dups, len(want))
	})
}

func TestPausedOwnerCausesDuplicatesNotLoss(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, h *harness) {
		// paused pings once, then sleeps through the active relay's dead timeout (its own, an hour, would wake it at
		// the active one's expiry): it keeps polling the shards it last owned.
		paused := h.killableRelay(testRelay, CoordinatorConfig{Ping: time.Hour, DeadAfter: time.Hour})
		// Its one ping done before the active relay joins: a ping still under way (slow under the race detector)
		// would set what it owns after the test has read it.
		waitFor(t, "the paused relay's first ping", 5*time.Second, func() bool { return len(paused.coord.Owned()) == DefaultShards })
		active := h.killableRelay(testRelay, testCoordinator)
		waitFor(t, "the active relay to see the paused one", 5*time.Second, func() bool {
			return len(active.coord.Owned()) < DefaultShards && len(active.coord.Owned()) > 0
		})
		if _, err := paused.coord.heartbeat(context.Background()); err != nil {
			t.Fatal(err)
		}
		stale := paused.coord.Owned()
		waitFor(t, "the active relay to take over everything", 5*time.Second, func() bool {
			return len(active.coord.Owned()) == DefaultShards
		})
		if !slices.Equal(paused.coord.Owned(), stale) || len(stale) == 0 {
			t.Fatalf("the paused relay owns %v; the test needs it to still believe it owns %v", paused.coord.Owned(), stale)
		}

		// Both now poll the stale shards.
		writer := New(h.db, DefaultShards, ids, time.Now, nil, nil)
		written := capture(writer)
		write(t, writer, 500)
		want := written()
		dups := checkAtLeastOnce(t, h.consume(want, 20*time.Second), want)
		h.waitEmpty(5 * time.Second)
		t.Logf("two pollers on %d shards: %d of %d events published twice, none lost", len(stale), dups, len(want))

		// It wakes up: its next ping rejoins the set and the shards are split again.
		if _, err := paused.coord.heartbeat(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the shards to be split again", 5*time.Second, func() bool {
			return covers(DefaultShards, paused.coord, active.coord) && len(paused.coord.Owned()) > 0
		})
	})
}
