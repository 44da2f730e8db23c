package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"board/internal/polltest"
)

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func startRedis(t *testing.T, path string, every time.Duration) (*Redis, *redis.Client) {
	t.Helper()
	r, err := StartRedis("127.0.0.1:0", path, every, "", testLogger(t))
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
	t.Parallel()
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
		p.HSet(ctx, "fieldttl", "long", "v", "none", "v")
		p.HExpire(ctx, "fieldttl", time.Minute, "long")
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
	if ttls := c2.HTTL(ctx, "fieldttl", "long", "none").Val(); len(ttls) != 2 || ttls[0] < 55 || ttls[0] > 60 || ttls[1] != -1 {
		t.Errorf("HTTL fieldttl long, none = %v, want about 60 and -1", ttls)
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
	t.Parallel()
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
	if err := c.Set(ctx, "untouched", "v", 100*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	first := c.PTTL(ctx, "k").Val()
	time.Sleep(20 * time.Millisecond)
	if second := c.PTTL(ctx, "k").Val(); second >= first || second <= 0 {
		t.Errorf("PTTL went from %v to %v 20ms later, want it lower and positive", first, second)
	}
	time.Sleep(250 * time.Millisecond)
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after TTL: err = %v, want redis.Nil", err)
	}
	// A key no command names is removed too, so expired keys don't pile up.
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Errorf("DBSIZE after the TTLs = %d, want 0", n)
	}
}

func TestRedisWritesNothingWhileIdle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	_, c := startRedis(t, filepath.Join(dir, "redis.snapshot"), 20*time.Millisecond)

	c.Set(ctx, "k", "1", 0)
	waitForValueAfterCrash(t, dir, "k", "1")
	saved := savedBytes(t, dir)

	// Reads and pings change nothing, so nothing is written.
	c.Get(ctx, "k")
	c.Ping(ctx)
	time.Sleep(100 * time.Millisecond)
	if n := savedBytes(t, dir); n != saved {
		t.Fatalf("%d bytes written while idle", n-saved)
	}

	c.Set(ctx, "k", "2", 0)
	waitForValueAfterCrash(t, dir, "k", "2")
}

// savedBytes is the size of the files in dir.
func savedBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// waitForValueAfterCrash waits until a server started on a copy of dir, as
// a crash would leave it, finds key set to want.
func waitForValueAfterCrash(t *testing.T, dir, key, want string) {
	t.Helper()
	polltest.Until(t, 5*time.Second, func() (bool, string) {
		crashed := t.TempDir()
		if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		r, c := startRedis(t, filepath.Join(crashed, "redis.snapshot"), time.Hour)
		got := c.Get(context.Background(), key).Val()
		c.Close()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		return got == want, fmt.Sprintf("after a crash %s = %q, want %q", key, got, want)
	})
}

func TestRedisCorruptSnapshot(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]string{"garbage": "not a snapshot", "empty": ""} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "redis.snapshot")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := StartRedis("127.0.0.1:0", path, time.Hour, "", testLogger(t))
			if err == nil {
				r.Close()
				t.Fatal("StartRedis accepted a corrupt snapshot")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it away") {
				t.Errorf("error %q does not name the file and what to do", err)
			}
		})
	}
}

// TestRedisCommandsTheAppUses checks miniredis through go-redis for the
// commands board relies on.
func TestRedisCommandsTheAppUses(t *testing.T) {
	t.Parallel()
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
	// The Lua scripts of article-read and view call ZRANGEBYSCORE itself (go-redis deprecates its method for it).
	byScore, err := c.Do(ctx, "ZRANGEBYSCORE", "z", "2", "(4").StringSlice()
	check("ZRANGEBYSCORE", []any{byScore, err}, []any{[]string{"b", "c"}, nil})
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
	t.Parallel()
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
	t.Parallel()
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

func TestRedisRefusesOtherInterfacesWithoutPassword(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		r, err := StartRedis(addr, filepath.Join(t.TempDir(), "redis.snapshot"), time.Hour, "", testLogger(t))
		if err == nil {
			r.Close()
			t.Errorf("StartRedis(%q) without a password listened", addr)
		} else if !strings.Contains(err.Error(), "password") {
			t.Errorf("StartRedis(%q): error %q does not mention the password", addr, err)
		}
	}
	r, err := StartRedis("0.0.0.0:0", filepath.Join(t.TempDir(), "redis.snapshot"), time.Hour, "secret", testLogger(t))
	if err != nil {
		t.Fatalf("StartRedis on all interfaces with a password: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRedisPasswordRequiresAuth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r, err := StartRedis("127.0.0.1:0", filepath.Join(t.TempDir(), "redis.snapshot"), time.Hour, "secret", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	anonymous := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer anonymous.Close()
	if err := anonymous.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("SET without AUTH: err = %v, want NOAUTH", err)
	}
	authed := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: "secret"})
	defer authed.Close()
	if err := authed.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("SET with the password: %v", err)
	}
}

// TestRedisCommandCostDoesNotGrowWithKeys checks the patch in
// third_party/miniredis: with clock TTLs, upstream miniredis lists and sorts
// every key on every command, allocating 16 bytes per key each time.
func TestRedisCommandCostDoesNotGrowWithKeys(t *testing.T) {
	const keys = 100000
	m := miniredis.NewMiniRedis()
	for i := range keys {
		k := "k" + strconv.Itoa(i)
		if err := m.Set(k, "v"); err != nil {
			t.Fatal(err)
		}
		m.SetTTL(k, time.Hour)
	}
	m.ClockTTL(true) // only now: upstream would walk every key on each Set above
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const gets = 100
	for range gets {
		if _, err := m.Get("k1"); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perGet := (after.TotalAlloc - before.TotalAlloc) / gets; perGet > keys {
		t.Errorf("a GET allocates %d bytes with %d keys: it walks the keys", perGet, keys)
	}
}

// TestRedisRestartAfterKillIsOnePointInTime kills a server process with
// SIGKILL while a script increments many counters at once, and checks that
// the restart finds them all equal, the state of one moment, and that no
// acknowledged script was lost.
func TestRedisRestartAfterKillIsOnePointInTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const counters = 300 // more than one batch of the old snapshot, which read 100 keys at a time
	incrAll := redis.NewScript(`for i = 1, tonumber(ARGV[1]) do redis.call('INCR', 'c' .. i) end return 1`)
	dir := t.TempDir()
	path := filepath.Join(dir, "redis.snapshot")
	before := 0 // the counters at the start of a round
	for round := range 3 {
		addr := startRedisProcess(t, path)
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		wrote := make(chan int)
		go func() {
			n := 0
			for incrAll.Run(ctx, c, nil, counters).Err() == nil { // until the kill
				n++
			}
			wrote <- n
		}()
		time.Sleep(time.Duration(200+100*round) * time.Millisecond)
		killRedisProcess(t)
		acked := <-wrote
		if acked == 0 {
			t.Fatal("no script ran before the kill")
		}
		c.Close()

		r, c2 := startRedis(t, path, time.Hour)
		vals, err := c2.MGet(ctx, counterKeys(counters)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if v != vals[0] {
				t.Fatalf("round %d: after SIGKILL c1 = %v but c%d = %v: not one point in time", round, vals[0], i+1, v)
			}
		}
		// The script in flight at the kill may have run too.
		after, err := strconv.Atoi(vals[0].(string))
		if err != nil || after-before != acked && after-before != acked+1 {
			t.Errorf("round %d: %d scripts acknowledged, but the counters went from %d to %v", round, acked, before, vals[0])
		}
		before = after
		c2.Close()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedisCompactionKeepsChangesMadeDuringIt writes enough for the logs to
// outgrow minCompactBytes, and goes on changing keys while the compaction
// copies them in chunks: the restart must find the last state.
func TestRedisCompactionKeepsChangesMadeDuringIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, 10*time.Millisecond)
	const keys = 3 * dumpChunk
	want := map[string]string{}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range keys {
			k, v := "k"+strconv.Itoa(i), strings.Repeat("v", 40)
			p.Set(ctx, k, v, 0)
			want[k] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		k := "k" + strconv.Itoa(i*7919%keys)
		if i%3 == 0 {
			c.Del(ctx, k)
			delete(want, k)
		} else {
			c.Set(ctx, k, strconv.Itoa(i), 0)
			want[k] = strconv.Itoa(i)
		}
		if _, err := os.Stat(path); err == nil {
			break // a compaction wrote the base
		}
		if time.Now().After(deadline) {
			t.Fatal("no compaction")
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + logInfix + "0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the log the base covers is still there (stat: %v)", err)
	}

	_, c2 := startRedis(t, path, time.Hour)
	got := map[string]string{}
	names := c2.Keys(ctx, "*").Val()
	for chunk := range slices.Chunk(names, 1000) {
		for i, v := range c2.MGet(ctx, chunk...).Val() {
			got[chunk[i]] = v.(string)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys after the restart, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q after the restart, want %q", k, got[k], v)
		}
	}
}

// TestRedisTornLogTail appends half a frame to a log, as a crash during a
// write leaves it: the restart keeps what came before, and writes on in a
// new log.
func TestRedisTornLogTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, time.Hour)
	c.Set(ctx, "k1", "v1", 0)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path+logInfix+"0", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{100, 0, 0, 0, 1, 2, 3}); err != nil { // 100 bytes announced, 3 there
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	r2, c2 := startRedis(t, path, time.Hour)
	c2.Set(ctx, "k2", "v2", 0)
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	_, c3 := startRedis(t, path, time.Hour)
	if got := c3.MGet(ctx, "k1", "k2").Val(); !reflect.DeepEqual(got, []any{"v1", "v2"}) {
		t.Errorf("k1, k2 = %v, want v1, v2", got)
	}
}

func TestRedisRefusesLogsWithAGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	for _, k := range []string{"a", "b"} { // one log each
		r, c := startRedis(t, path, time.Hour)
		c.Set(ctx, k, "v", 0)
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(path + logInfix + "0"); err != nil {
		t.Fatal(err)
	}
	r, err := StartRedis("127.0.0.1:0", path, time.Hour, "", testLogger(t))
	if err == nil {
		r.Close()
		t.Fatal("StartRedis loaded logs with a change set missing")
	}
	if !strings.Contains(err.Error(), "missing") {
		t.Errorf("error %q does not say change sets are missing", err)
	}
}

// TestRedisRetriesAFailedWrite makes log writes fail: the change sets must
// be written once writing works again, not lost.
func TestRedisRetriesAFailedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "redis.snapshot")
	r, c := startRedis(t, path, time.Hour) // the ticker never fires: the test ticks
	c.Set(ctx, "k1", "v", 0)
	r.mu.Lock()
	err := r.log.Close() // writing to it fails from now on
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c.Set(ctx, "k2", "v", 0)
	c.Set(ctx, "k3", "v", 0)
	r.mu.Lock()
	failing, pending := r.failing, len(r.pending)
	r.mu.Unlock()
	// k1's change set was written but not synced: it is written again too.
	if !failing || pending != 3 {
		t.Fatalf("after a failed write: failing %v, %d change sets pending; want true, 3", failing, pending)
	}
	r.tick()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	_, c2 := startRedis(t, path, time.Hour)
	if n := c2.Exists(ctx, "k1", "k2", "k3").Val(); n != 3 {
		t.Errorf("%d of k1, k2, k3 after the restart, want 3", n)
	}
}

func counterKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "c" + strconv.Itoa(i+1)
	}
	return keys
}

// redisProcess is the child startRedisProcess runs, for killRedisProcess.
var redisProcess *exec.Cmd

// startRedisProcess runs StartRedis in a child process (this test binary,
// see TestMain) saving every 5ms, and returns its address.
func startRedisProcess(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), redisChildEnv+"="+path)
	cmd.Stderr = t.Output()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	redisProcess = cmd
	t.Cleanup(func() { killRedisProcess(t) })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child redis: %v", err)
	}
	return strings.TrimSpace(addr)
}

func killRedisProcess(t *testing.T) {
	t.Helper()
	if redisProcess == nil {
		return
	}
	if err := redisProcess.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = redisProcess.Wait() // reports the kill
	redisProcess = nil
}

// redisChildEnv makes TestMain run a server instead of the tests.
const redisChildEnv = "BOARD_TEST_REDIS_CHILD_SNAPSHOT"

func TestMain(m *testing.M) {
	if path := os.Getenv(redisChildEnv); path != "" {
		r, err := StartRedis("127.0.0.1:0", path, 5*time.Millisecond, "", slog.New(slog.NewTextHandler(os.Stderr, nil)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(r.Addr())
		select {} // until killed
	}
	os.Exit(m.Run())
}
