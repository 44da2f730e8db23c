// Package view is the view service (SPEC §3.4): per-article view counts kept in Redis, one counted view per
// (article, user) per dedupe window, and a backup of each count in SQL that publishes ARTICLE_VIEWED.
//
// Counting. One Lua script takes the user's dedupe lock (SET NX with the window as TTL) and, only if it got it,
// increments the article's count, so a view is counted at most once per window however many instances serve it.
// The count key, the lock keys and the tombstone (below) share the hash tag {articleId}, so the scripts run on Redis
// Cluster.
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
// counted in between on top of the older backup are the part that is lost.
//
// A crashed instance. What a process remembers dies with it, while its counts live on in Redis; a count that no
// later view moves would then stay ahead of its backup for good. So before counting, a view makes sure its article
// is marked in the unsaved index, sorted sets in Redis (16 shards, each in its own hash slot) scored by the
// server's clock: a mark made by this instance less than FlushEvery ago covers it, or it makes a new one. Every
// instance's Run settles the marks older than SettleAfter: it backs up each article's Redis count when SQL holds
// less, then removes the mark unless it was marked again meanwhile. A view must reach Redis within 2×FlushEvery of
// the mark covering it (its deadline is cut to that, and the Redis client must honour context deadlines), and
// SettleAfter is at least 3×FlushEvery, so a settled mark covers no view still on its way: whatever instance
// counted a view, its count reaches SQL within about SettleAfter + FlushEvery, crash or not. A count read that
// restores what only this instance remembers is covered the same way. A mark costs one Redis call per article per
// instance per FlushEvery; settling costs one Redis and one SQL read per article marked, and the index holds only
// the articles viewed in the last SettleAfter or so. What this does not cover: a Redis clock jumping forward by
// more than SettleAfter − 2×FlushEvery (or a failover to a node that far ahead) can settle a mark early, and a
// failover that loses recent marks loses their cover; either costs views only if the instance that counted them
// crashes too.
//
// A failed backup (SQL down) does not fail the view: the count is already in Redis, the user gets it, and the
// count stays remembered for the next flush.
//
// Who counts. A view is counted for a signed-in reader only, as their access token's subject; the HTTP layer
// refuses a view as anybody else (Routes), and a signed-out reader's request is 401 and counts nothing. The
// alternatives were weighed and refused: an id per client address or per cookie is one that a single client can
// mint at will (new cookies, rotating addresses), and each would count as a new reader, so views could be inflated
// without limit. An account costs more to make than a cookie: sign-ups are rate-limited per client address, and
// each account then counts once per article per DedupeTTL however often it views. The price is that views by
// signed-out readers do not show in the counts.
//
// Articles that do not exist. A view is counted only on a live article (docs/integrity.md): the service's
// existence.Registry, fed by its consumer of the article topic, answers from memory for an article it checked in
// the last minute and from its own database otherwise, so a warm view costs no SQL read and no call to the article
// service; an article it has not heard of is looked up there once. A view of an article that never existed or was
// deleted is refused with 404 ARTICLE_NOT_FOUND, and one the registry cannot tell about in time with its 503. Count
// reads are not checked: a deleted article reads 0 once purged. A backup, in SQL, starts with the registry's Require (a shared
// lock on the article's existence row), so a backup either commits before the delete is recorded, and the purge
// that follows removes its row, or sees the delete and is dropped, along with the count the instance remembered.
//
// The tombstone. Counting runs in Redis, outside any SQL transaction, and the registry trusts a remembered "live"
// for a minute, so a view checked just before the delete may reach Redis after the purge. The purge therefore
// leaves a tombstone key next to the count (same hash tag), and every script that writes a count — counting,
// restoring a lost count, raising it to a backup — writes nothing when the tombstone is there.
//
// Purge (existence.Purge, run by the registry's purge queue) removes a deleted article in one step, as it has a
// single count: one script sets the tombstone and deletes the count key, so no view lands in between; then the SQL
// backup row goes, and the instance forgets what it remembered of the article. It is idempotent, and it publishes
// no event: consumers drop the article on its ARTICLE_DELETED already. The users' dedupe locks of the article are
// left to expire with their TTL.
package view

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/existence"
	"board/internal/fault"
	"board/internal/redisclient"
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
	// settleBatch is how many marks of an unsaved index shard one settling step reads.
	settleBatch = 500
	// unsavedShards is how many keys the unsaved index is split over, each in a hash slot of its own: on Redis
	// Cluster the marks spread over the primaries, and losing one stalls only the views whose shard it held.
	unsavedShards = 16
	// tombstoneTTL is how long a purged article's tombstone refuses views in Redis. It has to outlast any view that
	// was checked live before the delete and is still on its way to Redis: the registry trusts a remembered "live"
	// for a minute, and a request can stall on top of that (a GC pause, a Redis failover, a retry). A day puts the
	// margin beyond doubt for one small key per deleted article; once it expires, every instance's registry has
	// long known the article is deleted and refuses the view before Redis.
	tombstoneTTL = 24 * time.Hour
)

// tombstoned is what the scripts return, in place of a count, for an article whose tombstone is set.
const tombstoned = -2

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
	// SettleAfter is how old a mark of the unsaved index must be before Run backs up its article's count from Redis;
	// at least 3×FlushEvery (raised to that), 4×FlushEvery by default.
	SettleAfter time.Duration
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
	marked  marked
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
	if cfg.SettleAfter <= 0 {
		cfg.SettleAfter = 4 * cfg.FlushEvery
	}
	cfg.SettleAfter = max(cfg.SettleAfter, 3*cfg.FlushEvery)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, rdb: rdb, cfg: cfg, unsaved: unsaved{counts: map[int64]int64{}},
		floored: floored{articles: map[int64]bool{}}, marked: marked{at: map[int64]time.Time{}}}
}

// viewScript counts a view unless the user's lock is held, restoring a missing count first when given one, and
// does nothing on a tombstoned article. KEYS: the count, the user's lock, the tombstone (one hash slot). ARGV: the
// lock TTL in ms; the count to restore, or "" to have the script return -1 instead when the count is missing.
// Returns {count, 1 if this view counted else 0}, or {tombstoned, 0}.
var viewScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[3]) == 1 then return {` + strconv.Itoa(tombstoned) + `, 0} end
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

// atLeastScript raises the count KEYS[1] (set it when missing) to at least ARGV[1] and returns it, unless the
// tombstone KEYS[2] is set: then it writes nothing and returns tombstoned.
var atLeastScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return ` + strconv.Itoa(tombstoned) + ` end
local count = tonumber(redis.call('GET', KEYS[1]) or '-1')
local floor = tonumber(ARGV[1])
if count < floor then
  redis.call('SET', KEYS[1], ARGV[1])
  return floor
end
return count`)

// serverNowMs is a Lua line setting now to the Redis server's clock in milliseconds.
const serverNowMs = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// markScript marks the article ARGV[1] in the unsaved index KEYS[1] at the server's time, unless it holds a later mark.
var markScript = redis.NewScript(serverNowMs + `
local old = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not old or tonumber(old) < now then redis.call('ZADD', KEYS[1], now, ARGV[1]) end
return 1`)

// settledScript returns up to ARGV[2] marks of the unsaved index KEYS[1] older than ARGV[1] ms by the server's
// clock, oldest first, as article, score, article, score...
var settledScript = redis.NewScript(serverNowMs + `
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))`)

// unmarkScript removes each article of ARGV (article, score, article, score...) from the unsaved index KEYS[1]
// unless it was marked again since it held that score.
var unmarkScript = redis.NewScript(`
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then redis.call('ZREM', KEYS[1], ARGV[i]) end
end
return 1`)

// purgeScript sets the tombstone KEYS[2] for ARGV[1] ms and deletes the count KEYS[1], at once.
var purgeScript = redis.NewScript(`
redis.call('SET', KEYS[2], '', 'PX', ARGV[1])
redis.call('DEL', KEYS[1])
return 1`)

// View records that userID viewed articleID and returns the article's count, whether or not this view counted. A
// view of an article that does not exist is refused with existence.NotFound.
func (s *Service) View(ctx context.Context, articleID, userID int64) (int64, error) {
	if err := s.store.articles.Check(ctx, articleID); err != nil {
		return 0, err
	}
	ctx, cancel, err := s.guard(ctx, articleID)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if err := s.raiseToBackup(ctx, articleID); err != nil {
		return 0, err
	}
	keys := []string{s.countKey(articleID), s.lockKey(articleID, userID), s.tombstoneKey(articleID)}
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
	if res[0] == tombstoned {
		return 0, existence.NotFound(articleID)
	}
	count, counted := res[0], res[1] == 1
	if counted {
		s.counted(ctx, articleID, count)
	}
	return count, nil
}

// guard makes sure a mark of the unsaved index covers a write of articleID's count made now (see "A crashed
// instance"), and cuts ctx to the deadline by which the write must reach Redis to stay covered, unless ctx's own
// deadline is earlier (a served request's always is).
func (s *Service) guard(ctx context.Context, articleID int64) (context.Context, context.CancelFunc, error) {
	covered, err := s.cover(ctx, articleID)
	if err != nil {
		return ctx, func() {}, err
	}
	if deadline, ok := ctx.Deadline(); ok && !deadline.After(covered) {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithDeadline(ctx, covered)
	return ctx, cancel, nil
}

// cover makes sure a mark of the unsaved index covers a write of articleID's count made now, and returns the
// deadline by which the write must reach Redis to stay covered.
func (s *Service) cover(ctx context.Context, articleID int64) (time.Time, error) {
	at, ok := s.marked.get(articleID)
	if !ok || time.Since(at) >= s.cfg.FlushEvery {
		at = time.Now() // before the mark, whose server time is then no earlier
		if err := markScript.Run(ctx, s.rdb, []string{s.unsavedKey(articleID)}, articleID).Err(); err != nil {
			return time.Time{}, redisFault(err)
		}
		s.marked.set(articleID, at)
	}
	return at.Add(2 * s.cfg.FlushEvery), nil
}

// counted remembers a count this instance produced, and backs it up when it is due.
func (s *Service) counted(ctx context.Context, articleID, count int64) {
	s.unsaved.note(articleID, count)
	if count%s.cfg.BackupEvery != 0 {
		return
	}
	if err := s.backup(ctx, articleID, count); err != nil {
		if s.droppedAsDeleted(ctx, articleID, count, err) {
			return
		}
		s.cfg.Logger.WarnContext(ctx, "view count backup failed; the next flush retries it",
			"article_id", articleID, "count", count, "err", err)
		return
	}
	s.unsaved.saved(articleID, count)
}

// droppedAsDeleted reports whether err says the article was deleted, and then forgets its unsaved count: the purge
// removes what is left of the article, and retrying the backup would fail forever.
func (s *Service) droppedAsDeleted(ctx context.Context, articleID, count int64, err error) bool {
	if fault.KindOf(err) != fault.NotFound {
		return false
	}
	s.unsaved.forget(articleID)
	s.cfg.Logger.DebugContext(ctx, "dropped the view count of a deleted article", "article_id", articleID, "count", count)
	return true
}

// Count returns an article's view count, restoring it from the backup when Redis lost it. It does not check that
// the article exists: a deleted article reads 0 once purged.
func (s *Service) Count(ctx context.Context, articleID int64) (int64, error) {
	if s.unsaved.get(articleID) > 0 { // a restore may write a count only this instance remembers
		var cancel context.CancelFunc
		var err error
		if ctx, cancel, err = s.guard(ctx, articleID); err != nil {
			return 0, err
		}
		defer cancel()
	}
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
	n, err = atLeastScript.Run(ctx, s.rdb, s.atLeastKeys(articleID), backup).Int64()
	if err != nil {
		return 0, redisFault(err)
	}
	if n == tombstoned { // purged between the read and the restore
		return 0, nil
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
		if err := atLeastScript.Run(ctx, s.rdb, s.atLeastKeys(articleID), floor).Err(); err != nil {
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

// backup writes count to SQL with its event, then makes sure Redis holds no less (nothing if the article was
// purged in between: the tombstone keeps the count from coming back).
func (s *Service) backup(ctx context.Context, articleID, count int64) error {
	if err := s.store.Backup(ctx, articleID, count); err != nil {
		return err
	}
	if err := atLeastScript.Run(ctx, s.rdb, s.atLeastKeys(articleID), count).Err(); err != nil {
		return redisFault(err)
	}
	return nil
}

// backupMany is backup for many articles: their SQL backups in one transaction (Store.BackupMany), then Redis
// raised for each. It returns the error of each article that failed; a deleted one fails with existence.NotFound.
func (s *Service) backupMany(ctx context.Context, counts map[int64]int64) map[int64]error {
	failed := map[int64]error{}
	if len(counts) == 0 {
		return failed
	}
	skipped, err := s.store.BackupMany(ctx, counts)
	for articleID, count := range counts {
		switch {
		case err != nil:
			failed[articleID] = err
		case errors.Is(skipped[articleID], existence.ErrUnknown): // counted before the registry heard of it
			if err := s.backup(ctx, articleID, count); err != nil {
				failed[articleID] = err
			}
		case skipped[articleID] != nil:
			failed[articleID] = skipped[articleID]
		default:
			if err := atLeastScript.Run(ctx, s.rdb, s.atLeastKeys(articleID), count).Err(); err != nil {
				failed[articleID] = redisFault(err)
			}
		}
	}
	return failed
}

// Flush backs up every count this instance produced since its last backup, settleBatch articles a transaction.
// Counts it fails to back up stay remembered for the next flush, except those of deleted articles, which are
// dropped; the error joins the failures.
func (s *Service) Flush(ctx context.Context) error {
	var errs []error
	for batch := range batches(s.unsaved.takeAll(), settleBatch) {
		for articleID, err := range s.backupMany(ctx, batch) {
			if !s.droppedAsDeleted(ctx, articleID, batch[articleID], err) {
				s.unsaved.note(articleID, batch[articleID])
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// batches splits counts into maps of at most n articles.
func batches(counts map[int64]int64, n int) iter.Seq[map[int64]int64] {
	return func(yield func(map[int64]int64) bool) {
		batch := map[int64]int64{}
		for id, count := range counts {
			batch[id] = count
			if len(batch) == n {
				if !yield(batch) {
					return
				}
				batch = map[int64]int64{}
			}
		}
		if len(batch) > 0 {
			yield(batch)
		}
	}
}

// Settle backs up the counts of the articles marked in the unsaved index more than SettleAfter ago whose backup is
// behind Redis, whichever instance counted their views, and removes their marks unless they were marked again
// meanwhile. A mark whose backup fails stays for the next call; the error joins the failures of every shard.
func (s *Service) Settle(ctx context.Context) error {
	var errs []error
	for shard := range unsavedShards {
		if err := s.settleShard(ctx, s.unsavedShardKey(shard)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// settleShard settles the marks of one shard of the unsaved index, a batch at a time.
func (s *Service) settleShard(ctx context.Context, key string) error {
	for {
		marks, err := settledScript.Run(ctx, s.rdb, []string{key}, s.cfg.SettleAfter.Milliseconds(), settleBatch).StringSlice()
		if err != nil {
			return redisFault(err)
		}
		if len(marks) == 0 {
			return nil
		}
		settled, err := s.settle(ctx, marks)
		if len(settled) > 0 {
			if err := unmarkScript.Run(ctx, s.rdb, []string{key}, settled...).Err(); err != nil {
				return redisFault(err)
			}
		}
		if err != nil || len(marks) < 2*settleBatch {
			return err
		}
	}
}

// settle backs up the counts of marks (article, score, ...) that are ahead of their backup and returns the marks
// that are settled, as unmarkScript's ARGV.
func (s *Service) settle(ctx context.Context, marks []string) ([]any, error) {
	var settled []any
	var ids []int64
	var idMarks []int // where each of ids is in marks
	for i := 0; i < len(marks); i += 2 {
		id, err := strconv.ParseInt(marks[i], 10, 64)
		if err != nil { // not written by this package: nothing to back up, and left there it would stall its batch
			s.cfg.Logger.WarnContext(ctx, "removing a member of the unsaved index that is no article id", "member", marks[i])
			settled = append(settled, marks[i], marks[i+1])
			continue
		}
		ids = append(ids, id)
		idMarks = append(idMarks, i)
	}
	if len(ids) == 0 {
		return settled, nil
	}
	counts := make([]*redis.StringCmd, len(ids))
	// The client splits the pipeline per node on Redis Cluster; each command's own error is checked below.
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			counts[i] = p.Get(ctx, s.countKey(id))
		}
		return nil
	})
	backups, err := s.store.counts(ctx, ids)
	if err != nil {
		return settled, err
	}
	var errs []error
	due := map[int64]int64{}
	for i, id := range ids {
		count, err := counts[i].Int64()
		switch {
		case errors.Is(err, redis.Nil): // purged, or lost with Redis: nothing is left to back up
		case err != nil:
			errs = append(errs, redisFault(err))
			continue
		case count > backups[id]:
			due[id] = count
		}
	}
	failed := s.backupMany(ctx, due)
	for i, id := range ids {
		if err, ok := failed[id]; ok && fault.KindOf(err) != fault.NotFound {
			errs = append(errs, err)
			continue
		}
		if counts[i].Err() != nil && !errors.Is(counts[i].Err(), redis.Nil) {
			continue // its GET failed: kept for the next round
		}
		settled = append(settled, marks[idMarks[i]], marks[idMarks[i]+1])
	}
	return settled, errors.Join(errs...)
}

// Run calls Flush and then Settle every FlushEvery until ctx is done, then flushes a last time (for up to 10 s, on
// a context of its own) and returns that flush's error. Run it once per Service, in its own goroutine, from start
// to shutdown. At shutdown, cancel ctx only after the HTTP server's Shutdown has returned, so that no view is
// counted after the last flush, and wait for Run to return before flushing the outbox relay and closing Redis and
// the database.
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
			s.marked.forgetOlder(time.Now().Add(-s.cfg.FlushEvery))
			if err := s.Settle(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Logger.WarnContext(ctx, "settling the unsaved index failed; the next round retries it", "err", err)
			}
		}
	}
}

// Purge removes what is left of a deleted article here (an existence.Purge, for the registry's purge queue): it
// tombstones the article and deletes its count in one script, then deletes the SQL backup and forgets the article.
// It finishes in one step, as an article has one count, and running it again does no harm.
func (s *Service) Purge(ctx context.Context, articleID int64) (done bool, err error) {
	keys := []string{s.countKey(articleID), s.tombstoneKey(articleID)}
	if err := purgeScript.Run(ctx, s.rdb, keys, tombstoneTTL.Milliseconds()).Err(); err != nil {
		return false, redisFault(err)
	}
	if err := s.store.deleteBackup(ctx, articleID); err != nil {
		return false, err
	}
	s.unsaved.forget(articleID)
	s.floored.forget(articleID)
	return true, nil
}

func (s *Service) countKey(articleID int64) string {
	return s.cfg.KeyPrefix + "view::article::{" + strconv.FormatInt(articleID, 10) + "}::view_count"
}

func (s *Service) lockKey(articleID, userID int64) string {
	return s.cfg.KeyPrefix + "view::article::{" + strconv.FormatInt(articleID, 10) + "}::user::" +
		strconv.FormatInt(userID, 10) + "::lock"
}

func (s *Service) tombstoneKey(articleID int64) string {
	return s.cfg.KeyPrefix + "view::article::{" + strconv.FormatInt(articleID, 10) + "}::deleted"
}

// unsavedKey is the shard of the unsaved index that holds articleID. The index lists the articles whose count may
// be ahead of their backup, each scored by the server time of its latest mark.
func (s *Service) unsavedKey(articleID int64) string {
	// Fibonacci hashing: Snowflake ids differ mostly in their high bits, which the multiplication mixes down.
	return s.unsavedShardKey(int((uint64(articleID) * 0x9E3779B97F4A7C15 >> 32) % unsavedShards))
}

func (s *Service) unsavedShardKey(shard int) string {
	return s.cfg.KeyPrefix + "view::unsaved-articles::{" + strconv.Itoa(shard) + "}"
}

// atLeastKeys are atLeastScript's keys for an article.
func (s *Service) atLeastKeys(articleID int64) []string {
	return []string{s.countKey(articleID), s.tombstoneKey(articleID)}
}

// redisFault is the view service's 503 for a Redis that cannot serve (redisclient.Unavailable).
func redisFault(err error) error {
	return redisclient.Unavailable(err, "REDIS_UNAVAILABLE", "the view counter (Redis) is unavailable; try again later")
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

func (u *unsaved) forget(articleID int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.counts, articleID)
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

func (f *floored) forget(articleID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.articles, articleID)
}

func (f *floored) add(articleID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.articles) >= maxFloored {
		clear(f.articles)
	}
	f.articles[articleID] = true
}

// marked remembers, per article, when this instance last marked it in the unsaved index (by its own clock, taken
// before the mark).
type marked struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func (m *marked) get(articleID int64) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[articleID]
	return at, ok
}

func (m *marked) set(articleID int64, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at.After(m.at[articleID]) {
		m.at[articleID] = at
	}
}

// forgetOlder forgets the marks made before t, which cover no view any more.
func (m *marked) forgetOlder(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	maps.DeleteFunc(m.at, func(_ int64, at time.Time) bool { return at.Before(t) })
}
