package miniredis

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2/proto"
)

// patchClient is a client on an in-memory connection to m.
func patchClient(t *testing.T, m *Miniredis) *proto.Client {
	t.Helper()
	conn, err := m.Dial()
	if err != nil {
		t.Fatal(err)
	}
	c := proto.NewClient(conn)
	t.Cleanup(func() { c.Close() })
	return c
}

// patchDo runs a command and checks its raw reply.
func patchDo(t *testing.T, c *proto.Client, want string, cmd ...string) {
	t.Helper()
	got, err := c.Do(cmd...)
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	if got != want {
		t.Fatalf("%v = %q, want %q", cmd, got, want)
	}
}

func TestExpiryQueueStaysProportional(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	m.Set("k", "v")
	m.HSet("h", "f", "v")
	for i := 0; i < 10000; i++ {
		m.SetTTL("k", time.Hour+time.Duration(i))
		m.HExpire("h", "f", time.Hour+time.Duration(i))
	}
	db := m.DB(0)
	if n := len(db.keyExpiries.entries); n > 2+64 {
		t.Errorf("%d key expiry entries for 1 key with a TTL", n)
	}
	if n := len(db.fieldExpiries.entries); n > 2+64 {
		t.Errorf("%d field expiry entries for 1 field with a TTL", n)
	}
	if ttl := m.TTL("k"); ttl != time.Hour+9999 {
		t.Errorf("TTL after the rebuilds = %v, want the last one set", ttl)
	}
}

func TestClockTTLRunsOnTheWallClock(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	m.ClockTTL(true)
	m.Set("k", "v")
	m.SetTTL("k", 50*time.Millisecond)
	first := m.TTL("k")
	time.Sleep(10 * time.Millisecond)
	if second := m.TTL("k"); second >= first {
		t.Errorf("TTL went from %v to %v 10ms later", first, second)
	}
	time.Sleep(60 * time.Millisecond)
	if m.Exists("k") {
		t.Error("k outlived its TTL")
	}
}

func TestTTLClockFollowsFastForwardAndSetTime(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	m.SetTime(t0)
	m.ClockTTL(true)
	m.Set("k", "v")
	m.SetTTL("k", 10*time.Second)
	check := func(what string, want time.Duration) {
		t.Helper()
		if got := m.TTL("k"); got != want {
			t.Errorf("TTL after %s = %v, want %v", what, got, want)
		}
	}
	m.FastForward(4 * time.Second)
	check("FastForward(4s)", 6*time.Second)
	m.SetTime(t0.Add(2 * time.Second))
	check("SetTime(+2s)", 4*time.Second)
	m.SetTime(t0)
	check("SetTime back to the start", 4*time.Second)
	m.SetTime(t0.Add(time.Second))
	check("SetTime(+1s) after going back", 3*time.Second)
	m.ClockTTL(false)
	m.SetTime(t0.Add(time.Hour))
	check("SetTime(+1h) without ClockTTL", 3*time.Second)
	m.ClockTTL(true)
	check("ClockTTL(true) again", 3*time.Second)
	m.FastForward(3 * time.Second)
	if m.Exists("k") {
		t.Error("k outlived its TTL")
	}
}

func TestRenameAndMoveCarryDeadlines(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	c := patchClient(t, m)
	patchDo(t, c, proto.Inline("OK"), "SET", "k", "v", "EX", "10")
	patchDo(t, c, proto.Int(1), "HSET", "h", "f", "v")
	patchDo(t, c, proto.Int(1), "HSET", "h", "g", "v")
	patchDo(t, c, proto.Ints(1), "HEXPIRE", "h", "10", "FIELDS", "1", "f")
	patchDo(t, c, proto.Inline("OK"), "RENAME", "h", "h2")
	patchDo(t, c, proto.Inline("OK"), "RENAME", "k", "k2")
	patchDo(t, c, proto.Int(1), "MOVE", "k2", "1")
	m.FastForward(11 * time.Second)
	patchDo(t, c, proto.Strings("g"), "HKEYS", "h2")
	patchDo(t, c, proto.Inline("OK"), "SELECT", "1")
	patchDo(t, c, proto.Int(0), "EXISTS", "k2")
}

func TestDeadlinesBeyondUnixNanoseconds(t *testing.T) {
	m := NewMiniRedis()
	defer m.Close()
	c := patchClient(t, m)
	// The year 5138, which miniredis keeps as the longest time.Duration: past 2262 still.
	patchDo(t, c, proto.Inline("OK"), "SET", "far", "v", "EXAT", "99999999999")
	patchDo(t, c, proto.Inline("OK"), "SET", "near", "v", "PX", "1000")
	m.FastForward(time.Hour)
	patchDo(t, c, proto.Int(1), "EXISTS", "far", "near")
	if ttl := m.TTL("far"); ttl < 200*365*24*time.Hour {
		t.Errorf("TTL of far = %v", ttl)
	}
}
