package articleread

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
)

// pageSizes are the page sizes lists are checked with: one article, one that divides nothing, the default, the most.
var pageSizes = []int64{1, 7, 30, 100}

// bigBoard fills board 1 with n articles (and board 2 with a few, so that boards stay apart), some liked, commented
// and viewed, and applies their events in order.
func bigBoard(t *testing.T, e *env, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range n {
		id := e.truth.create(1)
		if i%10 == 0 {
			e.truth.create(2)
		}
		switch rng.IntN(4) {
		case 0:
			e.truth.like(id, 1)
		case 1:
			e.truth.comment(id, 1)
		case 2:
			e.truth.setViews(id, rng.Int64N(500))
		}
	}
	e.applyNew(t, 0)
}

// inList reports whether ranks [from, from+n) lie inside a full list of the newest ListSize ids: such a page needs
// no origin page or scroll call once the list is synced.
func inList(from, n int64) bool { return from+n <= ListSize }

// checkPages checks every page of a board, for every page size, and every step of a scroll chain against the
// origin's answers. With warm, pages and scroll steps inside the list must make no origin page or scroll call. With
// sampled, pages of one article are checked only at the ends of the board and around the end of the list, which
// keeps the test fast (each is a round trip); every other page size still goes over every page.
func (e *env) checkPages(t *testing.T, boardID int64, warm, sampled bool) {
	t.Helper()
	for _, size := range pageSizes {
		live := e.truth.live(boardID)
		ranks := allRanks(int64(len(live)), size)
		if sampled && size == 1 {
			ranks = edgeRanks(int64(len(live)))
		}
		for _, from := range ranks {
			e.checkPage(t, boardID, from/size+1, size, warm)
		}
		if sampled && size == 1 {
			for _, from := range ranks {
				lastID := int64(0)
				if from > 0 && from <= int64(len(live)) {
					lastID = live[from-1]
				}
				e.checkScroll(t, boardID, size, lastID, from, warm)
			}
			continue
		}
		lastID, from := int64(0), int64(0)
		for {
			got := e.checkScroll(t, boardID, size, lastID, from, warm)
			if len(got) == 0 {
				break
			}
			lastID, from = int64(decoded(t, got[len(got)-1]).ArticleID), from+int64(len(got))
		}
	}
}

// allRanks returns the first rank of every page of size of a board of total articles, and of one page past its end.
func allRanks(total, size int64) []int64 {
	var ranks []int64
	for from := int64(0); from <= total+size; from += size {
		ranks = append(ranks, from)
	}
	return ranks
}

// edgeRanks returns the ranks at the ends of a board of total articles and around the end of a full list.
func edgeRanks(total int64) []int64 {
	var ranks []int64
	for r := range total + 2 {
		if r < 20 || r > total-20 || r >= ListSize-20 && r < ListSize+20 {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// checkPage checks one page against the origin's.
func (e *env) checkPage(t *testing.T, boardID, pageNo, size int64, warm bool) {
	t.Helper()
	before := e.origin.calledOf(epPage)
	got, err := e.svc.List(context.Background(), boardID, pageNo, size)
	if err != nil {
		t.Fatalf("List(board %d, page %d, size %d): %v", boardID, pageNo, size, err)
	}
	as, count := e.truth.page(boardID, pageNo, size)
	want := Page{Articles: e.truth.wantReads(as), Count: count}
	if diff := cmp.Diff(want, got, timeEqual); diff != "" {
		t.Fatalf("List(board %d, page %d, size %d) (-origin +got):\n%s", boardID, pageNo, size, diff)
	}
	if calls := e.origin.calledOf(epPage) - before; warm && inList((pageNo-1)*size, size) && calls != 0 {
		t.Errorf("List(board %d, page %d, size %d) inside the synced list called the origin's page %d times",
			boardID, pageNo, size, calls)
	}
}

// checkScroll checks one scroll step, the one after lastID at rank from, against the origin's.
func (e *env) checkScroll(t *testing.T, boardID, size, lastID, from int64, warm bool) []ArticleRead {
	t.Helper()
	before := e.origin.calledOf(epScroll)
	got, err := e.svc.Scroll(context.Background(), boardID, size, lastID)
	if err != nil {
		t.Fatalf("Scroll(board %d, size %d, after %d): %v", boardID, size, lastID, err)
	}
	want := e.truth.wantReads(e.truth.scroll(boardID, size, lastID))
	if diff := cmp.Diff(want, got, timeEqual); diff != "" {
		t.Fatalf("Scroll(board %d, size %d, after %d at rank %d) (-origin +got):\n%s", boardID, size, lastID, from, diff)
	}
	if calls := e.origin.calledOf(epScroll) - before; warm && inList(from, size) && calls != 0 {
		t.Errorf("Scroll(board %d, size %d, after %d at rank %d) inside the synced list called the origin's scroll %d times",
			boardID, size, lastID, from, calls)
	}
	return got
}

// awaitSynced waits for the background backfill of a board to finish.
func (e *env) awaitSynced(t *testing.T, boardID int64) {
	t.Helper()
	polltest.Until(t, 20*time.Second, func() (bool, string) {
		synced, err := e.b.Client.HGet(context.Background(), e.svc.boardKeys(boardID)[1], "synced").Result()
		return err == nil && synced == "1",
			fmt.Sprintf("board %d: no backfill made the list synced (synced=%q, err=%v)", boardID, synced, err)
	})
}

// TestListsMatchOrigin: a board past the first 1000 articles pages and scrolls as the article service does — same
// articles, same order, same capped count — cold, warm, after deletes, after a flush, and with events out of order.
func TestListsMatchOrigin(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		e.svc = e.service(e.viewCache()) // view counts do not change here: cache them as production does
		bigBoard(t, e, ListSize+150)
		mark := e.truth.eventCount()

		t.Log("cold: the list was never synced, so pages come from the origin and a backfill starts")
		as, count := e.truth.page(1, 1, 30)
		got, err := e.svc.List(ctx, 1, 1, 30)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Page{e.truth.wantReads(as), count}, got, timeEqual); diff != "" {
			t.Errorf("first cold page (-origin +got):\n%s", diff)
		}
		if got := e.origin.calledOf(epPage); got != 1 {
			t.Errorf("the first page of an unsynced list called the origin's page %d times, want 1", got)
		}
		e.checkPages(t, 1, false, false)
		e.awaitSynced(t, 1)
		if e.origin.calledOf(epBoardCount) == 0 {
			t.Errorf("no backfill read the board count: origin calls %v", e.origin.allCalls())
		}

		t.Log("warm")
		e.awaitSynced(t, 1)
		e.checkPages(t, 1, true, false)
		e.checkPages(t, 2, false, false)
		e.awaitSynced(t, 2)
		e.checkPages(t, 2, true, false)

		t.Log("after deletes inside the list, at its ends and past it")
		live := e.truth.live(1)
		for _, rank := range []int{0, 5, 100, 500, 990, 995, 999, 1000, 1100, len(live) - 1} {
			e.truth.delete(live[rank])
		}
		mark = e.applyNew(t, mark)
		e.checkPages(t, 1, false, true)

		t.Log("after a flush")
		e.flush(t)
		e.checkPages(t, 1, false, true)
		e.awaitSynced(t, 1)
		e.checkPages(t, 1, true, true)

		t.Log("events out of order: a newer create before an older one, a delete before its create")
		older := e.truth.create(1)
		e.truth.create(1) // newer
		gone := e.truth.create(1)
		e.truth.update(older)
		e.truth.delete(gone)
		envs := e.truth.eventsSince(mark)
		// envs: create older, create newer, create gone, update older, delete gone
		e.apply(t, reorder(envs, 4, 1, 3, 0, 2))
		e.checkPages(t, 1, true, true)
	})
}

// reorder returns envs in the order of the indexes given.
func reorder(envs []event.Envelope, order ...int) []event.Envelope {
	out := make([]event.Envelope, len(order))
	for i, j := range order {
		out[i] = envs[j]
	}
	return out
}

// TestListSmallBoard: a board of fewer than ListSize articles is held whole, so every page and scroll step comes
// from Redis once synced, up to its end.
func TestListSmallBoard(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		for range 45 {
			e.truth.create(4)
		}
		e.applyNew(t, 0)
		if err := e.svc.Backfill(context.Background(), 4); err != nil {
			t.Fatal(err)
		}
		e.origin.resetCalls()
		e.checkPages(t, 4, true, false)
		for _, ep := range []string{epPage, epScroll, epArticle} {
			if n := e.origin.calledOf(ep); n != 0 {
				t.Errorf("a synced small board called the origin's %s %d times", ep, n)
			}
		}
	})
}

// TestListEmptyBoard: a board without articles pages as the origin does: no articles, count 0.
func TestListEmptyBoard(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		e.checkPages(t, 9, false, false)
		if err := e.svc.Backfill(context.Background(), 9); err != nil {
			t.Fatal(err)
		}
		e.checkPages(t, 9, false, false)
	})
}

// TestListLateCreateOfDeletedArticle: ARTICLE_CREATED of an article deleted more than ten minutes before (a
// redelivery, a dead letter sent back) must not put it back in the list: a page from Redis would then lack an
// article (its model is a tombstone, so the page drops it) — a hole the origin's page does not have.
func TestListLateCreateOfDeletedArticle(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		for range 40 {
			e.truth.create(5)
		}
		e.applyNew(t, 0)
		if err := e.svc.Backfill(context.Background(), 5); err != nil {
			t.Fatal(err)
		}
		victim := e.truth.live(5)[3]
		mark := e.truth.eventCount()
		e.truth.delete(victim)
		e.applyNew(t, mark)
		// Ten minutes later the recent deletes are forgotten (deleting the key is what its expiry does).
		e.clock.add(recentDeletes + time.Minute)
		if err := e.b.Client.Del(context.Background(), e.svc.boardKeys(5)[2]).Err(); err != nil {
			t.Fatal(err)
		}
		e.apply(t, []event.Envelope{e.truth.createEvent(victim)})
		e.checkPages(t, 5, true, false)
	})
}

// TestListDeletedArticleStaysOutAfterFlush: after a flush, a redelivered ARTICLE_CREATED of a deleted article must
// not bring it back into the board's pages.
func TestListDeletedArticleStaysOutAfterFlush(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		for range 12 {
			e.truth.create(6)
		}
		victim := e.truth.live(6)[2]
		e.truth.delete(victim)
		envs := e.truth.eventsSince(0)
		e.apply(t, envs)
		e.flush(t)
		e.apply(t, []event.Envelope{e.truth.createEvent(victim)})
		if err := e.svc.Backfill(context.Background(), 6); err != nil {
			t.Fatal(err)
		}
		// The backfill's read did not return it: the backfill takes it out, so a page past it is right at once,
		// before the page that held it is read (and would heal the list).
		if rank, err := b.Client.ZRevRank(context.Background(), e.svc.boardKeys(6)[0], member(victim)).Result(); err == nil {
			t.Errorf("the deleted article is still listed at rank %d after the backfill", rank)
		}
		e.checkPage(t, 6, 2, 5, true)
		e.checkPages(t, 6, false, false)
	})
}

// TestDeepPagesShared: a page past the list's reach is fetched from the article service once per DeepPageTTL
// however many read it, at once or one after another, and then shows what changed; a page within reach is not
// shared.
func TestDeepPagesShared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, redisclienttest.Mini(t))
	bigBoard(t, e, ListSize+25)
	var mu sync.Mutex
	now := e.clock.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	svc := NewService(e.b.Client, loadViews{}, Config{KeyPrefix: e.b.Prefix, Now: clock, Reads: e.reads,
		DeepPageTTL: time.Second, Origins: Origins{Article: e.origin.URL, Comment: e.origin.URL, Like: e.origin.URL,
			View: e.origin.URL}})
	const deep, size = ListSize/10 + 1, 10 // from rank ListSize on
	check := func(what string, want Page, calls int) {
		t.Helper()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				got, err := svc.List(ctx, 1, deep, size)
				if err != nil {
					t.Errorf("%s: %v", what, err)
					return
				}
				if diff := cmp.Diff(want, got, timeEqual); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			})
		}
		wg.Wait()
		if got := e.origin.calledOf(epPage); got != calls {
			t.Errorf("%s: the origin's page was called %d times, want %d", what, got, calls)
		}
	}
	as, count := e.truth.page(1, deep, size)
	first := Page{e.truth.wantReads(as), count}
	check("eight readers of a deep page", first, 1)

	e.truth.create(1) // every article moves one rank down
	check("the same page within the TTL", first, 1)

	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	as, count = e.truth.page(1, deep, size)
	check("the page once the TTL passed", Page{e.truth.wantReads(as), count}, 2)

	for range 2 {
		if _, err := svc.List(ctx, 1, 2, size); err != nil { // within reach: the list is not synced here
			t.Fatal(err)
		}
	}
	if got := e.origin.calledOf(epPage); got != 4 {
		t.Errorf("two reads of page 2 made %d calls of the origin's page in all, want 4: pages within reach are not shared", got)
	}
}

// countingViews is the production view cache, counting the reads that go through Get.
type countingViews struct {
	ViewCounts
	gets atomic.Int64
}

func (c *countingViews) Get(ctx context.Context, key string, load func(context.Context) (int64, error)) (int64, error) {
	c.gets.Add(1)
	return c.ViewCounts.Get(ctx, key, load)
}

// TestOriginPageWarm: a page the article service answers (past the list's reach) whose articles' models hold their
// counts, and whose view counts are cached, is answered in the round trip that read them: the models keep no article
// from a page (it has no version), and the page's own article stands in without a wait for anything else.
func TestOriginPageWarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, redisclienttest.Mini(t))
	bigBoard(t, e, ListSize+25)
	views := &countingViews{ViewCounts: e.viewCache()}
	e.svc = e.service(views)
	const deep, size = ListSize/10 + 1, 10
	for range 2 { // the first read builds the counts and caches the views
		if _, err := e.svc.List(ctx, 1, deep, size); err != nil {
			t.Fatal(err)
		}
	}
	// As after a read that rebuilt the counts with the page's article (a board filled by board seed, say): the
	// models hold the counts but no article.
	as, count := e.truth.page(1, deep, size)
	for _, a := range as {
		if err := e.b.Client.HDel(ctx, e.svc.modelKey(int64(a.ArticleID)), "article", "av").Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := views.gets.Load()
	got, err := e.svc.List(ctx, 1, deep, size)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Page{e.truth.wantReads(as), count}, got, timeEqual); diff != "" {
		t.Errorf("warm deep page (-want +got):\n%s", diff)
	}
	if n := views.gets.Load() - before; n != 0 {
		t.Errorf("a warm deep page read %d view counts through Get, want none: they were cached", n)
	}
}
