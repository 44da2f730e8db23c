package comment

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"testing"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence/existencetest"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// moderationEvent is the envelope of a moderation event with payload p.
func moderationEvent(t testing.TB, typ event.Type, p any) event.Envelope {
	t.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: 1, Type: typ, Payload: body}
}

// applyModeration has svc's handlers apply a moderation event.
func applyModeration(t testing.TB, svc *Service, typ event.Type, p any) {
	t.Helper()
	if err := svc.Handlers()[typ](context.Background(), moderationEvent(t, typ, p)); err != nil {
		t.Fatalf("apply %s: %v", typ, err)
	}
}

func lockEvent(articleID int64, locked bool, version int64) event.ArticleModeration {
	return event.ArticleModeration{ArticleID: apijson.ID(articleID), BoardID: 1, Locked: locked, ModerationVersion: version}
}

func hideEvent(articleID, commentID int64, hidden event.Hidden, reason string, version int64) event.CommentModeration {
	return event.CommentModeration{ArticleID: apijson.ID(articleID), CommentID: apijson.ID(commentID), Hidden: hidden,
		RemovedReason: reason, ModerationVersion: version}
}

// rowsOf counts the rows of table about an article.
func rowsOf(t testing.TB, db *sqldb.DB, table string, articleID int64) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table+" WHERE article_id = ?", articleID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLocked checks that both versions refuse new comments on a locked article with LOCKED, except from moderators,
// that the newest ARTICLE_MODERATED wins whatever the order, and that an unlock lets comments in again.
func TestLocked(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article, writer, moderator = 5, 9, 11
		post := func(h http.Handler, version string) httpiotest.Reply {
			return httpiotest.Call(h, "POST", "/"+version+"/comments", fmt.Sprintf(`{"articleId":%d,"content":"c"}`, article))
		}
		wantOpen := func(when string) {
			t.Helper()
			for _, v := range []string{"v1", "v2"} {
				if r := post(httpiotest.As(f.h, writer), v); r.Status != http.StatusCreated {
					t.Errorf("%s: %s POST = %d %s, want 201", when, v, r.Status, r.Body)
				}
			}
		}
		wantLocked := func(when string) {
			t.Helper()
			before := httpCount(t, f.h, article)
			for _, v := range []string{"v1", "v2"} {
				httpiotest.WantError(t, post(httpiotest.As(f.h, writer), v), http.StatusForbidden, "LOCKED")
				// A moderator may still comment, to say why it is locked.
				httpiotest.WantStatus(t, post(httpiotest.AsModerator(f.h, moderator), v), http.StatusCreated)
			}
			if after := httpCount(t, f.h, article); after == before {
				t.Errorf("%s: count %s unchanged by the moderators' comments", when, after)
			}
		}

		wantOpen("never moderated")
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, true, 2))
		wantLocked("locked at v2")
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, false, 1)) // late
		wantLocked("after a late unlock")
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, false, 2)) // duplicate version
		wantLocked("after an unlock at the same version")
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, false, 3))
		wantOpen("unlocked at v3")
		// A pin or a hide of the article leaves comments open: only locked matters here.
		p := lockEvent(article, false, 4)
		p.Pinned, p.Hidden = true, event.Removed
		applyModeration(t, f.svc, event.ArticleModerated, p)
		wantOpen("pinned and removed")

		// A lock of an article not heard of here yet holds all the same.
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(6, true, 1))
		httpiotest.WantError(t, httpiotest.Call(httpiotest.As(f.h, writer), "POST", "/v2/comments", `{"articleId":6,"content":"c"}`),
			http.StatusForbidden, "LOCKED")

		// Bad events are refused as such (dead-lettered at once).
		for what, env := range map[string]event.Envelope{
			"no article":      moderationEvent(t, event.ArticleModerated, lockEvent(0, true, 1)),
			"no version":      moderationEvent(t, event.ArticleModerated, lockEvent(article, true, 0)),
			"no comment":      moderationEvent(t, event.CommentModerated, hideEvent(article, 0, event.Removed, "", 1)),
			"unknown hidden":  moderationEvent(t, event.CommentModerated, hideEvent(article, 1, "gone", "", 1)),
			"comment version": moderationEvent(t, event.CommentModerated, hideEvent(article, 1, event.Removed, "", 0)),
		} {
			if err := f.svc.Handlers()[env.Type](context.Background(), env); fault.KindOf(err) != fault.Invalid {
				t.Errorf("%s: error %v, want an Invalid fault", what, err)
			}
		}
	})
}

// TestHiddenComments checks what a hidden comment reads as, in both versions' reads one by one, in pages and in the
// infinite scroll, for an anonymous reader, another user, its writer and a moderator; and that the newest
// COMMENT_MODERATED wins whatever the order.
func TestHiddenComments(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newArticlesFixture(t, db)
		const article, writer, other, moderator = 5, 9, 10, 11
		for _, version := range []string{"v1", "v2"} {
			t.Run(version, func(t *testing.T) {
				var cs []map[string]any
				for i := range 3 {
					var c map[string]any
					if version == "v1" {
						c = httpPostV1(t, f.h, article, writer, "", fmt.Sprintf("c%d", i))
					} else {
						c = httpPostV2(t, f.h, article, writer, "", fmt.Sprintf("c%d", i))
					}
					cs = append(cs, c)
				}
				id := func(c map[string]any) int64 {
					var n apijson.ID
					if err := n.UnmarshalJSON([]byte(`"` + c["commentId"].(string) + `"`)); err != nil {
						t.Fatal(err)
					}
					return int64(n)
				}
				removed, pending := id(cs[0]), id(cs[1])
				applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, removed, event.Removed, "abuse", 2))
				applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, removed, event.Visible, "", 1)) // late
				applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, pending, event.Removed, "x", 1))
				applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, pending, event.Pending, "reported", 2))

				with := func(c map[string]any, kv ...any) any {
					c = maps.Clone(c)
					for k := 0; k < len(kv); k += 2 {
						c[kv[k].(string)] = kv[k+1]
					}
					return c
				}
				revealed := []any{with(cs[0], "hidden", "removed", "removedReason", "abuse"),
					with(cs[1], "hidden", "pending", "removedReason", "reported"), any(cs[2])}
				masked := []any{with(cs[0], "content", "", "contentHtml", "", "contentText", "", "hidden", "removed", "removedReason", "abuse"),
					with(cs[1], "content", "", "contentHtml", "", "contentText", "", "hidden", "pending", "removedReason", "reported"), any(cs[2])}
				base := "/" + version + "/comments"
				for _, tc := range []struct {
					who  string
					h    http.Handler
					want []any
				}{
					{"anonymous", f.h, masked},
					{"another user", httpiotest.As(f.h, other), masked},
					{"the writer", httpiotest.As(f.h, writer), revealed},
					{"a moderator", httpiotest.AsModerator(f.h, moderator), revealed},
				} {
					for i, c := range cs {
						httpWantJSON(t, tc.who+": GET one", tc.want[i], httpGet(t, tc.h, base+"/"+c["commentId"].(string)))
					}
					page := httpGet(t, tc.h, fmt.Sprintf("%s?articleId=%d&page=1&pageSize=10", base, article)).(map[string]any)
					httpWantJSON(t, tc.who+": page", any(tc.want), page["comments"])
					httpWantJSON(t, tc.who+": scroll", any(tc.want), httpGet(t, tc.h, fmt.Sprintf("%s/infinite-scroll?articleId=%d&pageSize=10", base, article)))
				}

				// A restore shows the content again; removing a comment takes its moderation row with it.
				applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, pending, event.Visible, "", 3))
				httpWantJSON(t, "restored", any(cs[1]), httpGet(t, f.h, base+"/"+cs[1]["commentId"].(string)))
				for _, c := range cs {
					httpiotest.WantStatus(t, httpiotest.Call(httpiotest.As(f.h, writer), "DELETE", base+"/"+c["commentId"].(string), ""), http.StatusNoContent)
				}
			})
		}
		if n := rowsOf(t, db, "comment_moderation", article); n != 0 {
			t.Errorf("%d comment_moderation rows left after every comment was removed, want 0", n)
		}
	})
}

// TestModerationPurged checks that a deleted article's lock and its comments' moderation state go with its purge,
// and that moderation events that come after its delete leave nothing behind.
func TestModerationPurged(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		f := newArticlesFixture(t, db)
		const article, writer = 7, 9
		existencetest.Apply(t, f.reg, existencetest.Created(article, 1))
		var ids []int64
		for i := range 3 {
			c1, err := f.svc.Create(ctx, article, writer, 0, fmt.Sprintf("v1 %d", i))
			if err != nil {
				t.Fatal(err)
			}
			c2, err := f.svc.CreateV2(ctx, article, writer, "", fmt.Sprintf("v2 %d", i))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c1.ID, c2.ID)
		}
		for i, id := range ids {
			applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, id, event.Removed, "r", int64(i+1)))
		}
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, true, 1))
		if _, err := f.svc.Create(ctx, article, writer, 0, "locked out"); fault.KindOf(err) != fault.Forbidden {
			t.Errorf("create on a locked article: %v, want LOCKED", err)
		}
		if n := rowsOf(t, db, "comment_moderation", article); n != len(ids) {
			t.Fatalf("%d comment_moderation rows, want %d", n, len(ids))
		}

		existencetest.Apply(t, f.reg, existencetest.Deleted(article, 2))
		// Events after the delete is recorded change nothing, and leave no row to purge.
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, false, 2))
		applyModeration(t, f.svc, event.CommentModerated, hideEvent(article, 12345, event.Removed, "late", 1))
		if err := f.reg.PurgeQueued(ctx, f.store.Purge); err != nil {
			t.Fatal(err)
		}
		wantNothingLeft(t, db, article)
		for _, table := range []string{"comment_moderation", "article_lock"} {
			if n := rowsOf(t, db, table, article); n != 0 {
				t.Errorf("%d %s rows left after the purge, want 0", n, table)
			}
		}
		applyModeration(t, f.svc, event.ArticleModerated, lockEvent(article, true, 3))
		if n := rowsOf(t, db, "article_lock", article); n != 0 {
			t.Errorf("a lock after the purge left %d rows, want 0", n)
		}
	})
}
