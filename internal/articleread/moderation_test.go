package articleread

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/boardpage"
	"board/internal/event"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
)

// idsOf returns the ids of as, in order.
func idsOf(as []ArticleRead) []int64 {
	ids := make([]int64, len(as))
	for i, a := range as {
		ids[i] = a.Article.id()
	}
	return ids
}

// shown returns the live articles of a board that moderation does not hide, newest first: what its list holds.
func (tr *truth) shown(boardID int64) []int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ids []int64
	for _, id := range tr.liveLocked(boardID) {
		if tr.articles[id].mod.Hidden == event.Visible {
			ids = append(ids, id)
		}
	}
	return ids
}

// pinnedFirst returns the shown articles of a board as its pages show them from a synced list: the pinned ones
// first, newest first, then the others.
func (tr *truth) pinnedFirst(boardID int64) []int64 {
	shown := tr.shown(boardID)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var pinned, others []int64
	for _, id := range shown {
		if tr.articles[id].mod.Pinned {
			pinned = append(pinned, id)
		} else {
			others = append(others, id)
		}
	}
	return append(pinned, others...)
}

// firstPage returns the ids of a board's first page of size as article-read answers it from a synced list: the
// pinned articles first (newest first; for a scroll, leaving the last place to one that is not), then the newest
// others.
func (tr *truth) firstPage(boardID int64, size int, scroll bool) []int64 {
	shown := tr.shown(boardID)
	tr.mu.Lock()
	var pinned []int64
	for _, id := range shown {
		if tr.articles[id].mod.Pinned {
			pinned = append(pinned, id)
		}
	}
	tr.mu.Unlock()
	slots := min(len(pinned), size)
	if scroll {
		slots = min(len(pinned), max(size-1, 0))
	}
	page := slices.Clone(pinned[:slots])
	for _, id := range shown {
		if len(page) == size {
			break
		}
		if !slices.Contains(page, id) {
			page = append(page, id)
		}
	}
	return page
}

// onTheWire compares articles as their answers read: a hidden article's model may hold the article or the
// placeholder its origin answered with, which answer alike.
var onTheWire = cmp.Transformer("wire", func(a ArticleRead) string { return string(a.appendJSON(nil)) })

// wantIDs checks that as are the articles ids, in order, each answered as the truth holds it.
func (e *env) wantIDs(t *testing.T, what string, as []ArticleRead, ids []int64) {
	t.Helper()
	if diff := cmp.Diff(ids, idsOf(as)); diff != "" {
		t.Errorf("%s: ids (-want +got):\n%s", what, diff)
		return
	}
	for _, a := range as {
		want, _ := e.truth.want(a.Article.id())
		if diff := cmp.Diff(want, a, onTheWire); diff != "" {
			t.Errorf("%s: article %d (-want +got):\n%s", what, a.Article.id(), diff)
		}
	}
}

// wantGet checks that Get answers article id as the truth holds it.
func (e *env) wantGet(t *testing.T, id int64) {
	t.Helper()
	got, err := e.svc.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	e.wantIDs(t, fmt.Sprintf("Get(%d)", id), []ArticleRead{got}, []int64{id})
}

// syncedBoard creates n articles on board, applies their events and backfills the board's list.
func syncedBoard(t *testing.T, e *env, boardID int64, n int) []int64 {
	t.Helper()
	mark := e.truth.eventCount()
	for range n {
		e.truth.create(boardID)
	}
	e.applyNew(t, mark)
	if err := e.svc.Backfill(context.Background(), boardID); err != nil {
		t.Fatal(err)
	}
	return e.truth.live(boardID)
}

// TestModerationInAnyOrder: an article's moderation events, delivered in any order and more than once, with its
// other events, leave its model at the newest moderation state, and its answer shows it (masked when hidden).
func TestModerationInAnyOrder(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		rng := rand.New(rand.NewPCG(27, 9))
		for round := range 6 {
			mark := e.truth.eventCount()
			id := e.truth.create(11)
			e.truth.comment(id, 1)
			e.truth.moderate(id, event.Pending, false, false)
			e.truth.update(id)
			e.truth.moderate(id, event.Removed, true, false)
			e.truth.like(id, 1)
			if round%2 == 0 {
				e.truth.moderate(id, event.Visible, true, true)
			}
			e.apply(t, shuffled(rng, e.truth.eventsSince(mark)))
			e.wantGet(t, id)
			if round%3 == 0 { // and rebuilt from the article service, which tells no moderation version
				e.flush(t)
				e.wantGet(t, id)
			}
		}
	})
}

// TestModerationAnswers: a hidden article is answered to everyone with a placeholder title, no content and the
// reason; a restored one as it is; locked and pinned are carried.
func TestModerationAnswers(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.create(12)
		mark := e.applyNew(t, 0)
		for _, step := range []struct {
			hidden         event.Hidden
			locked, pinned bool
			title          string
		}{
			{event.Pending, false, false, pendingTitle},
			{event.Removed, true, false, removedTitle},
			{event.Visible, true, true, ""},
			{event.Visible, false, false, ""},
		} {
			e.truth.moderate(id, step.hidden, step.locked, step.pinned)
			mark = e.applyNew(t, mark)
			got, err := e.svc.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			var wire map[string]any
			if err := json.Unmarshal(got.appendJSON(nil), &wire); err != nil {
				t.Fatal(err)
			}
			want, _ := e.truth.want(id)
			wantTitle, wantContent, wantReason := decoded(t, want).Title, decoded(t, want).Content, ""
			if step.hidden != event.Visible {
				wantTitle, wantContent, wantReason = step.title, "", "why "+string(step.hidden)
			}
			if wire["title"] != wantTitle || wire["content"] != wantContent || wire["hidden"] != string(step.hidden) ||
				wire["removedReason"] != wantReason || wire["locked"] != step.locked || wire["pinned"] != step.pinned {
				t.Errorf("after %+v the answer is %v", step, wire)
			}
		}
	})
}

// TestModerationOfAnArticleNotHeld: a moderation event for an article whose model Redis does not hold (created
// days ago) keeps the state in a model of its own for a day, which a read completes from the origins.
func TestModerationOfAnArticleNotHeld(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		id := e.truth.createAt(13, e.clock.Now().Add(-72*time.Hour))
		mark := e.truth.eventCount()
		e.truth.moderate(id, event.Removed, true, false)
		e.applyNew(t, mark)
		if !exists(t, b, e.svc.modelKey(id)) {
			t.Fatal("the moderation of an article not held was not kept")
		}
		if left := time.Until(pexpireTime(t, b, e.svc.modelKey(id))) + time.Since(e.clock.Now()); left < ModelTTL-time.Minute {
			t.Errorf("the moderation is kept %v, want a day", left)
		}
		e.wantGet(t, id)
		if e.origin.calledOf(epArticle) != 1 {
			t.Errorf("the article service was called %d times, want once", e.origin.calledOf(epArticle))
		}
		// The article service answered the placeholder; restored, the article is read again.
		mark = e.truth.eventCount()
		e.truth.moderate(id, event.Visible, false, false)
		e.applyNew(t, mark)
		e.wantGet(t, id)
		if got, _ := e.svc.Get(context.Background(), id); decoded(t, got).Content == "" {
			t.Errorf("the restored article is still the placeholder: %s", got.Article)
		}
	})
}

// TestHiddenLeavesTheList: a hidden article leaves its board's list (pages and scrolls from Redis skip it; the
// count is the article service's), a restored one comes back in its place; late events change nothing.
func TestHiddenLeavesTheList(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		live := syncedBoard(t, e, 14, 20)
		check := func(what string) {
			t.Helper()
			shown := e.truth.shown(14)
			for _, size := range []int64{1, 5, 7} {
				for page := int64(1); (page-1)*size <= int64(len(shown)); page++ {
					p, err := e.svc.List(ctx, 14, page, size)
					if err != nil {
						t.Fatal(err)
					}
					from := min((page-1)*size, int64(len(shown)))
					e.wantIDs(t, fmt.Sprintf("%s: page %d of %d", what, page, size), p.Articles, shown[from:min(from+size, int64(len(shown)))])
					if want := min(int64(len(live)), boardpage.CountLimit(page, size)); p.Count != want {
						t.Errorf("%s: page %d of %d: count %d, want the article service's %d", what, page, size, p.Count, want)
					}
				}
				var got []int64
				for last := int64(0); ; {
					as, err := e.svc.Scroll(ctx, 14, size, last)
					if err != nil {
						t.Fatal(err)
					}
					if len(as) == 0 {
						break
					}
					got = append(got, idsOf(as)...)
					last = as[len(as)-1].Article.id()
				}
				if diff := cmp.Diff(shown, got); diff != "" {
					t.Errorf("%s: scrolling by %d (-want +got):\n%s", what, size, diff)
				}
			}
		}
		mark := e.truth.eventCount()
		hide := e.truth.moderate(live[3], event.Removed, false, false)
		e.truth.moderate(live[0], event.Pending, false, false)
		e.applyNew(t, mark)
		check("two hidden")
		if p, err := e.svc.List(ctx, 14, 1, 5); err != nil || slices.Contains(idsOf(p.Articles), live[3]) {
			t.Fatalf("page 1 = %v, %v; want it without the hidden article", idsOf(p.Articles), err)
		}

		restore := e.truth.moderate(live[3], event.Visible, false, false)
		e.apply(t, []event.Envelope{restore, hide, restore}) // the restore first, then the late hide
		mark = e.truth.eventCount()
		check("one restored, a late hide")
		e.truth.moderate(live[0], event.Visible, false, false)
		e.applyNew(t, mark)
		check("both restored")
		e.checkPages(t, 14, true, false)
	})
}

// TestHiddenAfterAFlush: a Redis that lost the board's moderation records lists a hidden article again from the
// backfill; the article's model (rebuilt from the article service) says it is hidden, so the page skips it and the
// list is healed.
func TestHiddenAfterAFlush(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		live := syncedBoard(t, e, 15, 10)
		e.apply(t, []event.Envelope{e.truth.moderate(live[1], event.Removed, false, false)})
		e.flush(t)
		if err := e.svc.Backfill(ctx, 15); err != nil {
			t.Fatal(err)
		}
		p, err := e.svc.List(ctx, 15, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		e.wantIDs(t, "page 1 after the flush", p.Articles, e.truth.shown(15)[:5])
		if _, err := b.Client.ZRevRank(ctx, e.svc.boardKeys(15)[0], member(live[1])).Result(); err == nil {
			t.Error("the hidden article is still listed after a page found it hidden")
		}
	})
}

// TestPinnedFirst: pinned articles come first on page 1 and on the first scroll, marked pinned, without repeating
// them further down that page and keeping its size; later pages go on with the others, each once, and later
// scrolls in the board's order; pins applied out of order end at the newest; unpinned, hidden or deleted articles
// leave the first places.
func TestPinnedFirst(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		live := syncedBoard(t, e, 16, 12)
		check := func(what string) {
			t.Helper()
			for _, size := range []int{1, 2, 3, 5, 30} {
				p, err := e.svc.List(ctx, 16, 1, int64(size))
				if err != nil {
					t.Fatal(err)
				}
				e.wantIDs(t, fmt.Sprintf("%s: page 1 of %d", what, size), p.Articles, e.truth.firstPage(16, size, false))
				as, err := e.svc.Scroll(ctx, 16, int64(size), 0)
				if err != nil {
					t.Fatal(err)
				}
				first := e.truth.firstPage(16, size, true)
				e.wantIDs(t, fmt.Sprintf("%s: first scroll of %d", what, size), as, first)
				if len(first) == 0 {
					continue
				}
				// The next scroll goes on after the first one's last article, in the board's order.
				shown := e.truth.shown(16)
				from := slices.Index(shown, first[len(first)-1]) + 1
				next, err := e.svc.Scroll(ctx, 16, int64(size), first[len(first)-1])
				if err != nil {
					t.Fatal(err)
				}
				e.wantIDs(t, fmt.Sprintf("%s: second scroll of %d", what, size), next, shown[from:min(from+size, len(shown))])
			}
			// Every page: the pinned ones first, then the others, each once.
			order := e.truth.pinnedFirst(16)
			for _, size := range []int64{1, 2, 3, 5} {
				for page := int64(1); (page-1)*size <= int64(len(order)); page++ {
					p, err := e.svc.List(ctx, 16, page, size)
					if err != nil {
						t.Fatal(err)
					}
					from := min((page-1)*size, int64(len(order)))
					e.wantIDs(t, fmt.Sprintf("%s: page %d of %d", what, page, size), p.Articles,
						order[from:min(from+size, int64(len(order)))])
				}
			}
		}
		mark := e.truth.eventCount()
		e.truth.moderate(live[7], event.Visible, false, true)
		e.truth.moderate(live[1], event.Visible, true, true)
		pin := e.truth.moderate(live[9], event.Visible, false, true)
		unpin := e.truth.moderate(live[9], event.Visible, false, false)
		e.apply(t, reorder(e.truth.eventsSince(mark), 3, 0, 2, 1)) // the unpin of live[9] before its pin
		mark = e.truth.eventCount()
		check("two pinned")
		e.apply(t, []event.Envelope{pin, unpin})
		check("a late pin")

		e.truth.moderate(live[1], event.Removed, true, true) // hidden while pinned
		e.truth.moderate(live[4], event.Visible, false, true)
		mark = e.applyNew(t, mark)
		check("one pinned hidden, another pinned")
		e.truth.delete(live[4])
		mark = e.applyNew(t, mark)
		check("a pinned one deleted")
		e.truth.moderate(live[7], event.Visible, false, false)
		e.truth.moderate(live[1], event.Visible, true, false)
		e.applyNew(t, mark)
		check("all unpinned")
		e.checkPages(t, 16, true, false)
	})
}

// TestPinnedFirstFromTheOrigin: before a board's list is synced, its pages come from the article service, and page
// 1 still shows the pinned articles first, keeping its size.
func TestPinnedFirstFromTheOrigin(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		for range 6 {
			e.truth.create(18)
		}
		live := e.truth.live(18)
		e.truth.moderate(live[4], event.Visible, false, true)
		e.applyNew(t, 0)
		before := e.origin.calledOf(epPage)
		p, err := e.svc.List(context.Background(), 18, 1, 3)
		if err != nil {
			t.Fatal(err)
		}
		e.wantIDs(t, "page 1 from the origin", p.Articles, []int64{live[4], live[0], live[1]})
		if e.origin.calledOf(epPage) == before {
			t.Error("the page did not come from the article service")
		}
	})
}

// TestModerationThroughTheNearCache: hides, pins and their undoing reach a reader that reads through a near cache.
func TestModerationThroughTheNearCache(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		ctx := context.Background()
		reads, memo := readsClient(t, b.Addrs, 1<<20)
		e := newEnv(t, b)
		reader := NewService(b.Client, e.viewCache(), Config{KeyPrefix: b.Prefix, Now: e.clock.Now, Reads: reads, Memo: memo,
			Origins: Origins{Article: e.origin.URL, Comment: e.origin.URL, Like: e.origin.URL, View: e.origin.URL}})
		live := syncedBoard(t, e, 17, 8)
		mark := e.truth.eventCount()
		for _, change := range []struct {
			name string
			do   func()
		}{
			{"nothing", func() {}},
			{"hide", func() { e.truth.moderate(live[0], event.Removed, false, false) }},
			{"pin", func() { e.truth.moderate(live[5], event.Visible, true, true) }},
			{"restore", func() { e.truth.moderate(live[0], event.Visible, false, false) }},
			{"unpin", func() { e.truth.moderate(live[5], event.Visible, false, false) }},
		} {
			change.do()
			mark = e.applyNew(t, mark)
			t.Run(change.name, func(t *testing.T) {
				polltest.Until(t, nearWait, func() (bool, string) {
					p, err := reader.List(ctx, 17, 1, 4)
					if want := e.truth.firstPage(17, 4, false); err != nil || !slices.Equal(want, idsOf(p.Articles)) {
						return false, fmt.Sprintf("page 1 = %v, %v; want %v", idsOf(p.Articles), err, want)
					}
					for _, id := range live {
						got, err := reader.Get(ctx, id)
						if want, _ := e.truth.want(id); err != nil || !cmp.Equal(want, got) {
							return false, fmt.Sprintf("Get(%d) = %+v, %v; want %+v", id, got, err, want)
						}
					}
					return true, ""
				})
			})
		}
	})
}
