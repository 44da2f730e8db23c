package search

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"board/internal/boardpage"
	"board/internal/fault"
)

// Limits of a search request (SPEC §3.10).
const (
	MaxQueryRunes = 200
	// MaxResultWindow bounds how deep results can be paged: every engine ranks offset+pageSize documents to answer
	// a page, so a page past this is refused rather than left to cost without bound.
	MaxResultWindow = 10_000
)

// Request is a search as the API takes it.
type Request struct {
	Q        string
	BoardID  int64
	WriterID int64
	Type     Type // "": both
	Newest   bool
	Page     int64
	PageSize int64
}

// Hit is one found article or comment. Fragment is HTML-escaped text with the matches in <mark>.
type Hit struct {
	Type      Type
	ArticleID int64
	CommentID int64
	BoardID   int64
	Title     string // a comment's article's title; "" when that article cannot be shown
	Fragment  string
	WriterID  int64
	CreatedAt time.Time
}

// Page is a page of results and the count of matches, capped like the board count.
type Page struct {
	Hits  []Hit
	Count int64
}

// Service answers searches from the current index, which a rebuild may replace while it answers (Swap).
type Service struct {
	cur atomic.Pointer[handle]
}

// handle is an index the service answers from, and the requests that use it.
type handle struct {
	ix Indexer
	// mu is held for reading by each request that uses ix; Swap takes it to wait them out.
	mu      sync.RWMutex
	retired bool
}

// NewService returns a Service that answers from ix.
func NewService(ix Indexer) *Service {
	s := &Service{}
	s.cur.Store(&handle{ix: ix})
	return s
}

// Swap makes the service answer from ix, and returns once no request uses the index it answered from: the caller may
// then close it.
func (s *Service) Swap(ix Indexer) {
	old := s.cur.Swap(&handle{ix: ix})
	old.mu.Lock()
	old.retired = true
	old.mu.Unlock()
}

// acquire returns the current index, held for reading until release.
func (s *Service) acquire() *handle {
	for {
		h := s.cur.Load()
		h.mu.RLock()
		if !h.retired {
			return h
		}
		h.mu.RUnlock() // swapped out meanwhile: the current one is new
	}
}

// Search answers r.
func (s *Service) Search(ctx context.Context, r Request) (Page, error) {
	q := strings.TrimSpace(r.Q)
	if q == "" || utf8.RuneCountInString(q) > MaxQueryRunes || !utf8.ValidString(q) {
		return Page{}, fault.Invalidf("INVALID_QUERY", "q must be 1 to %d characters of text", MaxQueryRunes)
	}
	offset := (r.Page - 1) * r.PageSize
	if offset+r.PageSize > MaxResultWindow {
		return Page{}, fault.Invalidf("INVALID_PAGE", "results can be paged %d deep (page*pageSize); narrow the search instead", MaxResultWindow)
	}
	terms := Terms(q)
	if len(terms) == 0 { // nothing but stop words or punctuation: nothing to look for
		return Page{Hits: []Hit{}}, nil
	}
	h := s.acquire()
	defer h.mu.RUnlock()
	ix := h.ix
	res, err := ix.Search(ctx, Query{Terms: terms, BoardID: r.BoardID, WriterID: r.WriterID, Type: r.Type,
		Newest: r.Newest, Offset: int(offset), Limit: int(r.PageSize), CountLimit: int(boardpage.CountLimit(r.Page, r.PageSize))})
	if err != nil {
		return Page{}, unavailable(ctx, err)
	}
	articles, err := commentArticles(ctx, ix, res.Docs)
	if err != nil {
		return Page{}, unavailable(ctx, err)
	}
	out := Page{Hits: make([]Hit, 0, len(res.Docs)), Count: int64(res.Count)}
	for _, d := range res.Docs {
		title := d.Title
		if d.Type == TypeComment {
			a := articles[d.ArticleID]
			if a.Deleted {
				// Its delete reached an instance that did not yet know this comment (a shared SQL index): it went with
				// the article all the same.
				continue
			}
			if a.State() == Live {
				title = a.Title
			}
		}
		out.Hits = append(out.Hits, Hit{Type: d.Type, ArticleID: d.ArticleID, CommentID: d.CommentID,
			BoardID: d.BoardID, Title: title, Fragment: Fragment(d.Content, terms), WriterID: d.WriterID,
			CreatedAt: d.CreatedAt})
	}
	return out, nil
}

// commentArticles returns the documents the index holds of the articles of the comments among docs.
func commentArticles(ctx context.Context, ix Indexer, docs []Doc) (map[int64]Doc, error) {
	var keys []string
	for _, d := range docs {
		if d.Type == TypeComment {
			keys = append(keys, ArticleKey(d.ArticleID))
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	found, err := ix.Get(ctx, keys)
	if err != nil {
		return nil, err
	}
	articles := make(map[int64]Doc, len(found))
	for _, a := range found {
		articles[a.ArticleID] = a
	}
	return articles, nil
}

// unavailable makes an index error the 503 it is to a client: the index is this service's only dependency.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fault.Unavailablef(err, "SEARCH_UNAVAILABLE", "the search index cannot answer now")
}
