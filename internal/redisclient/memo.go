package redisclient

import (
	"container/list"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Memo holds values a service decoded from what it read through ConnectReads's near cache, by Redis key, so that a
// warm read costs a map lookup rather than a cached command (building it and its cache key, the client's LRU) and
// the decoding of its reply. Redis keeps it right as it keeps the near cache: every report that a key changed
// (client tracking) drops the key's value here too, and a lost connection or a flush drops everything.
//
// A value may only be stored from a read of its key through the near cache (DoCache, DoMultiCache), which is what
// makes Redis report the key's next change: take Generation before the read, and Put refuses the value when a
// report of the key arrived since, which may have come before the read's reply was decoded.
//
// It holds at most about maxBytes, as the callers weigh their values; past it the least recently read are evicted.
type Memo struct {
	seed     maphash.Seed
	perShard int
	epoch    atomic.Uint64 // bumped by every report, before the values it drops are gone
	shards   [memoShards]memoShard
}

// memoShards spreads the lock; a report also refuses the pending Puts of the other keys of its shard, rarely.
const memoShards = 64

// memoEntryOverhead is what an entry costs beside its key and the value's weight: the map's slot, the list's
// element and the entry.
const memoEntryOverhead = 160

type memoShard struct {
	mu      sync.Mutex
	gen     uint64 // bumped by each report of one of the shard's keys
	entries map[string]*list.Element
	lru     list.List // of *memoEntry, most recently read first
	bytes   int
}

type memoEntry struct {
	key      string
	value    any
	bytes    int
	expireAt int64 // Unix ms
}

// newMemo returns a memo of at most about maxBytes, for ConnectReads to feed Redis's reports to.
func newMemo(maxBytes int) *Memo {
	m := &Memo{seed: maphash.MakeSeed(), perShard: maxBytes / memoShards}
	for i := range m.shards {
		m.shards[i].entries = map[string]*list.Element{}
	}
	return m
}

func (m *Memo) shard(key string) *memoShard {
	return &m.shards[maphash.String(m.seed, key)%memoShards]
}

// Generation is what Put needs to tell whether Redis reported key changed after it was taken.
func (m *Memo) Generation(key string) uint64 {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Epoch changes whenever Redis reports a change of any key: a value built from several keys, stored under a name
// of its own, stands only while the epoch is the one taken before they were read.
func (m *Memo) Epoch() uint64 { return m.epoch.Load() }

// Get returns the value stored under key, and until when (Unix ms), unless it expired by now.
func (m *Memo) Get(key string, now time.Time) (value any, expireAt int64, ok bool) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.entries[key]
	if !ok {
		return nil, 0, false
	}
	e := el.Value.(*memoEntry)
	if e.expireAt <= now.UnixMilli() {
		s.remove(el)
		return nil, 0, false
	}
	s.lru.MoveToFront(el)
	return e.value, e.expireAt, true
}

// Put stores value, weighing bytes, under key until expireAt (the near cache's expiry of the read, rueidis's
// CachePXAT), unless Redis reported a change of key since gen was taken: the value may then be older than the change.
func (m *Memo) Put(key string, gen uint64, value any, bytes int, expireAt int64) {
	bytes += len(key) + memoEntryOverhead
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen || bytes > m.perShard {
		return
	}
	if el, ok := s.entries[key]; ok {
		s.remove(el)
	}
	s.entries[key] = s.lru.PushFront(&memoEntry{key: key, value: value, bytes: bytes, expireAt: expireAt})
	s.bytes += bytes
	for s.bytes > m.perShard {
		s.remove(s.lru.Back())
	}
}

func (s *memoShard) remove(el *list.Element) {
	e := s.lru.Remove(el).(*memoEntry)
	delete(s.entries, e.key)
	s.bytes -= e.bytes
}

// usage returns how many values the memo holds, and their weight.
func (m *Memo) usage() (n, bytes int) {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		n, bytes = n+len(s.entries), bytes+s.bytes
		s.mu.Unlock()
	}
	return n, bytes
}

// invalidate applies a report of Redis (rueidis's OnInvalidations): the keys that changed, or nil for all of them
// (a flush, or a connection lost and with it what Redis tracked for it).
func (m *Memo) invalidate(keys []rueidis.RedisMessage) {
	all := keys == nil
	names := make([]string, len(keys))
	for i, k := range keys {
		var err error
		if names[i], err = k.ToString(); err != nil {
			all = true // not a key's name, as Redis never sends: drop everything rather than keep a stale value
		}
	}
	m.drop(names, all)
}

// drop drops the values of keys, or all of them, and refuses the values of their shards read before.
func (m *Memo) drop(keys []string, all bool) {
	m.epoch.Add(1)
	if all {
		for i := range m.shards {
			s := &m.shards[i]
			s.mu.Lock()
			s.gen++
			clear(s.entries)
			s.lru.Init()
			s.bytes = 0
			s.mu.Unlock()
		}
		return
	}
	for _, key := range keys {
		s := m.shard(key)
		s.mu.Lock()
		s.gen++
		if el, ok := s.entries[key]; ok {
			s.remove(el)
		}
		s.mu.Unlock()
	}
}
