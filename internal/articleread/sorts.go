package articleread

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"board/internal/boardpage"
	"board/internal/fault"
	"board/internal/snowflake"
)

// Sort is an order of a board's lists (the contract of issue 40): newest, the board list of SPEC §3.6, or one of
// the orders kept in sorted sets from events.
type Sort string

// The sorts. top-day, top-week and top-month hold the articles created in the last 24 hours, 7 days and 30 days,
// by likes; top-all every article by likes; comments by comment count; active by the time of the latest comment
// (an article without one: its creation). Ties come newest first.
const (
	SortNewest   Sort = "newest"
	SortTopDay   Sort = "top-day"
	SortTopWeek  Sort = "top-week"
	SortTopMonth Sort = "top-month"
	SortTopAll   Sort = "top-all"
	SortComments Sort = "comments"
	SortActive   Sort = "active"
)

// Windows of the top sorts.
const (
	dayWindow   = 24 * time.Hour
	weekWindow  = 7 * dayWindow
	monthWindow = 30 * dayWindow
)

// ParseSort reads a list's sort parameter: "" is newest.
func ParseSort(s string) (Sort, error) {
	switch Sort(s) {
	case "":
		return SortNewest, nil
	case SortNewest, SortTopDay, SortTopWeek, SortTopMonth, SortTopAll, SortComments, SortActive:
		return Sort(s), nil
	}
	return "", fault.Invalidf("INVALID_SORT",
		"query parameter sort must be one of newest, top-day, top-week, top-month, top-all, comments, active")
}

// window is the name of a top sort's window in the board's windows hash, and its length; "" for the others.
func (s Sort) window() (string, time.Duration) {
	switch s {
	case SortTopDay:
		return "day", dayWindow
	case SortTopWeek:
		return "week", weekWindow
	case SortTopMonth:
		return "month", monthWindow
	}
	return "", 0
}

// sortKeys are a board's keys of the sorts, in sortBoardScript's order: the state of each article, the six sorted
// sets, the index of the last month's articles by creation, and the windows' marks. They share the board's hash
// tag with its list, so one script changes them together, on one node of a cluster.
func (s *Service) sortKeys(boardID int64) []string {
	base := s.cfg.KeyPrefix + "article-read::board::{" + strconv.FormatInt(boardID, 10) + "}::sort::"
	return []string{base + "state", base + string(SortTopDay), base + string(SortTopWeek), base + string(SortTopMonth),
		base + string(SortTopAll), base + string(SortComments), base + string(SortActive), base + "recent",
		base + "windows"}
}

// sortSet is the key of a sort's sorted set among keys (sortKeys).
func sortSet(keys []string, sort Sort) string {
	for i, s := range []Sort{SortTopDay, SortTopWeek, SortTopMonth, SortTopAll, SortComments, SortActive} {
		if s == sort {
			return keys[1+i]
		}
	}
	panic("no sorted set for sort " + string(sort))
}

// articleSortKey is the article's record of the sorts: its board, or the counts that came before it was known.
// It has no expiry: like and comment events name the article only, however old it is.
func (s *Service) articleSortKey(articleID int64) string {
	return s.modelKey(articleID) + "::sort"
}

// sortArticleScript records what the sorts need of an article in its own hash slot, where its like and comment
// events can find it: its board, and, until the board is known, the counts events brought (each only if newer).
// KEYS: the article's sort record. ARGV: 'board' and the board id (an article or moderation event), 'deleted' and
// the board id, or 'counts' and groups of three: name, version, value.
// Returns {status, board, groups...}: status 'deleted' (the article is deleted; board when known), 'board' with
// the board and every group it parked (which the board's script applies, each only if newer: so a retry after a
// failed second step loses nothing), or 'parked' (the board is not known yet: the groups wait in the record).
var sortArticleScript = redis.NewScript(`
local h, op = KEYS[1], ARGV[1]
local board = redis.call('HGET', h, 'board')
if redis.call('HEXISTS', h, 'deleted') == 1 then return {'deleted', board or ''} end
if op == 'deleted' then
  redis.call('DEL', h)
  redis.call('HSET', h, 'board', ARGV[2], 'deleted', '1')
  return {'deleted', ARGV[2]}
end
if op == 'board' then
  if not board then
    board = ARGV[2]
    redis.call('HSET', h, 'board', board)
  end
  local out = {'board', board}
  for _, name in ipairs({'likes', 'comments', 'active'}) do
    local g = redis.call('HMGET', h, name .. ':v', name)
    if g[1] then
      table.insert(out, name)
      table.insert(out, g[1])
      table.insert(out, g[2])
    end
  end
  return out
end
if board then return {'board', board} end
for i = 2, #ARGV, 3 do
  local name, version = ARGV[i], tonumber(ARGV[i+1])
  if version > tonumber(redis.call('HGET', h, name .. ':v') or '-1') then
    redis.call('HSET', h, name .. ':v', ARGV[i+1], name, ARGV[i+2])
  end
end
return {'parked', ''}`)

// sortBoardScript applies groups to an article's state in its board and projects the state onto the sorted sets,
// then trims the windows whose oldest member has aged out. With no member, it only trims.
//
// KEYS: sortKeys. ARGV: now (Unix ms), the member (the id zero-padded: on equal scores reverse-lexicographic order
// is newest first), its creation (Unix ms, from the id), then groups of three: name, version, value. A group is
// applied only if its version is newer than the state's: likes and comments carry their count rows' versions,
// active the comment's time as version and value (so the latest wins), mod the moderation version and '1' when
// hidden, created and deleted version 1. A deleted article's state takes nothing more.
//
// The state is '<name>=<version>:<value>,...'. An article is listed when it is created, not hidden and not
// deleted: in top-all by likes, comments by comment count, active by max(latest comment, creation), and in each
// window it lies in (created after now less the window, and after the window's mark) by likes. The index `recent`
// holds the listed articles of the month window by creation; a window's mark is the cutoff of its last trim, and
// its expiry the instant its oldest member ages out (an upper bound: at most then), when the next write or read
// trims it.
var sortBoardScript = redis.NewScript(strings.NewReplacer(
	"${day}", strconv.FormatInt(dayWindow.Milliseconds(), 10),
	"${week}", strconv.FormatInt(weekWindow.Milliseconds(), 10),
	"${month}", strconv.FormatInt(monthWindow.Milliseconds(), 10)).Replace(`
local state, topAll, comments, active, recent, windows = KEYS[1], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local now, m = tonumber(ARGV[1]), ARGV[2]
local spans = {{'day', KEYS[2], ${day}}, {'week', KEYS[3], ${week}}, {'month', KEYS[4], ${month}}}
local function mark(name) return tonumber(redis.call('HGET', windows, name) or '0') end
if m ~= '' then
  local created, createdRaw = tonumber(ARGV[3]), ARGV[3]
  local st, raw = {}, redis.call('HGET', state, m)
  if raw then
    for name, version, value in string.gmatch(raw, '(%a+)=(%d+):(%d+)') do st[name] = {tonumber(version), version, value} end
  end
  if st.deleted then return 0 end
  for i = 4, #ARGV, 3 do
    local name, version = ARGV[i], tonumber(ARGV[i+1])
    if not st[name] or version > st[name][1] then st[name] = {version, ARGV[i+1], ARGV[i+2]} end
  end
  local out = {}
  for name, g in pairs(st) do table.insert(out, name .. '=' .. g[2] .. ':' .. g[3]) end
  table.sort(out)
  redis.call('HSET', state, m, table.concat(out, ','))
  local function value(name) if st[name] then return st[name][3] end return '0' end
  local listed = st.created and not st.deleted and value('mod') ~= '1'
  if listed then
    local likes = value('likes')
    redis.call('ZADD', topAll, likes, m)
    redis.call('ZADD', comments, value('comments'), m)
    local latest = createdRaw
    if st.active and st.active[1] > created then latest = st.active[3] end
    redis.call('ZADD', active, latest, m)
    for _, w in ipairs(spans) do
      if created > now - w[3] and created > mark(w[1]) then
        redis.call('ZADD', w[2], likes, m)
        local expiry = tonumber(redis.call('HGET', windows, w[1] .. ':expiry') or '-1')
        if expiry < 0 or created + w[3] < expiry then
          redis.call('HSET', windows, w[1] .. ':expiry', string.format('%d', created + w[3]))
        end
      else
        redis.call('ZREM', w[2], m)
      end
    end
    if created > now - ${month} and created > mark('month') then
      redis.call('ZADD', recent, createdRaw, m)
    else
      redis.call('ZREM', recent, m)
    end
  else
    for _, k in ipairs({KEYS[2], KEYS[3], KEYS[4], topAll, comments, active, recent}) do redis.call('ZREM', k, m) end
  end
end
-- Trim each window whose oldest member has aged out: what the index says was created from the last cutoff to this
-- one leaves it. Day and week before month, whose trim drops the index's entries below its cutoff.
for _, w in ipairs(spans) do
  local expiry = redis.call('HGET', windows, w[1] .. ':expiry')
  if expiry and now >= tonumber(expiry) then
    local cutoff = string.format('%d', now - w[3])
    local stale = redis.call('ZRANGEBYSCORE', recent, redis.call('HGET', windows, w[1]) or '-inf', cutoff)
    for i = 1, #stale, 1000 do redis.call('ZREM', w[2], unpack(stale, i, math.min(i + 999, #stale))) end
    redis.call('HSET', windows, w[1], cutoff)
    local nextOne = redis.call('ZRANGEBYSCORE', recent, '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if nextOne[2] then
      redis.call('HSET', windows, w[1] .. ':expiry', string.format('%d', tonumber(nextOne[2]) + w[3]))
    else
      redis.call('HDEL', windows, w[1] .. ':expiry')
    end
    if w[1] == 'month' then redis.call('ZREMRANGEBYSCORE', recent, '-inf', cutoff) end
  end
end
return 1`))

// sortGroup is one group of the sort scripts: a name, its version and its value.
type sortGroup struct {
	name           string
	version, value int64
}

func (g sortGroup) args() []any { return []any{g.name, g.version, g.value} }

// applySorts applies an event's groups to the article's sorts: first to the article's record, which knows its
// board (or parks the groups until it does), then to the board's state and sets. board is the event's board (0 for
// like and comment events, which do not carry one); op is 'board', 'deleted' or 'counts'.
func (s *Service) applySorts(ctx context.Context, articleID, boardID int64, op string, groups ...sortGroup) error {
	args := []any{op}
	if op == "counts" {
		for _, g := range groups {
			args = append(args, g.args()...)
		}
	} else {
		args = append(args, boardID)
	}
	res, err := sortArticleScript.Run(ctx, s.rdb, []string{s.articleSortKey(articleID)}, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("apply to the sort record of article %d: %w", articleID, redisFault(err))
	}
	if len(res) < 2 || res[1] == "" {
		return nil // parked, or deleted before its board was known
	}
	if boardID, err = strconv.ParseInt(res[1], 10, 64); err != nil {
		return fmt.Errorf("sort record of article %d: board %q", articleID, res[1])
	}
	switch res[0] {
	case "deleted":
		groups = []sortGroup{{"deleted", 1, 1}}
	case "board":
		if op == "board" { // with what waited for the board
			for i := 2; i+2 < len(res); i += 3 {
				v, _ := strconv.ParseInt(res[i+1], 10, 64)
				n, _ := strconv.ParseInt(res[i+2], 10, 64)
				groups = append(groups, sortGroup{res[i], v, n})
			}
		}
	}
	return s.applyBoardSorts(ctx, boardID, articleID, groups...)
}

// applyBoardSorts runs sortBoardScript for an article of a board (0: only trim).
func (s *Service) applyBoardSorts(ctx context.Context, boardID, articleID int64, groups ...sortGroup) error {
	if err := sortBoardScript.Run(ctx, s.rdb, s.sortKeys(boardID), s.sortBoardArgs(articleID, groups)...).Err(); err != nil {
		return fmt.Errorf("apply to the sorts of board %d: %w", boardID, redisFault(err))
	}
	return nil
}

func (s *Service) sortBoardArgs(articleID int64, groups []sortGroup) []any {
	args := []any{s.cfg.Now().UnixMilli(), "", 0}
	if articleID != 0 {
		args[1], args[2] = member(articleID), memberScore(articleID)
	}
	for _, g := range groups {
		args = append(args, g.args()...)
	}
	return args
}

// sortedWindowExact reads, through the near cache, whether the window of a top sort holds no article aged out of
// it; when one has (its expiry passed), it trims the board's windows and reports false. It notes in w what it read.
func (s *Service) sortedWindowExact(ctx context.Context, boardID int64, sort Sort, w *warmth) (bool, error) {
	name, _ := sort.window()
	if name == "" {
		return true, nil
	}
	res := s.reads.DoCache(ctx, s.reads.B().Hget().Key(s.sortKeys(boardID)[8]).Field(name+":expiry").Cache(), nearTTL)
	raw, err := res.ToString()
	if rueidis.IsRedisNil(err) {
		w.read(res.CachePXAT())
		return true, nil // an empty window
	}
	if err != nil {
		return false, redisFault(err)
	}
	w.read(res.CachePXAT())
	if expiry, err := strconv.ParseInt(raw, 10, 64); err == nil && s.cfg.Now().UnixMilli() < expiry {
		w.read(expiry) // a page kept whole in the memo ends when the window next needs a trim
		return true, nil
	}
	w.cold()
	return false, s.applyBoardSorts(ctx, boardID, 0)
}

// listSorted is one attempt of List in a sort kept in a sorted set: as list, pinned articles first, then the
// others in the sort's order. The set is the whole sort, so no page comes from an origin; articleCount is the
// number of places (the set and the pinned articles not in it), capped as the article service caps its count.
func (s *Service) listSorted(ctx context.Context, boardID int64, sort Sort, page, pageSize int64, w *warmth) (Page, staleEntries, error) {
	var stale staleEntries
	for exact := false; !exact; {
		var err error
		if exact, err = s.sortedWindowExact(ctx, boardID, sort, w); err != nil {
			return Page{}, stale, err
		}
	}
	pinnedIDs, err := s.pinnedIDs(ctx, boardID, w)
	if err != nil {
		return Page{}, stale, err
	}
	start, pins := (page-1)*pageSize, int64(len(pinnedIDs))
	lead, err := s.pinned(ctx, pinnedIDs[min(start, pins):min(start+pageSize, pins)], &stale, w)
	if err != nil {
		return Page{}, stale, err
	}
	first, want := max(start-pins, 0), pageSize-max(min(start+pageSize, pins)-start, 0)
	key := sortSet(s.sortKeys(boardID), sort)
	rank, skips, listedPins := first, int64(0), int64(0)
	if pins > 0 {
		if rank, skips, listedPins, err = s.rankAmongPinned(ctx, key, first, pinnedIDs, w); err != nil {
			return Page{}, stale, err
		}
	}
	cmds := []rueidis.CacheableTTL{rueidis.CT(s.reads.B().Zcard().Key(key).Cache(), nearTTL)}
	if want > 0 {
		cmds = append(cmds, rueidis.CT(s.reads.B().Zrange().Key(key).Min(strconv.FormatInt(rank, 10)).
			Max(strconv.FormatInt(rank+want+skips-1, 10)).Rev().Cache(), nearTTL))
	}
	res := s.reads.DoMultiCache(ctx, cmds...)
	size, err := res[0].AsInt64()
	if err != nil {
		return Page{}, stale, redisFault(err)
	}
	var members []string
	if want > 0 {
		if members, err = res[1].AsStrSlice(); err != nil {
			return Page{}, stale, redisFault(err)
		}
	}
	for _, r := range res {
		w.read(r.CachePXAT())
	}
	isPinned := make(map[int64]bool, len(pinnedIDs))
	for _, id := range pinnedIDs {
		isPinned[id] = true
	}
	ids := make([]int64, 0, want)
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil && !isPinned[id] && int64(len(ids)) < want {
			ids = append(ids, id)
		}
	}
	rest, gone, err := s.withCounts(ctx, ids, nil, w)
	if err != nil {
		return Page{}, stale, err
	}
	stale.gone = append(stale.gone, gone...)
	rest = visible(rest, &stale)
	articles := append(append(make([]ArticleRead, 0, len(lead)+len(rest)), lead...), rest...)
	count := size + pins - listedPins
	return Page{Articles: articles, Count: min(count, boardpage.CountLimit(page, pageSize))}, stale, nil
}

// seekScript reads n members of a sort's set after a given one, in the set's order (score descending, then member
// descending: newest first). A member not in the set (deleted, hidden, aged out of a window since the reader saw
// it, or never listed) is placed by its sort key as the board's state holds it, else by the fallback given: the
// answer goes on with the articles that come after that key. KEYS: the set, the board's state. ARGV: the member
// (” for the start), the state's group the score comes from ('likes', 'comments' or 'active'), the fallback
// score, n.
var seekScript = redis.NewScript(`
local set, m, n = KEYS[1], ARGV[1], tonumber(ARGV[4])
if m == '' then return redis.call('ZREVRANGE', set, 0, n - 1) end
local rank = redis.call('ZREVRANK', set, m)
if rank then return redis.call('ZREVRANGE', set, rank + 1, rank + n) end
local score = ARGV[3]
local raw = redis.call('HGET', KEYS[2], m)
if raw then
  local v = string.match(raw, ARGV[2] .. '=%d+:(%d+)')
  if v and (ARGV[2] ~= 'active' or tonumber(v) > tonumber(score)) then score = v end
end
-- Before m come the higher scores, and among equal scores the greater members: find the first lesser one.
local lo = redis.call('ZCOUNT', set, '(' .. score, '+inf')
local hi = lo + redis.call('ZCOUNT', set, score, score)
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  if redis.call('ZREVRANGE', set, mid, mid)[1] > m then lo = mid + 1 else hi = mid end
end
return redis.call('ZREVRANGE', set, lo, lo + n - 1)`)

// scrollSorted is one attempt of Scroll in a sort kept in a sorted set, without the pinned articles: the pageSize
// articles after lastID's place in the sort (0: from the start).
func (s *Service) scrollSorted(ctx context.Context, boardID int64, sort Sort, pageSize, lastID int64) ([]ArticleRead, staleEntries, error) {
	for exact := false; !exact; {
		var err error
		if exact, err = s.sortedWindowExact(ctx, boardID, sort, nil); err != nil {
			return nil, staleEntries{}, err
		}
	}
	keys := s.sortKeys(boardID)
	after, group, fallback := "", "likes", int64(0)
	switch sort {
	case SortComments:
		group = "comments"
	case SortActive:
		group = "active"
	}
	if lastID != 0 {
		after = member(lastID)
		if sort == SortActive {
			fallback = memberScore(lastID) // never commented: its creation
		}
	}
	members, err := seekScript.Run(ctx, s.rdb, []string{sortSet(keys, sort), keys[0]}, after, group, fallback, pageSize).StringSlice()
	if err != nil {
		return nil, staleEntries{}, redisFault(err)
	}
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	as, gone, err := s.withCounts(ctx, ids, nil, nil)
	stale := staleEntries{gone: gone}
	return visible(as, &stale), stale, err
}

// healSorts sets right in the board's sorts what a read found stale: deleted articles as their ARTICLE_DELETED
// would, hidden ones as their ARTICLE_MODERATED would (version-checked).
func (s *Service) healSorts(ctx context.Context, boardID int64, stale staleEntries) error {
	pipe := s.rdb.Pipeline()
	for _, id := range stale.gone {
		sortBoardScript.Eval(ctx, pipe, s.sortKeys(boardID), s.sortBoardArgs(id, []sortGroup{{"deleted", 1, 1}})...)
	}
	for _, a := range stale.hidden {
		sortBoardScript.Eval(ctx, pipe, s.sortKeys(boardID),
			s.sortBoardArgs(a.Article.id(), []sortGroup{{"mod", a.Moderation.Version, 1}})...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return redisFault(err)
	}
	return nil
}

// commentTime is when a comment was written, from its id, as the active sort takes it (Unix ms).
func commentTime(commentID int64) int64 { return snowflake.Timestamp(commentID).UnixMilli() }
