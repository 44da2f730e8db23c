package articleread

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/logicalttl"
	"board/internal/polltest"
	"board/internal/redisclient/redisclienttest"
)

// nearWait bounds how long a change may take to reach a reader through the near cache: far below nearTTL, so
// that only Redis's reports of the changes can make it (and a view count's one-second refresh).
const nearWait = 10 * time.Second

// TestNearCache reads articles and board pages through a near cache while another instance applies every kind of
// change: updates, likes, comments, views, deletes, new articles and a Redis that lost its keys. Each change reaches
// the reader once Redis has reported it; the report travels apart from the write, so the reader is polled. On a
// Redis without client tracking (miniredis) there is no near cache, and the same reads go to Redis.
func TestNearCache(t *testing.T) {
	t.Parallel()
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		reads, memo := readsClient(t, b.Addrs, 1<<20)
		if near := memo != nil; near != (b.Mini == nil) {
			t.Fatalf("near cache %v, want it on a real Redis only", near)
		}
		e := newEnv(t, b)
		reader := NewService(b.Client, e.viewCache(), Config{KeyPrefix: b.Prefix, Now: e.clock.Now, Reads: reads, Memo: memo,
			Origins: Origins{Article: e.origin.URL, Comment: e.origin.URL, Like: e.origin.URL, View: e.origin.URL}})
		const board = 4
		var ids []int64
		for range 12 {
			ids = append(ids, e.uncachedArticle(board))
		}
		applied := e.applyNew(t, 0)
		e.waitNear(t, reader, board, ids)

		for _, change := range []struct {
			name string
			do   func()
		}{
			{"update", func() { e.truth.update(ids[0]) }},
			{"like and unlike", func() { e.truth.like(ids[1], 1); e.truth.like(ids[2], -1) }},
			{"comment", func() { e.truth.comment(ids[3], 1) }},
			{"views", func() { e.truth.setViews(ids[4], 999); e.clock.add(logicalttl.DefaultLogicalTTL) }},
			{"delete", func() { e.truth.delete(ids[5]) }},
			{"create", func() { ids = append(ids, e.truth.create(board)) }},
		} {
			change.do()
			applied = e.applyNew(t, applied)
			t.Run(change.name, func(t *testing.T) { e.waitNear(t, reader, board, ids) })
		}
		t.Run("flush", func(t *testing.T) {
			e.flush(t)
			e.waitNear(t, reader, board, ids)
		})
	})
}

// waitNear waits until reader answers every article of ids and the first page of board as the truth holds them.
func (e *env) waitNear(t *testing.T, reader *Service, board int64, ids []int64) {
	t.Helper()
	ctx := context.Background()
	polltest.Until(t, nearWait, func() (bool, string) {
		for _, id := range ids {
			got, err := reader.Get(ctx, id)
			want, live := e.truth.want(id)
			switch {
			case !live && !errors.Is(err, errArticleNotFound):
				return false, fmt.Sprintf("Get(%d) of a deleted article = %v, %v", id, got, err)
			case live && err != nil:
				return false, fmt.Sprintf("Get(%d): %v", id, err)
			case live && !cmp.Equal(want, got):
				return false, fmt.Sprintf("Get(%d) = %+v, want %+v", id, got, want)
			}
		}
		got, err := reader.List(ctx, board, 1, 5)
		as, count := e.truth.page(board, 1, 5)
		if want := (Page{Articles: e.truth.wantReads(as), Count: count}); err != nil || !cmp.Equal(want, got) {
			return false, fmt.Sprintf("page 1 = %+v, %v; want %+v", got, err, want)
		}
		return true, ""
	})
}

// TestNearCacheKeptPage reads a board's page, which the reader keeps whole in its memo, while another instance
// applies changes to its articles. Once a change has reached the reader (its read of the article shows it), its
// very next read of the page shows it too: the kept page is as fresh as the keys it was read from. The view counts
// stay fresh for the whole test, so nothing else ends the kept page. Needs a Redis that tracks clients.
func TestNearCacheKeptPage(t *testing.T) {
	t.Parallel()
	b := redisclienttest.Real(t)
	if b.Mini != nil {
		t.Skip("miniredis does not track clients; set " + redisclienttest.AddrEnv)
	}
	reads, memo := readsClient(t, b.Addrs, 1<<20)
	e := newEnv(t, b)
	views := logicalttl.New[int64](b.Client, b.Prefix+"article-read::", logicalttl.Config{Now: e.clock.Now,
		LogicalTTL: time.Hour, PhysicalTTL: 2 * time.Hour})
	reader := NewService(b.Client, views, Config{KeyPrefix: b.Prefix, Now: e.clock.Now, Reads: reads, Memo: memo,
		Origins: Origins{Article: e.origin.URL, Comment: e.origin.URL, Like: e.origin.URL, View: e.origin.URL}})
	const board = 5
	var ids []int64
	for range 6 {
		ids = append(ids, e.uncachedArticle(board))
	}
	applied := e.applyNew(t, 0)
	e.waitNear(t, reader, board, ids)
	ctx := context.Background()
	for _, change := range []struct {
		name string
		id   int64
		do   func(id int64)
	}{
		{"update", ids[5], e.truth.update}, // the newest: on page 1
		{"like", ids[4], func(id int64) { e.truth.like(id, 1) }},
		{"comment", ids[3], func(id int64) { e.truth.comment(id, 1) }},
		{"delete", ids[2], e.truth.delete},
	} {
		t.Run(change.name, func(t *testing.T) {
			if _, err := reader.List(ctx, board, 1, 5); err != nil { // kept again, if a change ended it
				t.Fatal(err)
			}
			change.do(change.id)
			applied = e.applyNew(t, applied)
			polltest.Until(t, nearWait, func() (bool, string) {
				got, err := reader.Get(ctx, change.id)
				want, live := e.truth.want(change.id)
				if live {
					return err == nil && cmp.Equal(want, got), fmt.Sprintf("Get(%d) = %+v, %v; want %+v", change.id, got, err, want)
				}
				return errors.Is(err, errArticleNotFound), fmt.Sprintf("Get(%d) of a deleted article = %+v, %v", change.id, got, err)
			})
			got, err := reader.List(ctx, board, 1, 5)
			as, count := e.truth.page(board, 1, 5)
			if want := (Page{Articles: e.truth.wantReads(as), Count: count}); err != nil || !cmp.Equal(want, got) {
				t.Errorf("page 1 once the change reached the reader = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}
