package notification

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
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

// userRows is how many rows of each kind a user of the leaving tests has.
type userRows struct {
	notifications, unread, likers, bookmarks, watches, watchers int64
	inbox                                                       bool
}

// seedUser gives user n notifications (every third one unread), n/2 likers, n/2 bookmarks and n/2 watches with
// their index entries, and an inbox that counts the unread ones.
func seedUser(t testing.TB, db *sqldb.DB, user, n int64) userRows {
	var ns, likers, bookmarks, watches, watchers [][]any
	unread := int64(0)
	for i := int64(1); i <= n; i++ {
		read := i%3 != 0
		if !read {
			unread++
		}
		ns = append(ns, []any{user, i, i, string(ArticleComment), i, read, t0, t0})
		if i <= n/2 {
			likers = append(likers, []any{user, i, i + 1000})
			bookmarks = append(bookmarks, []any{user, i, string(BookmarkArticle), i, i, t0})
			watches = append(watches, []any{user, TargetArticle, i, LevelWatching, i, t0})
			watchers = append(watchers, []any{i, TargetArticle, user})
		}
	}
	insertRows(t, db, "inbox", "user_id, seq, unread", [][]any{{user, n, unread}})
	insertRows(t, db, "notification", "user_id, notification_id, seq, kind, article_id, is_read, created_at, updated_at", ns)
	insertRows(t, db, "like_actor", "user_id, article_id, actor_id", likers)
	insertRows(t, db, "bookmark", "user_id, bookmark_id, target_type, target_id, article_id, created_at", bookmarks)
	insertRows(t, db, "watch", "user_id, target_type, target_id, level, watch_id, created_at", watches)
	insertRows(t, db, "watcher", "target_id, target_type, user_id", watchers)
	return userRows{n, unread, n / 2, n / 2, n / 2, n / 2, true}
}

// rowsOf counts what the service keeps of user; unread is the inbox's count, which must match its unread rows.
func rowsOf(t *testing.T, db *sqldb.DB, user int64) userRows {
	t.Helper()
	ctx := context.Background()
	var r userRows
	for q, into := range map[string]*int64{
		"SELECT COUNT(*) FROM notification WHERE user_id = ?": &r.notifications,
		"SELECT COUNT(*) FROM like_actor WHERE user_id = ?":   &r.likers,
		"SELECT COUNT(*) FROM bookmark WHERE user_id = ?":     &r.bookmarks,
		"SELECT COUNT(*) FROM watch WHERE user_id = ?":        &r.watches,
		"SELECT COUNT(*) FROM watcher WHERE user_id = ?":      &r.watchers,
	} {
		if err := db.QueryRowContext(ctx, q, user).Scan(into); err != nil {
			t.Fatal(err)
		}
	}
	var unreadRows int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM notification WHERE user_id = ? AND is_read = FALSE", user).Scan(&unreadRows); err != nil {
		t.Fatal(err)
	}
	err := db.QueryRowContext(ctx, "SELECT unread FROM inbox WHERE user_id = ?", user).Scan(&r.unread)
	r.inbox = err == nil
	if r.inbox && r.unread != unreadRows {
		t.Errorf("user %d: inbox says %d unread, %d rows are", user, r.unread, unreadRows)
	}
	return r
}

// TestUserLeaves forgets a user's rows: each step in batches of at most 500, an interrupted run resumed by the
// next delivery, the other user's rows untouched.
func TestUserLeaves(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		ctx := context.Background()
		f := newFixture(t, db, b, Config{})
		const leaver, stays = 7, 8
		seedUser(t, db, leaver, 1300)
		kept := seedUser(t, db, stays, 10)

		// One batch of each step, as a handler killed midway would have done: each bounded, the inbox's count right.
		for _, step := range []func(context.Context, int64) (bool, error){
			f.svc.forgetLikers, f.svc.forgetBookmarks, f.svc.forgetWatches, f.svc.forgetInbox,
		} {
			if done, err := step(ctx, leaver); err != nil || done {
				t.Fatalf("first batch: done %v, %v", done, err)
			}
		}
		got := rowsOf(t, db, leaver)
		want := userRows{notifications: 800, unread: got.unread, likers: 150, bookmarks: 150, watches: 150, watchers: 150, inbox: true}
		if got != want {
			t.Errorf("after one batch of each: %+v, want %+v", got, want)
		}

		h := f.svc.LeavingHandlers()[event.UserDeleted]
		for range 2 { // redelivered, then delivered once more
			if err := h(ctx, envelope(t, event.UserDeleted, event.UserDeletion{UserID: leaver, Content: event.DeleteKeep})); err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(t, db, leaver); got != (userRows{}) {
				t.Errorf("after the handler: %+v left", got)
			}
		}
		if got := rowsOf(t, db, stays); got != kept {
			t.Errorf("the other user: %+v, want %+v", got, kept)
		}
		if err := h(ctx, envelope(t, event.UserDeleted, event.UserDeletion{Content: event.DeleteKeep})); fault.KindOf(err) != fault.Invalid {
			t.Errorf("without a user: %v, want Invalid", err)
		}
	})
}

// TestLeaverEmailForgotten: a deleted user's address and unsubscribe tokens are forgotten, and a verification of
// theirs read after the deletion does not bring the address back.
func TestLeaverEmailForgotten(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		ctx := context.Background()
		f := newFixture(t, db, b, Config{})
		const leaver = 7
		verified := func(version int64) {
			t.Helper()
			err := f.svc.emailVerified(ctx, envelope(t, event.UserEmailVerified,
				event.EmailVerified{UserID: leaver, Email: "ann@example.org", EmailVersion: version}))
			if err != nil {
				t.Fatal(err)
			}
		}
		verified(1)
		var tokens [][]any
		for i := range forgetBatchSize + 20 {
			tokens = append(tokens, []any{leaver, fmt.Sprintf("%064x", i), t0})
		}
		insertRows(t, db, "unsubscribe_token", "user_id, token_hash, created_at", tokens)

		h := f.svc.LeavingHandlers()[event.UserDeleted]
		if err := h(ctx, envelope(t, event.UserDeleted, event.UserDeletion{UserID: leaver, Content: event.DeleteKeep})); err != nil {
			t.Fatal(err)
		}
		verified(2) // late, from the account topic
		var email string
		var n int
		if err := db.QueryRowContext(ctx, "SELECT email FROM email_address WHERE user_id = ?", leaver).Scan(&email); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM unsubscribe_token WHERE user_id = ?", leaver).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if email != "" || n != 0 {
			t.Errorf("after leaving: address %q, %d unsubscribe tokens; want none", email, n)
		}
	})
}

// leftUsers says the users in it deleted their accounts.
type leftUsers map[int64]bool

func (leftUsers) Ended(auth.Principal) (bool, error) { return false, nil }
func (l leftUsers) Deleted(user int64) bool          { return l[user] }

// TestLeaverToldNothingMore: a comment on the article a deleted user kept, read after their USER_DELETED, starts
// no inbox for them; the others are told as before.
func TestLeaverToldNothingMore(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{Sessions: leftUsers{author: true}})
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "Kept"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		f.deliver(event.ArticleLiked, likeEvent(a1, replier))
		if got := rowsOf(t, db, author); got != (userRows{}) {
			t.Errorf("the user who left: %+v, want nothing", got)
		}
	})
}

// TestExports streams a user's bookmarks, notifications and watches, newest first, past a page of 1000.
func TestExports(t *testing.T) {
	t.Parallel()
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		const user = 7
		seedUser(t, db, user, 2400)
		seedUser(t, db, user+1, 4)
		for _, kind := range []string{"bookmarks", "notifications", "watches"} {
			path := "/v1/exports/" + kind
			if r := f.call(0, "GET", path, ""); r.Status != http.StatusUnauthorized {
				t.Errorf("%s without a token: %d", path, r.Status)
			}
			r := f.call(user, "GET", path, "")
			if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%s: %d %s", path, r.Status, r.Header.Get("Content-Type"))
			}
			var rows []map[string]any
			if err := json.Unmarshal([]byte(r.Body), &rows); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			want, first, last := 1200, "1200", "1"
			idField := map[string]string{"bookmarks": "targetId", "notifications": "notificationId", "watches": "targetId"}[kind]
			if kind == "notifications" {
				want, first = 2400, "2400"
			}
			if len(rows) != want || rows[0][idField] != first || rows[len(rows)-1][idField] != last {
				t.Errorf("%s: %d rows from %v to %v; want %d from %s to %s", path, len(rows), rows[0][idField],
					rows[len(rows)-1][idField], want, first, last)
			}
		}
	})
}
