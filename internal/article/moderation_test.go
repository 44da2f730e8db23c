package article

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// moderated is the envelope of an ARTICLE_MODERATED.
func moderated(t testing.TB, p event.ArticleModeration) event.Envelope {
	t.Helper()
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: 1, Type: event.ArticleModerated, Payload: body}
}

// moderationRows counts the article_moderation rows of an article.
func moderationRows(t testing.TB, db *sqldb.DB, id int64) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM article_moderation WHERE article_id = ?", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApplyModeration checks that an article's moderation state follows the newest ARTICLE_MODERATED whatever the
// order they arrive in, that bad events are refused, and that the state goes with the article.
func TestApplyModeration(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		apply := svc.Handlers()[event.ArticleModerated]
		a, err := svc.Create(ctx, "t", "c", 7, 9)
		if err != nil {
			t.Fatal(err)
		}
		state := func(hidden event.Hidden, reason string, locked, pinned bool, version int64) event.ArticleModeration {
			return event.ArticleModeration{ArticleID: apijson.ID(a.ID), BoardID: 7, WriterID: 9, Hidden: hidden,
				RemovedReason: reason, Locked: locked, Pinned: pinned, ModerationVersion: version}
		}
		want := func(what string, m Moderation) {
			t.Helper()
			got, err := svc.Get(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(m, got.Moderation); diff != "" {
				t.Errorf("%s (-want +got):\n%s", what, diff)
			}
		}
		want("never moderated", Moderation{})

		for _, step := range []struct {
			what  string
			event event.ArticleModeration
			want  Moderation
		}{
			{"v2 first", state(event.Pending, "reported", false, false, 2), Moderation{Hidden: event.Pending, RemovedReason: "reported"}},
			{"v1 late", state(event.Visible, "", true, false, 1), Moderation{Hidden: event.Pending, RemovedReason: "reported"}},
			{"v2 again", state(event.Removed, "x", true, true, 2), Moderation{Hidden: event.Pending, RemovedReason: "reported"}},
			{"v4", state(event.Removed, "spam", true, true, 4), Moderation{Hidden: event.Removed, RemovedReason: "spam", Locked: true, Pinned: true}},
			{"v3 late", state(event.Visible, "", false, false, 3), Moderation{Hidden: event.Removed, RemovedReason: "spam", Locked: true, Pinned: true}},
			{"v5 restore and unlock", state(event.Visible, "", false, true, 5), Moderation{Pinned: true}},
		} {
			if err := apply(ctx, moderated(t, step.event)); err != nil {
				t.Fatalf("%s: %v", step.what, err)
			}
			want(step.what, step.want)
		}

		// Bad events are refused as such (dead-lettered at once), and change nothing.
		for what, p := range map[string]event.ArticleModeration{
			"no article id":  {ModerationVersion: 9, Hidden: event.Removed},
			"no version":     {ArticleID: apijson.ID(a.ID), Hidden: event.Removed},
			"unknown hidden": {ArticleID: apijson.ID(a.ID), Hidden: "gone", ModerationVersion: 9},
		} {
			if err := apply(ctx, moderated(t, p)); fault.KindOf(err) != fault.Invalid {
				t.Errorf("%s: error %v, want an Invalid fault", what, err)
			}
		}
		bad := event.Envelope{EventID: 1, Type: event.ArticleModerated, Payload: []byte(`{"articleId":[]}`)}
		if err := apply(ctx, bad); err == nil {
			t.Error("a malformed payload was applied")
		}
		want("after bad events", Moderation{Pinned: true})

		// An event for an article that does not exist (deleted, or never) records nothing.
		if err := apply(ctx, moderated(t, event.ArticleModeration{ArticleID: 12345, Hidden: event.Removed, ModerationVersion: 1})); err != nil {
			t.Fatal(err)
		}
		if n := moderationRows(t, db, 12345); n != 0 {
			t.Errorf("an unknown article got %d moderation rows", n)
		}

		// The delete takes the state with it, and a late event does not bring it back.
		if err := svc.Delete(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		if n := moderationRows(t, db, a.ID); n != 0 {
			t.Errorf("%d moderation rows after the delete, want 0", n)
		}
		if err := apply(ctx, moderated(t, state(event.Removed, "late", true, false, 9))); err != nil {
			t.Fatal(err)
		}
		if n := moderationRows(t, db, a.ID); n != 0 {
			t.Errorf("%d moderation rows after a late event, want 0", n)
		}
	})
}

// TestRoutesHidden checks what a hidden article reads as on every read route, for an anonymous reader, another
// user, its writer and a moderator, and that its writer may still update it.
func TestRoutesHidden(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		h := httpiotest.Handler("article", Routes(svc, httpiotest.Logger))
		const writer, other, moderator = 9, 10, 11
		const created = "2026-01-02T03:04:05.006Z"
		var ids []int64
		for i := range 3 {
			r := httpiotest.Call(httpiotest.As(h, writer), "POST", "/v1/articles", fmt.Sprintf(`{"title":"t%d","content":"c%d","boardId":7}`, i, i))
			httpiotest.WantStatus(t, r, http.StatusCreated)
			id, _ := strconv.ParseInt(httpiotest.DecodeJSON(t, r.Body).(map[string]any)["articleId"].(string), 10, 64)
			ids = append(ids, id)
		}
		removed, pending, plain := ids[0], ids[1], ids[2]
		apply := svc.Handlers()[event.ArticleModerated]
		for _, p := range []event.ArticleModeration{
			{ArticleID: apijson.ID(removed), Hidden: event.Removed, RemovedReason: "spam", Locked: true, ModerationVersion: 3},
			{ArticleID: apijson.ID(pending), Hidden: event.Pending, RemovedReason: "reported by 5 users", ModerationVersion: 1},
			{ArticleID: apijson.ID(plain), Pinned: true, ModerationVersion: 1},
		} {
			if err := apply(ctx, moderated(t, p)); err != nil {
				t.Fatal(err)
			}
		}

		real := func(id int64, i int) map[string]any {
			return articleMap(id, fmt.Sprintf("t%d", i), fmt.Sprintf("c%d", i), 7, writer, created, created)
		}
		with := func(m map[string]any, kv ...any) map[string]any {
			for k := 0; k < len(kv); k += 2 {
				m[kv[k].(string)] = kv[k+1]
			}
			return m
		}
		revealed := []any{
			with(real(plain, 2), "pinned", true),
			with(real(pending, 1), "hidden", "pending", "removedReason", "reported by 5 users"),
			with(real(removed, 0), "hidden", "removed", "removedReason", "spam", "locked", true),
		}
		masked := []any{
			revealed[0],
			with(real(pending, 1), "title", "[hidden pending review]", "content", "", "contentHtml", "", "contentText", "",
				"hidden", "pending", "removedReason", "reported by 5 users"),
			with(real(removed, 0), "title", "[removed]", "content", "", "contentHtml", "", "contentText", "",
				"hidden", "removed", "removedReason", "spam", "locked", true),
		}
		for _, tc := range []struct {
			who  string
			h    http.Handler
			want []any
		}{
			{"anonymous", h, masked},
			{"another user", httpiotest.As(h, other), masked},
			{"the writer", httpiotest.As(h, writer), revealed},
			{"a moderator", httpiotest.AsModerator(h, moderator), revealed},
		} {
			for i, id := range []int64{plain, pending, removed} {
				r := httpiotest.Call(tc.h, "GET", "/v1/articles/"+strconv.FormatInt(id, 10), "")
				httpiotest.WantStatus(t, r, http.StatusOK)
				if diff := cmp.Diff(tc.want[i], httpiotest.DecodeJSON(t, r.Body)); diff != "" {
					t.Errorf("%s: GET %d (-want +got):\n%s", tc.who, id, diff)
				}
			}
			r := httpiotest.Call(tc.h, "GET", "/v1/articles?boardId=7", "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if diff := cmp.Diff(any(map[string]any{"articles": tc.want, "articleCount": json.Number("3")}), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
				t.Errorf("%s: list (-want +got):\n%s", tc.who, diff)
			}
			r = httpiotest.Call(tc.h, "GET", "/v1/articles/infinite-scroll?boardId=7", "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if diff := cmp.Diff(any(tc.want), httpiotest.DecodeJSON(t, r.Body)); diff != "" {
				t.Errorf("%s: scroll (-want +got):\n%s", tc.who, diff)
			}
		}

		// The writer of a removed article may update it; it stays removed, to everyone else.
		path := "/v1/articles/" + strconv.FormatInt(removed, 10)
		r := httpiotest.Call(httpiotest.As(h, writer), "PUT", path, `{"title":"mended","content":"better"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		got := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		if got["title"] != "mended" || got["content"] != "better" || got["hidden"] != "removed" || got["removedReason"] != "spam" {
			t.Errorf("PUT by the writer of a removed article = %v, want its new content, still removed", got)
		}
		got = httpiotest.DecodeJSON(t, httpiotest.Call(h, "GET", path, "").Body).(map[string]any)
		if got["title"] != "[removed]" || got["content"] != "" || got["contentHtml"] != "" || got["contentText"] != "" {
			t.Errorf("removed article after its update, anonymously = %v, want it still masked", got)
		}
	})
}
