package miniredis

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/proto"
	"github.com/alicebob/miniredis/v2/server"
)

// changedKeys returns what Changes() hands out, by key.
func changedKeys(m *Miniredis) ([]int, map[string]KeyCopy) {
	flushed, keys := m.Changes()
	sort.Ints(flushed)
	byKey := map[string]KeyCopy{}
	for _, k := range keys {
		byKey[strconv.Itoa(k.DB)+"/"+k.Key] = k
	}
	return flushed, byKey
}

func TestChangesNotesEveryChange(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	c := patchClient(t, m)
	patchDo(t, c, proto.Inline("OK"), "SET", "untouched", "v")
	patchDo(t, c, proto.Int(2), "HSET", "h", "f", "v", "g", "v")
	patchDo(t, c, proto.Int(2), "ZADD", "z", "1", "a", "2", "b")
	patchDo(t, c, proto.Inline("OK"), "SET", "p", "v", "EX", "10")
	patchDo(t, c, proto.Inline("OK"), "SET", "e", "v", "EX", "10")
	m.TrackChanges()
	if flushed, keys := changedKeys(m); len(flushed) > 0 || len(keys) > 0 {
		t.Fatalf("changes before TrackChanges: %v %v", flushed, keys)
	}

	patchDo(t, c, proto.Inline("OK"), "SET", "s", "v", "PX", "10000")
	patchDo(t, c, proto.Int(1), "HDEL", "h", "f")
	patchDo(t, c, proto.Int(1), "ZREM", "z", "a")
	patchDo(t, c, proto.String("v"), "GETEX", "p", "PERSIST")
	m.SetTime(time.Now().Add(time.Minute)) // the TTLs run out, without ClockTTL too
	m.FastForward(11 * time.Second)
	_, keys := changedKeys(m)
	want := map[string]KeyCopy{
		"0/s": {DB: 0, Key: "s"}, // expired
		"0/h": {DB: 0, Key: "h", Type: "hash", Hash: map[string]string{"g": "v"}},
		"0/z": {DB: 0, Key: "z", Type: "zset", SortedSet: map[string]float64{"b": 2}},
		"0/p": {DB: 0, Key: "p", Type: "string", String: "v"},
		"0/e": {DB: 0, Key: "e"}, // expired
	}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("Changes() = %+v, want %+v", keys, want)
	}

	patchDo(t, c, proto.Inline("OK"), "SELECT", "1")
	patchDo(t, c, proto.Inline("OK"), "SET", "one", "v")
	patchDo(t, c, proto.Inline("OK"), "SWAPDB", "0", "1")
	flushed, keys := changedKeys(m)
	if !reflect.DeepEqual(flushed, []int{0, 1}) {
		t.Errorf("flushed after SWAPDB = %v, want [0 1]", flushed)
	}
	for _, k := range []string{"0/one", "1/untouched", "1/h", "1/z", "1/p"} {
		if keys[k].Type == "" {
			t.Errorf("after SWAPDB, %s is not among the changes %v", k, keys)
		}
	}

	patchDo(t, c, proto.Inline("OK"), "FLUSHDB")
	if flushed, keys := changedKeys(m); !reflect.DeepEqual(flushed, []int{1}) || len(keys) > 0 {
		t.Errorf("Changes() after FLUSHDB of DB 1 = %v, %v; want [1] and no keys", flushed, keys)
	}
}

// HDEL and ZREM of members other than the last one change the key: WATCH
// must see them, as Changes does.
func TestWatchSeesHdelAndZrem(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	c, other := patchClient(t, m), patchClient(t, m)
	patchDo(t, c, proto.Int(2), "HSET", "h", "f", "v", "g", "v")
	patchDo(t, c, proto.Int(2), "ZADD", "z", "1", "a", "2", "b")
	for _, change := range [][]string{{"HDEL", "h", "f"}, {"ZREM", "z", "a"}} {
		patchDo(t, c, proto.Inline("OK"), "WATCH", change[1])
		patchDo(t, other, proto.Int(1), change...)
		patchDo(t, c, proto.Inline("OK"), "MULTI")
		patchDo(t, c, proto.Inline("QUEUED"), "SET", "x", "y")
		patchDo(t, c, proto.NilList, "EXEC")
	}
}

func TestDumpKeysHandsOutEveryKeyOnce(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	for i := 0; i < 1000; i++ {
		m.Set("k"+strconv.Itoa(i), "v")
		m.Set("gone"+strconv.Itoa(i), "v")
	}
	seen := map[string]int{}
	added := 0
	err := m.DumpKeys(10, func(keys []KeyCopy) error {
		if len(keys) > 10 {
			t.Errorf("a chunk of %d keys, want at most 10", len(keys))
		}
		for _, k := range keys {
			seen[k.Key]++
		}
		// Commands run between chunks.
		for i := 0; i < 10; i++ {
			m.Set("new"+strconv.Itoa(added), "v")
			m.Del("gone" + strconv.Itoa(added))
			added++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if n := seen["k"+strconv.Itoa(i)]; n != 1 {
			t.Fatalf("k%d handed out %d times, want once", i, n)
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s handed out %d times", k, n)
		}
	}
}

func TestRestoreKeysBringsBackWhatDumpKeysCopied(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	m.ClockTTL(true)
	c := patchClient(t, m)
	patchDo(t, c, proto.Inline("OK"), "SET", "s", "v", "EX", "100")
	patchDo(t, c, proto.Int(2), "HSET", "h", "f", "v", "g", "v")
	patchDo(t, c, proto.Ints(1), "HEXPIRE", "h", "100", "FIELDS", "1", "f")
	patchDo(t, c, proto.Int(3), "RPUSH", "l", "a", "b", "a")
	patchDo(t, c, proto.Int(2), "SADD", "set", "a", "b")
	patchDo(t, c, proto.Int(1), "ZADD", "z", "1.5", "a")
	patchDo(t, c, proto.Inline("OK"), "SELECT", "3")
	patchDo(t, c, proto.Inline("OK"), "SET", "other", "v")
	var keys []KeyCopy
	if err := m.DumpKeys(100, func(chunk []KeyCopy) error {
		keys = append(keys, chunk...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Second)
	keys = append(keys,
		KeyCopy{DB: 0, Key: "expired", Type: "string", String: "v", ExpireAt: past},
		KeyCopy{DB: 0, Key: "deleted", Type: "string", String: "v"},
		KeyCopy{DB: 0, Key: "deleted"},
	)

	m2 := NewMiniRedis()
	defer m2.Close()
	m2.ClockTTL(true)
	m2.RestoreKeys(keys)
	if m.Dump() != m2.Dump() {
		t.Errorf("restored DB 0:\n%s\nwant:\n%s", m2.Dump(), m.Dump())
	}
	if ttl := m2.TTL("s"); ttl <= 99*time.Second || ttl > 100*time.Second {
		t.Errorf("TTL of s = %v, want about 100s", ttl)
	}
	if ttl := m2.HTTL("h", "f"); ttl <= 99*time.Second || ttl > 100*time.Second {
		t.Errorf("TTL of h's f = %v, want about 100s", ttl)
	}
	if v, err := m2.DB(3).Get("other"); v != "v" {
		t.Errorf("DB 3 other = %q (%v), want v", v, err)
	}
}

func TestPostHookRunsBeforeTheReply(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	c := patchClient(t, m)
	entered, release := make(chan string), make(chan struct{})
	m.Server().SetPostHook(func(_ *server.Peer, cmd string) {
		entered <- cmd
		<-release
	})
	replied := make(chan string, 1)
	go func() {
		reply, err := c.Do("SET", "k", "v")
		if err != nil {
			reply = err.Error()
		}
		replied <- reply
	}()
	if cmd := <-entered; cmd != "SET" {
		t.Errorf("hook got %q, want SET", cmd)
	}
	if v, _ := m.Get("k"); v != "v" {
		t.Errorf("k = %q while the hook runs, want the command done", v)
	}
	select {
	case reply := <-replied:
		t.Fatalf("reply %q sent before the hook returned", reply)
	default:
	}
	close(release)
	if reply := <-replied; reply != proto.Inline("OK") {
		t.Errorf("reply %q, want OK", reply)
	}
}

// Scripts run on reused Lua states (board's patch): nothing of one call is seen by the next, and a failed script
// does not spoil the state the next one gets.
func TestLuaStatesAreReusedCleanly(t *testing.T) {
	m := RunT(t)
	c, err := proto.Dial(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, tc := range []struct {
		args []string
		want string // the reply, or a part of an error reply
	}{
		{[]string{"EVAL", "return {KEYS[1], KEYS[2], ARGV[1]}", "2", "a", "b", "x"}, proto.Strings("a", "b", "x")},
		{[]string{"EVAL", "return {KEYS[1], KEYS[2], ARGV[1]}", "1", "c"}, proto.Strings("c")},
		{[]string{"EVAL", "leaked = 1", "0"}, "attempted to create global variable 'leaked'"},
		{[]string{"EVAL", "error('boom')", "0"}, "boom"},
		{[]string{"EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k", "v"}, proto.Inline("OK")},
		{[]string{"EVAL", "return type(leaked)", "0"}, "access nonexistent global variable 'leaked'"},
	} {
		got, err := c.Do(tc.args...)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got != tc.want && !(strings.HasPrefix(got, "-") && strings.Contains(got, tc.want)) {
			t.Errorf("call %d %q: got %q, want %q", i, tc.args, got, tc.want)
		}
	}
}
