package comment

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

func userDeleted(t *testing.T, user int64, content string) event.Envelope {
	t.Helper()
	body, err := json.Marshal(event.UserDeletion{UserID: apijson.ID(user), Content: content, TokenEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: 1, Type: event.UserDeleted, Payload: body}
}

// liveWritten counts writer's comments of both versions that are not deleted.
func liveWritten(t *testing.T, db *sqldb.DB, writer int64) int {
	t.Helper()
	var n1, n2 int
	for table, n := range map[string]*int{"comment": &n1, "comment_v2": &n2} {
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table+" WHERE writer_id = ? AND deleted = FALSE",
			writer).Scan(n); err != nil {
			t.Fatal(err)
		}
	}
	return n1 + n2
}

// TestUserDeletedRemovesComments checks USER_DELETED on 1,200 comments and a few threads of both versions: keep
// leaves all; remove deletes as the writer's own deletes would (a comment with another's reply stays, deleted), in
// transactions of at most leavingBatch comments each writing its COMMENT_DELETED; stopped after one page and delivered
// again it deletes what is left, and once more changes nothing. Another writer's comments stay; so do those on an
// article recorded deleted (its purge's); an article this service does not know is looked up first.
func TestUserDeletedRemovesComments(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		const leaver, other = 5, 6
		const many = 1200
		var mine []int64
		create := func(article, writer int64, parentPath string) Comment {
			t.Helper()
			c, err := svc.CreateV2(ctx, article, writer, parentPath, "text")
			if err != nil {
				t.Fatal(err)
			}
			if writer == leaver {
				mine = append(mine, c.ID)
			}
			return c
		}
		createV1 := func(article, writer, parent int64) Comment {
			t.Helper()
			c, err := svc.Create(ctx, article, writer, parent, "text")
			if err != nil {
				t.Fatal(err)
			}
			if writer == leaver {
				mine = append(mine, c.ID)
			}
			return c
		}
		for range many {
			create(100, leaver, "")
		}
		theirs := create(101, other, "")
		create(101, leaver, theirs.Path) // a reply of the leaver's to another's comment: removed
		replied := create(101, leaver, "")
		theirReply := create(101, other, replied.Path) // the leaver's comment stays, deleted
		root := createV1(102, leaver, 0)
		createV1(102, leaver, root.ID)
		repliedV1 := createV1(102, leaver, 0)
		theirV1 := createV1(102, other, repliedV1.ID)
		create(103, leaver, "") // on an article this service forgets: looked up again, then deleted
		onDeleted := create(104, leaver, "")
		mine = mine[:len(mine)-1] // on an article recorded deleted: left to its purge
		for _, q := range []string{"DELETE FROM article_existence WHERE article_id = 103",
			"UPDATE article_existence SET deleted = TRUE WHERE article_id = 104", "DELETE FROM outbox"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		// Another instance, whose record of articles is only what the database holds (the one above remembers 103).
		svc, store, _ := testService(t, db)
		handle := svc.Handlers()[event.UserDeleted]

		if err := handle(ctx, userDeleted(t, leaver, event.DeleteKeep)); err != nil {
			t.Fatal(err)
		}
		if n := liveWritten(t, db, leaver); n != len(mine)+1 {
			t.Fatalf("after keep: %d comments left, want %d", n, len(mine)+1)
		}

		// One page of the v2 table, as a crash after it would leave it: the newest leavingBatch, with their events.
		next, err := store.deleteWrittenPage(ctx, store.tables()[1], leaver, 0)
		if err != nil || next == 0 {
			t.Fatalf("first page: next %d, %v; want more to come", next, err)
		}
		// The page holds the newest, the comment on the deleted article among them, which it skips.
		if n, want := liveWritten(t, db, leaver), len(mine)+1-(leavingBatch-1); n != want {
			t.Errorf("after one page: %d comments left, want %d", n, want)
		}
		if n := len(outboxEvents(t, db)); n != leavingBatch-1 {
			t.Errorf("after one page: %d events, want %d", n, leavingBatch-1)
		}

		for range 2 {
			if err := handle(ctx, userDeleted(t, leaver, event.DeleteRemove)); err != nil {
				t.Fatal(err)
			}
		}
		if n := liveWritten(t, db, leaver); n != 1 {
			t.Errorf("after remove: %d comments left, want the one on a deleted article", n)
		}
		var left int64
		if err := db.QueryRowContext(ctx, "SELECT comment_id FROM comment_v2 WHERE writer_id = ? AND deleted = FALSE", leaver).Scan(&left); err != nil || left != onDeleted.ID {
			t.Errorf("left %d, %v; want the comment on the deleted article", left, err)
		}
		var deleted []int64
		for _, e := range outboxEvents(t, db) {
			if e.Type != event.CommentDeleted || !e.Payload.Deleted || e.Payload.Content != "" {
				t.Fatalf("event %s %+v, want COMMENT_DELETED without content", e.Type, e.Payload)
			}
			deleted = append(deleted, int64(e.Payload.CommentID))
		}
		slices.Sort(deleted)
		slices.Sort(mine)
		if !slices.Equal(deleted, mine) {
			t.Errorf("COMMENT_DELETED for %d comments, want each of the leaver's %d once", len(deleted), len(mine))
		}
		for _, id := range []int64{replied.ID} {
			if c, err := svc.GetV2(ctx, id); err != nil || !c.Deleted {
				t.Errorf("the leaver's comment with another's reply: %+v, %v; want it deleted, in place", c, err)
			}
		}
		if c, err := svc.Get(ctx, repliedV1.ID); err != nil || !c.Deleted {
			t.Errorf("the leaver's v1 root with another's reply: %+v, %v; want it deleted, in place", c, err)
		}
		for _, c := range []Comment{theirs, theirReply} {
			if got, err := svc.GetV2(ctx, c.ID); err != nil || got.Deleted {
				t.Errorf("another's comment %d: %+v, %v", c.ID, got, err)
			}
		}
		if got, err := svc.Get(ctx, theirV1.ID); err != nil || got.Deleted {
			t.Errorf("another's v1 reply: %+v, %v", got, err)
		}
		for article, want := range map[int64]int64{100: 0, 101: 3, 102: 2} {
			if n, err := svc.ArticleCount(ctx, article); err != nil || n != want {
				t.Errorf("article %d count = %d, %v; want %d", article, n, err, want)
			}
		}

		for _, env := range []event.Envelope{userDeleted(t, leaver, "shred"), userDeleted(t, 0, event.DeleteRemove)} {
			if err := svc.applyUserDeleted(ctx, env); fault.KindOf(err) != fault.Invalid {
				t.Errorf("bad USER_DELETED: %v, want an Invalid fault", err)
			}
		}
	})
}

// TestExportRoute checks GET /v1/exports/comments: the caller's comments of both versions, merged newest first
// across more than one page of the export's reads, without deleted ones; [] for a user without comments; 401
// without a token.
func TestExportRoute(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		h := httpiotest.Handler("comment", Routes(svc, httpiotest.Logger))
		var want []int64
		for i := range exportPage + 1 {
			c, err := svc.CreateV2(ctx, 100, 5, "", "v2 "+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, c.ID)
			if i%300 == 0 { // v1 comments among them
				c, err := svc.Create(ctx, 101, 5, 0, "v1")
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, c.ID)
			}
		}
		gone, err := svc.CreateV2(ctx, 100, 5, "", "deleted")
		if err == nil {
			err = svc.DeleteV2(ctx, gone.ID)
		}
		if err == nil {
			_, err = svc.CreateV2(ctx, 100, 6, "", "another's")
		}
		if err != nil {
			t.Fatal(err)
		}

		r := httpiotest.Call(httpiotest.As(h, 5), "GET", ExportPath, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		var got []int64
		for _, it := range httpiotest.DecodeJSON(t, r.Body).([]any) {
			m := it.(map[string]any)
			id, err := strconv.ParseInt(m["commentId"].(string), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
			_, path := m["path"]
			_, parent := m["parentCommentId"]
			if path == parent || m["articleId"] == nil || m["content"] == nil || m["createdAt"] == nil || m["modifiedAt"] == nil {
				t.Fatalf("exported comment %v: want articleId, content, times and one of path and parentCommentId", m)
			}
		}
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Errorf("exported %d comments, want the writer's %d live ones newest first", len(got), len(want))
		}

		r = httpiotest.Call(httpiotest.As(h, 9), "GET", ExportPath, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if r.Body != "[]" {
			t.Errorf("export of a user without comments = %s, want []", r.Body)
		}
		httpiotest.WantError(t, httpiotest.Call(h, "GET", ExportPath, ""), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}
