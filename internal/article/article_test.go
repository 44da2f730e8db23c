package article

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/boardpage"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// t0 has sub-millisecond digits and a non-UTC zone: stores must keep milliseconds in UTC.
var t0 = time.Date(2026, 1, 2, 12, 4, 5, 6_789_123, time.FixedZone("KST", 9*60*60))

// t0ms is t0 as stored.
var t0ms = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

// firstID is the first id the tests' generator issues: one issued at t0, as a Snowflake generator would (an article
// is created at its id's time). It is above 2^53, so a float64 on the way would lose digits.
var firstID = snowflake.Compose(t0, 1, 0)

// eventIDs issues the tests' event ids: one generator for the package, as one process has one.
var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(2, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

// testStore returns a store whose outbox takes event ids from eventIDs.
func testStore(db *sqldb.DB) *Store {
	return NewStore(db, outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil))
}

func newTestService(db *sqldb.DB) (*Service, *Store, *snowflaketest.Clock) {
	clock := snowflaketest.NewClock(t0)
	store := testStore(db)
	return NewService(store, snowflaketest.NewIDs(firstID), clock.Now), store, clock
}

func wantKind(t *testing.T, err error, kind fault.Kind, what string) {
	t.Helper()
	if got := fault.KindOf(err); got != kind {
		t.Errorf("%s: error = %v (kind %d), want kind %d", what, err, got, kind)
	}
}

func TestCRUD(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, clock := newTestService(db)

		created, err := svc.Create(ctx, "title", "content", 7, 9)
		if err != nil {
			t.Fatal(err)
		}
		want := Article{ID: firstID, Title: "title", Content: "content", ContentHTML: "<p>content</p>\n", ContentText: "content",
			BoardID: 7, WriterID: 9, CreatedAt: t0ms, ModifiedAt: t0ms, Version: 1}
		if diff := cmp.Diff(want, created); diff != "" {
			t.Errorf("Create (-want +got):\n%s", diff)
		}
		got, err := svc.Get(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get after Create (-want +got):\n%s", diff)
		}
		if got.CreatedAt.Location() != time.UTC || got.ModifiedAt.Location() != time.UTC {
			t.Errorf("times not in UTC: %v, %v", got.CreatedAt.Location(), got.ModifiedAt.Location())
		}

		clock.Add(90*time.Minute + 1500*time.Microsecond)
		updated, err := svc.Update(ctx, created.ID, "new title", "new **content**")
		if err != nil {
			t.Fatal(err)
		}
		want.Title, want.Content, want.ModifiedAt = "new title", "new **content**", t0ms.Add(90*time.Minute+2*time.Millisecond) // 6.789 ms + 1.5 ms
		want.ContentHTML, want.ContentText = "<p>new <strong>content</strong></p>\n", "new content"
		want.Version = 2
		if diff := cmp.Diff(want, updated); diff != "" {
			t.Errorf("Update (-want +got):\n%s", diff)
		}
		if got, err = svc.Get(ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get after Update (-want +got):\n%s", diff)
		}

		// An update that changes nothing still finds its row (MySQL counts changed rows unless told otherwise).
		clock.Add(time.Second)
		want.ModifiedAt = want.ModifiedAt.Add(time.Second)
		want.Version = 3
		if updated, err = svc.Update(ctx, created.ID, "new title", "new **content**"); err != nil {
			t.Fatalf("Update with the same title and content: %v", err)
		}
		if diff := cmp.Diff(want, updated); diff != "" {
			t.Errorf("Update with same text (-want +got):\n%s", diff)
		}
		clock.Add(-time.Second) // the same modified_at again: nothing changes at all
		if _, err = svc.Update(ctx, created.ID, "new title", "new content"); err != nil {
			t.Fatalf("Update that changes no column: %v", err)
		}

		if err := svc.Delete(ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		_, err = svc.Get(ctx, created.ID)
		wantKind(t, err, fault.NotFound, "Get after Delete")
		_, err = svc.Update(ctx, created.ID, "t", "c")
		wantKind(t, err, fault.NotFound, "Update after Delete")
		wantKind(t, svc.Delete(ctx, created.ID), fault.NotFound, "second Delete")
		_, err = svc.Get(ctx, 12345)
		wantKind(t, err, fault.NotFound, "Get of a never created id")
		if fe, _ := fault.As(err); fe == nil || fe.Code != "ARTICLE_NOT_FOUND" {
			t.Errorf("Get missing: code = %v, want ARTICLE_NOT_FOUND", err)
		}
	})
}

func TestCreateTimesMillisUTC(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		for _, in := range []time.Time{
			time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC),
			time.Date(2026, 5, 6, 7, 8, 9, 999_999_999, time.UTC),
			time.Date(2026, 5, 6, 0, 30, 0, 1_000_000, time.FixedZone("", -8*60*60)),
			time.Now(), // with a monotonic reading
		} {
			svc := NewService(testStore(db), snowflaketest.NewIDs(snowflake.Compose(in, 1, 0)), func() time.Time { return in })
			a, err := svc.Create(ctx, "t", "c", 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := svc.Get(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := in.UTC().Truncate(time.Millisecond)
			if got.CreatedAt != want || got.ModifiedAt != want || a.CreatedAt != want {
				t.Errorf("clock %v: created %v, stored %v / %v; want %v", in, a.CreatedAt, got.CreatedAt, got.ModifiedAt, want)
			}
		}
	})
}

func TestValidation(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		existing, err := svc.Create(ctx, "t", "c", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, title, content string
			wantCode             string // "" for valid
		}{
			{"empty title", "", "c", "INVALID_TITLE"},
			{"blank title", " \t\n", "c", "INVALID_TITLE"},
			{"101-char title", strings.Repeat("a", 101), "c", "INVALID_TITLE"},
			{"101 multi-byte title", strings.Repeat("가", 101), "c", "INVALID_TITLE"},
			{"empty content", "t", "", "INVALID_CONTENT"},
			{"blank content", "t", "  ", "INVALID_CONTENT"},
			{"3001-char content", "t", strings.Repeat("a", 3001), "INVALID_CONTENT"},
			{"100-char title", strings.Repeat("a", 100), "c", ""},
			{"100 multi-byte title", strings.Repeat("가", 100), "c", ""},
			{"100 four-byte title", strings.Repeat("😀", 100), "c", ""},
			{"3000-char content", "t", strings.Repeat("a", 3000), ""},
			{"3000 multi-byte content", "t", strings.Repeat("가", 3000), ""},
			{"padded title kept", "  t  ", "c", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// Routes checks the text of every POST and PUT with validate (TestRoutesBadInput); what it accepts
				// is stored as it came.
				err := validate(tc.title, tc.content)
				if tc.wantCode != "" {
					if fe, ok := fault.As(err); !ok || fe.Kind != fault.Invalid || fe.Code != tc.wantCode {
						t.Errorf("validate: %v, want Invalid %s", err, tc.wantCode)
					}
					return
				}
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				a, err := svc.Create(ctx, tc.title, tc.content, 1, 1)
				u, uerr := svc.Update(ctx, existing.ID, tc.title, tc.content)
				if err != nil || uerr != nil {
					t.Fatalf("Create: %v, Update: %v", err, uerr)
				}
				for _, id := range []int64{a.ID, u.ID} {
					got, err := svc.Get(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff([]string{tc.title, tc.content}, []string{got.Title, got.Content}); diff != "" {
						t.Errorf("stored text (-want +got):\n%s", diff)
					}
				}
			})
		}
	})
}

func TestCreateIDUnavailable(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc := NewService(testStore(db), snowflaketest.FailingIDs{}, time.Now)
		_, err := svc.Create(context.Background(), "t", "c", 1, 1)
		if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable || fe.Code != "ID_UNAVAILABLE" {
			t.Errorf("Create without ids: %v, want Unavailable ID_UNAVAILABLE", err)
		}
		if n, err := svc.BoardCount(context.Background(), 1); err != nil || n != 0 {
			t.Errorf("BoardCount = %d, %v; want 0", n, err)
		}
	})
}

// createMany creates n articles on board, returning their ids in creation (= ascending) order.
func createMany(t *testing.T, svc *Service, board int64, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range n {
		a, err := svc.Create(context.Background(), fmt.Sprintf("title %d", i), "content", board, 1)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = a.ID
	}
	return ids
}

func articleIDs(as []Article) []int64 {
	out := make([]int64, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

func reversed(ids []int64) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[len(ids)-1-i] = id
	}
	return out
}

// boardFixture: 45 articles on board 1 with 3 on board 2 created in between, so ids of the boards interleave.
func boardFixture(t *testing.T, svc *Service) (board1 []int64) {
	t.Helper()
	for i := range 3 {
		board1 = append(board1, createMany(t, svc, 1, 15)...)
		createMany(t, svc, 2, 1)
		_ = i
	}
	return board1
}

func TestListPages(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		board1 := reversed(boardFixture(t, svc)) // newest first

		for _, tc := range []struct {
			page, size int64
			want       []int64
			wantCount  int64
		}{
			{1, 20, board1[0:20], 45},
			{2, 20, board1[20:40], 45},
			{3, 20, board1[40:45], 45},
			{4, 20, []int64{}, 45},
			{1, 45, board1, 45},
			{1, 100, board1, 45},
			{1, 1, board1[0:1], 11},
			{23, 2, board1[44:45], 45},
		} {
			t.Run(fmt.Sprintf("page %d size %d", tc.page, tc.size), func(t *testing.T) {
				p, err := svc.List(ctx, 1, tc.page, tc.size)
				if err != nil {
					t.Fatal(err)
				}
				if p.Articles == nil {
					t.Error("Articles is nil, want an empty slice")
				}
				if diff := cmp.Diff(tc.want, articleIDs(p.Articles)); diff != "" {
					t.Errorf("ids (-want +got):\n%s", diff)
				}
				if p.Count != tc.wantCount {
					t.Errorf("Count = %d, want %d", p.Count, tc.wantCount)
				}
				for _, a := range p.Articles {
					if a.BoardID != 1 {
						t.Errorf("article %d of board %d on board 1's page", a.ID, a.BoardID)
					}
				}
			})
		}

		// Pages 1..3 of 20 cover the board exactly once.
		seen := map[int64]int{}
		for page := int64(1); page <= 3; page++ {
			p, err := svc.List(ctx, 1, page, 20)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range p.Articles {
				seen[a.ID]++
			}
		}
		if len(seen) != 45 {
			t.Errorf("pages 1..3 held %d distinct articles, want 45", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("article %d on %d pages", id, n)
			}
		}

		p, err := svc.List(ctx, 2, 1, 20)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Articles) != 3 || p.Count != 3 {
			t.Errorf("board 2: %d articles, count %d; want 3, 3", len(p.Articles), p.Count)
		}
		p, err = svc.List(ctx, 99, 1, 20)
		if err != nil {
			t.Fatal(err)
		}
		if p.Articles == nil || len(p.Articles) != 0 || p.Count != 0 {
			t.Errorf("empty board: %#v, want an empty non-nil page with count 0", p)
		}
	})
}

func TestListCappedCount(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		boardFixture(t, svc)
		for _, tc := range []struct{ page, want int64 }{
			{1, 21}, {10, 21}, {11, 41}, {12, 41}, {20, 41}, {21, 45}, {23, 45}, {100, 45}, // 23: a partial last page
		} {
			p, err := svc.List(ctx, 1, tc.page, 2)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(45, boardpage.CountLimit(tc.page, 2)); p.Count != tc.want || p.Count != want {
				t.Errorf("page %d size 2: Count = %d, want %d", tc.page, p.Count, tc.want)
			}
		}
	})
}

// scrollAll walks a board with Scroll and returns every id seen, in order.
func scrollAll(t *testing.T, svc *Service, board, size int64) []int64 {
	t.Helper()
	var out []int64
	last := int64(0)
	for range 10_000 {
		as, err := svc.Scroll(context.Background(), board, size, last)
		if err != nil {
			t.Fatal(err)
		}
		if as == nil {
			t.Fatal("Scroll returned nil, want an empty slice")
		}
		if int64(len(as)) > size {
			t.Fatalf("Scroll returned %d articles, more than %d", len(as), size)
		}
		for _, a := range as {
			if a.BoardID != board {
				t.Fatalf("article %d of board %d in board %d's scroll", a.ID, a.BoardID, board)
			}
			out = append(out, a.ID)
		}
		if len(as) == 0 {
			return out
		}
		last = as[len(as)-1].ID
	}
	t.Fatal("scroll did not end")
	return nil
}

func TestScroll(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		board1 := reversed(boardFixture(t, svc))
		for _, size := range []int64{1, 7, 20, 45, 100} {
			if diff := cmp.Diff(board1, scrollAll(t, svc, 1, size)); diff != "" {
				t.Errorf("scroll by %d (-want +got):\n%s", size, diff)
			}
		}
		for _, tc := range []struct {
			name        string
			board, size int64
			last        int64
			want        []int64
		}{
			{"first page", 1, 5, 0, board1[:5]},
			{"after the 10th", 1, 5, board1[9], board1[10:15]},
			{"after a board-2 id", 1, 100, board1[14] - 1, board1[15:]},
			{"after the oldest", 1, 5, board1[44], []int64{}},
			{"empty board", 99, 5, 0, []int64{}},
			{"empty board with cursor", 99, 5, 123, []int64{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				as, err := svc.Scroll(ctx, tc.board, tc.size, tc.last)
				if err != nil {
					t.Fatal(err)
				}
				if as == nil {
					t.Error("Scroll returned nil, want an empty slice")
				}
				if diff := cmp.Diff(tc.want, articleIDs(as)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	})
}

func TestBoardCount(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		count := func(board int64) int64 {
			t.Helper()
			n, err := svc.BoardCount(ctx, board)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(1); n != 0 {
			t.Errorf("fresh board: %d, want 0", n)
		}
		ids := createMany(t, svc, 1, 5)
		createMany(t, svc, 2, 2)
		for _, id := range ids[:2] {
			if err := svc.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		// A failed delete does not uncount.
		wantKind(t, svc.Delete(ctx, ids[0]), fault.NotFound, "second delete")
		got := []int64{count(1), count(2), count(99)}
		if diff := cmp.Diff([]int64{3, 2, 0}, got); diff != "" {
			t.Errorf("counts of boards 1, 2, 99 (-want +got):\n%s", diff)
		}
		for _, id := range ids[2:] {
			if err := svc.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(1); n != 0 {
			t.Errorf("after deleting all: %d, want 0", n)
		}
		createMany(t, svc, 1, 1)
		if n := count(1); n != 1 {
			t.Errorf("after one more create: %d, want 1", n)
		}
	})
}

func TestConcurrentCreateDelete(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		const (
			board, freshBoard = 1, 3
			creates, deletes  = 200, 100
			freshCreates      = 40
			workers           = 20
		)
		existing := createMany(t, svc, board, deletes+10)

		type op func() error
		var ops []op
		for i := range creates {
			ops = append(ops, func() error { _, err := svc.Create(ctx, fmt.Sprint("c", i), "x", board, 1); return err })
		}
		for _, id := range existing[:deletes] {
			ops = append(ops, func() error { return svc.Delete(ctx, id) })
		}
		// The first creates on a board race to insert its count row.
		for i := range freshCreates {
			ops = append(ops, func() error { _, err := svc.Create(ctx, fmt.Sprint("f", i), "x", freshBoard, 1); return err })
		}
		// Interleave creates and deletes so that every worker does both.
		queue := make(chan op, len(ops))
		for i := range ops {
			queue <- ops[(i*7919)%len(ops)] // 7919 is prime and does not divide len(ops): a permutation
		}
		close(queue)

		start := make(chan struct{})
		var ready, done sync.WaitGroup
		var failures atomic.Int64
		var firstErr atomic.Value
		for range workers {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				ready.Done()
				<-start
				for f := range queue {
					if err := f(); err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		ready.Wait()
		close(start)
		done.Wait()
		if n := failures.Load(); n > 0 {
			t.Errorf("%d operations failed; first: %v", n, firstErr.Load())
		}

		for _, b := range []struct {
			board int64
			want  int64
		}{{board, creates + 10}, {freshBoard, freshCreates}} {
			rows := int64(len(scrollAll(t, svc, b.board, 100)))
			count, err := svc.BoardCount(ctx, b.board)
			if err != nil {
				t.Fatal(err)
			}
			if count != rows || rows != b.want {
				t.Errorf("board %d: BoardCount = %d, rows = %d, want both %d", b.board, count, rows, b.want)
			}
		}
	})
}

func TestSeedChunk(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, store, _ := newTestService(db)
		chunk := func(first int64, n int) []SeedArticle {
			out := make([]SeedArticle, n)
			for i := range out {
				out[i] = SeedArticle{ID: first + int64(i), CreatedAt: t0ms.Add(time.Duration(i) * time.Millisecond)}
			}
			return out
		}
		exists := func(id int64) bool {
			t.Helper()
			ok, err := store.Exists(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}

		if exists(1000) {
			t.Error("Exists(1000) before seeding")
		}
		first := chunk(1000, 50)
		if err := store.SeedChunk(ctx, 5, first); err != nil {
			t.Fatal(err)
		}
		for _, a := range first {
			if !exists(a.ID) {
				t.Errorf("seeded article %d missing", a.ID)
			}
		}
		if exists(999) || exists(1050) {
			t.Error("Exists true for an id never seeded")
		}
		if n, err := svc.BoardCount(ctx, 5); err != nil || n != 50 {
			t.Errorf("BoardCount = %d, %v; want 50", n, err)
		}
		got, err := svc.Get(ctx, 1007)
		if err != nil {
			t.Fatal(err)
		}
		at := t0ms.Add(7 * time.Millisecond)
		// Seeded articles have no HTML: they read as plain text.
		want := Article{ID: 1007, Title: "seeded article 1007", Content: "content of seeded article 1007",
			ContentHTML: "<p>content of seeded article 1007</p>", ContentText: "content of seeded article 1007", BoardID: 5, WriterID: 1,
			CreatedAt: at, ModifiedAt: at, Version: 1}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("seeded article (-want +got):\n%s", diff)
		}

		if err := store.SeedChunk(ctx, 5, chunk(2000, 50)); err != nil {
			t.Fatal(err)
		}
		// A chunk that clashes with a stored id is not stored at all.
		if err := store.SeedChunk(ctx, 5, chunk(2040, 50)); err == nil {
			t.Error("SeedChunk over existing ids succeeded")
		}
		if exists(2050) {
			t.Error("part of a failed chunk was stored")
		}
		if n, err := svc.BoardCount(ctx, 5); err != nil || n != 100 {
			t.Errorf("BoardCount = %d, %v; want 100", n, err)
		}
		if n := len(scrollAll(t, svc, 5, 100)); n != 100 {
			t.Errorf("scroll found %d seeded articles, want 100", n)
		}
		// Services and seeds share the board: a delete uncounts a seeded article.
		if err := svc.Delete(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		if n, err := svc.BoardCount(ctx, 5); err != nil || n != 99 {
			t.Errorf("BoardCount after a delete = %d, %v; want 99", n, err)
		}
	})
}

// outboxRows returns the events waiting in the outbox, oldest first.
func outboxRows(t *testing.T, db *sqldb.DB) []event.Envelope {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT outbox_id, event_type, payload FROM outbox ORDER BY outbox_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []event.Envelope
	for rows.Next() {
		var id int64
		var typ, payload string
		if err := rows.Scan(&id, &typ, &payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, event.Envelope{EventID: apijson.ID(id), Type: event.Type(typ), Payload: []byte(payload)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEventsWrittenWithChanges checks that every change writes its event in the same transaction, with the board
// count as of that transaction and versions that order the events.
func TestEventsWrittenWithChanges(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		first, err := svc.Create(ctx, "one", "c", 9, 1)
		if err != nil {
			t.Fatal(err)
		}
		second, err := svc.Create(ctx, "two", "c", 9, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Update(ctx, first.ID, "one, edited", "c2"); err != nil {
			t.Fatal(err)
		}
		if err := svc.Delete(ctx, second.ID); err != nil {
			t.Fatal(err)
		}
		// A failed change writes no event.
		if _, err := svc.Update(ctx, 12345, "x", "y"); fault.KindOf(err) != fault.NotFound {
			t.Fatalf("update of a missing article: %v", err)
		}

		type summary struct {
			Type                         event.Type
			Article                      int64
			Title                        string
			Count, Version, CountVersion int64
		}
		var got []summary
		for _, env := range outboxRows(t, db) {
			p, err := event.Payload[event.Article](env)
			if err != nil {
				t.Fatal(err)
			}
			if p.BoardID != 9 {
				t.Errorf("%s payload board %d, want 9", env.Type, p.BoardID)
			}
			got = append(got, summary{env.Type, int64(p.ArticleID), p.Title, p.BoardArticleCount, p.ArticleVersion,
				p.BoardArticleCountVersion})
		}
		want := []summary{
			{event.ArticleCreated, first.ID, "one", 1, 1, 1},
			{event.ArticleCreated, second.ID, "two", 2, 1, 2},
			{event.ArticleUpdated, first.ID, "one, edited", 2, 2, 2},
			{event.ArticleDeleted, second.ID, "two", 1, 2, 3},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("outbox events (-want +got):\n%s", diff)
		}
	})
}
