package articleread

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"board/internal/boardpage"
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

// readBoard runs listReadScript: n ids from rank from, or after lastID when it is not 0.
func (s *Service) readBoard(ctx context.Context, boardID, lastID, from, n int64) (boardState, error) {
	if s.cfg.Near && lastID == 0 {
		return s.readBoardNear(ctx, boardID, from, n)
	}
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
func (s *Service) readBoardNear(ctx context.Context, boardID, from, n int64) (boardState, error) {
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
func (s *Service) List(ctx context.Context, boardID, page, pageSize int64) (Page, error) {
	for healed := false; ; healed = true {
		p, gone, err := s.list(ctx, boardID, page, pageSize)
		if len(gone) == 0 || healed || err != nil {
			return p, err
		}
		if err := s.forget(ctx, boardID, gone); err != nil {
			return Page{}, err
		}
	}
}

// list is one attempt of List; gone are listed articles that turned out deleted, which left the page short.
func (s *Service) list(ctx context.Context, boardID, page, pageSize int64) (Page, []int64, error) {
	offset := (page - 1) * pageSize
	board := boardState{} // past the list's reach: not read
	if offset < ListSize {
		var err error
		if board, err = s.readBoard(ctx, boardID, 0, offset, pageSize); err != nil {
			return Page{}, nil, err
		}
	}
	if !board.covers(pageSize) {
		if offset < ListSize && (!board.synced || !board.wholeBoard && board.size < ListSize) {
			s.backfillSoon(boardID)
		}
		p, err := s.originPage(ctx, boardID, page, pageSize)
		return p, nil, err
	}
	articles, gone, err := s.withCounts(ctx, board.ids, nil)
	if err != nil {
		return Page{}, nil, err
	}
	return Page{Articles: articles, Count: min(board.count, boardpage.CountLimit(page, pageSize))}, gone, nil
}

// forget removes from a board's list articles found deleted, as their ARTICLE_DELETED would.
func (s *Service) forget(ctx context.Context, boardID int64, ids []int64) error {
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

// Scroll returns the pageSize articles of a board after lastID (0: from the newest), newest first.
func (s *Service) Scroll(ctx context.Context, boardID, pageSize, lastID int64) ([]ArticleRead, error) {
	for healed := false; ; healed = true {
		as, gone, err := s.scroll(ctx, boardID, pageSize, lastID)
		if len(gone) == 0 || healed || err != nil {
			return as, err
		}
		if err := s.forget(ctx, boardID, gone); err != nil {
			return nil, err
		}
	}
}

// scroll is one attempt of Scroll; gone are listed articles that turned out deleted, which left the answer short.
func (s *Service) scroll(ctx context.Context, boardID, pageSize, lastID int64) ([]ArticleRead, []int64, error) {
	board, err := s.readBoard(ctx, boardID, lastID, 0, pageSize)
	if err != nil {
		return nil, nil, err
	}
	// A last id not in the list (deleted, below the floor, no article) or a run the list does not cover is the
	// article service's to answer.
	if !board.covers(pageSize) {
		if board.found && board.from < ListSize && (!board.synced || !board.wholeBoard && board.size < ListSize) {
			s.backfillSoon(boardID)
		}
		as, err := s.originScroll(ctx, boardID, pageSize, lastID)
		return as, nil, err
	}
	return s.withCounts(ctx, board.ids, nil)
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
	articles, _, err := s.withCounts(ctx, articleIDs(p.Articles), known)
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
	articles, _, err := s.withCounts(ctx, articleIDs(as), known)
	return articles, err
}

func encodeArticles(as []Article) ([]articleJSON, error) {
	out := make([]articleJSON, len(as))
	for i, a := range as {
		var err error
		if out[i], err = encodeArticle(a); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func articleIDs(as []Article) []int64 {
	ids := make([]int64, len(as))
	for i, a := range as {
		ids[i] = int64(a.ArticleID)
	}
	return ids
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

// Backfill reads the board's newest ListSize article ids and its count from the article service and merges them
// into the board's list, which from then on counts as synced.
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
		ids = append(ids, articleIDs(as)...)
		if len(as) < 100 {
			break
		}
		lastID = ids[len(ids)-1]
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
