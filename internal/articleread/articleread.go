// Package articleread is the article-read service (SPEC §3.6): the CQRS read side of articles. It answers an
// article with its comment, like and view counts, and a board's pages, from Redis, kept up to date by the article,
// comment and like events; it calls the origin services over HTTP only for what Redis does not hold.
//
// # The query model
//
// One hash per article, `article-read::article::{<id>}`: the article as JSON with its version (av), the comment
// count and its version (comments, cv), the like count and its version (likes, lv); or, once the article is
// deleted, only a tombstone (deleted). One script applies every change, field group by field group, only when it
// is newer than what the hash holds, so duplicates and any order of delivery end in the same state; counts that
// arrive before the article wait in the hash, and nothing brings a deleted article back. A hash lives until one day
// after the article's creation (the time in its id): every write sets an absolute PEXPIREAT and only ever moves it
// later, so no update resets or wipes it.
//
// A read takes the hash; each field group it lacks (a fresh or flushed Redis, counts of an article that has none yet)
// is fetched from its origin, which tells the version of what it returns (ETag), and written back through the same
// script: a late event can then never overwrite a fresher origin value. Concurrent reads of one article collapse
// into one origin call per service (singleflight in the process, a short Redis lock across processes).
//
// Versions order events among themselves, not against what Redis lost. An epoch key records when this Redis's read
// model began; an event committed before it may update what a model holds but writes a group the model lacks only
// as unverified, which reads fetch again from the origin (docs/article-read.md).
//
// View counts are not in the model: they come from the view service through a logicalttl cache, which refreshes a
// cached count at most once per second for everyone; a read that finds a count due serves it and refreshes it in
// the background.
//
// # The near cache
//
// With a Redis that tracks clients (RESP3 CLIENT TRACKING), warm reads of models, view counts and a board's first
// pages are answered from process memory (Config.Near, through Config.Reads): Redis reports each change to a key
// the process has read, and the key is dropped from memory. A change thus reaches every instance's next read once its report has arrived,
// a fraction of a millisecond after the write; the report travels apart from the write, so even the instance that
// wrote may read the old value in between. What it decoded of those keys is kept in a memo (Config.Memo) that the
// same reports empty, and a board page read from them alone is kept whole until any report arrives
// (docs/article-read.md). Without tracking, every read goes to Redis.
//
// # Board lists
//
// Per board, in one hash slot: `article-read::board::{<boardId>}::list`, the newest 1000 article ids (sorted set,
// score = the id's millisecond, member = the id zero-padded, so rank order is id order); `::meta`, the board's
// article count with its version, whether the list is synced, and its floor; `::deleted`, ids deleted in the last
// ten minutes. The list is a prefix of the board's articles, newest first: every live article with an id at or
// above the floor is in it (no floor: every article of the board). Events keep it so: ARTICLE_CREATED adds the id
// unless it lies below the floor or was just deleted, trimming the oldest past 1000 raises the floor, ARTICLE_DELETED
// removes it. A list only counts once it is synced: backfilled from the article service's newest 1000 ids. Until
// then (a new deployment, a flushed Redis), and for any page the prefix does not cover (past the floor, or a list
// shortened by deletes), the page comes from the article service; a backfill starts in the background when the
// list is unsynced or shortened and the page lies within its reach.
//
// # Sorts
//
// Lists in another order than newest (Sort: top-day, top-week, top-month by likes among the articles of a window,
// top-all, comments, active) come from sorted sets per board, kept from events alone (sorts.go): each article's
// record in its own slot knows its board (like and comment events name the article only) and holds counts that
// came before it; the board's state, in the board's slot, applies each group only if newer and projects the article
// onto the sets. A window's set is trimmed by the next write or read once its oldest member has aged out, so
// answers are exact with no periodic job. A lost Redis is rebuilt by a replay of the topics.
package articleread

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"golang.org/x/sync/singleflight"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/markdown"
	"board/internal/redisclient"
	"board/internal/snowflake"
)

// Defaults (SPEC §5.2).
const (
	// ModelTTL is how long after an article's creation its model is kept from events.
	ModelTTL = 24 * time.Hour
	// ListSize is how many of a board's newest article ids are kept.
	ListSize = 1000
	// recentDeletes is how long a deleted id keeps a backfill or a late ARTICLE_CREATED from listing it again.
	recentDeletes = 10 * time.Minute
	// epochMargin is how far ahead of the service's clock a new epoch starts: more than clocks disagree.
	epochMargin = time.Second
	// notFoundTTL is how long an article its origin does not have is remembered (a tombstone) when it is older than
	// a day, so that reads of unknown ids do not each cost an origin call.
	notFoundTTL = 10 * time.Minute
	// rebuildTimeout bounds a rebuild, which every concurrent reader of the article shares: two origin attempts.
	rebuildTimeout = 2*attemptTimeout + time.Second
	// rebuildLockTTL is how long other processes wait for one process's rebuild of a model: as long as it may take.
	rebuildLockTTL = rebuildTimeout
	// rebuildWaitPoll is how often a process waiting for another's rebuild looks at the model again.
	rebuildWaitPoll = 20 * time.Millisecond
	// opTimeout bounds one Redis round trip of an event handler and of a background backfill.
	opTimeout = 2 * time.Second
	// backfillTimeout bounds a whole backfill: ten origin pages and one script.
	backfillTimeout = 30 * time.Second
	// backfillRetry is how long after a failed backfill of a board the next may start.
	backfillRetry = 5 * time.Second
	// nearTTL is the longest the near cache holds a key without reading it again: Redis reports every change, so
	// this only bounds what a lost report could cost.
	nearTTL = 10 * time.Minute
	// backfillSkew is how much older than a backfill's read an id must be for the read to rule it out.
	backfillSkew = 5 * time.Second
)

// ViewCounts is the cache view counts are read through (a *logicalttl.Cache[int64] in production).
type ViewCounts interface {
	Get(ctx context.Context, key string, load func(ctx context.Context) (int64, error)) (int64, error)
	// EntryKey is the Redis key of key's cached count, which reads take in the round trip of the model.
	EntryKey(key string) string
	// Cached decodes what EntryKey's key holds: ok false when the count must go through Get; its logical expiry,
	// which Fresh judges: a count no longer fresh is due for a refresh, which RefreshSoon starts in the background.
	Cached(raw string) (count, expiry int64, ok bool)
	Fresh(expiry int64) bool
	RefreshSoon(key string, load func(ctx context.Context) (int64, error))
}

// Config configures a Service.
type Config struct {
	KeyPrefix string       // goes in front of every Redis key
	Origins   Origins      // the services models and pages are rebuilt from
	Client    *http.Client // for the origins (default: pooled, per-attempt timeouts)
	// Reads is the client of the same Redis that models, view counts and pages are read through, and Memo what
	// redisclient.ConnectReads returned with it: not nil when Reads caches them in process memory (the near cache),
	// and then the models and counts decoded from them are kept in it.
	Reads rueidis.Client
	Memo  *redisclient.Memo
	// DeepPageTTL is how long the article service's answer to a page past the list's reach is shared by the
	// requests for it: such a page costs the article service a scan of its offset. 0: not shared.
	DeepPageTTL time.Duration
	Now         func() time.Time
	Logger      *slog.Logger
}

// Service is the article-read service.
type Service struct {
	rdb       redis.UniversalClient
	reads     rueidis.Client
	cfg       Config
	origins   *origins
	views     ViewCounts
	rebuilds  singleflight.Group
	deepPages *deepPages
	backfills struct {
		mu   sync.Mutex
		next map[int64]time.Time // per board, when a backfill may start again
	}
}

// NewService returns the article-read service over rdb (standalone or cluster) and cfg.Reads, reading view counts
// through views.
func NewService(rdb redis.UniversalClient, views ViewCounts, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{rdb: rdb, reads: cfg.Reads, cfg: cfg, deepPages: newDeepPages(cfg.DeepPageTTL), origins: newOrigins(cfg.Origins, cfg.Client), views: views}
}

// ArticleRead is an article with its moderation state and counts.
type ArticleRead struct {
	Article      articleJSON
	Moderation   Moderation
	CommentCount int64
	LikeCount    int64
	ViewCount    int64
}

// Placeholder titles of hidden articles: article-read is a public cache, so it shows every reader what a reader
// who is neither a moderator nor the writer sees (those read the article service).
const (
	removedTitle = "[removed]"
	pendingTitle = "[hidden pending review]"
)

// appendJSON appends a's wire form: the article's object with its moderation state and the three counts added to
// it, as encoding/json writes it, without decoding the article unless it is hidden.
func (a ArticleRead) appendJSON(dst []byte) []byte {
	article := a.shown()
	return a.appendState(append(dst, article[:len(article)-1]...))
}

// appendSummaryJSON appends a's summary wire form, what a list answers with ?view=summary: appendJSON's without
// content, contentHtml and contentText, with an excerpt of contentText after the title.
func (a ArticleRead) appendSummaryJSON(dst []byte) []byte {
	head, text, tail, ok := a.shown().parts()
	if !ok {
		return a.appendJSON(dst) // never stored (isArticleJSON)
	}
	dst = append(append(dst, head...), `,"excerpt":`...)
	dst = appendExcerpt(dst, text)
	return a.appendState(append(dst, tail[:len(tail)-1]...))
}

// shown is the article as readers are shown it: a hidden one's placeholder.
func (a ArticleRead) shown() articleJSON {
	if a.Moderation.Hidden != event.Visible {
		return masked(a.Article, a.Moderation.Hidden)
	}
	return a.Article
}

// appendState appends a's moderation state and counts and closes its object.
func (a ArticleRead) appendState(dst []byte) []byte {
	m := a.Moderation
	if m.Hidden == event.Visible && !m.Locked && !m.Pinned {
		dst = append(dst, `,"hidden":"","removedReason":"","locked":false,"pinned":false`...)
	} else {
		raw, _ := json.Marshal(m) // strings and bools: cannot fail
		dst = append(append(dst, ','), raw[1:len(raw)-1]...)
	}
	dst = append(dst, `,"articleCommentCount":`...)
	dst = strconv.AppendInt(dst, a.CommentCount, 10)
	dst = append(dst, `,"articleLikeCount":`...)
	dst = strconv.AppendInt(dst, a.LikeCount, 10)
	dst = append(dst, `,"articleViewCount":`...)
	dst = strconv.AppendInt(dst, a.ViewCount, 10)
	return append(dst, '}')
}

// masked is a hidden article's wire form: its placeholder title and no content.
func masked(a articleJSON, hidden event.Hidden) articleJSON {
	var art Article
	if err := json.Unmarshal([]byte(a), &art); err != nil {
		return a // not an article's JSON: never stored (isArticleJSON)
	}
	art.Title, art.Content, art.ContentHTML, art.ContentText = removedTitle, "", "", ""
	if hidden == event.Pending {
		art.Title = pendingTitle
	}
	out, err := encodeArticle(art)
	if err != nil {
		return a
	}
	return out
}

// parts splits the wire form around its content (json.Marshal writes Article's fields in their order): head is the
// object up to the content field, text contentText's quoted string, tail the object from boardId on. A `,"` stands
// only between fields, since a quote inside a string is escaped.
func (a articleJSON) parts() (head string, text string, tail string, ok bool) {
	s := string(a)
	content := strings.Index(s, `,"content":"`)
	textAt := strings.Index(s, `,"contentText":"`)
	board := strings.Index(s, `,"boardId":`)
	if content < 0 || textAt < content || board < textAt {
		return "", "", "", false
	}
	return s[:content], s[textAt+len(`,"contentText":`) : board], s[board:], true
}

// excerptRunes bounds a summary's excerpt: a line or two under the title.
const excerptRunes = 200

// appendExcerpt appends, as a JSON string, the start of the text that quoted (a JSON string) holds: its whitespace
// made single spaces, cut at a word boundary before excerptRunes with an ellipsis when longer. It walks quoted's
// escaped form and copies it as it goes, never decoding the text whole: pages ask for it every time.
func appendExcerpt(dst []byte, quoted string) []byte {
	dst = append(dst, '"')
	start := len(dst)
	// keep is where dst ends one rune before the bound, to leave room for the ellipsis.
	runes, keep, space, cut := 0, start, false, false
	for i := 1; i < len(quoted)-1; {
		r, n := rune(quoted[i]), 1
		raw := quoted[i : i+1]
		switch {
		case r == '\\':
			r, n = unescape(quoted[i:])
			raw = quoted[i : i+n]
		case r >= utf8.RuneSelf:
			r, n = utf8.DecodeRuneInString(quoted[i:])
			raw = quoted[i : i+n]
		}
		i += n
		if unicode.IsSpace(r) {
			space = len(dst) > start
			continue
		}
		if space {
			dst, runes, space = append(dst, ' '), runes+1, false
			if runes < excerptRunes {
				keep = len(dst)
			}
		}
		if runes >= excerptRunes {
			cut = true
			break
		}
		dst, runes = append(dst, raw...), runes+1
		if runes < excerptRunes {
			keep = len(dst)
		}
	}
	if cut {
		dst = dst[:keep]
		if i := bytes.LastIndexByte(dst[start:], ' '); i > (len(dst)-start)/2 {
			dst = dst[:start+i]
		}
		dst = append(bytes.TrimRight(dst, " ,.;:"), "…"...)
	}
	return append(dst, '"')
}

// unescape reads the escape sequence that s starts with: the rune it stands for and its length. json.Marshal, which
// wrote every stored form, escapes only single runes (control characters, <, >, &, U+2028, U+2029) and never
// writes a bad escape; one would read as the backslash alone.
func unescape(s string) (rune, int) {
	if len(s) < 2 {
		return '\\', 1
	}
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		if len(s) < 6 {
			return '\\', 1
		}
		r, err := strconv.ParseUint(s[2:6], 16, 16)
		if err != nil {
			return '\\', 1
		}
		return rune(r), 6
	}
	return rune(s[1]), 2 // \", \\, \/
}

// masked reports whether the article is the placeholder the article service answers anonymous readers while it is
// hidden: an article's content is never empty otherwise.
func (a articleJSON) masked() bool { return strings.Contains(string(a), `,"content":"",`) }

// id is the article's id, read from the start of its wire form.
func (a articleJSON) id() int64 {
	rest := strings.TrimPrefix(string(a), `{"articleId":"`)
	end := strings.IndexByte(rest, '"')
	if end < 0 {
		return 0
	}
	id, _ := strconv.ParseInt(rest[:end], 10, 64)
	return id
}

func (s *Service) modelKey(articleID int64) string {
	return s.cfg.KeyPrefix + "article-read::article::{" + strconv.FormatInt(articleID, 10) + "}"
}

// boardKeys are a board's keys, in boardScript's order: list, meta, deleted, moderation, pinned.
func (s *Service) boardKeys(boardID int64) []string {
	base := s.cfg.KeyPrefix + "article-read::board::{" + strconv.FormatInt(boardID, 10) + "}::"
	return []string{base + "list", base + "meta", base + "deleted", base + "moderation", base + "pinned"}
}

// member is an article's name in a board list: its id zero-padded, so that lexicographic order is numeric order.
func member(articleID int64) string { return fmt.Sprintf("%019d", articleID) }

// memberScore is the list score of an article: the millisecond in its id, exact in a float64.
func memberScore(articleID int64) int64 { return memberScoreAt(snowflake.Timestamp(articleID)) }

func memberScoreAt(t time.Time) int64 { return t.UnixMilli() }

// keepUntil is when the model of an article built from events expires: a day after its creation.
func keepUntil(articleID int64) time.Time { return snowflake.Timestamp(articleID).Add(ModelTTL) }

// articleJSON is an article in its wire form, the article service's JSON object, as the model stores it: a warm
// read splices it into its answer, neither decoding the article nor encoding it again.
type articleJSON string

func encodeArticle(a Article) (articleJSON, error) {
	raw, err := json.Marshal(a)
	return articleJSON(raw), err
}

// isArticleJSON tells an article stored in wire form from one stored by an earlier version (another format, or
// from before contentHtml), which reads then fetch again from the origin.
func isArticleJSON(raw string) bool {
	_, _, _, ok := articleJSON(raw).parts()
	return ok && strings.HasPrefix(raw, `{"articleId":`) && strings.HasSuffix(raw, "}") && strings.Contains(raw, `,"contentHtml":`)
}

// modelScript applies field groups to an article's model, each only if newer, or puts a tombstone, and keeps the
// key at least until a given instant without ever moving its expiry earlier (compared in Redis, so the clocks of
// the service and of Redis need not agree).
// KEYS: the model. ARGV: keep-until (Unix ms), now (Unix ms), trusted ('1' or '0'), then either 'deleted' and the
// delete's version, or groups of four: value field, version field, version, value.
// An untrusted write (an event committed before the read model's epoch, which may be older than state Redis lost)
// into a group the model lacks marks the group unverified (field '<value>?'), and reads fetch it again from its
// origin; a trusted write of the group's current version or a newer one verifies it.
// A model that does not exist is not created when keep-until has passed: nothing would read it.
// Returns 2 when the model is a tombstone (nothing written), 1 when it applied, 0 when it created nothing.
var modelScript = redis.NewScript(`
local h, keepUntil, now, trusted = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
if redis.call('HEXISTS', h, 'deleted') == 1 then return 2 end
if redis.call('EXISTS', h) == 0 and keepUntil <= now then return 0 end
local expiry = redis.call('PEXPIRETIME', h)
if ARGV[4] == 'deleted' then
  redis.call('DEL', h)
  redis.call('HSET', h, 'deleted', ARGV[5])
else
  for i = 4, #ARGV, 4 do
    local value, versionField, version = ARGV[i], ARGV[i+1], tonumber(ARGV[i+2])
    local held = redis.call('HGET', h, versionField)
    local current = tonumber(held or '-1')
    if version > current or (trusted and version == current) then
      redis.call('HSET', h, value, ARGV[i+3], versionField, version)
      if trusted then
        redis.call('HDEL', h, value .. '?')
      elseif not held then
        redis.call('HSET', h, value .. '?', '1')
      end
    end
  end
end
if expiry > keepUntil then keepUntil = expiry end
redis.call('PEXPIREAT', h, keepUntil)
return 1`)

// modelTombstone is modelScript's answer for a deleted article.
const modelTombstone = 2

// epoch returns when this Redis's read model began: the instant the service first found the epoch key missing,
// which is also what a flushed or emptied Redis looks like. Events committed before it may be older than state that
// Redis lost, so they may not vouch for a field group the model lacks.
func (s *Service) epoch(ctx context.Context) (int64, error) {
	key := s.cfg.KeyPrefix + "article-read::epoch"
	ms, err := s.rdb.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		// A margin ahead of now: a producer whose clock runs ahead of ours must not pass off an event committed
		// before the loss as one after it. Events of the margin are only read again from their origins.
		start := s.cfg.Now().Add(epochMargin).UnixMilli()
		if err = s.rdb.SetNX(ctx, key, start, 0).Err(); err == nil {
			ms, err = s.rdb.Get(ctx, key).Int64()
		}
	}
	if err != nil {
		return 0, redisFault(err)
	}
	return ms, nil
}

// Prepare starts the read model's epoch if this Redis has none, so that the margin it starts with passes while
// the service starts rather than over its first events.
func (s *Service) Prepare(ctx context.Context) error {
	_, err := s.epoch(ctx)
	return err
}

// trusted reports, as modelScript's flag, whether an event was committed after the read model's epoch.
func (s *Service) trusted(ctx context.Context, eventID int64) (string, error) {
	epoch, err := s.epoch(ctx)
	if err != nil {
		return "", err
	}
	if snowflake.Timestamp(eventID).UnixMilli() >= epoch {
		return "1", nil
	}
	return "0", nil
}

// boardScript applies an article's creation, deletion or moderation, or a backfill, to its board's list, and the
// board count if newer. KEYS: list, meta, deleted, moderation, pinned. ARGV: the change ('created', 'deleted',
// 'moderated' or 'backfill'), now (Unix ms), the list size, the count, its version, then for created/deleted the
// member and its score, for moderated the member, its score, the moderation version and two flags, hidden and
// pinned ('1' or '0'), for a backfill the floor it proves (empty when it read the whole board), the instant its read
// began less a margin (Unix ms), and the members and scores it read, newest first.
//
// The moderation hash holds, per member, the newest moderation applied as '<version>:<hidden><pinned>', so that
// a late event never undoes a newer one; a hidden article stays out of the list (the list then proves every live,
// visible article at or above the floor), and the pinned set holds the pinned, visible, undeleted articles.
var boardScript = redis.NewScript(strings.ReplaceAll(`
local list, meta, deleted, moderation, pinned = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local change, now, size = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local floor = redis.call('HGET', meta, 'floor') or ''
local function record(member)
  local r = redis.call('HGET', moderation, member)
  if not r then return -1, '0', '0' end
  local v, h, p = string.match(r, '^(%d+):(%d)(%d)$')
  return tonumber(v), h, p
end
local function add(member, score)
  local _, hidden = record(member)
  if (floor == '' or member >= floor) and hidden == '0' and not redis.call('ZSCORE', deleted, member) then
    redis.call('ZADD', list, score, member)
  end
end
if change == 'created' then
  add(ARGV[6], ARGV[7])
elseif change == 'moderated' then
  local member, version, hidden, pin = ARGV[6], tonumber(ARGV[8]), ARGV[9], ARGV[10]
  if version <= record(member) then return 0 end
  redis.call('HSET', moderation, member, version .. ':' .. hidden .. pin)
  if hidden == '1' then
    redis.call('ZREM', list, member)
  else
    add(member, ARGV[7])
  end
  if pin == '1' and hidden == '0' and not redis.call('ZSCORE', deleted, member) then
    redis.call('ZADD', pinned, ARGV[7], member)
  else
    redis.call('ZREM', pinned, member)
  end
elseif change == 'deleted' then
  redis.call('ZREM', list, ARGV[6])
  redis.call('ZREM', pinned, ARGV[6])
  redis.call('ZADD', deleted, now, ARGV[6])
  redis.call('ZREMRANGEBYSCORE', deleted, '-inf', now - ${recent})
  redis.call('PEXPIRE', deleted, ${recent})
elseif change == 'backfill' then
  -- What the backfill read proves replaces what the list proved: every live id at or above its floor was read,
  -- and an id from before the read began that it did not see is not live (a late event listed it again).
  floor = ARGV[6]
  local read = {}
  for i = 8, #ARGV, 2 do
    read[ARGV[i]] = true
    add(ARGV[i], ARGV[i+1])
  end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', list, '-inf', '(' .. ARGV[7])) do
    if (floor == '' or m >= floor) and not read[m] then redis.call('ZREM', list, m) end
  end
  redis.call('HSET', meta, 'synced', '1')
  -- Below the floor a moderation record keeps nothing out of the list: only a pin needs it there.
  if floor ~= '' then
    local records = redis.call('HGETALL', moderation)
    for i = 1, #records, 2 do
      if records[i] < floor and string.sub(records[i+1], -1) == '0' then redis.call('HDEL', moderation, records[i]) end
    end
  end
end
-- Keep the newest size ids; what falls off raises the floor to the oldest id kept.
if redis.call('ZCARD', list) > size then
  redis.call('ZREMRANGEBYRANK', list, 0, -size - 1)
  local oldest = redis.call('ZRANGE', list, 0, 0)[1]
  if oldest > floor then floor = oldest end
end
if floor ~= '' then
  -- Below the floor the list proves nothing: drop what events left there, oldest first.
  local oldest = redis.call('ZRANGE', list, 0, 0)[1]
  while oldest and oldest < floor do
    redis.call('ZREM', list, oldest)
    oldest = redis.call('ZRANGE', list, 0, 0)[1]
  end
end
redis.call('HSET', meta, 'floor', floor)
if tonumber(ARGV[5]) > tonumber(redis.call('HGET', meta, 'cv') or '-1') then
  redis.call('HSET', meta, 'count', ARGV[4], 'cv', ARGV[5])
end
return 1`, "${recent}", strconv.FormatInt(recentDeletes.Milliseconds(), 10)))

// Apply applies one event to the read model. It returns an error of kind Invalid for an event that can never be
// applied, and of kind Unavailable when Redis cannot serve (the consumer then waits for it).
func (s *Service) Apply(ctx context.Context, env event.Envelope) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	switch env.Type {
	case event.ArticleCreated, event.ArticleUpdated, event.ArticleDeleted:
		return s.applyArticle(ctx, env)
	case event.CommentCreated, event.CommentDeleted:
		p, err := event.Payload[event.Comment](env)
		if err != nil {
			return err
		}
		if p.ArticleID <= 0 || p.ArticleCommentCountVersion <= 0 {
			return fault.Invalidf("INCOMPLETE_EVENT", "%s %d lacks articleId or articleCommentCountVersion", env.Type, env.EventID)
		}
		if err := s.applyModel(ctx, int64(env.EventID), int64(p.ArticleID), "comments", "cv", p.ArticleCommentCountVersion, p.ArticleCommentCount); err != nil {
			return err
		}
		groups := []sortGroup{{"comments", p.ArticleCommentCountVersion, p.ArticleCommentCount}}
		if env.Type == event.CommentCreated && p.CommentID > 0 {
			at := commentTime(int64(p.CommentID))
			groups = append(groups, sortGroup{"active", at, at})
		}
		return s.applySorts(ctx, int64(p.ArticleID), 0, "counts", groups...)
	case event.ArticleLiked, event.ArticleUnliked:
		p, err := event.Payload[event.Like](env)
		if err != nil {
			return err
		}
		if p.ArticleID <= 0 || p.ArticleLikeCountVersion <= 0 {
			return fault.Invalidf("INCOMPLETE_EVENT", "%s %d lacks articleId or articleLikeCountVersion", env.Type, env.EventID)
		}
		if err := s.applyModel(ctx, int64(env.EventID), int64(p.ArticleID), "likes", "lv", p.ArticleLikeCountVersion, p.ArticleLikeCount); err != nil {
			return err
		}
		return s.applySorts(ctx, int64(p.ArticleID), 0, "counts", sortGroup{"likes", p.ArticleLikeCountVersion, p.ArticleLikeCount})
	case event.ArticleModerated:
		return s.applyModeration(ctx, env)
	}
	return fault.Invalidf("UNKNOWN_EVENT", "article-read has no use for %s", env.Type)
}

func (s *Service) applyArticle(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.Article](env)
	if err != nil {
		return err
	}
	id := int64(p.ArticleID)
	if id <= 0 || p.BoardID <= 0 || p.ArticleVersion <= 0 || p.BoardArticleCountVersion <= 0 {
		return fault.Invalidf("INCOMPLETE_EVENT", "%s %d lacks an id, board or version", env.Type, env.EventID)
	}
	now := s.cfg.Now().UnixMilli()
	keep := keepUntil(id).UnixMilli()
	trusted, err := s.trusted(ctx, int64(env.EventID))
	if err != nil {
		return err
	}
	var applied int64
	if env.Type == event.ArticleDeleted {
		applied, err = modelScript.Run(ctx, s.rdb, []string{s.modelKey(id)}, keep, now, trusted, "deleted",
			p.ArticleVersion).Int64()
	} else {
		contentHTML := p.ContentHTML
		if contentHTML == "" {
			// An event from before Markdown: its content is plain text, which the article service shows escaped.
			contentHTML = markdown.Legacy(p.Content).HTML
		}
		var article articleJSON
		article, err = encodeArticle(Article{p.ArticleID, p.Title, p.Content, contentHTML, p.Text(), p.BoardID, p.WriterID,
			p.CreatedAt, p.ModifiedAt})
		if err != nil {
			return err
		}
		args := []any{keep, now, trusted, "article", "av", p.ArticleVersion, string(article)}
		if env.Type == event.ArticleCreated && trusted == "1" {
			// An article created since the epoch has its whole history after it, none of it lost: the counts it
			// was created with (none, version 0) stand until its count events arrive. Reads of a new article
			// then need no origin.
			args = append(args, "comments", "cv", 0, 0, "likes", "lv", 0, 0)
		}
		applied, err = modelScript.Run(ctx, s.rdb, []string{s.modelKey(id)}, args...).Int64()
	}
	if err != nil {
		return fmt.Errorf("apply %s %d to the model: %w", env.Type, env.EventID, redisFault(err))
	}
	change := "created"
	switch {
	case env.Type == event.ArticleUpdated:
		return nil // neither the board's list nor its count changes
	case env.Type == event.ArticleDeleted:
		change = "deleted"
	case applied == modelTombstone:
		change = "deleted" // a late create of a deleted article: keep it out of the list
	}
	if err := boardScript.Run(ctx, s.rdb, s.boardKeys(int64(p.BoardID)), change, now, ListSize,
		p.BoardArticleCount, p.BoardArticleCountVersion, member(id), memberScore(id)).Err(); err != nil {
		return fmt.Errorf("apply %s %d to board %d: %w", env.Type, env.EventID, p.BoardID, redisFault(err))
	}
	if change == "deleted" {
		return s.applySorts(ctx, id, int64(p.BoardID), "deleted")
	}
	return s.applySorts(ctx, id, int64(p.BoardID), "board", sortGroup{"created", 1, 1})
}

func (s *Service) applyModel(ctx context.Context, eventID, articleID int64, field, versionField string, version,
	value int64) error {
	trusted, err := s.trusted(ctx, eventID)
	if err != nil {
		return err
	}
	err = modelScript.Run(ctx, s.rdb, []string{s.modelKey(articleID)}, keepUntil(articleID).UnixMilli(),
		s.cfg.Now().UnixMilli(), trusted, field, versionField, version, value).Err()
	if err != nil {
		return fmt.Errorf("apply %s of article %d: %w", field, articleID, redisFault(err))
	}
	return nil
}

// applyModeration applies an ARTICLE_MODERATED to the article's model and to its board's list and pinned set,
// each only if newer than the moderation it holds.
//
// The model takes it even when it holds nothing else of the article, for a day from now as a rebuild would keep
// it: the article service learns the moderation from the same event, at its own pace, so a rebuild that read an
// article from it just before would otherwise keep the older state. It is written as trusted whatever the epoch:
// one article's moderation events share a partition (keyed by its board) and arrive in order, and what a rebuild
// reads from the article service goes through the same version check.
func (s *Service) applyModeration(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.ArticleModeration](env)
	if err != nil {
		return err
	}
	id := int64(p.ArticleID)
	if id <= 0 || p.BoardID <= 0 || p.ModerationVersion <= 0 {
		return fault.Invalidf("INCOMPLETE_EVENT", "%s %d lacks an id, board or moderationVersion", env.Type, env.EventID)
	}
	switch p.Hidden {
	case event.Visible, event.Pending, event.Removed:
	default:
		return fault.Invalidf("UNKNOWN_HIDDEN", "%s %d says hidden %q", env.Type, env.EventID, p.Hidden)
	}
	m := Moderation{Hidden: p.Hidden, RemovedReason: p.RemovedReason, Locked: p.Locked, Pinned: p.Pinned}
	if m.Hidden == event.Visible {
		m.RemovedReason = ""
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	keep := max(keepUntil(id).UnixMilli(), now.Add(ModelTTL).UnixMilli())
	applied, err := modelScript.Run(ctx, s.rdb, []string{s.modelKey(id)}, keep, now.UnixMilli(), "1", "mod", "mv",
		p.ModerationVersion, string(raw)).Int64()
	if err != nil {
		return fmt.Errorf("apply %s %d to the model: %w", env.Type, env.EventID, redisFault(err))
	}
	if applied == modelTombstone {
		return nil // deleted: its delete took it out of the list, the pinned set and the sorts
	}
	if err := boardScript.Run(ctx, s.rdb, s.boardKeys(int64(p.BoardID)), "moderated", now.UnixMilli(), ListSize, -1, -1,
		member(id), memberScore(id), p.ModerationVersion, flag(m.Hidden != event.Visible), flag(m.Pinned)).Err(); err != nil {
		return fmt.Errorf("apply %s %d to board %d: %w", env.Type, env.EventID, p.BoardID, redisFault(err))
	}
	return s.applySorts(ctx, id, int64(p.BoardID), "board", sortGroup{"mod", p.ModerationVersion, boolInt(m.Hidden != event.Visible)})
}

// boolInt is a boolean as the sort scripts take it.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// flag is a boolean as boardScript takes it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Handlers are the consumer's handlers: Apply for the article, comment, like and article moderation events.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{
		event.ArticleCreated: s.Apply, event.ArticleUpdated: s.Apply, event.ArticleDeleted: s.Apply,
		event.CommentCreated: s.Apply, event.CommentDeleted: s.Apply,
		event.ArticleLiked: s.Apply, event.ArticleUnliked: s.Apply,
		event.ArticleModerated: s.Apply,
	}
}

// KeyPattern matches every Redis key of the service (models, board lists, cached view counts), for a replay to
// clear.
func (s *Service) KeyPattern() string { return s.cfg.KeyPrefix + "article-read::*" }

// redisFault is the article-read service's 503 for a Redis that cannot serve.
func redisFault(err error) error {
	return redisclient.Unavailable(err, "REDIS_UNAVAILABLE", "the read model (Redis) is unavailable; try again later")
}

var errArticleNotFound = fault.NotFoundf("ARTICLE_NOT_FOUND", "article not found")

// asNotFound turns an origin's 404 into the article's 404.
func asNotFound(err error) error {
	if errors.Is(err, errNotFound) {
		return errArticleNotFound
	}
	return err
}
