package search

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"board/internal/fault"
)

// countingIndex answers every query with a page of limit documents of long content, counting its searches; with
// block set, each search waits for it to close (or for its context).
type countingIndex struct {
	Indexer
	searches atomic.Int64
	block    chan struct{}
}

func (c *countingIndex) Search(ctx context.Context, q Query) (Result, error) {
	c.searches.Add(1)
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}
	docs := make([]Doc, q.Limit)
	for i := range docs {
		docs[i] = Doc{Type: TypeArticle, ArticleID: int64(q.Offset + i + 1), BoardID: 1, WriterID: 1,
			Title: "title " + strings.Join(q.Terms, " "), Content: strings.Repeat(q.Terms[0]+" 게시판에 글 ", 40), Version: 1}
	}
	return Result{Docs: docs, Count: q.Limit}, nil
}

// stopCache stops the goroutine of svc's cache, which a synctest bubble must not leave behind.
func stopCache(svc *Service) {
	if c := svc.cur.Load().cache; c != nil {
		c.StopAllGoroutines()
	}
}

func request(q string) Request { return Request{Q: q, Page: 1, PageSize: 20} }

// The cache answers the same query (its terms in any order) from memory until the TTL passes; another page, sort or
// filter is another query; without a TTL there is no cache.
func TestCacheAnswersTheSameQueryUntilItsTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ix := &countingIndex{}
		svc := NewService(ix, Options{CacheTTL: 500 * time.Millisecond, CacheBytes: 1 << 20})
		search := func(r Request, wantSearches int64) {
			t.Helper()
			if _, err := svc.Search(ctx, r); err != nil {
				t.Fatal(err)
			}
			if got := ix.searches.Load(); got != wantSearches {
				t.Errorf("after %+v: %d searches of the index, want %d", r, got, wantSearches)
			}
		}
		search(request("apple banana"), 1)
		search(request("Banana  APPLE the"), 1) // the same terms
		newest := request("apple banana")
		newest.Newest = true
		search(newest, 2)
		page2 := request("apple banana")
		page2.Page = 2
		search(page2, 3)
		board := request("apple banana")
		board.BoardID = 7
		search(board, 4)
		time.Sleep(499 * time.Millisecond)
		search(request("apple banana"), 4)
		time.Sleep(time.Millisecond)
		search(request("apple banana"), 5) // 500 ms after its search began: searched again

		stopCache(svc)
		off := &countingIndex{}
		svc = NewService(off, Options{CacheBytes: 1 << 20})
		for range 3 {
			if _, err := svc.Search(ctx, request("apple")); err != nil {
				t.Fatal(err)
			}
		}
		if got := off.searches.Load(); got != 3 {
			t.Errorf("without a TTL: %d searches of the index for 3 requests, want 3", got)
		}
	})
}

// The cache holds no more than its bound, however many answers it is given.
func TestCacheStaysWithinItsBound(t *testing.T) {
	t.Parallel()
	const bound = 256 << 10
	ix := &countingIndex{}
	svc := NewService(ix, Options{CacheTTL: time.Hour, CacheBytes: bound})
	h := svc.cur.Load()
	var given uint64
	for i := range 100 {
		r := request(fmt.Sprintf("word%d", i))
		p, err := svc.Search(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		given += uint64(cached{page: p}.weight(cacheKey(Terms(r.Q), r)))
	}
	h.cache.CleanUp()
	if got := h.cache.WeightedSize(); got > bound || got == 0 {
		t.Errorf("the cache holds %d bytes after %d were given it; want 1 to %d", got, given, bound)
	}
	if given < 4*bound {
		t.Fatalf("the test gave the cache %d bytes, too few to fill it", given)
	}
	// A page's weight is about its bytes: 20 fragments of some 500 bytes.
	if w := (cached{page: mustSearch(t, svc, request("x"))}).weight(""); w < 20*500 {
		t.Errorf("a page of 20 weighs %d, less than its fragments' bytes", w)
	}
}

func mustSearch(t *testing.T, svc *Service, r Request) Page {
	t.Helper()
	p, err := svc.Search(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Concurrent misses of the same query are answered by one search of the index, also when the cache is off; a
// client that goes away while it waits does not cut the search short for the others.
func TestConcurrentMissesSearchOnce(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{{}, {CacheTTL: time.Second, CacheBytes: 1 << 20}} {
		synctest.Test(t, func(t *testing.T) {
			ix := &countingIndex{block: make(chan struct{})}
			svc := NewService(ix, opts)
			leaving, leave := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			errs := make([]error, 10)
			for i := range errs {
				ctx := context.Background()
				if i == 0 {
					ctx = leaving // the first, whose search the others wait for
				}
				wg.Go(func() { _, errs[i] = svc.Search(ctx, request("same words")) })
				synctest.Wait()
			}
			leave()
			close(ix.block)
			wg.Wait()
			if got := ix.searches.Load(); got != 1 {
				t.Errorf("%+v: %d searches of the index for 10 concurrent requests, want 1", opts, got)
			}
			stopCache(svc)
			for _, err := range errs[1:] {
				if err != nil {
					t.Errorf("%+v: a waiting request: %v", opts, err)
				}
			}
		})
	}
}

// A search that would run past the service's timeout, or the request's deadline if sooner, is cut there and says so.
func TestSearchIsCutAtItsDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		svc := NewService(&countingIndex{block: make(chan struct{})}, Options{Timeout: 2 * time.Second})
		for _, tc := range []struct {
			name     string
			deadline time.Duration // the request's; 0: none
			want     time.Duration
		}{{"no request deadline", 0, 2 * time.Second}, {"a later one", 5 * time.Second, 2 * time.Second},
			{"a sooner one", time.Second, time.Second}} {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			start := time.Now()
			_, err := svc.Search(ctx, request("slow "+tc.name))
			if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "SEARCH_TIMEOUT" {
				t.Errorf("%s: %v, want 503 SEARCH_TIMEOUT", tc.name, err)
			}
			if took := time.Since(start); took != tc.want {
				t.Errorf("%s: cut after %s, want %s", tc.name, took, tc.want)
			}
		}
	})
}

// The cache belongs to its index: once a rebuilt index is swapped in, no answer of the old one is given.
func TestSwapStartsAnEmptyCache(t *testing.T) {
	t.Parallel()
	old, rebuilt := &countingIndex{}, &countingIndex{}
	svc := NewService(old, Options{CacheTTL: time.Hour, CacheBytes: 1 << 20})
	mustSearch(t, svc, request("apple"))
	mustSearch(t, svc, request("apple"))
	svc.Swap(rebuilt)
	mustSearch(t, svc, request("apple"))
	if o, r := old.searches.Load(), rebuilt.searches.Load(); o != 1 || r != 1 {
		t.Errorf("searches of the old index %d, of the rebuilt one %d; want 1 and 1", o, r)
	}
	stopCache(svc)
}
