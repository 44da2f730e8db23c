package article

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

// writeArticles creates n articles by writer on board and returns their ids.
func writeArticles(t *testing.T, svc *Service, board, writer int64, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range n {
		a, err := svc.Create(context.Background(), "t"+strconv.Itoa(i), "c", board, writer)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = a.ID
	}
	return ids
}

func countWritten(t *testing.T, db *sqldb.DB, writer int64) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article WHERE writer_id = ?", writer).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// deletedIDs returns the articles of the outbox's ARTICLE_DELETED events, in order.
func deletedIDs(t *testing.T, db *sqldb.DB) []int64 {
	t.Helper()
	var out []int64
	for _, env := range outboxRows(t, db) {
		if env.Type != event.ArticleDeleted {
			continue
		}
		p, err := event.Payload[event.Article](env)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, int64(p.ArticleID))
	}
	return out
}

func userDeleted(t *testing.T, user int64, content string) event.Envelope {
	t.Helper()
	body, err := json.Marshal(event.UserDeletion{UserID: apijson.ID(user), Content: content, TokenEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: 1, Type: event.UserDeleted, Payload: body}
}

// TestUserDeletedRemovesArticles checks USER_DELETED: keep leaves every article; remove deletes the user's in
// transactions of at most leavingBatch articles, each with its ARTICLE_DELETED, and stopped after one page and
// delivered again it deletes what is left; another writer's articles stay, and the board counts follow.
func TestUserDeletedRemovesArticles(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, store, _ := newTestService(db)
		const leaver, other = 5, 6
		mine := append(writeArticles(t, svc, 7, leaver, leavingBatch+20), writeArticles(t, svc, 8, leaver, 30)...)
		theirs := writeArticles(t, svc, 7, other, 3)
		if _, err := db.ExecContext(ctx, "DELETE FROM outbox"); err != nil {
			t.Fatal(err)
		}

		if err := svc.Handlers()[event.UserDeleted](ctx, userDeleted(t, leaver, event.DeleteKeep)); err != nil {
			t.Fatal(err)
		}
		if n := countWritten(t, db, leaver); n != len(mine) {
			t.Fatalf("after keep: %d articles left, want %d", n, len(mine))
		}

		// One page: the newest leavingBatch, each in its board's transaction, each with its event.
		next, err := store.deleteWrittenPage(ctx, leaver, 0)
		if err != nil || next == 0 {
			t.Fatalf("first page: next %d, %v; want more to come", next, err)
		}
		if n := countWritten(t, db, leaver); n != len(mine)-leavingBatch {
			t.Errorf("after one page: %d articles left, want %d", n, len(mine)-leavingBatch)
		}
		if got := deletedIDs(t, db); len(got) != leavingBatch {
			t.Errorf("after one page: %d ARTICLE_DELETED, want %d", len(got), leavingBatch)
		}

		// Delivered again (as after a crash), it finishes; once more, it changes nothing.
		for range 2 {
			if err := svc.Handlers()[event.UserDeleted](ctx, userDeleted(t, leaver, event.DeleteRemove)); err != nil {
				t.Fatal(err)
			}
		}
		if n := countWritten(t, db, leaver); n != 0 {
			t.Errorf("after remove: %d articles left", n)
		}
		got := deletedIDs(t, db)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(mine))
		if !slices.Equal(got, want) {
			t.Errorf("ARTICLE_DELETED for %d articles, want each of the %d once", len(got), len(want))
		}
		for _, id := range theirs {
			if _, err := svc.Get(ctx, id); err != nil {
				t.Errorf("another writer's article %d: %v", id, err)
			}
		}
		for board, want := range map[int64]int64{7: int64(len(theirs)), 8: 0} {
			if n, err := svc.BoardCount(ctx, board); err != nil || n != want {
				t.Errorf("board %d count = %d, %v; want %d", board, n, err, want)
			}
		}

		// A payload no service could act on is refused (dead-lettered by the consumer).
		for _, env := range []event.Envelope{userDeleted(t, leaver, "shred"), userDeleted(t, 0, event.DeleteRemove)} {
			if err := svc.applyUserDeleted(ctx, env); fault.KindOf(err) != fault.Invalid {
				t.Errorf("bad USER_DELETED: %v, want an Invalid fault", err)
			}
		}
	})
}

// TestExportRoute checks GET /v1/exports/articles: the caller's articles only, newest first, across more than one
// page of the export's reads; nothing for a user without articles; 401 without a token.
func TestExportRoute(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		svc, _, _ := newTestService(db)
		h := httpiotest.Handler("article", Routes(svc, httpiotest.Logger))
		mine := append(writeArticles(t, svc, 7, 5, exportPage), writeArticles(t, svc, 8, 5, 2)...)
		writeArticles(t, svc, 7, 6, 2)

		r := httpiotest.Call(httpiotest.As(h, 5), "GET", ExportPath, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		items := httpiotest.DecodeJSON(t, r.Body).([]any)
		var got []int64
		for _, it := range items {
			m := it.(map[string]any)
			id, err := strconv.ParseInt(m["articleId"].(string), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
			for _, k := range []string{"boardId", "title", "content", "createdAt", "modifiedAt"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("exported article without %s: %v", k, m)
				}
			}
		}
		slices.Reverse(mine)
		if !slices.Equal(got, mine) {
			t.Errorf("exported %d articles, want the writer's %d newest first", len(got), len(mine))
		}

		r = httpiotest.Call(httpiotest.As(h, 9), "GET", ExportPath, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if r.Body != "[]" {
			t.Errorf("export of a user without articles = %s, want []", r.Body)
		}
		r = httpiotest.Call(h, "GET", ExportPath, "")
		httpiotest.WantError(t, r, http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}
