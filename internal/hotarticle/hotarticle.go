// Package hotarticle is the hot-article service (SPEC §3.5): each day's ten best articles, by
// score = likes*3 + comments*2 + views, computed from the event stream alone. It never calls another service.
//
// # State
//
// An article competes on the day it was created, in the configured time zone. An article is created at the time
// in its id (the article service makes it so), so every event names the article's day through its articleId,
// even a like that arrives before the article's own ARTICLE_CREATED. All keys of one day share the hash tag of
// that day, so one script can change an article's state and the day's ranking together, on Redis Cluster too:
//
//	hot-article::{yyyyMMdd}::article::<articleId>   hash: title, created (ms), av (article version),
//	                                                likes, lv, comments, cv (count and version), views,
//	                                                hidden, mv (moderation state and version);
//	                                                or, once deleted, only the tombstone: deleted = version
//	hot-article::{yyyyMMdd}::list                   sorted set: every live, created, visible article of the day
//	                                                by score
//
// Every event is applied by one Lua script (applyScript) that changes a field only if the event is newer than
// what the hash holds (higher version; for views, which only grow, a higher count), then re-scores the article
// in the day's list if the article is known and not deleted. So duplicates and any order of delivery give the
// same state:
//   - counts that arrive before the article wait in its hash; ARTICLE_CREATED (or a later ARTICLE_UPDATED, which
//     carries the same fields) puts the article in the list with them;
//   - ARTICLE_DELETED leaves a tombstone that refuses every later event, so nothing brings the article back;
//   - a count that goes down (a newer version with a smaller count) lowers the score;
//   - ARTICLE_MODERATED that hides the article (SPEC §3.9) takes it out of the list but keeps its hash, whose counts
//     go on following their events, so that a restore (hidden back to "") ranks it again with its latest counts.
//
// # Exact ranking
//
// The list holds every created article of the day, not only ten, so the top ten are exact after any sequence of
// events: an article that drops out and climbs back, or one that falls below an article that was once ahead of it,
// is ranked by its latest counts. Equal scores put the newer article first: members are zero-padded ids, which
// ZREVRANGE orders descending for equal scores, and a larger Snowflake id is a newer article. The cost is one
// sorted-set member and one small hash per article created that day (docs/hot-article.md has the measured bytes).
//
// # Lifetime
//
// A day's list and its articles' hashes expire together, retention (7 days by default) after the day ends: an
// absolute PEXPIREAT that every update sets to the same instant, so no update extends or shortens it. An event for
// an article whose day has expired is ignored (its list is gone); one whose id lies further in the future than
// clocks can disagree is dead-lettered (no real article has such an id). Nothing ever needs sweeping.
package hotarticle

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/redisclient"
	"board/internal/snowflake"
)

// Defaults (SPEC §5.2).
const (
	// DefaultRetention is how long a day's list is kept after the day ends.
	DefaultRetention = 7 * 24 * time.Hour
	// ListSize is how many articles a day's list shows.
	ListSize = 10
	// maxClockSkew is how far in the future an article id may lie and still be taken for a real article: an id
	// issued by an instance whose clock runs ahead of ours.
	maxClockSkew = time.Hour
	// readMargin is how many members past the tenth a read fetches, so that an article deleted between the read of
	// the list and the read of its hash does not leave the answer one short.
	readMargin = 10
	// opTimeout bounds one Redis round trip of an event handler (the HTTP API has the request's deadline).
	opTimeout = 2 * time.Second
)

// Config tunes a Service; zero fields take the defaults.
type Config struct {
	// KeyPrefix goes in front of every Redis key the service writes.
	KeyPrefix string
	// Location is the time zone days are counted in (default time.Local).
	Location *time.Location
	// Retention is how long a day's list is kept after the day ends (default DefaultRetention).
	Retention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the events the service ignores, at debug level.
	Logger *slog.Logger
}

// Service keeps the daily rankings in Redis.
type Service struct {
	rdb redis.UniversalClient
	cfg Config
}

// NewService returns the hot-article service over rdb (standalone or cluster).
func NewService(rdb redis.UniversalClient, cfg Config) *Service {
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{rdb: rdb, cfg: cfg}
}

// HotArticle is one entry of a day's list.
type HotArticle struct {
	ArticleID    int64
	Title        string
	CreatedAt    time.Time
	Score        int64
	LikeCount    int64
	CommentCount int64
	ViewCount    int64
}

// Score is the ranking formula (SPEC §3.5).
func Score(likes, comments, views int64) int64 { return likes*3 + comments*2 + views }

// day is the calendar day an article competes on, as yyyyMMdd, and when its state expires.
type day struct {
	name     string
	expireAt time.Time
}

// dayOf returns the day of the article with id articleID in the service's time zone.
func (s *Service) dayOf(articleID int64) day {
	created := snowflake.Timestamp(articleID).In(s.cfg.Location)
	y, m, d := created.Date()
	return day{name: created.Format(dayLayout), expireAt: dayStart(y, m, d+1, s.cfg.Location).Add(s.cfg.Retention)}
}

const dayLayout = "20060102"

func (s *Service) listKey(dayName string) string {
	return s.cfg.KeyPrefix + "hot-article::{" + dayName + "}::list"
}

func (s *Service) articleKey(dayName string, articleID int64) string {
	return s.cfg.KeyPrefix + "hot-article::{" + dayName + "}::article::" + strconv.FormatInt(articleID, 10)
}

// member is an article's name in a day's list: its id zero-padded to the width of the largest int64, so that
// lexicographic order (ZREVRANGE's order among equal scores) is numeric order.
func member(articleID int64) string { return fmt.Sprintf("%019d", articleID) }

// applyScript applies one event to an article's state and re-scores it in its day's list.
// KEYS: the article's hash, the day's list (one hash slot). ARGV: the change ('article', 'deleted', 'likes',
// 'comments', 'views' or 'moderation'), the list member, the expiry in Unix ms, then per change:
//
//	article: version, title, createdAt ms     deleted: version
//	likes, comments: count, version           views: count
//	moderation: version, hidden ('' or why)
//
// Returns 1 if the state changed, 0 if the event was old news.
var applyScript = redis.NewScript(`
local h, list, change, member, expireAt = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', h, 'deleted') == 1 then return 0 end
if change == 'deleted' then
  redis.call('DEL', h)
  redis.call('HSET', h, 'deleted', ARGV[4])
  redis.call('PEXPIREAT', h, expireAt)
  redis.call('ZREM', list, member)
  return 1
end
local function newer(field, value)
  return tonumber(value) > tonumber(redis.call('HGET', h, field) or '-1')
end
if change == 'article' then
  if not newer('av', ARGV[4]) then return 0 end
  redis.call('HSET', h, 'av', ARGV[4], 'title', ARGV[5], 'created', ARGV[6])
elseif change == 'likes' then
  if not newer('lv', ARGV[5]) then return 0 end
  redis.call('HSET', h, 'likes', ARGV[4], 'lv', ARGV[5])
elseif change == 'comments' then
  if not newer('cv', ARGV[5]) then return 0 end
  redis.call('HSET', h, 'comments', ARGV[4], 'cv', ARGV[5])
elseif change == 'views' then
  if not newer('views', ARGV[4]) then return 0 end
  redis.call('HSET', h, 'views', ARGV[4])
elseif change == 'moderation' then
  if not newer('mv', ARGV[4]) then return 0 end
  redis.call('HSET', h, 'mv', ARGV[4], 'hidden', ARGV[5])
else
  return redis.error_reply('unknown change ' .. change)
end
redis.call('PEXPIREAT', h, expireAt)
if (redis.call('HGET', h, 'hidden') or '') ~= '' then
  redis.call('ZREM', list, member)
elseif redis.call('HEXISTS', h, 'av') == 1 then
  local c = redis.call('HMGET', h, 'likes', 'comments', 'views')
  local score = 3 * (tonumber(c[1]) or 0) + 2 * (tonumber(c[2]) or 0) + (tonumber(c[3]) or 0)
  redis.call('ZADD', list, score, member)
  redis.call('PEXPIREAT', list, expireAt)
end
return 1`)

// change is one event reduced to what the ranking needs.
type change struct {
	articleID int64
	kind      string // applyScript's change
	args      []any  // applyScript's ARGV after the member and the expiry
}

// Apply applies one event. It returns an error of kind Invalid for an event that can never be applied, and of
// kind Unavailable when Redis cannot serve (the consumer then waits for it).
func (s *Service) Apply(ctx context.Context, env event.Envelope) error {
	c, err := toChange(env)
	if err != nil {
		return err
	}
	d := s.dayOf(c.articleID)
	now := s.cfg.Now()
	if snowflake.Timestamp(c.articleID).After(now.Add(maxClockSkew)) {
		return fault.Invalidf("ARTICLE_FROM_THE_FUTURE", "%s %d names article %d, whose id lies in the future",
			env.Type, env.EventID, c.articleID)
	}
	if !d.expireAt.After(now) {
		s.cfg.Logger.Debug("hot-article: event of a day no longer kept, ignored", "event_id", env.EventID,
			"type", env.Type, "article_id", c.articleID, "day", d.name)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	keys := []string{s.articleKey(d.name, c.articleID), s.listKey(d.name)}
	args := append([]any{c.kind, member(c.articleID), d.expireAt.UnixMilli()}, c.args...)
	if err := applyScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("apply %s %d: %w", env.Type, env.EventID, redisFault(err))
	}
	return nil
}

// toChange decodes an event's payload into its change, rejecting events that name no article.
func toChange(env event.Envelope) (change, error) {
	var c change
	switch env.Type {
	case event.ArticleCreated, event.ArticleUpdated, event.ArticleDeleted:
		p, err := event.Payload[event.Article](env)
		if err != nil {
			return c, err
		}
		c.articleID = int64(p.ArticleID)
		switch {
		case p.ArticleVersion <= 0:
			return c, fault.Invalidf("NO_VERSION", "%s %d carries no articleVersion", env.Type, env.EventID)
		case env.Type == event.ArticleDeleted:
			c.kind, c.args = "deleted", []any{p.ArticleVersion}
		case time.Time(p.CreatedAt).IsZero():
			return c, fault.Invalidf("NO_CREATED_AT", "%s %d carries no createdAt", env.Type, env.EventID)
		default:
			c.kind, c.args = "article", []any{p.ArticleVersion, p.Title, time.Time(p.CreatedAt).UnixMilli()}
		}
	case event.CommentCreated, event.CommentDeleted:
		p, err := event.Payload[event.Comment](env)
		if err != nil {
			return c, err
		}
		c.articleID, c.kind, c.args = int64(p.ArticleID), "comments", []any{p.ArticleCommentCount, p.ArticleCommentCountVersion}
		if p.ArticleCommentCountVersion <= 0 {
			return c, fault.Invalidf("NO_VERSION", "%s %d carries no articleCommentCountVersion", env.Type, env.EventID)
		}
	case event.ArticleLiked, event.ArticleUnliked:
		p, err := event.Payload[event.Like](env)
		if err != nil {
			return c, err
		}
		c.articleID, c.kind, c.args = int64(p.ArticleID), "likes", []any{p.ArticleLikeCount, p.ArticleLikeCountVersion}
		if p.ArticleLikeCountVersion <= 0 {
			return c, fault.Invalidf("NO_VERSION", "%s %d carries no articleLikeCountVersion", env.Type, env.EventID)
		}
	case event.ArticleViewed:
		p, err := event.Payload[event.View](env)
		if err != nil {
			return c, err
		}
		c.articleID, c.kind, c.args = int64(p.ArticleID), "views", []any{p.ArticleViewCount}
	case event.ArticleModerated:
		p, err := event.Payload[event.ArticleModeration](env)
		if err != nil {
			return c, err
		}
		c.articleID, c.kind, c.args = int64(p.ArticleID), "moderation", []any{p.ModerationVersion, string(p.Hidden)}
		if p.ModerationVersion <= 0 {
			return c, fault.Invalidf("NO_VERSION", "%s %d carries no moderationVersion", env.Type, env.EventID)
		}
	default:
		return c, fault.Invalidf("UNKNOWN_EVENT", "hot-article has no use for %s", env.Type)
	}
	if c.articleID <= 0 {
		return c, fault.Invalidf("NO_ARTICLE", "%s %d names no article", env.Type, env.EventID)
	}
	return c, nil
}

// Handlers are the consumer's handlers: Apply for every event type the ranking follows.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{
		event.ArticleCreated: s.Apply, event.ArticleUpdated: s.Apply, event.ArticleDeleted: s.Apply,
		event.CommentCreated: s.Apply, event.CommentDeleted: s.Apply,
		event.ArticleLiked: s.Apply, event.ArticleUnliked: s.Apply,
		event.ArticleViewed:    s.Apply,
		event.ArticleModerated: s.Apply,
	}
}

// Day returns the list of the day named yyyyMMdd in the service's time zone: the ten best articles, best first.
func (s *Service) Day(ctx context.Context, name string) ([]HotArticle, error) {
	if err := s.checkDay(name); err != nil {
		return nil, err
	}
	members, err := s.rdb.ZRevRange(ctx, s.listKey(name), 0, ListSize+readMargin-1).Result()
	if err != nil {
		return nil, redisFault(err)
	}
	pipe := s.rdb.Pipeline()
	reads := make([]*redis.SliceCmd, len(members))
	ids := make([]int64, len(members))
	for i, m := range members {
		if ids[i], err = strconv.ParseInt(m, 10, 64); err != nil {
			return nil, fmt.Errorf("hot-article list %s holds %q: %w", name, m, err)
		}
		reads[i] = pipe.HMGet(ctx, s.articleKey(name, ids[i]), "title", "created", "likes", "comments", "views", "hidden")
	}
	if len(members) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, redisFault(err)
		}
	}
	list := make([]HotArticle, 0, ListSize)
	for i, read := range reads {
		if len(list) == ListSize {
			break
		}
		a, ok, err := toHotArticle(ids[i], read.Val())
		if err != nil {
			return nil, fmt.Errorf("hot-article %s/%d: %w", name, ids[i], err)
		}
		if ok { // else deleted or hidden since the list was read
			list = append(list, a)
		}
	}
	return list, nil
}

// toHotArticle reads an article's hash fields (title, created, likes, comments, views, hidden); ok is false when
// the article is no longer there to show.
func toHotArticle(id int64, fields []any) (a HotArticle, ok bool, err error) {
	title, hasTitle := fields[0].(string)
	created, hasCreated := fields[1].(string)
	if hidden, _ := fields[5].(string); !hasTitle || !hasCreated || hidden != "" {
		return a, false, nil
	}
	a = HotArticle{ArticleID: id, Title: title}
	ms, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		return a, false, err
	}
	a.CreatedAt = time.UnixMilli(ms).UTC()
	for i, n := range []*int64{&a.LikeCount, &a.CommentCount, &a.ViewCount} {
		if v, set := fields[2+i].(string); set {
			if *n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return a, false, err
			}
		}
	}
	a.Score = Score(a.LikeCount, a.CommentCount, a.ViewCount)
	return a, true, nil
}

// checkDay rejects a day that is not a yyyyMMdd date, or one no article can have been created on: before the
// first Snowflake id, or after tomorrow.
func (s *Service) checkDay(name string) error {
	t, err := time.Parse(dayLayout, name)
	if err != nil || t.Format(dayLayout) != name {
		return fault.Invalidf("INVALID_DATE", "the date %q is not a date in yyyyMMdd form", name)
	}
	first := calendarDate(snowflake.Epoch.In(s.cfg.Location))
	tomorrow := calendarDate(s.cfg.Now().In(s.cfg.Location)).AddDate(0, 0, 1)
	if t.Before(first) || t.After(tomorrow) {
		return fault.Invalidf("DATE_OUT_OF_RANGE", "the date %s is outside the days articles exist on", name)
	}
	return nil
}

// calendarDate is t's date in its own location, as midnight UTC: dates compare without zone arithmetic.
func calendarDate(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// dayStart is the first instant of the day y-m-d (normalised, so d may overflow) in loc: its midnight, or in a
// zone whose clocks jump over midnight (summer time starting at 00:00, as in Chile), the end of the jump.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, loc).Date()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if t.Day() != d { // midnight does not exist that day, and time.Date took it back into the day before
		_, t = t.ZoneBounds()
	}
	return t
}

// redisFault is the hot-article service's 503 for a Redis that cannot serve.
func redisFault(err error) error {
	return redisclient.Unavailable(err, "REDIS_UNAVAILABLE", "the hot-article store (Redis) is unavailable; try again later")
}

// KeyPattern matches every Redis key of the service (all days' lists and article states), for a replay to clear.
func (s *Service) KeyPattern() string { return s.cfg.KeyPrefix + "hot-article::*" }
