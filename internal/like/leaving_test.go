package like

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// insertRows inserts rows into table (columns cols) a few hundred at a time.
func insertRows(t testing.TB, db *sqldb.DB, table, cols string, rows [][]any) {
	t.Helper()
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), 200)]
		rows = rows[len(chunk):]
		row := "(?" + strings.Repeat(", ?", len(chunk[0])-1) + ")"
		var args []any
		for _, r := range chunk {
			args = append(args, r...)
		}
		if _, err := db.ExecContext(context.Background(), "INSERT INTO "+table+" ("+cols+") VALUES "+strings.Repeat(", "+row, len(chunk))[2:],
			args...); err != nil {
			t.Fatal(err)
		}
	}
}

// leavingFixture: articles 1..articles, each liked by the leaver and by another user (count 2, version 2), and
// comments 1..comments of article 1, each liked by both too.
type leavingFixture struct {
	leaver, other      int64
	articles, comments int64
}

func (f leavingFixture) seed(t testing.TB, db *sqldb.DB) {
	var exist, likes, counts, clikes, ccounts, cexist [][]any
	id := int64(1)
	for a := int64(1); a <= f.articles; a++ {
		exist = append(exist, []any{a, false, 1})
		for _, u := range []int64{f.leaver, f.other} {
			likes = append(likes, []any{id, a, u, t0ms})
			id++
		}
		counts = append(counts, []any{a, 2, 2})
	}
	for c := int64(1); c <= f.comments; c++ {
		cexist = append(cexist, []any{c, 1, false})
		for _, u := range []int64{f.leaver, f.other} {
			clikes = append(clikes, []any{id, 1, c, u, t0ms})
			id++
		}
		ccounts = append(ccounts, []any{c, 1, 2, 2})
	}
	insertRows(t, db, "article_existence", "article_id, deleted, article_version", exist)
	insertRows(t, db, "article_like", articleTables.columns, likes)
	insertRows(t, db, "article_like_count", "article_id, like_count, version", counts)
	if f.comments > 0 {
		insertRows(t, db, "comment_existence", "comment_id, article_id, deleted", cexist)
		insertRows(t, db, "comment_like", commentTables.columns, clikes)
		insertRows(t, db, "comment_like_count", "comment_id, article_id, like_count, version", ccounts)
	}
}

// check asserts that nothing is half done: each like of the leaver is either there with its target's count at 2
// (version 2) and no event, or gone with the count at 1 (version 3) and exactly one unlike event that says so. The
// other user's likes are all there. It returns how many of the leaver's likes are left.
func (f leavingFixture) check(t *testing.T, db *sqldb.DB) (left int64) {
	t.Helper()
	ctx := context.Background()
	events := map[target][]sent{}
	for _, s := range allOutbox(t, db) {
		tg := target{article: int64(s.Payload.ArticleID)}
		if s.isComment() {
			tg = target{article: int64(s.Comment.ArticleID), comment: int64(s.Comment.CommentID)}
		}
		events[tg] = append(events[tg], s)
	}
	var targets []target
	for a := int64(1); a <= f.articles; a++ {
		targets = append(targets, target{article: a})
	}
	for c := int64(1); c <= f.comments; c++ {
		targets = append(targets, target{article: 1, comment: c})
	}
	for _, tg := range targets {
		tb := tg.tables()
		var mine, others int64
		if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(CASE WHEN user_id = ? THEN 1 ELSE 0 END), 0), COALESCE(SUM(CASE WHEN user_id = ? THEN 1 ELSE 0 END), 0) FROM "+
			tb.likes+" WHERE "+tb.key, append([]any{f.leaver, f.other}, tg.args()...)...).Scan(&mine, &others); err != nil {
			t.Fatal(err)
		}
		count, version, err := (&Store{db: db}).count(ctx, tg)
		if err != nil {
			t.Fatal(err)
		}
		evs := events[tg]
		switch {
		case others != 1:
			t.Errorf("%s: the other user's like is gone", tg)
		case mine == 1 && (count != 2 || version != 2 || len(evs) != 0):
			t.Errorf("%s: the leaver's like is there, but count %d version %d with %d events", tg, count, version, len(evs))
		case mine == 0 && (count != 1 || version != 3 || len(evs) != 1 || evs[0].counted() != [2]int64{1, 3} ||
			evs[0].Type != tb.unliked):
			t.Errorf("%s: the leaver's like is gone, but count %d version %d, events %+v", tg, count, version, evs)
		}
		left += mine
	}
	return left
}

// allOutbox returns every event of the outbox.
func allOutbox(t *testing.T, db *sqldb.DB) []sent {
	t.Helper()
	keys, err := sqldb.IDs(db.QueryContext(context.Background(), "SELECT DISTINCT record_key FROM outbox"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sent
	for _, k := range keys {
		out = append(out, outboxOf(t, db, k)...)
	}
	return out
}

func userDeleted(t testing.TB, userID int64, content string) event.Envelope {
	t.Helper()
	body, err := json.Marshal(event.UserDeletion{UserID: apijson.ID(userID), Content: content, TokenEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: 1, Type: event.UserDeleted, Payload: body}
}

// TestUserLeaves removes a user's 1,150 likes: bounded batches, each whole (counts, versions and events as unlikes
// make them), a handler cut off after one batch resumed by the next delivery, and a third delivery a no-op.
func TestUserLeaves(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		store := env.svc.store
		f := leavingFixture{leaver: 7, other: 8, articles: 1100, comments: 50}
		f.seed(t, db)
		total := f.articles + f.comments

		keep := store.LeavingHandlers()[event.UserDeleted]
		if err := keep(ctx, userDeleted(t, f.leaver, event.DeleteKeep)); err != nil {
			t.Fatal(err)
		}
		if left := f.check(t, db); left != total {
			t.Fatalf("content keep: %d of %d likes left", left, total)
		}

		// One batch, then the handler is "killed": what a reader sees is whole, and bounded.
		if done, err := store.removeUserLikes(ctx, f.leaver); err != nil || done {
			t.Fatalf("first batch: done %v, %v", done, err)
		}
		if left := f.check(t, db); left != total-leaveBatchSize {
			t.Fatalf("after one batch: %d left, want %d", left, total-leaveBatchSize)
		}
		for range 2 { // redelivered, then delivered once more
			if err := keep(ctx, userDeleted(t, f.leaver, event.DeleteRemove)); err != nil {
				t.Fatal(err)
			}
			if left := f.check(t, db); left != 0 {
				t.Fatalf("after the handler: %d left", left)
			}
		}
		if n := int64(len(allOutbox(t, db))); n != total {
			t.Errorf("%d events, want one per like: %d", n, total)
		}
	})
}

// TestUserLeavesDeletedTargets: a like of a deleted article goes as its purge would take it (count lowered, no
// event), a like of a deleted comment goes with its event; a bad event is refused.
func TestUserLeavesDeletedTargets(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		env := newTestEnv(t, db, "")
		const leaver, article, gone, comment = 7, 100, 101, 500
		env.commentOrigin.add("v2", comment, article)
		for _, a := range []int64{article, gone} {
			if _, err := env.svc.Like(ctx, "", a, leaver); err != nil {
				t.Fatal(err)
			}
			if _, err := env.svc.Like(ctx, "", a, leaver+1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := env.svc.LikeComment(ctx, "", comment, leaver); err != nil {
			t.Fatal(err)
		}
		existencetest.Apply(t, env.articles, existencetest.Deleted(gone, 2))
		env.applyComment(t, commentEvent(event.CommentDeleted, comment, article))
		before := len(outboxOf(t, db, gone))

		h := env.svc.store.LeavingHandlers()[event.UserDeleted]
		if err := h(ctx, userDeleted(t, leaver, event.DeleteRemove)); err != nil {
			t.Fatal(err)
		}
		for _, tg := range []target{{article: article}, {article: gone}, {article: article, comment: comment}} {
			if _, err := env.svc.store.get(ctx, tg, leaver); fault.KindOf(err) != fault.NotFound {
				t.Errorf("%s: the leaver's like: %v", tg, err)
			}
		}
		if n, v, _ := env.svc.store.count(ctx, target{article: gone}); n != 1 || v != 3 {
			t.Errorf("deleted article's count %d version %d, want 1, 3", n, v)
		}
		if after := len(outboxOf(t, db, gone)); after != before {
			t.Errorf("deleted article: %d events written", after-before)
		}
		var unlikes []event.Type
		for _, s := range outboxOf(t, db, article) {
			if s.Type == event.ArticleUnliked || s.Type == event.CommentUnliked {
				unlikes = append(unlikes, s.Type)
			}
		}
		if len(unlikes) != 2 {
			t.Errorf("live article: unlike events %v, want an article's and a comment's", unlikes)
		}

		for _, bad := range []event.Envelope{userDeleted(t, 0, event.DeleteRemove), userDeleted(t, 1, "purge")} {
			if err := h(ctx, bad); fault.KindOf(err) != fault.Invalid {
				t.Errorf("%s: %v, want Invalid", bad.Payload, err)
			}
		}
	})
}

// TestExportLikes pages through 2,300 likes of both kinds, newest first, and answers 401 without a token.
func TestExportLikes(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		h, _ := testHandler(t, db, "")
		f := leavingFixture{leaver: 7, other: 8, articles: 1200, comments: 1100}
		f.seed(t, db)
		if r := httpiotest.Call(h, "GET", "/v1/exports/likes", ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("without a token: %d %s", r.Status, r.Body)
		}
		r := httpiotest.Call(httpiotest.As(h, f.leaver), "GET", "/v1/exports/likes", "")
		if r.Status != http.StatusOK {
			t.Fatalf("export: %d %s", r.Status, r.Body)
		}
		var got []exportJSON
		if err := json.Unmarshal([]byte(r.Body), &got); err != nil {
			t.Fatalf("export body: %v", err)
		}
		if int64(len(got)) != f.articles+f.comments {
			t.Fatalf("%d likes exported, want %d", len(got), f.articles+f.comments)
		}
		// The seed gave ids in order: comments' likes last, so newest first puts them first.
		first, last := got[0], got[len(got)-1]
		wantFirst := exportJSON{"comment", apijson.ID(f.comments), 1, apijson.Time(t0ms)}
		wantLast := exportJSON{"article", 1, 1, apijson.Time(t0ms)}
		if fmt.Sprint(first) != fmt.Sprint(wantFirst) || fmt.Sprint(last) != fmt.Sprint(wantLast) {
			t.Errorf("first %+v last %+v; want %+v and %+v", first, last, wantFirst, wantLast)
		}
		seen := map[string]bool{}
		for _, e := range got {
			k := e.TargetType + strconv.FormatInt(int64(e.TargetID), 10)
			if seen[k] {
				t.Fatalf("%s exported twice", k)
			}
			seen[k] = true
		}
	})
}
