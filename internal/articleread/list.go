package articleread

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"board/internal/boardpage"
	"board/internal/event"
)

// Page is an offset page with the capped count its page links need (boardpage.CountLimit), as the article service
// counts it.
type Page struct {
	Articles []ArticleRead
	Count    int64
}

// boardState is what a board's keys say about its list, read in one script with the ids a request asks for.
type boardState struct {
	synced     bool
	wholeBoard bool // no floor: the list holds every article of the board
	size       int64
	count      int64
	countKnown bool
	found      bool    // the scroll's last id is in the list (always true for a page)
	from       int64   // the rank the ids start at
	ids        []int64 // up to n ids from that rank
}

// covers reports whether the list can answer the ranks [from, from+n): it holds them all, or it holds the whole
// board and so every article there is.
func (b boardState) covers(n int64) bool {
	return b.found && b.synced && b.countKnown && (int64(len(b.ids)) == n || b.wholeBoard)
}

// listReadScript reads a board's list state and a run of its ids at once, so that the ids and the size and floor
// that say whether they answer the request are one snapshot. KEYS: list, meta. ARGV: the member after which the run
// starts (” for a page), the rank it starts at otherwise, how many. Returns {size, synced, floor, count, found,
// from, ids}.
var listReadScript = redis.NewScript(`
local list, meta = KEYS[1], KEYS[2]
local m = redis.call('HMGET', meta, 'synced', 'floor', 'count')
local size = redis.call('ZCARD', list)
local from, found = tonumber(ARGV[2]), 1
if ARGV[1] ~= '' then
  local rank = redis.call('ZREVRANK', list, ARGV[1])
  if rank then from = rank + 1 else found = 0 end
end
local ids = {}
if found == 1 and from < size then ids = redis.call('ZREVRANGE', list, from, from + tonumber(ARGV[3]) - 1) end
return {size, m[1] or '', m[2] or '', m[3] or '', found, from, ids}`)

// readBoard runs listReadScript: n ids from rank from, or after lastID when it is not 0. It notes in w what it read.
func (s *Service) readBoard(ctx context.Context, boardID, lastID, from, n int64, w *warmth) (boardState, error) {
	if s.cfg.Memo != nil && lastID == 0 {
		return s.readBoardNear(ctx, boardID, from, n, w)
	}
	w.cold()
	after := ""
	if lastID != 0 {
		after = member(lastID)
	}
	vals, err := listReadScript.Run(ctx, s.rdb, s.boardKeys(boardID)[:2], after, from, n).Slice()
	if err != nil {
		return boardState{}, redisFault(err)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	num := func(v any) int64 { n, _ := v.(int64); return n }
	b := boardState{size: num(vals[0]), synced: str(vals[1]) == "1", wholeBoard: str(vals[2]) == "",
		found: num(vals[4]) == 1, from: num(vals[5])}
	if c, err := strconv.ParseInt(str(vals[3]), 10, 64); err == nil {
		b.count, b.countKnown = c, true
	}
	members, _ := vals[6].([]any)
	for _, m := range members {
		if id, err := strconv.ParseInt(str(m), 10, 64); err == nil {
			b.ids = append(b.ids, id)
		}
	}
	return b, nil
}

// readBoardNear reads n ids of a board's list from rank from through the near cache, with the size and meta that
// say whether they answer. The three are separate keys read when the cache lacks them, not one snapshot as the
// script's: a change to the board drops all three from the cache at once (one script writes them), so a read mixes
// states only across that change's invalidation, and the next read sees it whole. covers asks of the ids alone
// whether they fill the page, never of the size.
func (s *Service) readBoardNear(ctx context.Context, boardID, from, n int64, w *warmth) (boardState, error) {
	keys := s.boardKeys(boardID)
	res := s.reads.DoMultiCache(ctx,
		rueidis.CT(s.reads.B().Zcard().Key(keys[0]).Cache(), nearTTL),
		rueidis.CT(s.reads.B().Hmget().Key(keys[1]).Field("synced", "floor", "count").Cache(), nearTTL),
		rueidis.CT(s.reads.B().Zrange().Key(keys[0]).Min(strconv.FormatInt(from, 10)).
			Max(strconv.FormatInt(from+n-1, 10)).Rev().Cache(), nearTTL))
	size, err := res[0].AsInt64()
	if err != nil {
		return boardState{}, redisFault(err)
	}
	meta, err := res[1].ToArray()
	if err != nil {
		return boardState{}, redisFault(err)
	}
	members, err := res[2].AsStrSlice()
	if err != nil {
		return boardState{}, redisFault(err)
	}
	for _, r := range res {
		w.read(r.CachePXAT())
	}
	str := func(i int) string { v, _ := meta[i].ToString(); return v }
	b := boardState{size: size, synced: str(0) == "1", wholeBoard: str(1) == "", found: true, from: from}
	if c, err := strconv.ParseInt(str(2), 10, 64); err == nil {
		b.count, b.countKnown = c, true
	}
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			b.ids = append(b.ids, id)
		}
	}
	return b, nil
}

// List returns page (from 1) of a board, pageSize articles newest first, with the capped count of the article
// service. From Redis when the board's list covers the page; else from the article service (and the list is
// backfilled in the background when the page lies within its reach).
//
// The pages show the board's pinned articles first, then its others: page 1 starts with the pinned ones, and the
// pages after it go on with the others from where page 1 left them, so that pins neither hide an article from the
// pages nor show one twice. Pages the article service answers (past the list's reach, or before the list is
// synced) are its own, less the pinned articles: around them pins may show an article on two pages or none.
//
// With a near cache, a page read from it alone is kept whole in the memo, and served from there until any key read
// through the near cache changes (the memo's epoch), the first key read leaves the near cache, or the first of its
// view counts is due for a refresh; a page read with a count due, whose refresh it started, for dueKeep at most.
// Its articles are shared by the requests it serves: read-only.
func (s *Service) List(ctx context.Context, boardID, page, pageSize int64) (Page, error) {
	return s.ListBy(ctx, boardID, SortNewest, page, pageSize)
}

// ListBy is List in a given sort: newest is List's; the others come from their sorted sets alone (listSorted), and
// are kept whole in the memo alike.
func (s *Service) ListBy(ctx context.Context, boardID int64, sort Sort, page, pageSize int64) (Page, error) {
	memo, key := s.cfg.Memo, ""
	var epoch uint64
	if memo != nil {
		key = fmt.Sprintf("\x00page:%s:%d:%d:%d", sort, boardID, page, pageSize) // no Redis key's name starts with a NUL
		epoch = memo.Epoch()                                                     // before anything is read
		if v, _, ok := memo.Get(key, time.Now()); ok {
			if kept := v.(keptPage); kept.epoch == epoch && (kept.views == 0 || s.views.Fresh(kept.views)) {
				return kept.page, nil
			}
		}
	}
	for healed := false; ; healed = true {
		var w warmth
		var p Page
		var stale staleEntries
		var err error
		if sort == SortNewest {
			p, stale, err = s.list(ctx, boardID, page, pageSize, &w)
		} else {
			p, stale, err = s.listSorted(ctx, boardID, sort, page, pageSize, &w)
		}
		if err == nil && stale.none() && !healed && memo != nil && w.warm() {
			size := 0
			for _, a := range p.Articles {
				size += len(a.Article) + 100
			}
			until := w.until
			if w.due { // served as it is while its refresh runs, whose report ends it; if that fails, a read retries
				until = min(until, time.Now().Add(dueKeep).UnixMilli())
			}
			memo.Put(key, memo.Generation(key), keptPage{p, epoch, w.views}, size, until)
		}
		if stale.none() || healed || err != nil {
			return p, err
		}
		if err := s.heal(ctx, boardID, stale); err != nil {
			return Page{}, err
		}
	}
}

// dueKeep is how long a page with a view count due is kept: the refresh's report ends it sooner, and if the refresh
// failed, the next read past it starts another, as every read of such a count does without the memo.
const dueKeep = 100 * time.Millisecond

// keptPage is a page kept whole in the memo: the memo's epoch before it was read, and the first logical expiry of
// its fresh view counts (0: none).
type keptPage struct {
	page  Page
	epoch uint64
	views int64
}

// staleEntries are what a read found a board's keys to hold wrongly: listed or pinned articles that turned out
// deleted, and listed or pinned ones whose model says they are hidden (the list or its moderation record lost, as
// a flushed Redis loses them). They left the answer short, and heal sets them right.
type staleEntries struct {
	gone   []int64
	hidden []ArticleRead
}

func (st staleEntries) none() bool { return len(st.gone) == 0 && len(st.hidden) == 0 }

// visible drops from articles read from a board's list those their models say are hidden, noting them in stale.
func visible(as []ArticleRead, stale *staleEntries) []ArticleRead {
	shown := as[:0]
	for _, a := range as {
		if a.Moderation.Hidden != event.Visible {
			stale.hidden = append(stale.hidden, a)
			continue
		}
		shown = append(shown, a)
	}
	return shown
}

// heal removes from a board's keys what a read found stale: deleted articles as their ARTICLE_DELETED would, hidden
// ones as their ARTICLE_MODERATED would (version-checked, so a newer restore already applied stands).
func (s *Service) heal(ctx context.Context, boardID int64, stale staleEntries) error {
	if err := s.forget(ctx, boardID, stale.gone); err != nil {
		return err
	}
	if err := s.healSorts(ctx, boardID, stale); err != nil {
		return err
	}
	if len(stale.hidden) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, a := range stale.hidden {
		id, m := a.Article.id(), a.Moderation
		boardScript.Eval(ctx, pipe, s.boardKeys(boardID), "moderated", s.cfg.Now().UnixMilli(), ListSize, -1, -1,
			member(id), memberScore(id), m.Version, "1", flag(m.Pinned))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return redisFault(err)
	}
	return nil
}

// pinnedIDs returns a board's pinned articles, newest first, read through the near cache, noting it in w.
func (s *Service) pinnedIDs(ctx context.Context, boardID int64, w *warmth) ([]int64, error) {
	key := s.boardKeys(boardID)[4]
	res := s.reads.DoCache(ctx, s.reads.B().Zrange().Key(key).Min("0").Max("-1").Rev().Cache(), nearTTL)
	members, err := res.AsStrSlice()
	if err != nil {
		return nil, redisFault(err)
	}
	w.read(res.CachePXAT())
	ids := make([]int64, 0, len(members))
	for _, m := range members {
		if id, err := strconv.ParseInt(m, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// pinned returns the pinned articles ids with their counts, noting in stale those found deleted or hidden, which
// it leaves out, and in w what it read.
func (s *Service) pinned(ctx context.Context, ids []int64, stale *staleEntries, w *warmth) ([]ArticleRead, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	as, gone, err := s.withCounts(ctx, ids, nil, w)
	if err != nil {
		return nil, err
	}
	stale.gone = append(stale.gone, gone...)
	as = visible(as, stale)
	for i := range as {
		as[i].Moderation.Pinned = true // the pinned set says so, whatever an older model says
	}
	return as, nil
}

// withPinned returns the first scroll of a board: its pinned articles first, then the scroll's others, size in all.
func withPinned(pinned, page []ArticleRead, size int) []ArticleRead {
	if len(pinned) == 0 {
		return page
	}
	out := make([]ArticleRead, 0, size)
	isPinned := map[int64]bool{}
	for _, a := range pinned[:min(len(pinned), size)] {
		out = append(out, a)
		isPinned[a.Article.id()] = true
	}
	for _, a := range page {
		if len(out) == size {
			break
		}
		if !isPinned[a.Article.id()] {
			out = append(out, a)
		}
	}
	return out
}

// list is one attempt of List; stale are what it found wrong in the board's keys, which left the page short.
func (s *Service) list(ctx context.Context, boardID, page, pageSize int64, w *warmth) (Page, staleEntries, error) {
	var stale staleEntries
	pinnedIDs, err := s.pinnedIDs(ctx, boardID, w)
	if err != nil {
		return Page{}, stale, err
	}
	// The page's places in the order "pinned articles, then the others": the pinned ones of its places (lead), then
	// want others from place first of the others on.
	start, pins := (page-1)*pageSize, int64(len(pinnedIDs))
	lead, err := s.pinned(ctx, pinnedIDs[min(start, pins):min(start+pageSize, pins)], &stale, w)
	if err != nil {
		return Page{}, stale, err
	}
	first, want := max(start-pins, 0), pageSize-max(min(start+pageSize, pins)-start, 0)
	isPinned := make(map[int64]bool, len(pinnedIDs))
	for _, id := range pinnedIDs {
		isPinned[id] = true
	}
	rank, skips := first, int64(0) // first's rank in the list, and how many pinned ones the list has from there
	if first < ListSize && pins > 0 {
		if rank, skips, _, err = s.rankAmongPinned(ctx, s.boardKeys(boardID)[0], first, pinnedIDs, w); err != nil {
			return Page{}, stale, err
		}
	}
	board := boardState{} // past the list's reach: not read
	if rank < ListSize && want > 0 {
		if board, err = s.readBoard(ctx, boardID, 0, rank, want+skips, w); err != nil {
			return Page{}, stale, err
		}
	}
	var rest []ArticleRead
	var count int64
	switch {
	case want == 0:
		w.cold() // rare: a page of pinned articles alone
		if count, err = s.boardCount(ctx, boardID); err != nil {
			return Page{}, stale, err
		}
	case board.covers(want + skips):
		ids := make([]int64, 0, want)
		for _, id := range board.ids {
			if !isPinned[id] && int64(len(ids)) < want {
				ids = append(ids, id)
			}
		}
		var gone []int64
		if rest, gone, err = s.withCounts(ctx, ids, nil, w); err != nil {
			return Page{}, stale, err
		}
		stale.gone = append(stale.gone, gone...)
		rest = visible(rest, &stale)
		count = board.count
	default:
		w.cold()
		if rank < ListSize && (!board.synced || !board.wholeBoard && board.size < ListSize) {
			s.backfillSoon(boardID)
		}
		p, err := s.originPage(ctx, boardID, page, pageSize)
		if err != nil {
			return Page{}, stale, err
		}
		for _, a := range p.Articles {
			if !isPinned[a.Article.id()] && int64(len(rest)) < want {
				rest = append(rest, a)
			}
		}
		count = p.Count
	}
	articles := append(append(make([]ArticleRead, 0, len(lead)+len(rest)), lead...), rest...)
	return Page{Articles: articles, Count: min(count, boardpage.CountLimit(page, pageSize))}, stale, nil
}

// rankAmongPinned returns the rank in a board's list (or sorted set) key of the article at place first of its
// order less the board's pinned articles, how many pinned articles the list holds from that rank on, which a read
// from there skips, and how many it holds in all.
func (s *Service) rankAmongPinned(ctx context.Context, key string, first int64, pinnedIDs []int64, w *warmth) (rank, skips, listed int64, err error) {
	cmds := make([]rueidis.CacheableTTL, len(pinnedIDs))
	for i, id := range pinnedIDs {
		cmds[i] = rueidis.CT(s.reads.B().Zrevrank().Key(key).Member(member(id)).Cache(), nearTTL)
	}
	var ranks []int64
	for _, res := range s.reads.DoMultiCache(ctx, cmds...) {
		w.read(res.CachePXAT())
		r, err := res.AsInt64()
		if rueidis.IsRedisNil(err) {
			continue // not listed: older than the list, or hidden or deleted since
		}
		if err != nil {
			return 0, 0, 0, redisFault(err)
		}
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	rank = first
	for _, r := range ranks {
		if r <= rank {
			rank++
		} else {
			skips++
		}
	}
	return rank, skips, int64(len(ranks)), nil
}

// boardCount returns the board's count as its list's meta holds it, else as the article service counts it.
func (s *Service) boardCount(ctx context.Context, boardID int64) (int64, error) {
	board, err := s.readBoard(ctx, boardID, 0, 0, 1, nil)
	if err != nil || board.countKnown {
		return board.count, err
	}
	c, err := s.origins.boardCount(ctx, boardID)
	return c.Value, err
}

// forget removes from a board's list articles found deleted, as their ARTICLE_DELETED would.
func (s *Service) forget(ctx context.Context, boardID int64, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, id := range ids {
		// Count and version -1: the board count is left as it is.
		boardScript.Eval(ctx, pipe, s.boardKeys(boardID), "deleted", s.cfg.Now().UnixMilli(), ListSize, -1, -1,
			member(id), memberScore(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return redisFault(err)
	}
	return nil
}

// Scroll returns the pageSize articles of a board after lastID (0: from the newest), newest first. The first
// answer (lastID 0) shows the board's pinned articles first, but leaves the last place to an article that is not
// pinned: the next request goes on after the last article, which must then be the newest one not yet shown.
func (s *Service) Scroll(ctx context.Context, boardID, pageSize, lastID int64) ([]ArticleRead, error) {
	return s.ScrollBy(ctx, boardID, SortNewest, pageSize, lastID)
}

// ScrollBy is Scroll in a given sort: after lastID's place in it.
func (s *Service) ScrollBy(ctx context.Context, boardID int64, sort Sort, pageSize, lastID int64) ([]ArticleRead, error) {
	for healed := false; ; healed = true {
		var as []ArticleRead
		var stale staleEntries
		var err error
		if sort == SortNewest {
			as, stale, err = s.scroll(ctx, boardID, pageSize, lastID)
		} else {
			as, stale, err = s.scrollSorted(ctx, boardID, sort, pageSize, lastID)
		}
		if err == nil && lastID == 0 {
			var ids []int64
			if ids, err = s.pinnedIDs(ctx, boardID, nil); err == nil {
				var pinned []ArticleRead
				if pinned, err = s.pinned(ctx, ids[:min(len(ids), int(pageSize)-1)], &stale, nil); err == nil {
					as = withPinned(pinned, as, int(pageSize))
				}
			}
		}
		if stale.none() || healed || err != nil {
			return as, err
		}
		if err := s.heal(ctx, boardID, stale); err != nil {
			return nil, err
		}
	}
}

// scroll is one attempt of Scroll, without the pinned articles; stale are what it found wrong in the board's list,
// which left the answer short.
func (s *Service) scroll(ctx context.Context, boardID, pageSize, lastID int64) ([]ArticleRead, staleEntries, error) {
	board, err := s.readBoard(ctx, boardID, lastID, 0, pageSize, nil)
	if err != nil {
		return nil, staleEntries{}, err
	}
	// A last id not in the list (deleted, below the floor, no article) or a run the list does not cover is the
	// article service's to answer.
	if !board.covers(pageSize) {
		if board.found && board.from < ListSize && (!board.synced || !board.wholeBoard && board.size < ListSize) {
			s.backfillSoon(boardID)
		}
		as, err := s.originScroll(ctx, boardID, pageSize, lastID)
		return as, staleEntries{}, err
	}
	as, gone, err := s.withCounts(ctx, board.ids, nil, nil)
	stale := staleEntries{gone: gone}
	return visible(as, &stale), stale, err
}

func (s *Service) originPage(ctx context.Context, boardID, page, pageSize int64) (Page, error) {
	p, err := s.deepPages.get(ctx, s.cfg.Now, boardID, page, pageSize, (page-1)*pageSize >= ListSize, s.origins.page)
	if err != nil {
		return Page{}, err
	}
	known, err := encodeArticles(p.Articles)
	if err != nil {
		return Page{}, err
	}
	articles, _, err := s.withCounts(ctx, articleIDs(p.Articles), known, nil)
	return Page{Articles: articles, Count: p.ArticleCount}, err
}

func (s *Service) originScroll(ctx context.Context, boardID, pageSize, lastID int64) ([]ArticleRead, error) {
	as, err := s.origins.scroll(ctx, boardID, pageSize, lastID)
	if err != nil {
		return nil, err
	}
	known, err := encodeArticles(as)
	if err != nil {
		return nil, err
	}
	articles, _, err := s.withCounts(ctx, articleIDs(as), known, nil)
	return articles, err
}

// knownArticle is an article as a page of the article service gave it: its wire form and its moderation state.
type knownArticle struct {
	article articleJSON
	mod     Moderation
}

func encodeArticles(as []originArticle) ([]knownArticle, error) {
	out := make([]knownArticle, len(as))
	for i, a := range as {
		var err error
		if out[i].article, err = encodeArticle(a.Article); err != nil {
			return nil, err
		}
		out[i].mod = a.moderation()
	}
	return out, nil
}

func articleIDs(as []originArticle) []int64 {
	ids := make([]int64, len(as))
	for i, a := range as {
		ids[i] = int64(a.ArticleID)
	}
	return ids
}

// notHidden returns those of ids that the board's moderation records do not say are hidden.
func (s *Service) notHidden(ctx context.Context, boardID int64, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	members := make([]string, len(ids))
	for i, id := range ids {
		members[i] = member(id)
	}
	records, err := s.rdb.HMGet(ctx, s.boardKeys(boardID)[3], members...).Result()
	if err != nil {
		return nil, redisFault(err)
	}
	shown := ids[:0:0]
	for i, r := range records {
		if rec, _ := r.(string); len(rec) < 2 || rec[len(rec)-2] != '1' { // '<version>:<hidden><pinned>'
			shown = append(shown, ids[i])
		}
	}
	return shown, nil
}

// backfillSoon starts a backfill of a board's list in the background, unless one is running in this process or
// the last one failed less than backfillRetry ago (the article service may be down: reads fall back to it anyway).
func (s *Service) backfillSoon(boardID int64) {
	s.backfills.mu.Lock()
	defer s.backfills.mu.Unlock()
	if s.backfills.next == nil {
		s.backfills.next = map[int64]time.Time{}
	}
	if next, ok := s.backfills.next[boardID]; ok && time.Now().Before(next) {
		return // running (next is far ahead) or failed lately
	}
	s.backfills.next[boardID] = time.Now().Add(backfillTimeout)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), backfillTimeout)
		defer cancel()
		err := s.Backfill(ctx, boardID)
		s.backfills.mu.Lock()
		defer s.backfills.mu.Unlock()
		if err == nil {
			delete(s.backfills.next, boardID)
			return
		}
		s.backfills.next[boardID] = time.Now().Add(backfillRetry)
		s.cfg.Logger.Warn("article-read: backfilling a board list failed; its pages come from the article service meanwhile",
			"board_id", boardID, "err", err)
	}()
}

// Backfill reads the board's newest ListSize visible article ids and its count from the article service and
// merges them into the board's list, which from then on counts as synced. Articles the board's moderation records
// say are hidden do not count: the script leaves them out of the list, which would be short of them for good.
func (s *Service) Backfill(ctx context.Context, boardID int64) error {
	// Ids older than the read's start (less a margin for clock skew and slow commits) that the read does not return
	// are not live, whatever late events listed them.
	cutoff := memberScoreAt(s.cfg.Now().Add(-backfillSkew))
	count, err := s.origins.boardCount(ctx, boardID)
	if err != nil {
		return err
	}
	var ids []int64
	for lastID := int64(0); len(ids) < ListSize; {
		as, err := s.origins.scroll(ctx, boardID, min(100, int64(ListSize-len(ids))), lastID)
		if err != nil {
			return err
		}
		read := articleIDs(as)
		shown, err := s.notHidden(ctx, boardID, read)
		if err != nil {
			return err
		}
		ids = append(ids, shown...)
		if len(as) < 100 {
			break
		}
		lastID = read[len(read)-1]
	}
	floor := "" // read to the end of the board
	if len(ids) == ListSize {
		floor = member(ids[len(ids)-1])
	}
	args := []any{"backfill", s.cfg.Now().UnixMilli(), ListSize, count.Value, max(count.Version, 0), floor, cutoff}
	for _, id := range ids {
		args = append(args, member(id), memberScore(id))
	}
	if err := boardScript.Run(ctx, s.rdb, s.boardKeys(boardID), args...).Err(); err != nil {
		return redisFault(err)
	}
	return nil
}
