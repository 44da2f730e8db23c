package embedded

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func startRedis(t *testing.T, path string, every time.Duration) (*Redis, *redis.Client) {
	t.Helper()
	r, err := StartRedis("127.0.0.1:0", path, every, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	t.Cleanup(func() {
		c.Close()
		r.Close()
	})
	return r, c
}

func TestRedisSnapshotSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, time.Hour)

	start := time.Now()
	binary := "a\x00\xff\xfeb" // not UTF-8: the snapshot must keep bytes as they are
	zset := []redis.Z{{Score: 0.1, Member: "a"}, {Score: 1.0 / 3, Member: "b"}, {Score: -2.5e-300, Member: "c"}, {Score: 1e300, Member: "d"}}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "plain", binary, 0)
		p.Set(ctx, "ex60", "v", 60*time.Second)
		p.Set(ctx, "px200", "v", 200*time.Millisecond)
		p.Incr(ctx, "counter")
		p.Incr(ctx, "counter")
		p.HSet(ctx, "hash", "f1", "v1", "f2", binary)
		p.RPush(ctx, "list", "a", "b", "a")
		p.SAdd(ctx, "set", "x", "y")
		p.ZAdd(ctx, "zset", zset...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db1 := redis.NewClient(&redis.Options{Addr: r.Addr(), DB: 1})
	defer db1.Close()
	if err := db1.Set(ctx, "other-db", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	r2, c2 := startRedis(t, path, time.Hour)
	if got := c2.Get(ctx, "plain").Val(); got != binary {
		t.Errorf("plain = %q, want %q", got, binary)
	}
	if ttl := c2.TTL(ctx, "ex60").Val(); ttl < 55*time.Second || ttl > 60*time.Second {
		t.Errorf("ex60 TTL = %v, want about 60s", ttl)
	}
	if got := c2.Get(ctx, "counter").Val(); got != "2" {
		t.Errorf("counter = %q, want 2", got)
	}
	if got, want := c2.HGetAll(ctx, "hash").Val(), map[string]string{"f1": "v1", "f2": binary}; !reflect.DeepEqual(got, want) {
		t.Errorf("hash = %q, want %q", got, want)
	}
	if got, want := c2.LRange(ctx, "list", 0, -1).Val(), []string{"a", "b", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("list = %q, want %q", got, want)
	}
	if got, want := c2.SMembers(ctx, "set").Val(), []string{"x", "y"}; !sameElements(got, want) {
		t.Errorf("set = %q, want %q", got, want)
	}
	// ZRANGE orders by score: c, a, b, d.
	wantZ := []redis.Z{zset[2], zset[0], zset[1], zset[3]}
	if got := c2.ZRangeWithScores(ctx, "zset", 0, -1).Val(); !reflect.DeepEqual(got, wantZ) {
		t.Errorf("zset = %v, want %v", got, wantZ)
	}
	other := redis.NewClient(&redis.Options{Addr: r2.Addr(), DB: 1})
	defer other.Close()
	if got := other.Get(ctx, "other-db").Val(); got != "1" {
		t.Errorf("db 1 other-db = %q, want 1", got)
	}

	time.Sleep(time.Until(start.Add(250 * time.Millisecond)))
	if n := c2.Exists(ctx, "px200").Val(); n != 0 {
		t.Error("px200 still exists after its TTL")
	}
}

func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestRedisExpiredWhileStopped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, time.Hour)
	c.Set(ctx, "short", "v", 300*time.Millisecond)
	c.Set(ctx, "long", "v", time.Minute)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	_, c2 := startRedis(t, path, time.Hour)
	if n := c2.Exists(ctx, "short", "long").Val(); n != 1 {
		t.Errorf("%d of short, long exist, want only long", n)
	}
}

func TestRedisTTLFollowsWallClock(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t, filepath.Join(t.TempDir(), "redis.snapshot"), time.Hour)
	if err := c.Set(ctx, "k", "v", 100*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after TTL: err = %v, want redis.Nil", err)
	}
}

func TestRedisPeriodicSnapshotSkipsWhenIdle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	_, c := startRedis(t, path, 20*time.Millisecond)

	c.Set(ctx, "k", "1", 0)
	first := waitForSnapshot(t, path, time.Time{})

	// Reads and pings change nothing, so no snapshot is written.
	c.Get(ctx, "k")
	c.Ping(ctx)
	time.Sleep(100 * time.Millisecond)
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(first) {
		t.Fatalf("snapshot rewritten while idle (err %v)", err)
	}

	c.Set(ctx, "k", "2", 0)
	waitForSnapshot(t, path, first)
	// A crash now would keep the periodic snapshot: read it with a second server.
	_, c2 := startRedis(t, path, time.Hour)
	if got := c2.Get(ctx, "k").Val(); got != "2" {
		t.Errorf("k from periodic snapshot = %q, want 2", got)
	}
}

// waitForSnapshot waits until path has a modification time after prev.
func waitForSnapshot(t *testing.T, path string, prev time.Time) time.Time {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if fi, err := os.Stat(path); err == nil && fi.ModTime().After(prev) {
			return fi.ModTime()
		}
	}
	t.Fatal("no snapshot written")
	return time.Time{}
}

func TestRedisCorruptSnapshot(t *testing.T) {
	for name, content := range map[string]string{"garbage": "not a snapshot", "empty": ""} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "redis.snapshot")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := StartRedis("127.0.0.1:0", path, time.Hour, testLogger(t))
			if err == nil {
				r.Close()
				t.Fatal("StartRedis accepted a corrupt snapshot")
			}
			if !strings.Contains(err.Error(), "corrupt") {
				t.Errorf("error %q does not say the snapshot is corrupt", err)
			}
		})
	}
}

// TestRedisCommandsTheAppUses checks miniredis through go-redis for the
// commands board relies on.
func TestRedisCommandsTheAppUses(t *testing.T) {
	ctx := context.Background()
	_, c := startRedis(t, filepath.Join(t.TempDir(), "redis.snapshot"), time.Hour)
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}

	ok, err := c.SetNX(ctx, "lock", "a", time.Minute).Result()
	check("SET NX EX first", []any{ok, err}, []any{true, nil})
	ok, _ = c.SetNX(ctx, "lock", "b", time.Minute).Result()
	check("SET NX EX second", ok, false)
	c.SetArgs(ctx, "lock", "c", redis.SetArgs{KeepTTL: true})
	check("GET after KEEPTTL", c.Get(ctx, "lock").Val(), "c")
	if ttl := c.TTL(ctx, "lock").Val(); ttl <= 0 {
		t.Errorf("TTL after KEEPTTL = %v, want kept", ttl)
	}
	check("INCR", c.Incr(ctx, "n").Val(), int64(1))
	check("EXPIRE", c.Expire(ctx, "n", time.Minute).Val(), true)

	c.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2.5, Member: "b"}, redis.Z{Score: 3, Member: "c"}, redis.Z{Score: 4, Member: "d"})
	check("ZREVRANGE WITHSCORES", c.ZRevRangeWithScores(ctx, "z", 0, 1).Val(), []redis.Z{{Score: 4, Member: "d"}, {Score: 3, Member: "c"}})
	check("ZRANGEBYSCORE", c.ZRangeByScore(ctx, "z", &redis.ZRangeBy{Min: "2", Max: "(4"}).Val(), []string{"b", "c"})
	check("ZREMRANGEBYRANK", c.ZRemRangeByRank(ctx, "z", 0, 0).Val(), int64(1))
	check("ZREM", c.ZRem(ctx, "z", "b").Val(), int64(1))
	check("ZRANGE after removals", c.ZRange(ctx, "z", 0, -1).Val(), []string{"c", "d"})

	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "tx")
		p.Expire(ctx, "tx", time.Minute)
		return nil
	})
	check("MULTI/EXEC", []any{len(cmds), err, c.Get(ctx, "tx").Val()}, []any{2, nil, "1"})
	cmds, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "p1", "x", 0)
		p.Get(ctx, "p1")
		return nil
	})
	check("pipeline", []any{len(cmds), err, cmds[1].(*redis.StringCmd).Val()}, []any{2, nil, "x"})

	// Increment and set a TTL atomically, as a rate limiter would.
	script := `local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`
	for want := int64(1); want <= 2; want++ {
		check("EVAL", c.Eval(ctx, script, []string{"rl"}, 60000).Val(), want)
	}
	if ttl := c.PTTL(ctx, "rl").Val(); ttl <= 0 {
		t.Errorf("PTTL set by script = %v", ttl)
	}
}

func TestRedisUnsupportedTypeIsSkipped(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, time.Hour)
	c.XAdd(ctx, &redis.XAddArgs{Stream: "stream", Values: []string{"f", "v"}})
	c.Set(ctx, "k", "v", 0)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := startRedis(t, path, time.Hour)
	if got := c2.Exists(ctx, "stream").Val(); got != 0 {
		t.Error("stream was restored")
	}
	if got := c2.Get(ctx, "k").Val(); got != "v" {
		t.Errorf("k = %q, want v", got)
	}
}

// TestRedisSnapshotWhileWriting runs snapshots against clients that modify
// lists, zsets and hashes in place; run it with -race.
func TestRedisSnapshotWhileWriting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, time.Millisecond)
	c.RPush(ctx, "list", "a", "b", "c")
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.LSet(ctx, "list", 1, time.Now().String())
			p.LInsert(ctx, "list", "BEFORE", "c", "x")
			p.LTrim(ctx, "list", 0, 9)
			p.ZAdd(ctx, "zset", redis.Z{Score: float64(time.Now().UnixNano()), Member: time.Now().String()})
			p.HSet(ctx, "hash", time.Now().String(), "v")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := c.LRange(ctx, "list", 0, -1).Val()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := startRedis(t, path, time.Hour)
	if got := c2.LRange(ctx, "list", 0, -1).Val(); !slices.Equal(got, want) {
		t.Errorf("list = %q, want %q", got, want)
	}
}
