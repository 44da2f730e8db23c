package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/maypok86/otter/v2"
	"golang.org/x/sync/singleflight"

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

// Page is a page of results and the count of matches, capped like the board count. A cached page is given to every
// request that asks for it: its readers must not change it.
type Page struct {
	Hits  []Hit
	Count int64
}

// Defaults of the Options board serve gives the service. An answer cached for half a second keeps a new document's
// create-to-found under the 1 s target with the index's own lag (a consumer poll and a batch); 2 s is about where a
// reader gives up on a search; 64 MiB holds some 5,000 pages of 20 Korean results (about 12 KB each).
const (
	DefaultTimeout    = 2 * time.Second
	DefaultCacheTTL   = 500 * time.Millisecond
	DefaultCacheBytes = 64 << 20
)

// Options tune a Service. The zero value has no cache and no deadline but the request's.
type Options struct {
	// Timeout bounds each search's work in the index: a search that would run longer is cut there and answered 503
	// SEARCH_TIMEOUT. 0: only the request's own deadline bounds it.
	Timeout time.Duration
	// CacheTTL is how long an answer is given again to the same query, counted from when its search began: a
	// document put in the index is found by every search that begins CacheTTL after it at the latest. 0: no cache.
	CacheTTL time.Duration
	// CacheBytes bounds the memory of the cached answers (an estimate of their size).
	CacheBytes int64
}

// Service answers searches from the current index, which a rebuild may replace while it answers (Swap). Concurrent
// searches of the same query (its terms, filters, order and page) are answered by one search of the index, and
// with a cache its answer is given again for CacheTTL.
type Service struct {
	cur  atomic.Pointer[handle]
	opts Options
}

// handle is an index the service answers from, the requests that use it, and its answers.
type handle struct {
	ix Indexer
	// mu is held for reading by each request that uses ix; Swap takes it to wait them out.
	mu      sync.RWMutex
	retired bool
	// cache holds answers by query (cacheKey); nil when off. It belongs to its index: a swap starts empty.
	cache  *otter.Cache[string, cached]
	flight singleflight.Group
}

// cached is an answer and when its search began, which is how old it is.
type cached struct {
	page  Page
	began time.Time
}

// hitBytes is what a cached hit costs besides its strings' bytes: its fixed fields and string headers.
const hitBytes = 128

// weight estimates the memory an answer holds in the cache under key.
func (c cached) weight(key string) uint32 {
	n := len(key) + 64 // the entry and its key's header
	for _, h := range c.page.Hits {
		n += hitBytes + len(h.Title) + len(h.Fragment)
	}
	return uint32(min(n, math.MaxUint32))
}

// NewService returns a Service that answers from ix.
func NewService(ix Indexer, opts Options) *Service {
	s := &Service{opts: opts}
	s.cur.Store(s.newHandle(ix))
	return s
}

func (s *Service) newHandle(ix Indexer) *handle {
	h := &handle{ix: ix}
	if s.opts.CacheTTL > 0 && s.opts.CacheBytes > 0 {
		h.cache = otter.Must(&otter.Options[string, cached]{
			MaximumWeight:    uint64(s.opts.CacheBytes),
			Weigher:          func(key string, c cached) uint32 { return c.weight(key) },
			ExpiryCalculator: otter.ExpiryWriting[string, cached](s.opts.CacheTTL),
		})
	}
	return h
}

// Swap makes the service answer from ix, and returns once no request uses the index it answered from: the caller may
// then close it.
func (s *Service) Swap(ix Indexer) {
	old := s.cur.Swap(s.newHandle(ix))
	old.mu.Lock()
	old.retired = true
	old.mu.Unlock()
	if old.cache != nil {
		old.cache.InvalidateAll()
		old.cache.StopAllGoroutines()
	}
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

// errTimedOut is a search cut at its deadline.
var errTimedOut = errors.New("search: cut at its deadline")

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
	key := cacheKey(terms, r)
	h := s.acquire()
	defer h.mu.RUnlock()
	if h.cache != nil {
		if c, ok := h.cache.GetIfPresent(key); ok && time.Since(c.began) < s.opts.CacheTTL {
			return c.page, nil
		}
	}
	// The search is shared by the requests that wait for it: a client that goes away does not cut it short for
	// the others, and the deadline of the first bounds it (every request has the same deadline).
	v, err, _ := h.flight.Do(key, func() (any, error) {
		began := time.Now()
		work, cancel := s.workContext(ctx)
		defer cancel()
		page, err := answer(work, h.ix, terms, r, offset)
		if err != nil {
			if work.Err() != nil {
				return nil, errTimedOut
			}
			return nil, err
		}
		if h.cache != nil {
			h.cache.Set(key, cached{page: page, began: began})
		}
		return page, nil
	})
	switch {
	case err == nil:
		return v.(Page), nil
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Page{}, ctx.Err() // the client went away
	case errors.Is(err, errTimedOut):
		return Page{}, fault.Unavailablef(err, "SEARCH_TIMEOUT", "the search did not finish in time; narrow it (fewer common words, a board) or try again")
	default:
		return Page{}, fault.Unavailablef(err, "SEARCH_UNAVAILABLE", "the search index cannot answer now")
	}
}

// workContext is the context of a search's work: not canceled with ctx, whose request is one of those that wait
// for it, but ending at ctx's deadline or the service's Timeout, whichever comes first.
func (s *Service) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if s.opts.Timeout > 0 {
		if own := time.Now().Add(s.opts.Timeout); !ok || own.Before(deadline) {
			deadline, ok = own, true
		}
	}
	work := context.WithoutCancel(ctx)
	if !ok {
		return context.WithCancel(work)
	}
	return context.WithDeadline(work, deadline)
}

// cacheKey is what makes two requests the same query: their analyzed terms in any order, filters, order and page.
func cacheKey(terms []string, r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d/%s/%t/%d/%d", r.BoardID, r.WriterID, r.Type, r.Newest, r.Page, r.PageSize)
	for _, t := range slices.Sorted(slices.Values(terms)) {
		b.WriteByte(0) // no term holds it: the analyzer splits words at control characters
		b.WriteString(t)
	}
	return b.String()
}

// answer searches ix for r, whose analyzed terms are terms.
func answer(ctx context.Context, ix Indexer, terms []string, r Request, offset int64) (Page, error) {
	res, err := ix.Search(ctx, Query{Terms: terms, BoardID: r.BoardID, WriterID: r.WriterID, Type: r.Type,
		Newest: r.Newest, Offset: int(offset), Limit: int(r.PageSize), CountLimit: int(boardpage.CountLimit(r.Page, r.PageSize))})
	if err != nil {
		return Page{}, err
	}
	articles, err := commentArticles(ctx, ix, res.Docs)
	if err != nil {
		return Page{}, err
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
