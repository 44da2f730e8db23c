package articleread

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultDeepPageTTL is how long a deep page is shared by default: a page past the newest ListSize articles moves
// only as articles are created or deleted, and a second of that is what a reader of page 20,000 can bear.
const DefaultDeepPageTTL = time.Second

// maxDeepPages bounds the pages kept; past it, expired ones are dropped, and if none has expired, all of them.
const maxDeepPages = 1000

// deepPages shares the article service's answers to deep pages among the requests for them for a ttl: such a
// page costs the article service a scan of its offset (the covering index, SPEC §3.1), so many readers of page
// 20,000 would each cost that scan. Concurrent misses of one page make one call. Counts are not in what it keeps:
// the answer takes them from the models as any page does.
type deepPages struct {
	ttl     time.Duration
	flights singleflight.Group
	mu      sync.Mutex
	pages   map[string]deepPage
}

type deepPage struct {
	page    page
	expires time.Time
}

func newDeepPages(ttl time.Duration) *deepPages {
	return &deepPages{ttl: ttl, pages: map[string]deepPage{}}
}

// get returns page pageNo of a board: a page kept less than ttl ago when deep is true, else from fetch.
func (d *deepPages) get(ctx context.Context, now func() time.Time, boardID, pageNo, pageSize int64, deep bool,
	fetch func(ctx context.Context, boardID, pageNo, pageSize int64) (page, error)) (page, error) {
	if !deep || d.ttl <= 0 {
		return fetch(ctx, boardID, pageNo, pageSize)
	}
	key := strconv.FormatInt(boardID, 10) + "/" + strconv.FormatInt(pageNo, 10) + "/" + strconv.FormatInt(pageSize, 10)
	d.mu.Lock()
	kept, ok := d.pages[key]
	d.mu.Unlock()
	if ok && now().Before(kept.expires) {
		return kept.page, nil
	}
	ch := d.flights.DoChan(key, func() (any, error) {
		p, err := fetch(ctx, boardID, pageNo, pageSize)
		if err == nil {
			d.keep(key, deepPage{p, now().Add(d.ttl)}, now())
		}
		return p, err
	})
	select {
	case <-ctx.Done():
		return page{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return page{}, r.Err
		}
		return r.Val.(page), nil
	}
}

func (d *deepPages) keep(key string, p deepPage, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pages) >= maxDeepPages {
		for k, kept := range d.pages {
			if !now.Before(kept.expires) {
				delete(d.pages, k)
			}
		}
		if len(d.pages) >= maxDeepPages {
			clear(d.pages)
		}
	}
	d.pages[key] = p
}
