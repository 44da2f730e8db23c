package web

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// A signed-out reader's board or article page is the same for every signed-out reader of its address, so it is
// kept for at most sharedPageTTL and shared: a burst of readers of a page costs the services one page a second, and
// the readers arriving while it is made wait for it rather than make it again. A page for a signed-in reader shows
// them (their name, their like, their own articles' buttons) and is never kept or shared; one for a signed-out
// reader is made by a request without a session, so it shows no one.
const (
	sharedPageTTL = time.Second
	// maxSharedPages bounds the pages kept (addresses differ by any query): when full, pages older than
	// sharedPageTTL are dropped, and if none is, a new page is not kept.
	maxSharedPages = 1000
)

type pageCache struct {
	now   func() time.Time
	group singleflight.Group

	mu    sync.Mutex
	pages map[string]*sharedPage
}

// sharedPage is a page as its handler answered it.
type sharedPage struct {
	status int
	header http.Header
	body   []byte
	made   time.Time // when it was started: what it shows is at least this old
}

func newPageCache(now func() time.Time) *pageCache {
	return &pageCache{now: now, pages: map[string]*sharedPage{}}
}

// shared serves page from the cache to signed-out readers (see sharedPageTTL); others get it made for them.
func (c *pageCache) shared(page http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cookie, err := r.Cookie(sessionCookie); err == nil && cookie.Value != "" {
			page.ServeHTTP(w, r)
			return
		}
		key := r.URL.RequestURI()
		if p := c.fresh(key); p != nil {
			p.write(w, r, `cache;desc="hit"`)
			return
		}
		made := false
		v, _, _ := c.group.Do(key, func() (any, error) {
			// Another reader's page may have been kept between the look above and this one.
			if p := c.fresh(key); p != nil {
				return p, nil
			}
			made = true
			return c.make(page, r, key), nil
		})
		timing := ""
		if !made {
			timing = `cache;desc="shared"`
		}
		v.(*sharedPage).write(w, r, timing)
	})
}

// fresh returns the page kept for key if it is younger than sharedPageTTL.
func (c *pageCache) fresh(key string) *sharedPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pages[key]; ok && c.now().Sub(p.made) < sharedPageTTL {
		return p
	}
	return nil
}

// make has page answer r into a recording, and keeps a successful answer. The page is made for every reader
// waiting on it, so a reader who goes away does not cancel it; its deadline still holds.
func (c *pageCache) make(page http.Handler, r *http.Request, key string) *sharedPage {
	ctx := context.WithoutCancel(r.Context())
	if deadline, ok := r.Context().Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	made := c.now()
	rec := &recorder{header: http.Header{}}
	req := r.Clone(ctx)
	req.Method = http.MethodGet // a HEAD's page is kept for the GETs after it
	page.ServeHTTP(rec, req)
	for k, v := range rec.header {
		rec.header[k] = slices.Clip(v) // shared by every answer: an Add to one must not write into the others
	}
	p := &sharedPage{status: rec.status, header: rec.header, body: rec.body.Bytes(), made: made}
	if p.status == 0 {
		p.status = http.StatusOK
	}
	if p.status == http.StatusOK && p.header.Get("Set-Cookie") == "" {
		c.keep(key, p)
	}
	return p
}

func (c *pageCache) keep(key string, p *sharedPage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pages) >= maxSharedPages {
		now := c.now()
		for k, old := range c.pages {
			if now.Sub(old.made) >= sharedPageTTL {
				delete(c.pages, k)
			}
		}
		if len(c.pages) >= maxSharedPages {
			return
		}
	}
	c.pages[key] = p
}

// write sends the page; timing, when given, replaces its Server-Timing (the calls were made for another request).
func (p *sharedPage) write(w http.ResponseWriter, r *http.Request, timing string) {
	h := w.Header()
	for k, v := range p.header {
		h[k] = v
	}
	if timing != "" {
		h.Set("Server-Timing", timing)
	}
	w.WriteHeader(p.status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(p.body)
	}
}

// recorder is the response a shared page is made into.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
