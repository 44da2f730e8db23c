package moderation

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
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

const (
	article1  = 1001
	article2  = 1002
	commentV2 = 2001
	commentV1 = 2002
	deletedC  = 2003
	orphanC   = 2004 // its article is gone
)

func seed(f *fixture) {
	f.origins.addArticle(article1, board, "buy cheap watches")
	f.origins.addArticle(article2, board, "a fine article")
	f.origins.addComment(commentV2, article1, strings.Repeat("long comment ", 40), false)
	f.origins.addComment(commentV1, article2, "a v1 comment", true)
	f.origins.addComment(deletedC, article1, "", false)
	f.origins.mu.Lock()
	c := f.origins.comments[deletedC]
	c.deleted = true
	f.origins.comments[deletedC] = c
	f.origins.mu.Unlock()
	f.origins.addComment(orphanC, 999, "orphan", false)
}

func TestReport(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 5)
		seed(f)
		// The happy path, each target type and comment version.
		r := f.call(20, "POST", "/v1/reports", reportBody("article", article1, "spam", ""))
		httpiotest.WantStatus(t, r, http.StatusCreated)
		got := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		want := map[string]any{"reportId": idStr(firstID), "targetType": "article", "targetId": idStr(article1), "articleId": idStr(article1),
			"reporterId": "20", "reason": "spam", "text": "", "createdAt": "2026-01-02T03:04:05.006Z"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("report (-want +got):\n%s", diff)
		}
		r = f.call(20, "POST", "/v1/reports", reportBody("comment", commentV1, "other", "  it is rude  "))
		httpiotest.WantStatus(t, r, http.StatusCreated)
		var rep struct{ ArticleID, Text string }
		decode(t, r, &rep)
		if rep.ArticleID != idStr(article2) || rep.Text != "it is rude" {
			t.Errorf("report of a v1 comment: %s", r.Body)
		}
		httpiotest.WantStatus(t, f.call(20, "POST", "/v1/reports", reportBody("comment", commentV2, "abuse", "")), http.StatusCreated)
		httpiotest.WantStatus(t, f.call(21, "POST", "/v1/reports", reportBody("article", article1, "other", strings.Repeat("가", 500))),
			http.StatusCreated)

		for _, c := range []struct {
			what   string
			user   int64
			body   string
			status int
			code   string
		}{
			{"the same report again", 20, reportBody("article", article1, "abuse", ""), 409, "REPORT_EXISTS"},
			{"a missing article", 20, reportBody("article", 12345, "spam", ""), 404, "TARGET_NOT_FOUND"},
			{"a missing comment", 20, reportBody("comment", 12345, "spam", ""), 404, "TARGET_NOT_FOUND"},
			{"a comment marked deleted", 20, reportBody("comment", deletedC, "spam", ""), 404, "TARGET_NOT_FOUND"},
			{"a comment of a deleted article", 20, reportBody("comment", orphanC, "spam", ""), 404, "TARGET_NOT_FOUND"},
			{"one's own article", writer, reportBody("article", article2, "spam", ""), 400, "OWN_CONTENT"},
			{"one's own comment", writer, reportBody("comment", commentV2, "spam", ""), 400, "OWN_CONTENT"},
			{"a text over 500 characters", 22, reportBody("article", article2, "other", strings.Repeat("가", 501)), 400, "TEXT_TOO_LONG"},
			{"an unknown reason", 22, reportBody("article", article2, "boring", ""), 400, "INVALID_REASON"},
			{"other without a text", 22, reportBody("article", article2, "other", "   "), 400, "MISSING_TEXT"},
			{"an unknown target type", 22, reportBody("user", article2, "spam", ""), 400, "INVALID_TARGET_TYPE"},
			{"a zero target id", 22, reportBody("article", 0, "spam", ""), 400, "INVALID_TARGET_ID"},
			{"no reason", 22, `{"targetType":"article","targetId":"1001"}`, 400, "MISSING_FIELD"},
			{"no target", 22, `{"reason":"spam"}`, 400, "MISSING_FIELD"},
			{"a bad id", 22, `{"targetType":"article","targetId":"x","reason":"spam"}`, 400, "INVALID_JSON"},
			{"not JSON", 22, `{`, 400, "INVALID_JSON"},
			{"no token", 0, reportBody("article", article2, "spam", ""), 401, "UNAUTHENTICATED"},
		} {
			t.Run(c.what, func(t *testing.T) {
				httpiotest.WantError(t, f.call(c.user, "POST", "/v1/reports", c.body), c.status, c.code)
			})
		}
		if n := count(t, db, "report", "1 = 1"); n != 4 {
			t.Errorf("%d reports stored, want 4", n)
		}

		// A service that is down or does not answer is a 503, within the lookup's deadline.
		f.origins.down.Store(true)
		httpiotest.WantError(t, f.call(22, "POST", "/v1/reports", reportBody("article", article2, "spam", "")), 503, "ARTICLE_SERVICE_UNAVAILABLE")
		httpiotest.WantError(t, f.call(22, "POST", "/v1/reports", reportBody("comment", commentV1, "spam", "")), 503, "COMMENT_SERVICE_UNAVAILABLE")
		f.origins.down.Store(false)
		f.origins.hang.Store(true)
		start := time.Now()
		httpiotest.WantError(t, f.call(22, "POST", "/v1/reports", reportBody("article", article2, "spam", "")), 503, "ARTICLE_SERVICE_UNAVAILABLE")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("a hung article service held the report %v", d)
		}
		f.origins.hang.Store(false)
		if evs := events(t, db); len(evs) != 0 {
			t.Errorf("reports under the threshold wrote events %v", evs)
		}
	})
}

// The report that reaches the threshold hides the target at once, with its event and log entry in the same
// transaction; later reports do not hide it again.
func TestThresholdHides(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 3)
		seed(f)
		for i, reason := range []string{"spam", "abuse", "spam", "other"} {
			httpiotest.WantStatus(t, f.call(int64(30+i), "POST", "/v1/reports", reportBody("article", article1, reason, "text")), http.StatusCreated)
			if i < 2 && len(events(t, db)) != 0 {
				t.Fatalf("hidden after %d reports", i+1)
			}
		}
		evs := events(t, db)
		if len(evs) != 1 || evs[0].Type != event.ArticleModerated || evs[0].Key != board {
			t.Fatalf("events %+v, want one ARTICLE_MODERATED keyed by the board", evs)
		}
		reason := "hidden pending review after 3 reports (spam 2, abuse 1)"
		want := event.ArticleModeration{ArticleID: article1, BoardID: board, WriterID: writer, Hidden: event.Pending, RemovedReason: reason,
			Action: event.ActionHide, Reason: reason, ModeratorID: 0, ModeratedAt: apijson.Time(t0), ModerationVersion: 1}
		if diff := cmp.Diff(want, payload[event.ArticleModeration](t, evs[0]), timesEqual); diff != "" {
			t.Errorf("hide event (-want +got):\n%s", diff)
		}

		// A comment, too: its event carries its article and board.
		for i := range 3 {
			httpiotest.WantStatus(t, f.call(int64(40+i), "POST", "/v1/reports", reportBody("comment", commentV2, "abuse", "")), http.StatusCreated)
		}
		evs = events(t, db)
		if len(evs) != 2 || evs[1].Type != event.CommentModerated || evs[1].Key != board {
			t.Fatalf("events %+v, want a COMMENT_MODERATED keyed by the board", evs)
		}
		c := payload[event.CommentModeration](t, evs[1])
		if c.CommentID != commentV2 || c.ArticleID != article1 || c.BoardID != board || c.WriterID != writer || c.Hidden != event.Pending ||
			c.RemovedReason != "hidden pending review after 3 reports (abuse 3)" || c.ModerationVersion != 1 {
			t.Errorf("comment hide event %+v", c)
		}
		var log []map[string]any
		decode(t, f.call(0, "GET", "/v1/modlog", ""), &log)
		if len(log) != 2 || log[0]["action"] != "hide" || log[0]["targetType"] != "comment" || log[0]["moderatorId"] != "0" ||
			log[0]["articleId"] != idStr(article1) || log[1]["targetId"] != idStr(article1) {
			t.Errorf("log %v", log)
		}
	})
}

// However many reports arrive at once, the target is hidden exactly once.
func TestConcurrentReportsHideOnce(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 5)
		seed(f)
		const n = 12
		var wg sync.WaitGroup
		statuses := make([]int, n)
		for i := range n {
			wg.Go(func() {
				r := f.call(int64(100+i), "POST", "/v1/reports", reportBody("article", article2, "spam", ""))
				statuses[i] = r.Status
				if r.Status != http.StatusCreated {
					t.Errorf("report %d: %d %s", i, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
		evs := events(t, db)
		if len(evs) != 1 || payload[event.ArticleModeration](t, evs[0]).ModerationVersion != 1 {
			t.Errorf("events %+v, want one hide", evs)
		}
		if c := count(t, db, "moderation_target", "open_reports = ? AND hidden = ?", n, "pending"); c != 1 {
			t.Errorf("target row not at %d open reports, pending", n)
		}
		if c := count(t, db, "modlog", "action = ?", "hide"); c != 1 {
			t.Errorf("%d hide log entries, want 1", c)
		}
	})
}

func TestQueueAndResolutions(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, 2)
		seed(f)
		report := func(user int64, typ string, id int64, reason string) {
			t.Helper()
			httpiotest.WantStatus(t, f.call(user, "POST", "/v1/reports", reportBody(typ, id, reason, "why")), http.StatusCreated)
			f.clock.Add(time.Second)
		}
		report(50, "article", article2, "spam")   // first in the queue
		report(50, "comment", commentV2, "abuse") // second
		report(51, "article", article2, "other")  // hides article2
		report(51, "article", article1, "off-topic")

		// Only moderators read the queue.
		httpiotest.WantError(t, f.call(0, "GET", "/v1/reports", ""), 401, "UNAUTHENTICATED")
		httpiotest.WantError(t, f.call(50, "GET", "/v1/reports", ""), 403, "FORBIDDEN")
		httpiotest.WantError(t, f.call(mod1, "GET", "/v1/reports?pageSize=0", ""), 400, "INVALID_PAGE_SIZE")
		r := f.call(mod1, "GET", "/v1/reports?page=1&pageSize=2", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		got := httpiotest.DecodeJSON(t, r.Body)
		want := map[string]any{"count": jsonNumber(3), "targets": []any{
			map[string]any{"targetType": "article", "targetId": idStr(article2), "boardId": idStr(board), "articleId": idStr(article2),
				"excerpt": "a fine article", "writerId": idStr(writer), "reportCount": jsonNumber(2),
				"reasons": map[string]any{"spam": jsonNumber(1), "other": jsonNumber(1)}, "firstReportedAt": "2026-01-02T03:04:05.006Z", "hidden": "pending"},
			map[string]any{"targetType": "comment", "targetId": idStr(commentV2), "boardId": idStr(board), "articleId": idStr(article1),
				"excerpt": strings.Repeat("long comment ", 40)[:200] + "…", "writerId": idStr(writer), "reportCount": jsonNumber(1),
				"reasons": map[string]any{"abuse": jsonNumber(1)}, "firstReportedAt": "2026-01-02T03:04:06.006Z", "hidden": ""},
		}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("queue page 1 (-want +got):\n%s", diff)
		}
		var page2 struct {
			Targets []struct{ TargetID string }
			Count   int
		}
		decode(t, f.call(mod1, "GET", "/v1/reports?page=2&pageSize=2", ""), &page2)
		if len(page2.Targets) != 1 || page2.Targets[0].TargetID != idStr(article1) || page2.Count != 3 {
			t.Errorf("queue page 2: %+v", page2)
		}

		resolve := func(user int64, body string) httpiotest.Reply {
			return f.call(user, "POST", "/v1/reports/resolutions", body)
		}
		for _, c := range []struct {
			what   string
			user   int64
			body   string
			status int
			code   string
		}{
			{"by a user", 50, `{"targetType":"article","targetId":"1002","action":"dismiss"}`, 403, "FORBIDDEN"},
			{"without a token", 0, `{"targetType":"article","targetId":"1002","action":"dismiss"}`, 401, "UNAUTHENTICATED"},
			{"an unknown action", mod1, `{"targetType":"article","targetId":"1002","action":"ignore"}`, 400, "INVALID_ACTION"},
			{"a removal without a reason", mod1, `{"targetType":"article","targetId":"1002","action":"remove"}`, 400, "MISSING_REASON"},
			{"a reason over 500 characters", mod1, fmt.Sprintf(`{"targetType":"article","targetId":"1002","action":"remove","reason":"%s"}`,
				strings.Repeat("x", 501)), 400, "REASON_TOO_LONG"},
			{"no action", mod1, `{"targetType":"article","targetId":"1002"}`, 400, "MISSING_FIELD"},
			{"a target without reports", mod1, `{"targetType":"comment","targetId":"2002","action":"dismiss"}`, 404, "NO_OPEN_REPORTS"},
		} {
			t.Run(c.what, func(t *testing.T) { httpiotest.WantError(t, resolve(c.user, c.body), c.status, c.code) })
		}

		// A dismissal of the reports that hid article2 shows it again.
		evsBefore := len(events(t, db))
		r = resolve(mod1, `{"targetType":"article","targetId":"1002","action":"dismiss","reason":"satire"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		if strings.TrimSpace(r.Body) != `{"resolved":2}` {
			t.Errorf("dismiss: %s", r.Body)
		}
		evs := events(t, db)
		if len(evs) != evsBefore+1 {
			t.Fatalf("dismiss wrote %d events", len(evs)-evsBefore)
		}
		restored := payload[event.ArticleModeration](t, evs[len(evs)-1])
		if restored.Hidden != event.Visible || restored.RemovedReason != "" || restored.Action != event.ActionRestore || restored.ModeratorID != mod1 ||
			restored.Reason != "satire" || restored.ModerationVersion != 2 {
			t.Errorf("restore event %+v", restored)
		}
		httpiotest.WantError(t, resolve(mod1, `{"targetType":"article","targetId":"1002","action":"dismiss"}`), 404, "NO_OPEN_REPORTS")
		// Resolved, a reporter may report again.
		httpiotest.WantStatus(t, f.call(50, "POST", "/v1/reports", reportBody("article", article2, "spam", "")), http.StatusCreated)

		// A dismissal of a target that was not hidden changes nothing shown: a log entry, no event.
		evsBefore = len(events(t, db))
		httpiotest.WantStatus(t, resolve(mod1, `{"targetType":"comment","targetId":"2001","action":"dismiss"}`), http.StatusOK)
		if n := len(events(t, db)); n != evsBefore {
			t.Errorf("a dismissal of a shown comment wrote %d events", n-evsBefore)
		}

		// A removal hides the target with the mod1's reason.
		r = resolve(mod2, `{"targetType":"article","targetId":"1001","action":"remove","reason":"  adverts are not welcome "}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		evs = events(t, db)
		removed := payload[event.ArticleModeration](t, evs[len(evs)-1])
		want2 := event.ArticleModeration{ArticleID: article1, BoardID: board, WriterID: writer, Hidden: event.Removed, RemovedReason: "adverts are not welcome",
			Action: event.ActionRemove, Reason: "adverts are not welcome", ModeratorID: mod2, ModeratedAt: apijson.Time(f.clock.Now()), ModerationVersion: 1}
		if diff := cmp.Diff(want2, removed, timesEqual); diff != "" {
			t.Errorf("remove event (-want +got):\n%s", diff)
		}
		var q struct {
			Targets []struct{ TargetID string }
			Count   int
		}
		decode(t, f.call(mod1, "GET", "/v1/reports", ""), &q)
		if len(q.Targets) != 1 || q.Targets[0].TargetID != idStr(article2) || q.Count != 1 {
			t.Errorf("queue after the resolutions: %+v", q)
		}

		// The log: newest first, public, paged, and without reporters.
		r = f.call(0, "GET", "/v1/modlog?page=1&pageSize=3", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		var log []struct{ Action, TargetType, TargetID, ModeratorID, Reason, CreatedAt string }
		decode(t, r, &log)
		var actions []string
		for _, e := range log {
			actions = append(actions, e.Action+" "+e.TargetType+" "+e.TargetID+" by "+e.ModeratorID)
		}
		wantLog := []string{"remove article 1001 by 10", "dismiss comment 2001 by 9", "restore article 1002 by 9"}
		if diff := cmp.Diff(wantLog, actions); diff != "" {
			t.Errorf("log (-want +got):\n%s", diff)
		}
		var rest []map[string]any
		decode(t, f.call(0, "GET", "/v1/modlog?page=2&pageSize=3", ""), &rest)
		if len(rest) != 1 || rest[0]["action"] != "hide" {
			t.Errorf("log page 2: %v", rest)
		}
		body := f.call(0, "GET", "/v1/modlog?pageSize=100", "").Body
		if strings.Contains(body, `"50"`) || strings.Contains(body, `"51"`) {
			t.Errorf("the log names reporters: %s", body)
		}
		httpiotest.WantError(t, f.call(0, "GET", "/v1/modlog?page=0", ""), 400, "INVALID_PAGE")

		// Complete for moderators: each resolution with the reports it closed (not those made since).
		var full []struct {
			Action  string
			Reports []struct{ ReporterID, Reason, Text string }
		}
		decode(t, f.call(mod2, "GET", "/v1/modlog?page=1&pageSize=3", ""), &full)
		type closed = struct{ ReporterID, Reason, Text string }
		if len(full) != 3 || !slices.Equal(full[0].Reports, []closed{{"51", "off-topic", "why"}}) ||
			!slices.Equal(full[2].Reports, []closed{{"50", "spam", "why"}, {"51", "other", "why"}}) {
			t.Errorf("the log for moderators: %+v", full)
		}
	})
}

func jsonNumber(n int) any { return json.Number(strconv.Itoa(n)) }
