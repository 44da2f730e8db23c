package redisclient

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
)

// TestMemoBound fills a memo far past its bound: it never weighs more than the bound, and what it evicts is what
// was read least recently.
func TestMemoBound(t *testing.T) {
	const bound = 256 << 10
	m := newMemo(bound)
	later := time.Now().Add(time.Hour).UnixMilli()
	value := strings.Repeat("x", 1000)
	key := func(i int) string { return fmt.Sprintf("article-read::article::{%d}", i) }
	for i := range 10_000 {
		m.Put(key(i), m.Generation(key(i)), value, len(value), later)
		m.Get(key(0), time.Now()) // read all along: kept
		if _, bytes := m.usage(); bytes > bound {
			t.Fatalf("after %d values of 1 KB the memo weighs %d bytes, past its bound of %d", i+1, bytes, bound)
		}
	}
	n, bytes := m.usage()
	if n < 100 || bytes < bound/2 {
		t.Errorf("the memo holds %d values, %d bytes: far below its bound of %d", n, bytes, bound)
	}
	if _, _, ok := m.Get(key(0), time.Now()); !ok {
		t.Error("the value read all along was evicted")
	}
	if _, _, ok := m.Get(key(1), time.Now()); ok {
		t.Error("the value read least recently is still held")
	}
	big := strings.Repeat("x", bound)
	m.Put("big", m.Generation("big"), big, len(big), later)
	if _, _, ok := m.Get("big", time.Now()); ok {
		t.Error("a value larger than a shard's share was held")
	}
}

// TestMemoReports drops values on Redis's reports: a report of a key drops it, and refuses a value read before the
// report and stored after it; a report of everything (a flush, a lost connection) drops all; an expired value is
// gone.
func TestMemoReports(t *testing.T) {
	m := newMemo(1 << 20)
	later := time.Now().Add(time.Hour).UnixMilli()
	put := func(key string) { m.Put(key, m.Generation(key), key, len(key), later) }
	held := func(key string) bool { _, _, ok := m.Get(key, time.Now()); return ok }
	put("a")
	put("b")
	epoch := m.Epoch()
	m.drop([]string{"a"}, false)
	if held("a") || !held("b") {
		t.Errorf(`after a report of "a": a held %v, b held %v; want false, true`, held("a"), held("b"))
	}
	if m.Epoch() == epoch {
		t.Error("a report left the epoch as it was")
	}

	gen := m.Generation("c") // the read of c starts
	m.drop([]string{"c"}, false)
	m.Put("c", gen, "old", 3, later) // its reply, decoded after the report
	if held("c") {
		t.Error("a value read before a report of its key was stored after it")
	}

	m.drop(nil, true)
	if held("b") {
		t.Error("a report of every key left a value")
	}
	m.Put("d", m.Generation("d"), "d", 1, time.Now().Add(-time.Millisecond).UnixMilli())
	if held("d") {
		t.Error("an expired value was served")
	}
}

// TestMemoAcrossClients reads a key through ConnectReads and keeps it in the memo, then changes it through another
// client: Redis's report drops it from the memo. Needs a Redis that tracks clients (BOARD_TEST_REDIS_ADDR).
func TestMemoAcrossClients(t *testing.T) {
	b := redisclienttest.Real(t)
	if b.Mini != nil {
		t.Skip("miniredis does not track clients; set " + redisclienttest.AddrEnv)
	}
	ctx := context.Background()
	c, memo, err := ConnectReads(ctx, b.Addrs, "", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if memo == nil {
		t.Fatal("no memo on a Redis that tracks clients")
	}
	key := b.Prefix + "memo"
	if err := b.Client.Set(ctx, key, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		gen := memo.Generation(key)
		res := c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute)
		v, err := res.ToString()
		if err != nil {
			t.Fatal(err)
		}
		memo.Put(key, gen, v, len(v), res.CachePXAT())
		return v
	}
	if v := read(); v != "1" {
		t.Fatalf("read %q, want 1", v)
	}
	if v, _, ok := memo.Get(key, time.Now()); !ok || v != "1" {
		t.Fatalf("memo holds %v, %v; want 1, true", v, ok)
	}
	if err := b.Client.Set(ctx, key, "2", 0).Err(); err != nil { // another client, as another instance
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, func() (bool, string) {
		v, _, ok := memo.Get(key, time.Now())
		return !ok, fmt.Sprintf("the memo still holds %v after the key changed", v)
	})
	if v := read(); v != "2" {
		t.Errorf("read %q after the change, want 2", v)
	}
}
