// Package view is the view service (SPEC §3.4): per-article view counts kept in Redis, one counted view per
// (article, user) per dedupe window, and a backup of each count in SQL that publishes ARTICLE_VIEWED.
//
// Counting. One Lua script takes the user's dedupe lock (SET NX with the window as TTL) and, only if it got it,
// increments the article's count, so a view is counted at most once per window however many instances serve it.
// The count key and the lock key share the hash tag {articleId}, so the script runs on Redis Cluster.
//
// Backups. Every BackupEvery-th count (count % 100 == 0 by default) is backed up to SQL as part of the request that
// reached it, with its ARTICLE_VIEWED in the same transaction. A backup never lowers the SQL row, and afterwards
// raises the Redis count to at least the backed-up value, so Redis never answers less than SQL holds.
//
// Losing Redis. When the count key is missing (Redis restarted empty, or evicted it), the next view or count read
// restores it from the SQL backup inside the same script that counts, setting it only if it is still missing: two
// instances restoring at once both land on the backup and add their views to it, never doubling it. A missing
// count with no backup row reads as 0 and is not written back, so reads of unknown articles create no keys.
//
// The views since the last backup. The seeds accept losing up to 99 of them with Redis. This package loses fewer:
// each Service remembers the highest count it produced per article that may not be backed up yet, and
//   - Run backs those up every FlushEvery (5 s by default) and once more when it stops, so a graceful shutdown
//     loses none and a Redis loss costs at most the views of one interval;
//   - a Service restores a lost count from the higher of the SQL backup and what it remembers of the article, so
//     a single instance (the embedded deployment) continues from the exact count after a Redis flush.
//
// Coming back behind a backup. A Redis can also come back from a crash holding a count older than a backup written
// just before it (an in-process snapshot taken a second earlier, a replica promoted before it caught up). So the
// first view or read of an article after an instance starts raises its count to at least the SQL backup: one SQL
// read per article per instance, and counts never fall below what SQL holds.
//
// With several instances, the others' remembered counts reach SQL at their next flush and then raise Redis; views
// counted in between on top of the older backup are the part that is lost. A crashed process loses nothing as long
// as Redis keeps its data: the count lives there, and the next backup carries it.
//
// A failed backup (SQL down) does not fail the view: the count is already in Redis, the user gets it, and the
// count stays remembered for the next flush.
package view

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/fault"
)

// Defaults (SPEC §5.2).
const (
	DefaultDedupeTTL   = 10 * time.Minute
	DefaultBackupEvery = 100
	DefaultFlushEvery  = 5 * time.Second
	// finalFlushTimeout bounds Run's last flush, which runs after its context is cancelled.
	finalFlushTimeout = 10 * time.Second
	// backupReadTimeout bounds raiseToBackup's SQL read.
	backupReadTimeout = 250 * time.Millisecond
	// maxFloored bounds the memory of which articles were raised to their backup; past it all are checked again.
	maxFloored = 100_000
)

// Config tunes a Service; zero fields take the defaults.
type Config struct {
	// KeyPrefix goes in front of every Redis key the service writes.
	KeyPrefix string
	// DedupeTTL is how long a user's view of an article keeps further views of it from counting.
	DedupeTTL time.Duration
	// BackupEvery: a count that is a multiple of it is backed up to SQL by the view that reached it.
	BackupEvery int64
	// FlushEvery is how often Run backs up the counts that moved since their last backup.
	FlushEvery time.Duration
	// Logger receives the errors of backups that no request waits for.
	Logger *slog.Logger
}

// Service counts views in Redis and backs the counts up to a Store.
type Service struct {
	store   *Store
	rdb     redis.UniversalClient
	cfg     Config
	unsaved unsaved
	floored floored
}

// NewService returns the view service over store and the Redis rdb (standalone or cluster).
func NewService(store *Store, rdb redis.UniversalClient, cfg Config) *Service {
	if cfg.DedupeTTL <= 0 {
		cfg.DedupeTTL = DefaultDedupeTTL
	}
	if cfg.BackupEvery <= 0 {
		cfg.BackupEvery = DefaultBackupEvery
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = DefaultFlushEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, rdb: rdb, cfg: cfg, unsaved: unsaved{counts: map[int64]int64{}},
		floored: floored{articles: map[int64]bool{}}}
}

// viewScript counts a view unless the user's lock is held, restoring a missing count first when given one.
// KEYS: the count, the user's lock (one hash slot). ARGV: the lock TTL in ms; the count to restore, or "" to have
// the script return -1 instead when the count is missing. Returns {count, 1 if this view counted else 0}.
var viewScript = redis.NewScript(`
local count = redis.call('GET', KEYS[1])
if not count then
  if ARGV[2] == '' then return {-1, 0} end
  redis.call('SET', KEYS[1], ARGV[2])
  count = ARGV[2]
end
if redis.call('SET', KEYS[2], '', 'NX', 'PX', ARGV[1]) then
  return {redis.call('INCR', KEYS[1]), 1}
end
return {tonumber(count), 0}`)

// atLeastScript raises the count KEYS[1] (set it when missing) to at least ARGV[1] and returns it.
var atLeastScript = redis.NewScript(`
local count = tonumber(redis.call('GET', KEYS[1]) or '-1')
local floor = tonumber(ARGV[1])
if count < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  return floor
end
return count`)

// View records that userID viewed articleID and returns the article's count, whether or not this view counted.
func (s *Service) View(ctx context.Context, articleID, userID int64) (int64, error) {
	if err := s.raiseToBackup(ctx, articleID); err != nil {
		return 0, err
	}
	keys := []string{s.countKey(articleID), s.lockKey(articleID, userID)}
	ttl := max(s.cfg.DedupeTTL.Milliseconds(), 1)
	res, err := viewScript.Run(ctx, s.rdb, keys, ttl, "").Int64Slice()
	if err == nil && res[0] < 0 {
		var backup int64
		if backup, err = s.restoreFrom(ctx, articleID); err != nil {
			return 0, err
		}
		res, err = viewScript.Run(ctx, s.rdb, keys, ttl, backup).Int64Slice()
	}
	if err != nil {
		return 0, redisFault(err)
	}
	count, counted := res[0], res[1] == 1
	if counted {
		s.counted(ctx, articleID, count)
	}
	return count, nil
}

// counted remembers a count this instance produced, and backs it up when it is due.
func (s *Service) counted(ctx context.Context, articleID, count int64) {
	s.unsaved.note(articleID, count)
	if count%s.cfg.BackupEvery != 0 {
		return
	}
	if err := s.backup(ctx, articleID, count); err != nil {
		s.cfg.Logger.WarnContext(ctx, "view count backup failed; the next flush retries it",
			"article_id", articleID, "count", count, "err", err)
		return
	}
	s.unsaved.saved(articleID, count)
}

// Count returns an article's view count, restoring it from the backup when Redis lost it.
func (s *Service) Count(ctx context.Context, articleID int64) (int64, error) {
	if err := s.raiseToBackup(ctx, articleID); err != nil {
		return 0, err
	}
	n, err := s.rdb.Get(ctx, s.countKey(articleID)).Int64()
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, redis.Nil) {
		return 0, redisFault(err)
	}
	backup, err := s.restoreFrom(ctx, articleID)
	if err != nil || backup == 0 {
		return 0, err
	}
	n, err = atLeastScript.Run(ctx, s.rdb, []string{s.countKey(articleID)}, backup).Int64()
	if err != nil {
		return 0, redisFault(err)
	}
	return n, nil
}

// raiseToBackup raises a Redis count that is behind the SQL backup to the backup, once per article per instance
// (see "Coming back behind a backup"). The SQL read gets a fraction of the request's time: a slow or unreachable
// database lets the view go on unchecked, to be checked next time, rather than spend the time Redis needs.
func (s *Service) raiseToBackup(ctx context.Context, articleID int64) error {
	if s.floored.has(articleID) {
		return nil
	}
	readCtx, cancel := context.WithTimeout(ctx, backupReadTimeout)
	defer cancel()
	floor, err := s.restoreFrom(readCtx, articleID)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "cannot read the view count backup; the count is not checked against it",
			"article_id", articleID, "err", err)
		return nil
	}
	if floor > 0 {
		if err := atLeastScript.Run(ctx, s.rdb, []string{s.countKey(articleID)}, floor).Err(); err != nil {
			return redisFault(err)
		}
	}
	s.floored.add(articleID)
	return nil
}

// restoreFrom returns the count to restore a lost Redis count from: the SQL backup, or what this instance
// remembers producing when that is higher. It writes nothing: the scripts set the count only if it is still
// missing (or lower), and the remembered count reaches SQL with the next flush.
func (s *Service) restoreFrom(ctx context.Context, articleID int64) (int64, error) {
	backup, err := s.store.Count(ctx, articleID)
	return max(backup, s.unsaved.get(articleID)), err
}

// backup writes count to SQL with its event, then makes sure Redis holds no less.
func (s *Service) backup(ctx context.Context, articleID, count int64) error {
	if err := s.store.Backup(ctx, articleID, count); err != nil {
		return err
	}
	if err := atLeastScript.Run(ctx, s.rdb, []string{s.countKey(articleID)}, count).Err(); err != nil {
		return redisFault(err)
	}
	return nil
}

// Flush backs up every count this instance produced since its last backup. Counts it fails to back up stay
// remembered for the next flush; the error joins the failures.
func (s *Service) Flush(ctx context.Context) error {
	var errs []error
	for articleID, count := range s.unsaved.takeAll() {
		if err := s.backup(ctx, articleID, count); err != nil {
			s.unsaved.note(articleID, count)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run calls Flush every FlushEvery until ctx is done, then flushes a last time (for up to 10 s, on a context of
// its own) and returns that flush's error. Run it once per Service, in its own goroutine, from start to shutdown.
// At shutdown, cancel ctx only after the HTTP server's Shutdown has returned, so that no view is counted after the
// last flush, and wait for Run to return before flushing the outbox relay and closing Redis and the database.
func (s *Service) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalFlushTimeout)
			defer cancel()
			return s.Flush(last)
		case <-tick.C:
			if err := s.Flush(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.WarnContext(ctx, "view count flush failed; the next flush retries it", "err", err)
			}
		}
	}
}

func (s *Service) countKey(articleID int64) string {
	return s.cfg.KeyPrefix + "view::article::{" + strconv.FormatInt(articleID, 10) + "}::view_count"
}

func (s *Service) lockKey(articleID, userID int64) string {
	return s.cfg.KeyPrefix + "view::article::{" + strconv.FormatInt(articleID, 10) + "}::user::" +
		strconv.FormatInt(userID, 10) + "::lock"
}

// redisFault is the view service's 503 for a Redis that cannot serve (fault.FromRedis).
func redisFault(err error) error {
	return fault.FromRedis(err, "REDIS_UNAVAILABLE", "the view counter (Redis) is unavailable; try again later")
}

// unsaved remembers, per article, the highest count this instance produced that may not be backed up yet.
type unsaved struct {
	mu     sync.Mutex
	counts map[int64]int64
}

func (u *unsaved) note(articleID, count int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if count > u.counts[articleID] {
		u.counts[articleID] = count
	}
}

// saved forgets an article once count, at least as high as what is remembered, is backed up.
func (u *unsaved) saved(articleID, count int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c, ok := u.counts[articleID]; ok && c <= count {
		delete(u.counts, articleID)
	}
}

func (u *unsaved) get(articleID int64) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[articleID]
}

func (u *unsaved) takeAll() map[int64]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	all := u.counts
	u.counts = map[int64]int64{}
	return all
}

// floored remembers the articles whose count this instance has raised to their backup.
type floored struct {
	mu       sync.Mutex
	articles map[int64]bool
}

func (f *floored) has(articleID int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.articles[articleID]
}

func (f *floored) add(articleID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.articles) >= maxFloored {
		clear(f.articles)
	}
	f.articles[articleID] = true
}
