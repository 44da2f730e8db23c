package articleread

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"board/internal/boardpage"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
)

var keptSorts = []Sort{SortTopDay, SortTopWeek, SortTopMonth, SortTopAll, SortComments, SortActive}

// wantSorted returns a board's shown articles in a sort as the truth says they are at now: created, not deleted,
// not hidden, inside the sort's window; by the sort's key, ties newest first.
func (tr *truth) wantSorted(boardID int64, sort Sort, now time.Time) []int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	latest := map[int64]int64{}
	for _, env := range tr.events {
		if env.Type != event.CommentCreated {
			continue
		}
		p, _ := event.Payload[event.Comment](env)
		latest[int64(p.ArticleID)] = max(latest[int64(p.ArticleID)], commentTime(int64(p.CommentID)))
	}
	_, window := sort.window()
	type keyed struct{ id, key int64 }
	var out []keyed
	for id, a := range tr.articles {
		if a.deleted || a.mod.Hidden != event.Visible || int64(a.article.BoardID) != boardID {
			continue
		}
		if window > 0 && !snowflake.Timestamp(id).After(now.Add(-window)) {
			continue
		}
		k := counter(tr.likes, id).Value
		switch sort {
		case SortComments:
			k = counter(tr.comments, id).Value
		case SortActive:
			k = max(latest[id], memberScore(id))
		}
		out = append(out, keyed{id, k})
	}
	slices.SortFunc(out, func(a, b keyed) int { return cmp.Or(cmp.Compare(b.key, a.key), cmp.Compare(b.id, a.id)) })
	ids := make([]int64, len(out))
	for i, k := range out {
		ids[i] = k.id
	}
	return ids
}

func readIDs(as []ArticleRead) []int64 {
	ids := make([]int64, len(as))
	for i, a := range as {
		ids[i] = a.Article.id()
	}
	return ids
}

// checkSorted checks every page and a whole scroll of each kept sort against the truth, for a few page sizes: the
// pages and the scroll go over the sort once, in order, with nothing missing or shown twice, and the counts and
// likes shown are the truth's.
func (e *env) checkSorted(t *testing.T, svc *Service, boardID int64, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for _, sort := range keptSorts {
		want := e.truth.wantSorted(boardID, sort, now)
		for _, size := range []int64{1, 7, 30} {
			var paged []int64
			for page := int64(1); ; page++ {
				p, err := svc.ListBy(ctx, boardID, sort, page, size)
				if err != nil {
					t.Fatalf("%s page %d of %d: %v", sort, page, size, err)
				}
				if wantCount := min(int64(len(want)), boardpage.CountLimit(page, size)); p.Count != wantCount {
					t.Errorf("%s page %d of %d: count %d, want %d", sort, page, size, p.Count, wantCount)
				}
				for _, a := range p.Articles {
					if w, ok := e.truth.want(a.Article.id()); !ok || w.LikeCount != a.LikeCount || w.CommentCount != a.CommentCount {
						t.Errorf("%s: article %d shows %d likes, %d comments; truth %+v (live %v)", sort, a.Article.id(), a.LikeCount, a.CommentCount, w, ok)
					}
				}
				paged = append(paged, readIDs(p.Articles)...)
				if len(p.Articles) < int(size) {
					break
				}
			}
			if !slices.Equal(paged, want) {
				t.Errorf("%s pages of %d:\n got %v\nwant %v", sort, size, paged, want)
			}
			var scrolled []int64
			for last := int64(0); ; {
				as, err := svc.ScrollBy(ctx, boardID, sort, size, last)
				if err != nil {
					t.Fatalf("%s scroll of %d after %d: %v", sort, size, last, err)
				}
				scrolled = append(scrolled, readIDs(as)...)
				if len(as) < int(size) || len(scrolled) > len(want) {
					break
				}
				last = as[len(as)-1].Article.id()
			}
			if !slices.Equal(scrolled, want) {
				t.Errorf("%s scroll of %d:\n got %v\nwant %v", sort, size, scrolled, want)
			}
		}
	}
}

// sortedBoard creates articles on board 1 of ages from an hour to 40 days, with likes, unlikes and comments (and
// a few on board 2), deletes and hides some, and returns the events in order.
func sortedBoard(e *env, rng *rand.Rand) []event.Envelope {
	now := e.clock.Now()
	ages := []time.Duration{time.Hour, 3 * time.Hour, 23 * time.Hour, 25 * time.Hour, 3 * dayWindow, 6 * dayWindow,
		8 * dayWindow, 20 * dayWindow, 29 * dayWindow, 31 * dayWindow, 40 * dayWindow}
	var ids []int64
	for i := range 40 {
		id := e.truth.createAt(1, now.Add(-ages[i%len(ages)]-time.Duration(i)*time.Minute))
		ids = append(ids, id)
		if i%5 == 0 {
			e.truth.createAt(2, now.Add(-time.Duration(i)*time.Minute))
		}
	}
	for range 150 {
		id := ids[rng.IntN(len(ids))]
		switch rng.IntN(5) {
		case 0, 1, 2:
			e.truth.like(id, 1)
		case 3:
			e.truth.comment(id, 1)
		case 4:
			if counter(e.truth.likes, id).Value > 0 {
				e.truth.like(id, -1)
			}
		}
	}
	e.truth.delete(ids[5])
	e.truth.delete(ids[6])
	e.truth.moderate(ids[7], event.Removed, false, false)
	e.truth.moderate(ids[8], event.Pending, false, false)
	return e.truth.eventsSince(0)
}

// TestSorts: each kept sort answers the board's articles in its order, pages and scrolls without gaps or repeats,
// windows by creation, deleted and hidden articles left out; and delivering every event twice, in any order (counts
// before their article, an unlike before its like), ends in the same answers.
func TestSorts(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		rng := rand.New(rand.NewPCG(4, 4))
		envs := sortedBoard(e, rng)
		twice := append(slices.Clone(envs), envs...)
		rng.Shuffle(len(twice), func(i, j int) { twice[i], twice[j] = twice[j], twice[i] })
		e.apply(t, twice)
		e.checkSorted(t, e.svc, 1, e.clock.Now())
		if got := e.truth.wantSorted(1, SortTopWeek, e.clock.Now()); len(got) == 0 || len(got) == len(e.truth.wantSorted(1, SortTopAll, e.clock.Now())) {
			t.Fatalf("the test's board should have articles both inside and outside the week: %d", len(got))
		}
	})
}

// TestSortWindowsAge: as time passes, an article leaves top-day, top-week and top-month at its window's end, with
// no event in between; an article of 8 days is not in top-week.
func TestSortWindowsAge(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		now := e.clock.Now()
		eightDays := e.truth.createAt(1, now.Add(-8*dayWindow))
		edge := e.truth.createAt(1, now.Add(-weekWindow+time.Hour))
		young := e.truth.createAt(1, now.Add(-time.Hour))
		e.truth.like(eightDays, 1)
		e.truth.like(eightDays, 1)
		e.truth.like(edge, 1)
		e.applyNew(t, 0)
		ctx := context.Background()
		for _, step := range []struct {
			later time.Duration
			day   []int64
			week  []int64
			month []int64
		}{
			{0, []int64{young}, []int64{edge, young}, []int64{eightDays, edge, young}},
			{2 * time.Hour, []int64{young}, []int64{young}, []int64{eightDays, edge, young}},
			{23 * time.Hour, nil, []int64{young}, []int64{eightDays, edge, young}},
			{23 * dayWindow, nil, nil, []int64{edge, young}},
			{31 * dayWindow, nil, nil, nil},
		} {
			at := now.Add(step.later)
			svc := e.serviceWithClock(loadViews{}, func() time.Time { return at })
			for sort, want := range map[Sort][]int64{SortTopDay: step.day, SortTopWeek: step.week, SortTopMonth: step.month} {
				p, err := svc.ListBy(ctx, 1, sort, 1, 30)
				if err != nil {
					t.Fatal(err)
				}
				if got := readIDs(p.Articles); !slices.Equal(got, want) || p.Count != int64(len(want)) {
					t.Errorf("%s after %s: %v (count %d), want %v", sort, step.later, got, p.Count, want)
				}
				as, err := svc.ScrollBy(ctx, 1, sort, 30, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got := readIDs(as); !slices.Equal(got, want) {
					t.Errorf("%s scroll after %s: %v, want %v", sort, step.later, got, want)
				}
			}
			e.checkSorted(t, svc, 1, at)
		}
		// The trims left nothing behind in the windows' sets and the index.
		keys := e.svc.sortKeys(1)
		for _, key := range []string{keys[1], keys[2], keys[3], keys[7]} {
			if n := b.Client.ZCard(ctx, key).Val(); n != 0 {
				t.Errorf("%s holds %d after every window passed", key, n)
			}
		}
	})
}

// TestSortsPinnedFirst: page 1 of a sort starts with the board's pinned articles, the pages after it go on with the
// others, each on one page; the first scroll shows them first too.
func TestSortsPinnedFirst(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		var ids []int64
		for i := range 12 {
			id := e.truth.create(1)
			ids = append(ids, id)
			for range i % 4 {
				e.truth.like(id, 1)
			}
		}
		e.truth.moderate(ids[2], event.Visible, false, true)
		e.applyNew(t, 0)
		ctx := context.Background()
		want := []int64{ids[2]}
		for _, id := range e.truth.wantSorted(1, SortTopAll, e.clock.Now()) {
			if id != ids[2] {
				want = append(want, id)
			}
		}
		var got []int64
		for page := int64(1); page <= 3; page++ {
			p, err := e.svc.ListBy(ctx, 1, SortTopAll, page, 5)
			if err != nil {
				t.Fatal(err)
			}
			if p.Count != 12 {
				t.Errorf("page %d: count %d, want 12", page, p.Count)
			}
			if page == 1 && (len(p.Articles) == 0 || !p.Articles[0].Moderation.Pinned) {
				t.Errorf("page 1 does not start with the pinned article: %v", readIDs(p.Articles))
			}
			got = append(got, readIDs(p.Articles)...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages:\n got %v\nwant %v", got, want)
		}
		as, err := e.svc.ScrollBy(ctx, 1, SortTopAll, 5, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := readIDs(as); len(got) != 5 || got[0] != ids[2] {
			t.Errorf("first scroll %v, want the pinned %d first", got, ids[2])
		}
	})
}

// TestSortScrollAfterGone: a scroll whose last article was deleted or hidden since goes on from that article's
// place in the sort.
func TestSortScrollAfterGone(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		var ids []int64
		for i := range 10 {
			id := e.truth.create(1)
			ids = append(ids, id)
			for range i % 3 {
				e.truth.comment(id, 1)
			}
		}
		e.applyNew(t, 0)
		ctx := context.Background()
		before := e.truth.wantSorted(1, SortComments, e.clock.Now())
		from := e.truth.eventCount()
		e.truth.delete(before[3])
		e.truth.moderate(before[6], event.Removed, false, false)
		e.applyNew(t, from)
		for _, cut := range []int{3, 6} {
			as, err := e.svc.ScrollBy(ctx, 1, SortComments, 100, before[cut])
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			for _, id := range before[cut+1:] {
				if id != before[6] {
					want = append(want, id)
				}
			}
			if got := readIDs(as); !slices.Equal(got, want) {
				t.Errorf("after the gone %d: %v, want %v", before[cut], got, want)
			}
		}
	})
}

// TestSortRoutes: sort is read by both lists; anything else than the sorts is 400 INVALID_SORT.
func TestSortRoutes(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		a := e.truth.create(1)
		c := e.truth.create(1)
		e.truth.like(a, 1)
		e.applyNew(t, 0)
		api := httpiotest.Handler("article-read", Routes(e.svc, httpiotest.Logger))
		for _, path := range []string{"/v1/articles?boardId=1&sort=best", "/v1/articles/infinite-scroll?boardId=1&sort=TOP-ALL"} {
			r := httpiotest.Call(api, http.MethodGet, path, "")
			httpiotest.WantError(t, r, http.StatusBadRequest, "INVALID_SORT")
		}
		r := httpiotest.Call(api, http.MethodGet, "/v1/articles/infinite-scroll?boardId=1&sort=top-all&pageSize=1&lastArticleId="+
			strconv.FormatInt(a, 10), "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		got := httpiotest.DecodeJSON(t, r.Body).([]any)
		if len(got) != 1 || got[0].(map[string]any)["articleId"] != strconv.FormatInt(c, 10) {
			t.Errorf("scroll top-all after %d: %v, want %d", a, got, c)
		}
	})
}

// TestSortsNearCache: a sorted page read through the near cache (and kept whole in the memo) shows a change that
// another instance applies once Redis has reported it, and, with no change at all, stops showing an article once
// it has aged out of its window.
func TestSortsNearCache(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		reads, memo := readsClient(t, b.Addrs, 1<<20)
		e := newEnv(t, b)
		var shift atomic.Int64 // how far the reader's clock runs ahead
		readerNow := func() time.Time { return e.clock.Now().Add(time.Duration(shift.Load())) }
		reader := NewService(b.Client, e.viewCache(), Config{KeyPrefix: b.Prefix, Now: readerNow, Reads: reads, Memo: memo,
			Origins: Origins{Article: e.origin.URL, Comment: e.origin.URL, Like: e.origin.URL, View: e.origin.URL}})
		var ids []int64
		for i := range 4 {
			ids = append(ids, e.truth.createAt(1, e.clock.Now().Add(-time.Duration(i+1)*time.Hour)))
			for range i {
				e.truth.like(ids[i], 1)
			}
		}
		applied := e.applyNew(t, 0)
		ctx := context.Background()
		waitFor := func(sort Sort, want func() []int64) {
			t.Helper()
			polltest.Until(t, nearWait, func() (bool, string) {
				p, err := reader.ListBy(ctx, 1, sort, 1, 30)
				if got, w := readIDs(p.Articles), want(); err != nil || !slices.Equal(got, w) {
					return false, fmt.Sprintf("%s page 1 = %v, %v; want %v", sort, got, err, w)
				}
				return true, ""
			})
		}
		now := func() []int64 { return e.truth.wantSorted(1, SortTopDay, readerNow()) }
		waitFor(SortTopDay, now)
		e.truth.like(ids[0], 5)
		e.truth.like(ids[0], 5)
		e.applyNew(t, applied)
		waitFor(SortTopDay, now)
		if got := readIDs(mustList(t, reader, SortTopDay)); got[0] != ids[0] {
			t.Fatalf("top-day after likes: %v, want %d first", got, ids[0])
		}
		shift.Store(int64(dayWindow - 150*time.Minute)) // the oldest two are now older than a day
		waitFor(SortTopDay, now)
		if got := now(); len(got) != 2 {
			t.Fatalf("the truth has %v in the day", got)
		}
	})
}

func mustList(t *testing.T, svc *Service, sort Sort) []ArticleRead {
	t.Helper()
	p, err := svc.ListBy(context.Background(), 1, sort, 1, 30)
	if err != nil {
		t.Fatal(err)
	}
	return p.Articles
}

// TestSortHealsGone: a sorted page that meets an article its origin no longer has (its delete not yet delivered)
// leaves it out and takes it out of the sorts, as its ARTICLE_DELETED would.
func TestSortHealsGone(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		e := newEnv(t, b)
		old := e.truth.createAt(1, e.clock.Now().Add(-3*dayWindow)) // no model from events: read from the origin
		other := e.truth.create(1)
		e.truth.like(old, 1)
		e.applyNew(t, 0)
		e.truth.delete(old) // not delivered
		ctx := context.Background()
		for range 2 {
			if got := readIDs(mustList(t, e.svc, SortTopAll)); !slices.Equal(got, []int64{other}) {
				t.Errorf("top-all = %v, want only %d", got, other)
			}
		}
		if err := b.Client.ZScore(ctx, sortSet(e.svc.sortKeys(1), SortTopAll), member(old)).Err(); err == nil {
			t.Errorf("the deleted %d is still in top-all", old)
		}
	})
}
