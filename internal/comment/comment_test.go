package comment

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

func TestCreateGetV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		root, err := svc.Create(ctx, 7, 9, 0, "root")
		if err != nil {
			t.Fatal(err)
		}
		want := Comment{ID: firstID, Content: "root", ContentHTML: "<p>root</p>\n", ContentText: "root", ArticleID: 7, WriterID: 9, ParentID: firstID,
			CreatedAt: t0ms, Version: 1, ModifiedAt: t0ms}
		if diff := cmp.Diff(want, root); diff != "" {
			t.Errorf("Create root (-want +got):\n%s", diff)
		}
		reply, err := svc.Create(ctx, 7, 10, root.ID, "reply")
		if err != nil {
			t.Fatal(err)
		}
		got, err := svc.Get(ctx, reply.ID)
		if err != nil {
			t.Fatal(err)
		}
		want = Comment{ID: firstID + 1, Content: "reply", ContentHTML: "<p>reply</p>\n", ContentText: "reply", ArticleID: 7, WriterID: 10, ParentID: root.ID,
			CreatedAt: t0ms, Version: 1, ModifiedAt: t0ms}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get reply (-want +got):\n%s", diff)
		}

		_, err = svc.Create(ctx, 7, 9, reply.ID, "third level")
		wantKind(t, err, fault.Invalid, "DEPTH_EXCEEDED")
		_, err = svc.Create(ctx, 8, 9, root.ID, "other article")
		wantKind(t, err, fault.Invalid, "PARENT_IN_OTHER_ARTICLE")
		_, err = svc.Create(ctx, 7, 9, 12345, "no parent")
		wantKind(t, err, fault.NotFound, "PARENT_COMMENT_NOT_FOUND")
		wantKind(t, validateContent(" \n\t"), fault.Invalid, "INVALID_CONTENT") // Routes checks content before Create
		_, err = svc.Get(ctx, 12345)
		wantKind(t, err, fault.NotFound, "COMMENT_NOT_FOUND")

		if err := svc.Delete(ctx, root.ID); err != nil { // soft: it has a reply
			t.Fatal(err)
		}
		_, err = svc.Create(ctx, 7, 9, root.ID, "reply to deleted")
		wantKind(t, err, fault.Invalid, "PARENT_COMMENT_DELETED")

		// Refused creates leave nothing behind: two comments, counted once each.
		if n, err := svc.ArticleCount(ctx, 7); err != nil || n != 2 {
			t.Errorf("ArticleCount = %d, %v; want 2", n, err)
		}
		if n, err := svc.ArticleCount(ctx, 8); err != nil || n != 0 {
			t.Errorf("ArticleCount(other article) = %d, %v; want 0", n, err)
		}
	})
}

func TestCreateV2Paths(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		parent := ""
		for d := 1; d <= MaxDepth; d++ {
			c, err := svc.CreateV2(ctx, 7, 9, parent, fmt.Sprintf("depth %d", d))
			if err != nil {
				t.Fatalf("depth %d: %v", d, err)
			}
			if want := parent + "00000"; c.Path != want {
				t.Fatalf("depth %d path = %q, want %q", d, c.Path, want)
			}
			got, err := svc.GetV2(ctx, c.ID)
			if err != nil || got != c {
				t.Fatalf("GetV2 = %+v, %v; want %+v", got, err, c)
			}
			parent = c.Path
		}
		_, err := svc.CreateV2(ctx, 7, 9, parent, "depth 6")
		wantKind(t, err, fault.Invalid, "DEPTH_EXCEEDED")

		// Siblings take the segment after the largest one, whatever lies deeper under it.
		for i, want := range []string{"0000000001", "0000000002", "0000000003"} {
			c, err := svc.CreateV2(ctx, 7, 9, "00000", fmt.Sprintf("sibling %d", i))
			if err != nil || c.Path != want {
				t.Fatalf("sibling %d: path %q, %v; want %q", i, c.Path, err, want)
			}
		}
		if c, err := svc.CreateV2(ctx, 7, 9, "", "second root"); err != nil || c.Path != "00001" {
			t.Fatalf("second root: path %q, %v; want 00001", c.Path, err)
		}
		// Paths are per article.
		if c, err := svc.CreateV2(ctx, 8, 9, "", "other article"); err != nil || c.Path != "00000" {
			t.Fatalf("root of another article: path %q, %v; want 00000", c.Path, err)
		}

		_, err = svc.CreateV2(ctx, 7, 9, "00009", "no parent")
		wantKind(t, err, fault.NotFound, "PARENT_COMMENT_NOT_FOUND")
		_, err = svc.CreateV2(ctx, 9, 9, "00000", "parent in another article")
		wantKind(t, err, fault.NotFound, "PARENT_COMMENT_NOT_FOUND")
		for _, bad := range []string{"0000", "0000-", "000000", "0000000000000000000000000000000"} {
			wantKind(t, validateParentPath(bad), fault.Invalid, "INVALID_PARENT_PATH") // Routes checks it before CreateV2
		}
		if n, err := svc.ArticleCount(ctx, 7); err != nil || n != 9 {
			t.Errorf("ArticleCount = %d, %v; want 9", n, err)
		}
	})
}

func TestCreateV2PastTheLastSegment(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		root, err := svc.CreateV2(ctx, 7, 9, "", "root")
		if err != nil {
			t.Fatal(err)
		}
		// 62^5 replies are too many to make; put the largest one in place directly.
		if _, err := db.ExecContext(ctx, "UPDATE comment_v2 SET path = 'zzzzz' WHERE comment_id = ?", root.ID); err != nil {
			t.Fatal(err)
		}
		_, err = svc.CreateV2(ctx, 7, 9, "", "one root too many")
		wantKind(t, err, fault.Invalid, "TOO_MANY_REPLIES")
		if c, err := svc.CreateV2(ctx, 7, 9, "zzzzz", "a reply still fits"); err != nil || c.Path != "zzzzz00000" {
			t.Fatalf("reply under zzzzz: %q, %v", c.Path, err)
		}
	})
}

// commentEvents returns the type, comment, deleted flag and count of every event in the outbox, in order.
func commentEvents(t *testing.T, db *sqldb.DB) []string {
	t.Helper()
	var out []string
	for _, e := range outboxEvents(t, db) {
		out = append(out, fmt.Sprintf("%s %d deleted=%v count=%d", e.Type, int64(e.Payload.CommentID)-firstID,
			e.Payload.Deleted, e.Payload.ArticleCommentCount))
	}
	return out
}

// countVersionsIncrease checks that the count versions the events carry never go down, and go up with every count.
func countVersionsIncrease(t *testing.T, db *sqldb.DB) {
	t.Helper()
	events := outboxEvents(t, db)
	for i := 1; i < len(events); i++ {
		prev, cur := events[i-1].Payload, events[i].Payload
		changed := cur.ArticleCommentCount != prev.ArticleCommentCount
		if cur.ArticleCommentCountVersion < prev.ArticleCommentCountVersion ||
			changed && cur.ArticleCommentCountVersion == prev.ArticleCommentCountVersion {
			t.Errorf("event %d: count %d version %d after count %d version %d", i, cur.ArticleCommentCount,
				cur.ArticleCommentCountVersion, prev.ArticleCommentCount, prev.ArticleCommentCountVersion)
		}
	}
}

func TestDeleteV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		root, _ := svc.Create(ctx, 7, 9, 0, "root")           // 0
		reply1, _ := svc.Create(ctx, 7, 9, root.ID, "one")    // 1
		reply2, _ := svc.Create(ctx, 7, 9, root.ID, "two")    // 2
		lonely, err := svc.Create(ctx, 7, 9, 0, "no replies") // 3
		if err != nil {
			t.Fatal(err)
		}

		for _, id := range []int64{lonely.ID, root.ID, reply1.ID} {
			if err := svc.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.Get(ctx, lonely.ID); fault.KindOf(err) != fault.NotFound {
			t.Errorf("a root without replies was not removed: %v", err)
		}
		got, err := svc.Get(ctx, root.ID)
		want := Comment{ID: root.ID, ArticleID: 7, WriterID: 9, ParentID: root.ID, Deleted: true, CreatedAt: t0ms, Version: 1,
			ModifiedAt: t0ms}
		if err != nil || got != want {
			t.Errorf("root with replies after delete = %+v, %v; want %+v (soft-deleted, no content)", got, err, want)
		}
		if err := svc.Delete(ctx, root.ID); err != nil { // again: nothing changes
			t.Errorf("deleting a deleted comment: %v", err)
		}
		if n, _ := svc.ArticleCount(ctx, 7); n != 2 {
			t.Errorf("count = %d, want 2 (the deleted root and reply two)", n)
		}

		// The last reply takes its deleted root with it.
		if err := svc.Delete(ctx, reply2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Get(ctx, root.ID); fault.KindOf(err) != fault.NotFound {
			t.Errorf("deleted root outlived its last reply: %v", err)
		}
		if err := svc.Delete(ctx, root.ID); fault.KindOf(err) != fault.NotFound {
			t.Errorf("deleting a removed comment: %v, want not found", err)
		}
		if n, _ := svc.ArticleCount(ctx, 7); n != 0 {
			t.Errorf("count = %d, want 0", n)
		}

		want2 := []string{
			"COMMENT_CREATED 0 deleted=false count=1",
			"COMMENT_CREATED 1 deleted=false count=2",
			"COMMENT_CREATED 2 deleted=false count=3",
			"COMMENT_CREATED 3 deleted=false count=4",
			"COMMENT_DELETED 3 deleted=true count=3",
			"COMMENT_DELETED 0 deleted=true count=3", // soft
			"COMMENT_DELETED 1 deleted=true count=2",
			"COMMENT_DELETED 2 deleted=true count=1",
			"COMMENT_DELETED 0 deleted=true count=0", // the root goes with its last reply
		}
		if diff := cmp.Diff(want2, commentEvents(t, db)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		countVersionsIncrease(t, db)
		for _, e := range outboxEvents(t, db) {
			if e.Payload.ParentCommentID == 0 || e.Payload.Path != "" || e.Type == event.CommentDeleted && e.Payload.Content != "" {
				t.Errorf("v1 event payload %+v: want a parent id, no path, no content once deleted", e.Payload)
			}
		}
	})
}

func TestDeleteV2Cascades(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		// 0 ─ 1 ─ 2 ─ 3
		//  └─ 4
		var chain []Comment
		parent := ""
		for i := range 4 {
			c, err := svc.CreateV2(ctx, 7, 9, parent, fmt.Sprintf("level %d", i+1))
			if err != nil {
				t.Fatal(err)
			}
			chain, parent = append(chain, c), c.Path
		}
		sibling, err := svc.CreateV2(ctx, 7, 9, chain[0].Path, "sibling of 1")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chain[:3] { // each still has replies: soft
			if err := svc.DeleteV2(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
			if got, err := svc.GetV2(ctx, c.ID); err != nil || !got.Deleted || got.Content != "" || got.Path != c.Path {
				t.Errorf("after delete: %+v, %v; want it kept, deleted, without content", got, err)
			}
		}
		// Removing the leaf removes 2 and 1, deleted and now without replies, but not 0, which still has 4.
		if err := svc.DeleteV2(ctx, chain[3].ID); err != nil {
			t.Fatal(err)
		}
		for i, c := range chain {
			_, err := svc.GetV2(ctx, c.ID)
			if gone := fault.KindOf(err) == fault.NotFound; gone != (i > 0) {
				t.Errorf("comment %d: removed = %v, want %v", i, gone, i > 0)
			}
		}
		if n, _ := svc.ArticleCount(ctx, 7); n != 2 {
			t.Errorf("count = %d, want 2", n)
		}
		if err := svc.DeleteV2(ctx, sibling.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.GetV2(ctx, chain[0].ID); fault.KindOf(err) != fault.NotFound {
			t.Errorf("root outlived its last reply: %v", err)
		}
		if n, _ := svc.ArticleCount(ctx, 7); n != 0 {
			t.Errorf("count = %d, want 0", n)
		}
		want := []string{
			"COMMENT_CREATED 0 deleted=false count=1",
			"COMMENT_CREATED 1 deleted=false count=2",
			"COMMENT_CREATED 2 deleted=false count=3",
			"COMMENT_CREATED 3 deleted=false count=4",
			"COMMENT_CREATED 4 deleted=false count=5",
			"COMMENT_DELETED 0 deleted=true count=5",
			"COMMENT_DELETED 1 deleted=true count=5",
			"COMMENT_DELETED 2 deleted=true count=5",
			"COMMENT_DELETED 3 deleted=true count=4",
			"COMMENT_DELETED 2 deleted=true count=3",
			"COMMENT_DELETED 1 deleted=true count=2",
			"COMMENT_DELETED 4 deleted=true count=1",
			"COMMENT_DELETED 0 deleted=true count=0",
		}
		if diff := cmp.Diff(want, commentEvents(t, db)); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		countVersionsIncrease(t, db)
	})
}

// TestTreeOrder builds a random tree through the store and checks that every way of listing it (offset pages,
// infinite scroll) gives depth-first order: binary path collation on every engine.
func TestTreeOrder(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		rng := rand.New(rand.NewPCG(7, 7))
		type treeNode struct {
			c        Comment
			children []*treeNode
		}
		root := &treeNode{}
		open := []*treeNode{root}
		const n = 300
		for range n {
			parent := open[rng.IntN(len(open))]
			c, err := svc.CreateV2(ctx, 7, 9, parent.c.Path, "x")
			if err != nil {
				t.Fatal(err)
			}
			child := &treeNode{c: c}
			parent.children = append(parent.children, child)
			if depth(c.Path) < MaxDepth {
				open = append(open, child)
			}
		}
		var want []int64
		var walk func(*treeNode)
		walk = func(tn *treeNode) {
			for _, ch := range tn.children {
				want = append(want, ch.c.ID)
				walk(ch)
			}
		}
		walk(root)

		var scrolled []int64
		for last := ""; ; {
			page, err := svc.ScrollV2(ctx, 7, 17, last)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, c := range page {
				scrolled = append(scrolled, c.ID)
			}
			last = page[len(page)-1].Path
		}
		if !slices.Equal(want, scrolled) {
			t.Errorf("infinite scroll order differs from depth-first order")
		}
		var paged []int64
		for page := int64(1); ; page++ {
			p, err := svc.ListV2(ctx, 7, page, 23)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(n, CountLimit(page, 23)); p.Count != want {
				t.Errorf("page %d count = %d, want %d", page, p.Count, want)
			}
			if len(p.Comments) == 0 {
				break
			}
			for _, c := range p.Comments {
				paged = append(paged, c.ID)
			}
		}
		if !slices.Equal(want, paged) {
			t.Errorf("offset page order differs from depth-first order")
		}
	})
}

func TestListAndScrollV1(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		// Roots and replies interleaved in time: the list still puts each root's replies right after it.
		var roots []Comment
		for i := range 10 {
			r, err := svc.Create(ctx, 7, 9, 0, fmt.Sprintf("root %d", i))
			if err != nil {
				t.Fatal(err)
			}
			roots = append(roots, r)
		}
		replies := map[int64][]int64{}
		for i := range 25 {
			r := roots[(i*7)%len(roots)]
			c, err := svc.Create(ctx, 7, 9, r.ID, fmt.Sprintf("reply %d", i))
			if err != nil {
				t.Fatal(err)
			}
			replies[r.ID] = append(replies[r.ID], c.ID)
		}
		if _, err := svc.Create(ctx, 8, 9, 0, "other article"); err != nil {
			t.Fatal(err)
		}
		var want []int64
		for _, r := range roots {
			want = append(want, r.ID)
			want = append(want, replies[r.ID]...)
		}

		var scrolled []int64
		var lastParent, last int64
		for {
			page, err := svc.Scroll(ctx, 7, 4, lastParent, last)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, c := range page {
				scrolled = append(scrolled, c.ID)
			}
			lastParent, last = page[len(page)-1].ParentID, page[len(page)-1].ID
		}
		if diff := cmp.Diff(want, scrolled); diff != "" {
			t.Errorf("scroll order (-want +got):\n%s", diff)
		}
		var paged []int64
		for page := int64(1); page <= 10; page++ {
			p, err := svc.List(ctx, 7, page, 3)
			if err != nil {
				t.Fatal(err)
			}
			// 35 comments; pages 1-10 count to at most 31.
			if p.Count != 31 {
				t.Errorf("page %d count = %d, want 31", page, p.Count)
			}
			for _, c := range p.Comments {
				paged = append(paged, c.ID)
			}
		}
		p, err := svc.List(ctx, 7, 11, 3)
		if err != nil || p.Count != 35 {
			t.Errorf("page 11 count = %d, %v; want 35", p.Count, err)
		}
		for _, c := range p.Comments {
			paged = append(paged, c.ID)
		}
		if p, err := svc.List(ctx, 7, 13, 3); err != nil || len(p.Comments) != 0 || p.Count != 35 {
			t.Errorf("page past the end = %d comments, count %d, %v; want none, 35", len(p.Comments), p.Count, err)
		}
		if diff := cmp.Diff(want[:33], paged); diff != "" {
			t.Errorf("page order (-want +got):\n%s", diff)
		}
	})
}

// TestConcurrentReplies fires 50 replies at one parent at once: all must succeed, with distinct paths.
func TestConcurrentReplies(t *testing.T) {
	// Not in parallel: its 50 replies at once fill its MySQL database's pool of 50 connections, and two such tests
	// beside another package's would pass MariaDB's default max_connections (151).
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		parent, err := svc.CreateV2(ctx, 7, 9, "", "parent")
		if err != nil {
			t.Fatal(err)
		}
		const n = 50
		paths := make([]string, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				c, err := svc.CreateV2(ctx, 7, 9, parent.Path, fmt.Sprintf("reply %d", i))
				if err != nil {
					t.Errorf("reply %d: %v", i, err)
					return
				}
				paths[i] = c.Path
			})
		}
		close(start)
		wg.Wait()
		slices.Sort(paths)
		for i, p := range paths {
			if want := parent.Path + fmt.Sprintf("000%c%c", digits[i/62], digits[i%62]); p != want {
				t.Errorf("reply path %d = %q, want %q (distinct, consecutive)", i, p, want)
			}
		}
		if n, err := svc.ArticleCount(ctx, 7); err != nil || n != 51 {
			t.Errorf("count = %d, %v; want 51", n, err)
		}
	})
}

// TestCountUnderConcurrency creates and deletes comments of both versions from many goroutines at once, and deletes
// their roots halfway; the article's count must equal the rows left.
func TestCountUnderConcurrency(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		rootV1, err := svc.Create(ctx, 7, 9, 0, "root v1")
		if err != nil {
			t.Fatal(err)
		}
		rootV2, err := svc.CreateV2(ctx, 7, 9, "", "root v2")
		if err != nil {
			t.Fatal(err)
		}
		var created atomic.Int64
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Go(func() {
				for i := range 12 {
					var c Comment
					var err error
					if w%2 == 0 {
						c, err = svc.Create(ctx, 7, 9, rootV1.ID, "v1")
					} else {
						c, err = svc.CreateV2(ctx, 7, 9, rootV2.Path, "v2")
					}
					if fe, ok := fault.As(err); ok && fe.Code == "PARENT_COMMENT_DELETED" {
						return // the root went first; the rules say no more replies
					}
					if err != nil {
						t.Error(err)
						return
					}
					created.Add(1)
					if i%3 == 0 {
						continue
					}
					if w%2 == 0 {
						err = svc.Delete(ctx, c.ID)
					} else {
						err = svc.DeleteV2(ctx, c.ID)
					}
					if err != nil {
						t.Error(err)
					}
				}
			})
		}
		// Delete the roots while replies come and go: each is soft-deleted or removed, and counted right either way.
		wg.Go(func() {
			for created.Load() < 16*12/2 {
				runtime.Gosched()
			}
			if err := svc.Delete(ctx, rootV1.ID); err != nil {
				t.Error(err)
			}
			if err := svc.DeleteV2(ctx, rootV2.ID); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		var rows int64
		if err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM comment WHERE article_id = 7) +
			(SELECT COUNT(*) FROM comment_v2 WHERE article_id = 7)`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		n, err := svc.ArticleCount(ctx, 7)
		if err != nil || n != rows {
			t.Errorf("count = %d, %v; rows = %d", n, err, rows)
		}
		t.Logf("%d created, %d left", created.Load(), rows)
	})
}

// TestConcurrentFirstComments writes the first comments of many new articles at once, both versions: writes of
// different articles must not meet on any lock (on MariaDB, a locking range read of an empty article locks the gap
// it shares with its neighbours, and two such articles inserting into it deadlock).
func TestConcurrentFirstComments(t *testing.T) {
	// Not in parallel: its 32 writers at once hold as many MySQL connections; beside another parallel test and
	// another package's tests, MariaDB's default max_connections (151) would come too close.
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		const articles, rounds = 16, 3
		for round := range rounds {
			var wg sync.WaitGroup
			for a := range articles {
				articleID := int64(1000*(round+1) + a)
				wg.Go(func() {
					if _, err := svc.CreateV2(ctx, articleID, 9, "", "first v2"); err != nil {
						t.Errorf("article %d, v2: %v", articleID, err)
					}
				})
				wg.Go(func() {
					if _, err := svc.Create(ctx, articleID+500, 9, 0, "first v1"); err != nil {
						t.Errorf("article %d, v1: %v", articleID+500, err)
					}
				})
			}
			wg.Wait()
		}
	})
}
