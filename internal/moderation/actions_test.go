package moderation

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

func TestLock(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 1)
		seed(f)
		const lock = "/v1/articles/1001/lock"
		httpiotest.WantError(t, f.call(0, "PUT", lock, ""), 401, "UNAUTHENTICATED")
		httpiotest.WantError(t, f.call(50, "PUT", lock, ""), 403, "FORBIDDEN")
		httpiotest.WantError(t, f.call(writer, "DELETE", lock, ""), 403, "FORBIDDEN")
		httpiotest.WantError(t, f.call(mod1, "PUT", "/v1/articles/12345/lock", ""), 404, "ARTICLE_NOT_FOUND")
		httpiotest.WantError(t, f.call(mod1, "PUT", "/v1/articles/0/lock", ""), 400, "INVALID_ID")
		httpiotest.WantError(t, f.call(mod1, "PUT", "/v1/articles/x/lock", ""), 400, "INVALID_ARTICLE_ID")
		// Unlocking an article moderation never knew changes nothing, and asks nobody.
		calls := f.origins.calls.Load()
		httpiotest.WantStatus(t, f.call(mod1, "DELETE", "/v1/articles/12345/lock", ""), http.StatusNoContent)
		if f.origins.calls.Load() != calls {
			t.Error("an unlock of an unknown article looked it up")
		}

		for i := range 2 { // the second lock changes nothing
			r := f.call(mod1, "PUT", lock, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			want := map[string]any{"articleId": "1001", "boardId": idStr(board), "writerId": idStr(writer), "hidden": "", "removedReason": "",
				"locked": true, "pinned": false, "moderationVersion": jsonNumber(1)}
			if diff := cmp.Diff(want, httpiotest.DecodeJSON(t, r.Body)); diff != "" {
				t.Errorf("lock %d (-want +got):\n%s", i, diff)
			}
		}
		for range 2 {
			httpiotest.WantStatus(t, f.call(mod2, "DELETE", lock, ""), http.StatusNoContent)
		}
		evs := events(t, db)
		if len(evs) != 2 {
			t.Fatalf("events %+v, want a lock and an unlock", evs)
		}
		want := []event.ArticleModeration{
			{ArticleID: article1, BoardID: board, WriterID: writer, Locked: true, Action: event.ActionLock, ModeratorID: mod1,
				ModeratedAt: apijson.Time(t0), ModerationVersion: 1},
			{ArticleID: article1, BoardID: board, WriterID: writer, Action: event.ActionUnlock, ModeratorID: mod2,
				ModeratedAt: apijson.Time(t0), ModerationVersion: 2},
		}
		for i, e := range evs {
			if e.Type != event.ArticleModerated || e.Key != board {
				t.Errorf("event %d: %s keyed %d", i, e.Type, e.Key)
			}
			if diff := cmp.Diff(want[i], payload[event.ArticleModeration](t, e), timesEqual); diff != "" {
				t.Errorf("event %d (-want +got):\n%s", i, diff)
			}
		}
		// The lock keeps what the reports did: the state travels whole.
		httpiotest.WantStatus(t, f.call(60, "POST", "/v1/reports", reportBody("article", article2, "spam", "")), http.StatusCreated)
		var st struct {
			Hidden            string
			Locked            bool
			ModerationVersion int
		}
		decode(t, f.call(mod1, "PUT", "/v1/articles/1002/lock", ""), &st)
		if st.Hidden != "pending" || !st.Locked || st.ModerationVersion != 2 {
			t.Errorf("lock of a hidden article: %+v", st)
		}
		var log []struct{ Action, TargetID string }
		decode(t, f.call(0, "GET", "/v1/modlog", ""), &log)
		if len(log) != 4 || log[0].Action != "lock" || log[1].Action != "hide" || log[2].Action != "unlock" || log[3].Action != "lock" {
			t.Errorf("log %+v", log)
		}
	})
}

// At most PinLimit articles per board are pinned, however many pins arrive at once.
func TestPinLimit(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 5)
		const n = 8
		for i := range n {
			f.origins.addArticle(int64(3000+i), board, fmt.Sprintf("article %d", i))
		}
		f.origins.addArticle(4000, board+1, "another board")
		httpiotest.WantError(t, f.call(50, "PUT", "/v1/articles/3000/pin", ""), 403, "FORBIDDEN")
		var wg sync.WaitGroup
		statuses := make([]int, n)
		for i := range n {
			wg.Go(func() {
				r := f.call(mod1, "PUT", fmt.Sprintf("/v1/articles/%d/pin", 3000+i), "")
				statuses[i] = r.Status
				if r.Status == http.StatusConflict {
					httpiotest.WantError(t, r, 409, "PIN_LIMIT")
				} else if r.Status != http.StatusOK {
					t.Errorf("pin %d: %d %s", i, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
		var pinned []int64
		for i, s := range statuses {
			if s == http.StatusOK {
				pinned = append(pinned, int64(3000+i))
			}
		}
		if len(pinned) != PinLimit {
			t.Fatalf("%d pins succeeded (%v), want %d", len(pinned), statuses, PinLimit)
		}
		if c := count(t, db, "moderation_target", "pinned = TRUE"); c != PinLimit {
			t.Errorf("%d articles pinned, want %d", c, PinLimit)
		}
		if evs := events(t, db); len(evs) != PinLimit {
			t.Errorf("%d events, want %d", len(evs), PinLimit)
		}
		// Pinning a pinned article is no new pin; another board has places of its own; an unpin frees a place.
		httpiotest.WantStatus(t, f.call(mod1, "PUT", fmt.Sprintf("/v1/articles/%d/pin", pinned[0]), ""), http.StatusOK)
		httpiotest.WantStatus(t, f.call(mod1, "PUT", "/v1/articles/4000/pin", ""), http.StatusOK)
		var free int64
		for i := range int64(n) {
			if !strings.Contains(fmt.Sprint(pinned), fmt.Sprint(3000+i)) {
				free = 3000 + i
				break
			}
		}
		httpiotest.WantError(t, f.call(mod1, "PUT", fmt.Sprintf("/v1/articles/%d/pin", free), ""), 409, "PIN_LIMIT")
		httpiotest.WantStatus(t, f.call(mod1, "DELETE", fmt.Sprintf("/v1/articles/%d/pin", pinned[0]), ""), http.StatusNoContent)
		httpiotest.WantStatus(t, f.call(mod1, "DELETE", fmt.Sprintf("/v1/articles/%d/pin", pinned[0]), ""), http.StatusNoContent)
		var st struct{ Pinned bool }
		decode(t, f.call(mod1, "PUT", fmt.Sprintf("/v1/articles/%d/pin", free), ""), &st)
		if !st.Pinned {
			t.Error("a pin after an unpin failed")
		}
		evs := events(t, db)
		last := payload[event.ArticleModeration](t, evs[len(evs)-2])
		if last.Action != event.ActionUnpin || last.Pinned || last.ArticleID != apijson.ID(pinned[0]) || last.ModerationVersion != 2 {
			t.Errorf("unpin event %+v", last)
		}
	})
}

func TestBans(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 5)
		const target = writer
		path := "/v1/bans/" + idStr(target)
		future := t0.Add(48 * time.Hour).Format(time.RFC3339)
		for _, c := range []struct {
			what   string
			user   int64
			path   string
			body   string
			status int
			code   string
		}{
			{"by a user", 50, path, `{"reason":"spam"}`, 403, "FORBIDDEN"},
			{"without a token", 0, path, `{"reason":"spam"}`, 401, "UNAUTHENTICATED"},
			{"of a moderator", mod1, "/v1/bans/" + idStr(mod2), `{"reason":"spam"}`, 403, "FORBIDDEN"},
			{"of oneself", mod1, "/v1/bans/" + idStr(mod1), `{"reason":"spam"}`, 400, "CANNOT_BAN_SELF"},
			{"of a missing user", mod1, "/v1/bans/12345", `{"reason":"spam"}`, 404, "USER_NOT_FOUND"},
			{"ended already", mod1, path, `{"reason":"spam","until":"` + t0.Add(-time.Second).Format(time.RFC3339) + `"}`, 400, "BAD_UNTIL"},
			{"ending now", mod1, path, `{"reason":"spam","until":"` + t0.Format(time.RFC3339Nano) + `"}`, 400, "BAD_UNTIL"},
			{"until not a time", mod1, path, `{"reason":"spam","until":"tomorrow"}`, 400, "BAD_UNTIL"},
			{"without a reason", mod1, path, `{"until":"` + future + `"}`, 400, "MISSING_REASON"},
			{"a blank reason", mod1, path, `{"reason":"  "}`, 400, "MISSING_REASON"},
			{"a reason over 500 characters", mod1, path, `{"reason":"` + strings.Repeat("가", 501) + `"}`, 400, "REASON_TOO_LONG"},
			{"a zero user", mod1, "/v1/bans/0", `{"reason":"spam"}`, 400, "INVALID_ID"},
		} {
			t.Run(c.what, func(t *testing.T) { httpiotest.WantError(t, f.call(c.user, "PUT", c.path, c.body), c.status, c.code) })
		}
		httpiotest.WantError(t, f.call(0, "GET", path, ""), 404, "BAN_NOT_FOUND")
		httpiotest.WantError(t, f.call(mod1, "DELETE", path, ""), 404, "BAN_NOT_FOUND")
		if evs := events(t, db); len(evs) != 0 {
			t.Fatalf("refused bans wrote %v", evs)
		}

		r := f.call(mod1, "PUT", path, `{"reason":"flooding","until":"`+future+`"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		want := map[string]any{"userId": idStr(target), "reason": "flooding", "until": "2026-01-04T03:04:05.000Z", "moderatorId": idStr(mod1),
			"createdAt": "2026-01-02T03:04:05.006Z"}
		if diff := cmp.Diff(want, httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("ban (-want +got):\n%s", diff)
		}
		r = f.call(0, "GET", path, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if diff := cmp.Diff(want, httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("the ban read by anyone (-want +got):\n%s", diff)
		}
		// A ban of a banned user replaces it: for good now.
		f.clock.Add(time.Minute)
		r = f.call(mod2, "PUT", path, `{"reason":"again"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		var b struct{ Until *string }
		decode(t, r, &b)
		if b.Until != nil {
			t.Errorf("a ban for good has until %q", *b.Until)
		}
		httpiotest.WantStatus(t, f.call(mod1, "DELETE", path, ""), http.StatusNoContent)
		httpiotest.WantError(t, f.call(mod1, "DELETE", path, ""), 404, "BAN_NOT_FOUND")
		httpiotest.WantError(t, f.call(0, "GET", path, ""), 404, "BAN_NOT_FOUND")

		evs := events(t, db)
		if len(evs) != 3 {
			t.Fatalf("events %+v, want ban, ban, unban", evs)
		}
		until := apijson.Time(t0.Add(48 * time.Hour).Truncate(time.Second))
		later := apijson.Time(t0.Add(time.Minute))
		wantEvents := []event.Ban{
			{UserID: target, Banned: true, Reason: "flooding", Until: &until, ModeratorID: mod1, At: apijson.Time(t0), BanVersion: 1},
			{UserID: target, Banned: true, Reason: "again", ModeratorID: mod2, At: later, BanVersion: 2},
			{UserID: target, Banned: false, Reason: "again", ModeratorID: mod1, At: later, BanVersion: 3},
		}
		for i, e := range evs {
			wantType := event.UserBanned
			if i == 2 {
				wantType = event.UserUnbanned
			}
			if e.Type != wantType || e.Key != target {
				t.Errorf("event %d: %s keyed %d", i, e.Type, e.Key)
			}
			if diff := cmp.Diff(wantEvents[i], payload[event.Ban](t, e), timesEqual); diff != "" {
				t.Errorf("event %d (-want +got):\n%s", i, diff)
			}
		}

		// A ban past its end is no ban.
		httpiotest.WantStatus(t, f.call(mod1, "PUT", path, `{"reason":"short","until":"`+f.clock.Now().Add(time.Hour).Format(time.RFC3339)+`"}`), http.StatusOK)
		f.clock.Add(2 * time.Hour)
		httpiotest.WantError(t, f.call(0, "GET", path, ""), 404, "BAN_NOT_FOUND")
		httpiotest.WantError(t, f.call(mod1, "DELETE", path, ""), 404, "BAN_NOT_FOUND")

		var log []struct{ Action, TargetType, TargetID, ModeratorID, Reason string }
		decode(t, f.call(0, "GET", "/v1/modlog", ""), &log)
		var got []string
		for _, e := range log {
			got = append(got, e.Action+" "+e.TargetType+" "+e.TargetID+" by "+e.ModeratorID+": "+e.Reason)
		}
		wantLog := []string{"ban user 7 by 9: short", "unban user 7 by 9: ", "ban user 7 by 10: again", "ban user 7 by 9: flooding"}
		if diff := cmp.Diff(wantLog, got); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}

		// The user service down is a 503, and bans nobody.
		f.origins.down.Store(true)
		httpiotest.WantError(t, f.call(mod1, "PUT", "/v1/bans/11", `{"reason":"x"}`), 503, "USER_SERVICE_UNAVAILABLE")
	})
}

// A deleted article takes its reports, its comments' and its pin with it; a deleted comment its reports.
func TestDeletesForget(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 5)
		seed(f)
		for _, u := range []int64{70, 71} {
			for _, target := range []string{reportBody("article", article1, "spam", ""), reportBody("comment", commentV2, "spam", ""),
				reportBody("article", article2, "spam", ""), reportBody("comment", commentV1, "spam", "")} {
				httpiotest.WantStatus(t, f.call(u, "POST", "/v1/reports", target), http.StatusCreated)
			}
		}
		for _, a := range []string{"1001", "1002"} {
			httpiotest.WantStatus(t, f.call(mod1, "PUT", "/v1/articles/"+a+"/pin", ""), http.StatusOK)
		}
		handlers := f.svc.Handlers()
		articleDeleted := envelope(t, event.ArticleDeleted, event.Article{ArticleID: article1, BoardID: board, WriterID: writer, ArticleVersion: 2})
		commentDeleted := envelope(t, event.CommentDeleted, event.Comment{CommentID: commentV1, ArticleID: article2, WriterID: writer, Deleted: true})
		for range 2 { // a second delivery finds nothing left
			if err := handlers[event.ArticleDeleted](context.Background(), articleDeleted); err != nil {
				t.Fatal(err)
			}
			if err := handlers[event.CommentDeleted](context.Background(), commentDeleted); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(t, db, "report", "article_id = ?", article1); n != 0 {
			t.Errorf("%d reports of the deleted article and its comments left", n)
		}
		if n := count(t, db, "moderation_target", "article_id = ?", article1); n != 0 {
			t.Errorf("%d target rows of the deleted article left", n)
		}
		if n := count(t, db, "report", "target_type = ? AND target_id = ?", "comment", commentV1); n != 0 {
			t.Errorf("%d reports of the deleted comment left", n)
		}
		if n := count(t, db, "report", "target_type = ? AND target_id = ?", "article", article2); n != 2 {
			t.Errorf("%d reports of the live article, want 2", n)
		}
		if n := count(t, db, "board_pin", "board_id = ? AND pin_count = 1", board); n != 1 {
			t.Error("the deleted article's pin place was not given back")
		}
		var q struct{ Count int }
		decode(t, f.call(mod1, "GET", "/v1/reports", ""), &q)
		if q.Count != 1 {
			t.Errorf("queue count %d after the deletes, want 1", q.Count)
		}
		// A malformed event is refused as such.
		bad := envelope(t, event.ArticleDeleted, event.Article{})
		if err := handlers[event.ArticleDeleted](context.Background(), bad); err == nil {
			t.Error("an ARTICLE_DELETED without an article id was applied")
		}
	})
}

func envelope(t testing.TB, typ event.Type, p any) event.Envelope {
	t.Helper()
	body, err := event.Encode(1, typ, mustJSON(t, p))
	if err != nil {
		t.Fatal(err)
	}
	env, err := event.Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
