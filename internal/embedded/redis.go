package embedded

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"
)

const (
	snapshotVersion = 1
	snapshotDBs     = 16  // Redis' default "databases 16"
	snapshotBatch   = 100 // keys read per script, i.e. per hold of the global lock
)

// snapshot is the file format, gob-encoded: unlike JSON, gob keeps binary
// strings and infinite zset scores as they are.
type snapshot struct {
	Version int
	DBs     map[int][]snapshotKey
}

type snapshotKey struct {
	Key      string
	Type     string    // string, hash, list, set or zset
	ExpireAt int64     // Unix milliseconds; 0 means no TTL
	Values   []string  // string: the value; hash: field, value, ...; list, set: elements; zset: members
	Scores   []float64 // zset: the score of each member in Values
}

// dumpScript reads type, expiry and value of each key in KEYS in one atomic
// step. The direct miniredis API can't be used on a live server: SortedSet
// and List hand out the server's own map and slice, which clients go on
// modifying.
var dumpScript = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
  local t = redis.call('TYPE', key).ok
  local v = {}
  if t == 'string' then v = {redis.call('GET', key)}
  elseif t == 'hash' then v = redis.call('HGETALL', key)
  elseif t == 'list' then v = redis.call('LRANGE', key, 0, -1)
  elseif t == 'set' then v = redis.call('SMEMBERS', key)
  elseif t == 'zset' then v = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  end
  out[i] = {t, redis.call('PEXPIRETIME', key), v}
end
return out`)

// dataNeutral are commands that change no data but that miniredis does not
// mark read-only; they must not make an idle server write snapshots.
var dataNeutral = map[string]bool{
	"AUTH": true, "CLIENT": true, "COMMAND": true, "DISCARD": true, "ECHO": true,
	"HELLO": true, "INFO": true, "MULTI": true, "PING": true, "QUIT": true,
	"SELECT": true, "TIME": true, "UNWATCH": true, "WATCH": true,
	"PUBLISH": true, "SUBSCRIBE": true, "UNSUBSCRIBE": true, "PSUBSCRIBE": true, "PUNSUBSCRIBE": true,
}

// Redis is an in-process Redis-protocol server (miniredis) whose data
// survives restarts through a snapshot file. See the package doc for what a
// snapshot holds and what it does not.
type Redis struct {
	m      *miniredis.Miniredis
	addr   string
	path   string
	logger *slog.Logger
	reader *redis.Client // in-memory connection the snapshots are read through

	changes atomic.Int64 // commands run so far that may have changed data
	saved   int64        // value of changes the last snapshot covers

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// StartRedis loads snapshotPath if it exists, then listens on addr (e.g.
// "127.0.0.1:6380", or port 0 for any free port). It rewrites the snapshot
// every `every` when data may have changed, and on Close. A snapshot that
// can't be read is an error: starting empty would silently lose the data.
func StartRedis(addr, snapshotPath string, every time.Duration, logger *slog.Logger) (*Redis, error) {
	if every <= 0 {
		return nil, fmt.Errorf("embedded redis: snapshot interval must be positive, got %v", every)
	}
	if err := os.MkdirAll(filepath.Dir(snapshotPath), 0o755); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true) // miniredis is made for tests: without this, keys never expire
	r := &Redis{
		m:      m,
		path:   snapshotPath,
		logger: logger,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("embedded redis: listen on %s: %w", addr, err)
	}
	// Count the commands that may change data, so that idle ticks write
	// nothing. CommandCount can't tell: it also counts reads, pings and the
	// snapshot's own commands.
	srv := m.Server()
	srv.SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
		if !dataNeutral[cmd] && !srv.IsReadOnlyCommand(cmd) {
			r.changes.Add(1)
		}
		return false
	})
	r.reader = redis.NewClient(&redis.Options{
		Dialer:   func(context.Context, string, string) (net.Conn, error) { return m.Dial() },
		Protocol: 2, // the script's reply as plain nested arrays
	})
	r.addr = m.Addr()
	go r.loop(every)
	logger.Info("embedded redis listening", "addr", r.addr, "snapshot", snapshotPath)
	return r, nil
}

// Addr is the address the server listens on, as host:port.
func (r *Redis) Addr() string { return r.addr }

// Close writes a final snapshot, then stops the server. Close the app's
// clients first: writes that race Close may miss the snapshot.
func (r *Redis) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.closeErr = r.saveIfChanged()
		r.reader.Close()
		r.m.Close()
	})
	return r.closeErr
}

func (r *Redis) loop(every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.saveIfChanged(); err != nil {
				r.logger.Error("embedded redis: snapshot failed", "path", r.path, "err", err)
			}
		}
	}
}

func (r *Redis) saveIfChanged() error {
	// Read the counter first: changes made during the save make the next
	// tick save again.
	n := r.changes.Load()
	if n == r.saved {
		return nil
	}
	if err := r.save(); err != nil {
		return err
	}
	r.saved = n
	return nil
}

func (r *Redis) save() error {
	ctx := context.Background()
	conn := r.reader.Conn()
	defer conn.Close()
	s := snapshot{Version: snapshotVersion, DBs: map[int][]snapshotKey{}}
	for db := range snapshotDBs {
		keys := r.m.DB(db).Keys()
		if len(keys) == 0 {
			continue
		}
		if err := conn.Select(ctx, db).Err(); err != nil {
			return err
		}
		for batch := range slices.Chunk(keys, snapshotBatch) {
			res, err := dumpScript.RunRO(ctx, conn, batch).Slice()
			if err != nil {
				return fmt.Errorf("read db %d: %w", db, err)
			}
			for i, item := range res {
				k, err := parseKey(batch[i], item)
				if err != nil {
					return fmt.Errorf("read db %d key %q: %w", db, batch[i], err)
				}
				switch k.Type {
				case "none": // deleted since Keys
				case "string", "hash", "list", "set", "zset":
					s.DBs[db] = append(s.DBs[db], k)
				default:
					r.logger.Warn("embedded redis: key type not snapshotted, skipping", "db", db, "key", k.Key, "type", k.Type)
				}
			}
		}
	}
	return writeFileAtomic(r.path, s)
}

// parseKey decodes one {type, pexpiretime, values} triple of dumpScript.
func parseKey(key string, item any) (snapshotKey, error) {
	k := snapshotKey{Key: key}
	triple, ok := item.([]any)
	if !ok || len(triple) != 3 {
		return k, fmt.Errorf("unexpected script reply %v", item)
	}
	typ, ok1 := triple[0].(string)
	exp, ok2 := triple[1].(int64)
	values, ok3 := triple[2].([]any)
	if !ok1 || !ok2 || !ok3 {
		return k, fmt.Errorf("unexpected script reply %v", item)
	}
	k.Type = typ
	if exp > 0 { // -1: no TTL, -2: no key
		k.ExpireAt = exp
	}
	for _, v := range values {
		s, ok := v.(string)
		if !ok {
			return k, fmt.Errorf("unexpected value %v", v)
		}
		k.Values = append(k.Values, s)
	}
	if k.Type == "zset" {
		// ZRANGE WITHSCORES alternates member and score; scores are printed
		// in shortest round-trip form, so parsing gives the exact float back.
		members := k.Values
		k.Values = nil
		for i := 0; i+1 < len(members); i += 2 {
			score, err := strconv.ParseFloat(members[i+1], 64)
			if err != nil {
				return k, err
			}
			k.Values = append(k.Values, members[i])
			k.Scores = append(k.Scores, score)
		}
	}
	return k, nil
}

// writeFileAtomic replaces path with s so that a crash leaves either the
// old or the new snapshot, never a torn one.
func writeFileAtomic(path string, s snapshot) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	w := bufio.NewWriter(f)
	err = errors.Join(gob.NewEncoder(w).Encode(s), w.Flush(), f.Sync(), f.Close())
	if err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	// Sync the directory so the rename itself survives a power loss.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// load restores the snapshot, if any, through the direct API: the server is
// not serving yet, so nothing races with it.
func (r *Redis) load() error {
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedded redis: %w", err)
	}
	defer f.Close()
	var s snapshot
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&s); err != nil {
		return fmt.Errorf("embedded redis: snapshot %s is corrupt: %w (move it away to start empty)", r.path, err)
	}
	if s.Version != snapshotVersion {
		return fmt.Errorf("embedded redis: snapshot %s has version %d, want %d", r.path, s.Version, snapshotVersion)
	}
	now := time.Now()
	n := 0
	for db, keys := range s.DBs {
		d := r.m.DB(db)
		for _, k := range keys {
			var ttl time.Duration
			if k.ExpireAt != 0 {
				if ttl = time.UnixMilli(k.ExpireAt).Sub(now); ttl <= 0 {
					continue // expired while stopped
				}
			}
			if err := restoreKey(d, k); err != nil {
				return fmt.Errorf("embedded redis: snapshot %s: db %d key %q: %w", r.path, db, k.Key, err)
			}
			if ttl > 0 {
				d.SetTTL(k.Key, ttl)
			}
			n++
		}
	}
	r.logger.Info("embedded redis snapshot loaded", "path", r.path, "keys", n)
	return nil
}

func restoreKey(d *miniredis.RedisDB, k snapshotKey) error {
	var err error
	switch k.Type {
	case "string":
		if len(k.Values) != 1 {
			return errors.New("corrupt string")
		}
		err = d.Set(k.Key, k.Values[0])
	case "hash":
		if len(k.Values)%2 != 0 {
			return errors.New("corrupt hash")
		}
		d.HSet(k.Key, k.Values...)
	case "list":
		_, err = d.Push(k.Key, k.Values...)
	case "set":
		_, err = d.SetAdd(k.Key, k.Values...)
	case "zset":
		if len(k.Scores) != len(k.Values) {
			return errors.New("corrupt zset")
		}
		for i, member := range k.Values {
			if _, err = d.ZAdd(k.Key, k.Scores[i], member); err != nil {
				break
			}
		}
	default:
		return fmt.Errorf("unknown type %q", k.Type)
	}
	return err
}
