package articleread

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/logicalttl"
	"board/internal/redisclient/redisclienttest"
)

// stableViewCache is the production view-count cache with a logical TTL no test outlives, so that a slow run under
// the race detector never sees a count expire and refresh: every origin call counted is a miss.
func (e *env) stableViewCache() *logicalttl.Cache[int64] {
	return logicalttl.New[int64](e.b.Client, e.b.Prefix+"article-read::",
		logicalttl.Config{Now: e.clock.Now, LogicalTTL: time.Hour, PhysicalTTL: 2 * time.Hour})
}

// uncachedArticle creates an article with counts in the origin only: no event reached article-read.
func (e *env) uncachedArticle(boardID int64) int64 {
	id := e.truth.create(boardID)
	e.truth.update(id)
	e.truth.like(id, 1)
	e.truth.like(id, 1)
	e.truth.comment(id, 1)
	e.truth.setViews(id, 321)
	return id
}

// getConcurrently calls Get of id n times at once on each service and checks every answer against the truth.
func (e *env) getConcurrently(t *testing.T, id int64, n int, services ...*Service) {
	t.Helper()
	want, _ := e.truth.want(id)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, n*len(services))
	for _, svc := range services {
		for range n {
			wg.Go(func() {
				<-start
				got, err := svc.Get(context.Background(), id)
				if err != nil {
					errs <- err.Error()
					return
				}
				if diff := cmp.Diff(want, got, timeEqual); diff != "" {
					errs <- diff
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	failures := 0
	for msg := range errs {
		if failures++; failures <= 3 {
			t.Errorf("Get(%d): %s", id, msg)
		}
	}
	if failures > 3 {
		t.Errorf("... and %d more failed Gets", failures-3)
	}
}

// wantOneCallEach checks that the origin was asked for an article, its counts and its views exactly once.
func (e *env) wantOneCallEach(t *testing.T) {
	t.Helper()
	want := map[string]int{epArticle: 1, epCommentCount: 1, epLikeCount: 1, epViewCount: 1}
	if diff := cmp.Diff(want, e.origin.allCalls()); diff != "" {
		t.Errorf("origin calls (-want +got):\n%s", diff)
	}
}

// TestGetStampede: however many readers want an article no one cached, the origins are asked once each.
func TestGetStampede(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		e.svc = e.service(e.stableViewCache())
		id := e.uncachedArticle(1)
		e.getConcurrently(t, id, 1000, e.svc)
		e.wantOneCallEach(t)
	})
}

// TestGetStampedeTwoInstances: two instances of the service sharing one Redis still ask each origin once.
func TestGetStampedeTwoInstances(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		one, two := e.service(e.stableViewCache()), e.service(e.stableViewCache())
		id := e.uncachedArticle(1)
		e.getConcurrently(t, id, 200, one, two)
		e.wantOneCallEach(t)
	})
}
