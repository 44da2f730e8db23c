package miniredis

import (
	"time"
)

// KeyCopy is a copy of a key's value and expiry, as Changes and DumpKeys
// hand it out and RestoreKeys takes it back. It shares nothing with the
// server.
type KeyCopy struct {
	DB  int
	Key string
	// Type is "string", "hash", "list", "set" or "zset", with the value in
	// the field of that name; "" when the key no longer exists. Other types
	// ("stream", "hll") come without their value.
	Type         string
	ExpireAt     time.Time // zero when the key has no TTL
	String       string
	Hash         map[string]string
	HashExpireAt map[string]time.Time // of the hash fields that have a TTL
	List         []string
	Set          []string
	SortedSet    map[string]float64
}

// TrackChanges makes the server note every key that changes, for Changes().
// Changes made before are not noted.
func (m *Miniredis) TrackChanges() {
	m.Lock()
	defer m.Unlock()
	m.tracking = true
	for _, db := range m.dbs {
		db.changed = map[string]struct{}{}
		db.flushed = false
	}
}

// Changes returns the databases emptied as a whole (FLUSHDB, FLUSHALL,
// SWAPDB) and a copy of every key changed, since TrackChanges() or the
// previous Changes(). All is copied in one hold of the lock, so it is one
// point in time: emptying the flushed databases, then applying the keys,
// brings an earlier copy up to date. The cost is in the number of changed
// keys, not in the number of keys.
func (m *Miniredis) Changes() (flushed []int, keys []KeyCopy) {
	m.Lock()
	defer m.Unlock()
	m.tickLocked()
	for id, db := range m.dbs {
		if db.flushed {
			flushed = append(flushed, id)
		}
		if len(db.changed) > 0 {
			for k := range db.changed {
				keys = append(keys, db.copyKey(k))
			}
			// A new map: iterating one emptied by deletes costs what it held at most.
			db.changed = map[string]struct{}{}
		}
		db.flushed = false
	}
	return flushed, keys
}

// DumpKeys hands fn a copy of every key, at most chunk keys at a time. The
// lock is held while a chunk is copied, not while fn runs, so commands go on
// in between and the copies are not one point in time. Together with the
// Changes() that follow the call, as in an append-only file rewrite, they
// are: a key that changes during the dump comes up in those Changes(). A
// key that exists throughout the dump is handed out exactly once. DumpKeys
// stops at the first error fn returns, and returns it.
func (m *Miniredis) DumpKeys(chunk int, fn func([]KeyCopy) error) error {
	m.Lock()
	dbs := make([]*RedisDB, 0, len(m.dbs))
	for _, db := range m.dbs {
		dbs = append(dbs, db)
	}
	var (
		keys []KeyCopy
		err  error
		hand = func() {
			m.Unlock()
			err = fn(keys)
			keys = nil
			m.Lock()
		}
	)
	for _, db := range dbs {
		// Go allows a map to change while it's iterated over: keys that are
		// there throughout come up exactly once.
		for k := range db.keys {
			if _, ok := db.keys[k]; !ok {
				continue // removed by a FLUSHDB, which replaces the map
			}
			keys = append(keys, db.copyKey(k))
			if len(keys) == chunk {
				if hand(); err != nil {
					m.Unlock()
					return err
				}
			}
		}
	}
	m.Unlock()
	if len(keys) > 0 {
		return fn(keys)
	}
	return nil
}

// copyKey copies key k, with its expiry on the wall clock.
func (db *RedisDB) copyKey(k string) KeyCopy {
	m := db.master
	now, ttlNow := m.effectiveNow(), m.ttlNow()
	wall := func(deadline time.Time) time.Time {
		return now.Add(deadline.Sub(ttlNow))
	}
	c := KeyCopy{DB: db.id, Key: k, Type: db.keys[k]}
	if c.Type == "" {
		return c
	}
	if at, ok := db.ttl[k]; ok {
		c.ExpireAt = wall(at)
	}
	switch c.Type {
	case keyTypeString:
		c.String = db.stringKeys[k]
	case keyTypeHash:
		c.Hash = copyHashKey(db.hashKeys[k])
		for field, at := range db.hashTTLs[k] {
			if _, ok := c.Hash[field]; !ok {
				continue
			}
			if c.HashExpireAt == nil {
				c.HashExpireAt = map[string]time.Time{}
			}
			c.HashExpireAt[field] = wall(at)
		}
	case keyTypeList:
		c.List = copyListKey(db.listKeys[k])
	case keyTypeSet:
		c.Set = make([]string, 0, len(db.setKeys[k]))
		for member := range db.setKeys[k] {
			c.Set = append(c.Set, member)
		}
	case keyTypeSortedSet:
		c.SortedSet = copySortedSet(db.sortedsetKeys[k])
	}
	return c
}

// RestoreKeys sets every key to its copy, as Changes() and DumpKeys() hand
// them out: a copy with Type "" deletes the key. Copies whose ExpireAt has
// passed delete the key too, hash fields whose expiry has passed are left
// out, and copies of other types are skipped.
func (m *Miniredis) RestoreKeys(keys []KeyCopy) {
	m.Lock()
	defer m.Unlock()
	defer m.signal.Broadcast()
	now, ttlNow := m.effectiveNow(), m.ttlNow()
	onTTLClock := func(wall time.Time) time.Time {
		return ttlNow.Add(wall.Sub(now))
	}
	var db *RedisDB
	for _, c := range keys {
		if db == nil || db.id != c.DB {
			db = m.db(c.DB)
		}
		db.del(c.Key, true)
		if !c.ExpireAt.IsZero() && !c.ExpireAt.After(now) {
			continue
		}
		switch c.Type {
		case keyTypeString:
			db.stringSet(c.Key, c.String)
		case keyTypeHash:
			for field, value := range c.Hash {
				at, ok := c.HashExpireAt[field]
				if ok && !at.After(now) {
					continue
				}
				db.hashSet(c.Key, field, value)
				if ok {
					db.setFieldDeadline(c.Key, field, onTTLClock(at))
				}
			}
		case keyTypeList:
			if len(c.List) > 0 {
				db.listPush(c.Key, c.List...)
			}
		case keyTypeSet:
			if len(c.Set) > 0 {
				db.setAdd(c.Key, c.Set...)
			}
		case keyTypeSortedSet:
			for member, score := range c.SortedSet {
				db.ssetAdd(c.Key, score, member)
			}
		}
		if _, ok := db.keys[c.Key]; ok && !c.ExpireAt.IsZero() {
			db.setDeadline(c.Key, onTTLClock(c.ExpireAt))
		}
	}
}
