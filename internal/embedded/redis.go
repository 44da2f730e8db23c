package embedded

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// The data is kept in a base file and in logs of the changes made since:
//
//	base:            path          every key, as of change set S (the compaction's)
//	logs:            path.log.<n>  change sets S+1, S+2, ... in order over n
//
// After every command that may change data, and before its reply goes out,
// the keys it changed are appended to the log as a change set, which
// miniredis copies in one hold of its lock. A restart replays the base and
// then the change sets, and so finds the state as of the last change set
// written, a consistent point in time; after kill -9 that includes every
// acknowledged write. The log is synced to disk every tick, as redis-server's
// "appendfsync everysec". Once the logs outgrow the base, a compaction
// writes a new base from miniredis in chunks while the change sets go on,
// into a new log, and then deletes the older logs.
//
// Both kinds of file hold fileMagic, then frames:
//
//	uint32 length of body | uint32 CRC-32C of body | body
//	body: uvarint change set | uvarint count, uvarint DB... (emptied DBs) | uvarint count, key...
//
// A frame torn by a crash fails its length or CRC check and ends its file.
const (
	fileMagic = "board-redis-v2\n"
	logInfix  = ".log."
	// dumpChunk keys are copied per hold of miniredis' lock in a compaction.
	dumpChunk = 10000
	// The logs are compacted once they outgrow the base and minCompactBytes.
	minCompactBytes = 1 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// keyTypes are the types kept, by their code in a key record; code 0 is a
// deleted key.
var keyTypes = []string{"", "string", "hash", "list", "set", "zset"}

// Redis is an in-process Redis-protocol server (a patched miniredis, see
// third_party/miniredis) whose data survives restarts in the files described
// above. See the package doc for what it keeps and what it does not.
type Redis struct {
	m      *miniredis.Miniredis
	addr   string
	path   string
	logger *slog.Logger

	// mu is held from taking a change set to writing it, so that change
	// sets are written in order, and guards the fields up to compaction.
	mu        sync.Mutex
	changeSet uint64   // number of the last change set taken from miniredis
	pending   [][]byte // frames of change sets not yet written
	unsynced  [][]byte // frames written to log but not yet synced
	failing   bool     // the last write or sync failed: only ticks retry
	logGen    uint64   // generation of the log appended to
	log       *os.File // nil until the first write to logGen
	logBytes  int64    // bytes in the logs, i.e. since the base
	baseBytes int64

	// Owned by the loop goroutine, and by Close once the loop is done.
	compaction chan compactResult // non-nil while a compaction runs
	compacting int64              // bytes in the logs the running compaction covers

	warnedTypes sync.Map // key types not kept, warned about once

	stopCompaction chan struct{}
	stop           chan struct{}
	done           chan struct{}
	closeOnce      sync.Once
	closeErr       error
}

type compactResult struct {
	bytes int64 // of the new base
	took  time.Duration
	err   error
}

// StartRedis loads the data kept at snapshotPath, if any, then listens on
// addr (e.g. "127.0.0.1:6380", or port 0 for any free port). It appends what
// each command changed to the files before replying, and syncs them to disk
// every `every`. Data that can't be read is an error: starting empty would
// silently lose it. With a password, clients must AUTH; without one, addr
// must be a loopback address.
func StartRedis(addr, snapshotPath string, every time.Duration, password string, logger *slog.Logger) (*Redis, error) {
	if every <= 0 {
		return nil, fmt.Errorf("embedded redis: snapshot interval must be positive, got %v", every)
	}
	if _, _, err := redisListenAddr(addr, password); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(snapshotPath), 0o755); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true) // miniredis is made for tests: without this, keys never expire
	if password != "" {
		m.RequireAuth(password)
	}
	r := &Redis{
		m:              m,
		path:           snapshotPath,
		logger:         logger,
		stopCompaction: make(chan struct{}),
		stop:           make(chan struct{}),
		done:           make(chan struct{}),
	}
	start := time.Now()
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("embedded redis: %w", err)
	}
	m.TrackChanges()
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("embedded redis: listen on %s: %w", addr, err)
	}
	srv := m.Server()
	srv.SetPostHook(func(_ *server.Peer, cmd string) {
		if !srv.IsReadOnlyCommand(cmd) {
			r.afterCommand()
		}
	})
	r.addr = m.Addr()
	go r.loop(every)
	logger.Info("embedded redis listening", "engine", "in-process", "addr", r.addr, "snapshot", snapshotPath,
		"loaded_bytes", r.baseBytes+r.logBytes, "load_time", time.Since(start).Round(time.Millisecond))
	return r, nil
}

// Addr is the address the server listens on, as host:port.
func (r *Redis) Addr() string { return r.addr }

// Close stops the server, then writes and syncs what is left.
func (r *Redis) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		close(r.stopCompaction)
		if r.compaction != nil {
			if res := <-r.compaction; res.err != nil && !errors.Is(res.err, errCompactionStopped) {
				r.logger.Error("embedded redis: compaction failed", "path", r.path, "err", res.err)
			}
		}
		r.m.Close() // no command runs after this: the last change set is the last state
		r.mu.Lock()
		defer r.mu.Unlock()
		r.takeChanges()
		r.closeErr = r.writePending()
		if r.closeErr == nil {
			r.closeErr = r.sync()
		}
		if r.log != nil {
			r.closeErr = errors.Join(r.closeErr, r.log.Close())
		}
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
		case res := <-r.compaction:
			r.compaction = nil
			r.mu.Lock()
			if res.err == nil {
				r.baseBytes = res.bytes
			} else {
				r.logBytes += r.compacting // still there, to compact again
			}
			r.mu.Unlock()
			if res.err != nil {
				r.logger.Error("embedded redis: compaction failed", "path", r.path, "err", res.err)
				continue
			}
			r.logger.Info("embedded redis: logs compacted", "path", r.path, "base_bytes", res.bytes, "took", res.took.Round(time.Millisecond))
		case <-t.C:
			r.tick()
		}
	}
}

// afterCommand writes the change set of a command that may have changed
// data, before the client gets the reply: a kill -9 then loses no
// acknowledged write. While writes fail, it leaves retrying to the ticks.
func (r *Redis) afterCommand() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takeChanges()
	if !r.failing {
		r.report(r.writePending())
	}
}

// tick writes and syncs what is left, and starts a compaction when the logs
// have outgrown the base.
func (r *Redis) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takeChanges()
	err := r.writePending()
	if err == nil {
		err = r.sync()
	}
	r.report(err)
	if err == nil && r.compaction == nil && r.logBytes > max(r.baseBytes, minCompactBytes) {
		r.startCompaction()
	}
}

// report logs when writes start failing, and when they work again.
func (r *Redis) report(err error) {
	switch {
	case err != nil && !r.failing:
		r.logger.Error("embedded redis: saving changes failed, retrying every tick", "path", r.path, "err", err)
	case err == nil && r.failing:
		r.logger.Info("embedded redis: saving changes works again", "path", r.path)
	}
	r.failing = err != nil
}

// takeChanges takes the keys changed since the last call from miniredis as
// a change set, to be written.
func (r *Redis) takeChanges() {
	flushed, keys := r.m.Changes()
	if len(flushed) > 0 || len(keys) > 0 {
		r.changeSet++
		r.pending = append(r.pending, r.encodeFrame(r.changeSet, flushed, keys))
	}
}

// writePending appends the pending frames to the log. When that fails they
// stay pending, and go to a new log: the one that failed may end in a torn
// frame.
func (r *Redis) writePending() error {
	if len(r.pending) == 0 {
		return nil
	}
	err := r.appendToLog(slices.Concat(r.pending...))
	if err != nil {
		r.abandonLog()
		return err
	}
	r.unsynced = append(r.unsynced, r.pending...)
	r.pending = nil
	return nil
}

// sync syncs the log. When that fails, the frames written since the last
// sync are written again to a new log: after a failed fsync, what the old
// one holds can't be trusted.
func (r *Redis) sync() error {
	if len(r.unsynced) == 0 {
		return nil
	}
	if err := r.log.Sync(); err != nil {
		r.abandonLog()
		return err
	}
	r.unsynced = nil
	return nil
}

// abandonLog makes the next write go to a new log, writing again what the
// abandoned one was not synced with.
func (r *Redis) abandonLog() {
	if r.log != nil {
		r.log.Close() // already failing: the error that counts was returned
		r.log = nil
	}
	r.pending = append(r.unsynced, r.pending...)
	r.unsynced = nil
	r.logGen++
}

func (r *Redis) appendToLog(b []byte) error {
	if r.log == nil {
		f, err := createFile(r.logPath(r.logGen))
		if err != nil {
			return err
		}
		r.log = f
		r.logBytes += int64(len(fileMagic))
	}
	if _, err := r.log.Write(b); err != nil {
		return err
	}
	r.logBytes += int64(len(b))
	return nil
}

func (r *Redis) logPath(gen uint64) string {
	return r.path + logInfix + strconv.FormatUint(gen, 10)
}

// createFile creates path holding fileMagic, synced, with its directory.
func createFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(fileMagic); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	if err := errors.Join(f.Sync(), syncDir(filepath.Dir(path))); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

var errCompactionStopped = errors.New("compaction stopped by Close")

// startCompaction moves the change sets to come to a new log and writes a
// new base in the background: the base as of change set S plus the change
// sets after S make one point in time, though the base is copied in chunks.
// The log must be synced.
func (r *Redis) startCompaction() {
	if r.log != nil {
		if err := r.log.Close(); err != nil {
			r.logger.Error("embedded redis: closing log failed", "path", r.log.Name(), "err", err)
		}
		r.log = nil
	}
	r.logGen++
	r.compacting, r.logBytes = r.logBytes, 0
	done := make(chan compactResult, 1)
	r.compaction = done
	changeSet, firstKeptGen := r.changeSet, r.logGen
	go func() {
		start := time.Now()
		n, err := r.writeBase(changeSet, firstKeptGen)
		done <- compactResult{bytes: n, took: time.Since(start), err: err}
	}()
}

// writeBase writes every key as of changeSet to the base, then deletes the
// logs before generation firstKeptGen. It returns the size of the base.
func (r *Redis) writeBase(changeSet, firstKeptGen uint64) (int64, error) {
	dir := filepath.Dir(r.path)
	f, err := os.CreateTemp(dir, filepath.Base(r.path)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	w := bufio.NewWriter(f)
	n := int64(len(fileMagic))
	write := func(frame []byte) error {
		n += int64(len(frame))
		_, err := w.Write(frame)
		return err
	}
	_, err = w.WriteString(fileMagic)
	// The first frame names the change set even when there are no keys.
	err = errors.Join(err, write(r.encodeFrame(changeSet, nil, nil)))
	if err == nil {
		err = r.m.DumpKeys(dumpChunk, func(keys []miniredis.KeyCopy) error {
			select {
			case <-r.stopCompaction:
				return errCompactionStopped
			default:
			}
			return write(r.encodeFrame(changeSet, nil, keys))
		})
	}
	if err := errors.Join(err, w.Flush(), f.Sync(), f.Close()); err != nil {
		return 0, err
	}
	if err := os.Rename(f.Name(), r.path); err != nil {
		return 0, err
	}
	if err := syncDir(dir); err != nil {
		return 0, err
	}
	gens, err := r.logGens()
	if err != nil {
		return 0, err
	}
	for _, gen := range gens {
		if gen < firstKeptGen {
			if err := os.Remove(r.logPath(gen)); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// logGens lists the generations of the logs on disk, in order.
func (r *Redis) logGens() ([]uint64, error) {
	entries, err := os.ReadDir(filepath.Dir(r.path))
	if err != nil {
		return nil, err
	}
	prefix := filepath.Base(r.path) + logInfix
	var gens []uint64
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		gen, err := strconv.ParseUint(suffix, 10, 64)
		if err != nil {
			continue // not one of ours
		}
		gens = append(gens, gen)
	}
	slices.Sort(gens)
	return gens, nil
}

// load restores the base and the change sets after it. A frame torn by a
// crash ends its log; the next log goes on from the change set before it,
// which was written again.
func (r *Redis) load() error {
	baseChangeSet, baseBytes, err := r.loadFile(r.path, 0, true)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	r.baseBytes = baseBytes
	r.changeSet = baseChangeSet
	gens, err := r.logGens()
	if err != nil {
		return err
	}
	for _, gen := range gens {
		path := r.logPath(gen)
		before := r.changeSet
		last, n, err := r.loadFile(path, r.changeSet, false)
		if err != nil {
			return err
		}
		r.changeSet = last
		r.logGen = gen + 1
		if last == before {
			// Nothing in it the base does not hold: a log already
			// compacted, or one created just before a crash.
			if err := os.Remove(path); err != nil {
				return err
			}
			continue
		}
		r.logBytes += n
	}
	return nil
}

// loadFile applies the frames of one file: for the base (isBase) all of
// them, for a log those of change sets after applied, which must follow on
// from it. It returns the last change set applied and the file's size.
func (r *Redis) loadFile(path string, applied uint64, isBase bool) (uint64, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return applied, 0, err
	}
	size := int64(len(data))
	rest, ok := bytes.CutPrefix(data, []byte(fileMagic))
	if !ok {
		if !isBase && len(data) < len(fileMagic) && strings.HasPrefix(fileMagic, string(data)) {
			return applied, size, nil // torn while being created
		}
		return applied, 0, fmt.Errorf("%s is not a board Redis snapshot of this version (move it away to start empty)", path)
	}
	stop := make(chan struct{})
	defer close(stop)
	// Change sets of one key each, as commands write them, are restored
	// together: a RestoreKeys call costs more than a key.
	var batch []miniredis.KeyCopy
	restore := func() {
		r.m.RestoreKeys(batch)
		batch = batch[:0]
	}
	defer restore()
	for fr := range decodeFrames(rest, stop) {
		switch {
		case fr.torn && isBase:
			return applied, 0, fmt.Errorf("snapshot %s is corrupt (move it away to start empty)", path)
		case fr.torn:
			r.logger.Warn("embedded redis: log ends in a torn frame, as after a crash; reading on from the next log", "path", path)
			return applied, size, nil
		case fr.err != nil:
			return applied, 0, fmt.Errorf("snapshot %s is corrupt: %w (move it away to start empty)", path, fr.err)
		case isBase:
			applied = fr.changeSet
		case fr.changeSet <= applied:
			continue // written again after a failed write, or already in the base
		case fr.changeSet != applied+1:
			return applied, 0, fmt.Errorf("%s: change sets %d to %d are missing: the files were changed by hand? (move them away to start empty)",
				path, applied+1, fr.changeSet-1)
		default:
			applied = fr.changeSet
		}
		if len(fr.flushed) > 0 {
			restore()
			for _, db := range fr.flushed {
				r.m.DB(db).FlushDB()
			}
		}
		batch = append(batch, fr.keys...)
		if len(batch) >= dumpChunk {
			restore()
		}
	}
	return applied, size, nil
}

type decodedFrame struct {
	frame
	torn bool // the frame is torn, and ends the file
	err  error
}

// decodeFrames decodes the frames in data in the background, so that
// decoding a frame overlaps restoring the one before. It stops after a torn
// or malformed frame, or when stop is closed.
func decodeFrames(data []byte, stop <-chan struct{}) <-chan decodedFrame {
	out := make(chan decodedFrame, 2)
	go func() {
		defer close(out)
		for len(data) > 0 {
			var df decodedFrame
			body, rest, ok := cutFrame(data)
			if ok {
				df.frame, df.err = decodeFrame(body)
			}
			df.torn = !ok
			data = rest
			select {
			case out <- df:
			case <-stop:
				return
			}
			if df.torn || df.err != nil {
				return
			}
		}
	}()
	return out
}

// cutFrame splits the first frame's body off b; ok is false when the frame
// is torn or corrupt.
func cutFrame(b []byte) (body, rest []byte, ok bool) {
	if len(b) < 8 {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	sum := binary.LittleEndian.Uint32(b[4:])
	if uint64(n) > uint64(len(b)-8) {
		return nil, nil, false
	}
	body = b[8 : 8+n]
	if crc32.Checksum(body, crcTable) != sum {
		return nil, nil, false
	}
	return body, b[8+n:], true
}

type frame struct {
	changeSet uint64
	flushed   []int
	keys      []miniredis.KeyCopy
}

// encodeFrame encodes a change set. A key is
//
//	uvarint DB | string name | byte type (its index in keyTypes) | varint expiry (Unix ms, 0: none) | value
//
// where a string is a uvarint length and the bytes, a deleted key has no
// expiry nor value, and the value of a string is a string; of a hash, a
// count and (field, value, varint field expiry) triples; of a list or set, a
// count and strings; of a zset, a count and (member, float64 score) pairs.
// Keys of types not kept are written as deleted, so that they don't bring
// back an older value of the key.
func (r *Redis) encodeFrame(changeSet uint64, flushed []int, keys []miniredis.KeyCopy) []byte {
	b := make([]byte, 8, 64+40*len(keys))
	b = binary.AppendUvarint(b, changeSet)
	b = binary.AppendUvarint(b, uint64(len(flushed)))
	for _, db := range flushed {
		b = binary.AppendUvarint(b, uint64(db))
	}
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		code := slices.Index(keyTypes, k.Type)
		if code < 0 {
			if _, warned := r.warnedTypes.LoadOrStore(k.Type, true); !warned {
				r.logger.Warn("embedded redis: keys of this type are not kept across restarts", "type", k.Type, "example", k.Key, "db", k.DB)
			}
			code = 0
		}
		b = binary.AppendUvarint(b, uint64(k.DB))
		b = appendString(b, k.Key)
		b = append(b, byte(code))
		if code == 0 {
			continue
		}
		b = binary.AppendVarint(b, unixMilli(k.ExpireAt))
		switch k.Type {
		case "string":
			b = appendString(b, k.String)
		case "hash":
			b = binary.AppendUvarint(b, uint64(len(k.Hash)))
			for field, value := range k.Hash {
				b = appendString(b, field)
				b = appendString(b, value)
				b = binary.AppendVarint(b, unixMilli(k.HashExpireAt[field]))
			}
		case "list", "set":
			elems := k.List
			if k.Type == "set" {
				elems = k.Set
			}
			b = binary.AppendUvarint(b, uint64(len(elems)))
			for _, e := range elems {
				b = appendString(b, e)
			}
		case "zset":
			b = binary.AppendUvarint(b, uint64(len(k.SortedSet)))
			for member, score := range k.SortedSet {
				b = appendString(b, member)
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(score))
			}
		}
	}
	body := b[8:]
	binary.LittleEndian.PutUint32(b, uint32(len(body)))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(body, crcTable))
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// unixMilli is t in Unix milliseconds, 0 for the zero time (no TTL).
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// decoder reads what frame wrote; the first malformed read sets err, and
// all reads after it return zero values.
type decoder struct {
	b   []byte
	err error
}

var errMalformed = errors.New("malformed frame")

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a number of elements, each at least one byte long.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errMalformed
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.count()
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errMalformed
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) float() float64 {
	if d.err != nil || len(d.b) < 8 {
		d.err = errMalformed
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return f
}

func decodeFrame(body []byte) (frame, error) {
	d := &decoder{b: body}
	fr := frame{changeSet: d.uvarint()}
	for range d.count() {
		fr.flushed = append(fr.flushed, int(d.uvarint()))
	}
	n := d.count()
	fr.keys = make([]miniredis.KeyCopy, 0, n)
	for range n {
		k := miniredis.KeyCopy{DB: int(d.uvarint()), Key: d.string()}
		code := int(d.byte())
		if code >= len(keyTypes) {
			return fr, fmt.Errorf("unknown key type %d", code)
		}
		k.Type = keyTypes[code]
		if code != 0 {
			k.ExpireAt = fromUnixMilli(d.varint())
		}
		switch k.Type {
		case "string":
			k.String = d.string()
		case "hash":
			n := d.count()
			k.Hash = make(map[string]string, n)
			for range n {
				field, value := d.string(), d.string()
				k.Hash[field] = value
				if at := fromUnixMilli(d.varint()); !at.IsZero() {
					if k.HashExpireAt == nil {
						k.HashExpireAt = map[string]time.Time{}
					}
					k.HashExpireAt[field] = at
				}
			}
		case "list", "set":
			n := d.count()
			elems := make([]string, 0, n)
			for range n {
				elems = append(elems, d.string())
			}
			if k.Type == "list" {
				k.List = elems
			} else {
				k.Set = elems
			}
		case "zset":
			n := d.count()
			k.SortedSet = make(map[string]float64, n)
			for range n {
				member := d.string()
				k.SortedSet[member] = d.float()
			}
		}
		fr.keys = append(fr.keys, k)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = errMalformed
	}
	return fr, d.err
}
