package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"board/internal/auth"
)

// The moderation service, faked as SPEC §3.9 says, and the pages of moderation tested on it.

type fakeReport struct {
	Reporter, Target   int64
	TargetType, Reason string
}

type fakeBan struct {
	Reason string
	Until  *time.Time
}

type fakeLogEntry struct {
	Action, TargetType, Reason string
	Target, Moderator, Article int64
	At                         time.Time
}

// moderation is the fake moderation service's data, under fakes.mu.
type moderation struct {
	reports []fakeReport
	bans    map[int64]fakeBan
	modlog  []fakeLogEntry // oldest first
}

// refuseBanned answers 403 BANNED, as every service does, when userID is banned; f.mu is held.
func (f *fakes) refuseBanned(w http.ResponseWriter, userID int64) bool {
	b, ok := f.bans[userID]
	if !ok {
		return false
	}
	var until any
	if b.Until != nil {
		until = wireTime(*b.Until)
	}
	writeJSON(w, http.StatusForbidden, map[string]any{"code": "BANNED", "message": "you are banned", "reason": b.Reason, "until": until})
	return true
}

// moderatorOf answers 401 or 403 itself unless r carries a moderator's token.
func (f *fakes) moderatorOf(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	p, ok := f.acting(w, r)
	if ok && p.Role != auth.RoleModerator {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "moderators only")
		return p, false
	}
	return p, ok
}

// logAction records a moderator's action; f.mu is held.
func (f *fakes) logAction(action, targetType string, target, article, moderator int64, reason string) {
	f.modlog = append(f.modlog, fakeLogEntry{Action: action, TargetType: targetType, Target: target, Article: article,
		Moderator: moderator, Reason: reason, At: today.Add(time.Duration(len(f.modlog)) * time.Minute)})
}

// commentByID finds a comment of any article; f.mu is held.
func (f *fakes) commentByID(n int64) *fakeComment {
	for _, cs := range f.comments {
		for i := range cs {
			if cs[i].ID == n {
				return &cs[i]
			}
		}
	}
	return nil
}

func (f *fakes) moderationMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/reports", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ TargetType, TargetID, Reason, Text string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			writeError(w, http.StatusBadRequest, "BAD_JSON", "bad json")
			return
		}
		target, _ := strconv64(in.TargetID)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.refuseBanned(w, p.UserID) {
			return
		}
		if in.Reason == "other" && in.Text == "" {
			writeError(w, http.StatusBadRequest, "MISSING_TEXT", "a report for reason other needs a text saying what is wrong")
			return
		}
		var writer int64
		switch in.TargetType {
		case "article":
			if a := f.source[target]; a != nil {
				writer = a.Writer
			}
		case "comment":
			if c := f.commentByID(target); c != nil {
				writer = c.Writer
			}
		}
		switch {
		case writer == 0:
			writeError(w, http.StatusNotFound, "TARGET_NOT_FOUND", "nothing to report there")
		case writer == p.UserID:
			writeError(w, http.StatusBadRequest, "OWN_CONTENT", "you cannot report what you wrote")
		case slices.ContainsFunc(f.reports, func(x fakeReport) bool { return x.Reporter == p.UserID && x.Target == target }):
			writeError(w, http.StatusConflict, "REPORT_EXISTS", "you reported this already")
		default:
			f.reports = append(f.reports, fakeReport{p.UserID, target, in.TargetType, in.Reason})
			writeJSON(w, http.StatusCreated, map[string]any{"reportId": "1", "targetType": in.TargetType, "targetId": in.TargetID})
		}
	})
	mux.HandleFunc("GET /v1/reports", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.moderatorOf(w, r); !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		var order []int64
		byTarget := map[int64][]fakeReport{}
		for _, rep := range f.reports {
			if byTarget[rep.Target] == nil {
				order = append(order, rep.Target)
			}
			byTarget[rep.Target] = append(byTarget[rep.Target], rep)
		}
		targets := []map[string]any{}
		for _, t := range order {
			reps := byTarget[t]
			reasons := map[string]int{}
			for _, rep := range reps {
				reasons[rep.Reason]++
			}
			m := map[string]any{"targetType": reps[0].TargetType, "targetId": wireID(t), "reportCount": len(reps), "reasons": reasons,
				"firstReportedAt": wireTime(t0), "hidden": ""}
			if reps[0].TargetType == "article" {
				a := f.source[t]
				m["boardId"], m["articleId"], m["excerpt"], m["writerId"], m["hidden"] = wireID(a.Board), wireID(a.ID), a.Title, wireID(a.Writer), a.Hidden
			} else {
				c := f.commentByID(t)
				m["boardId"], m["articleId"], m["excerpt"], m["writerId"], m["hidden"] = "1", wireID(c.Article), c.Content, wireID(c.Writer), c.Hidden
			}
			targets = append(targets, m)
		}
		writeJSON(w, http.StatusOK, map[string]any{"targets": targets, "count": len(targets)})
	})
	mux.HandleFunc("POST /v1/reports/resolutions", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.moderatorOf(w, r)
		if !ok {
			return
		}
		var in struct{ TargetType, TargetID, Action, Reason string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		target, _ := strconv64(in.TargetID)
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		f.reports = slices.DeleteFunc(f.reports, func(x fakeReport) bool {
			if x.Target == target {
				n++
				return true
			}
			return false
		})
		if in.Action == "remove" {
			if a := f.source[target]; in.TargetType == "article" && a != nil {
				a.Hidden, a.RemovedReason = "removed", in.Reason
				f.read[target].Hidden, f.read[target].RemovedReason = "removed", in.Reason
			}
		}
		f.logAction(in.Action, in.TargetType, target, target, p.UserID, in.Reason)
		writeJSON(w, http.StatusOK, map[string]any{"resolved": n})
	})
	for _, flag := range []string{"lock", "pin"} {
		for _, method := range []string{http.MethodPut, http.MethodDelete} {
			mux.HandleFunc(method+" /v1/articles/{articleId}/"+flag, func(w http.ResponseWriter, r *http.Request) {
				n, ok := pathID(w, r, "articleId")
				if !ok {
					return
				}
				p, ok := f.moderatorOf(w, r)
				if !ok {
					return
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				a := f.read[n]
				if a == nil {
					writeError(w, http.StatusNotFound, "ARTICLE_NOT_FOUND", "no such article")
					return
				}
				on := method == http.MethodPut
				if flag == "lock" {
					a.Locked, f.source[n].Locked = on, on
				} else {
					a.Pinned, f.source[n].Pinned = on, on
				}
				action := flag
				if !on {
					action = "un" + flag
				}
				f.logAction(action, "article", n, n, p.UserID, "")
				if on {
					writeJSON(w, http.StatusOK, map[string]any{"articleId": wireID(n)})
				} else {
					w.WriteHeader(http.StatusNoContent)
				}
			})
		}
	}
	mux.HandleFunc("GET /v1/bans/{userId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "userId")
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		b, ok := f.bans[n]
		if !ok {
			writeError(w, http.StatusNotFound, "BAN_NOT_FOUND", "not banned")
			return
		}
		var until any
		if b.Until != nil {
			until = wireTime(*b.Until)
		}
		writeJSON(w, http.StatusOK, map[string]any{"userId": wireID(n), "reason": b.Reason, "until": until, "moderatorId": "12",
			"createdAt": wireTime(today)})
	})
	mux.HandleFunc("PUT /v1/bans/{userId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "userId")
		if !ok {
			return
		}
		p, ok := f.moderatorOf(w, r)
		if !ok {
			return
		}
		var in struct {
			Reason string
			Until  *time.Time
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Reason == "" {
			writeError(w, http.StatusBadRequest, "MISSING_REASON", "a reason is required")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if u := f.users[n]; u != nil && u.Role == auth.RoleModerator {
			writeError(w, http.StatusForbidden, "FORBIDDEN", "a moderator cannot ban a moderator: take the role back first")
			return
		}
		f.bans[n] = fakeBan{Reason: in.Reason, Until: in.Until}
		f.logAction("ban", "user", n, 0, p.UserID, in.Reason)
		writeJSON(w, http.StatusOK, map[string]any{"userId": wireID(n), "reason": in.Reason})
	})
	mux.HandleFunc("DELETE /v1/bans/{userId}", func(w http.ResponseWriter, r *http.Request) {
		n, ok := pathID(w, r, "userId")
		if !ok {
			return
		}
		p, ok := f.moderatorOf(w, r)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.bans[n]; !ok {
			writeError(w, http.StatusNotFound, "BAN_NOT_FOUND", "not banned")
			return
		}
		delete(f.bans, n)
		f.logAction("unban", "user", n, 0, p.UserID, "")
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/modlog", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		page, _ := strconv64(q.Get("page"))
		size, _ := strconv64(q.Get("pageSize"))
		f.mu.Lock()
		defer f.mu.Unlock()
		list := []map[string]any{}
		for i := len(f.modlog) - 1 - int((page-1)*size); i >= 0 && int64(len(list)) < size; i-- {
			e := f.modlog[i]
			m := map[string]any{"action": e.Action, "targetType": e.TargetType, "targetId": wireID(e.Target),
				"moderatorId": wireID(e.Moderator), "reason": e.Reason, "createdAt": wireTime(e.At)}
			if e.Article != 0 {
				m["articleId"] = wireID(e.Article)
			}
			list = append(list, m)
		}
		writeJSON(w, http.StatusOK, list)
	})
	return mux
}

func strconv64(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

// writes is what service received other than reads, as "METHOD path".
func (f *fakes) writes(service string) []seen {
	var out []seen
	for _, s := range f.requests(service) {
		if s.Method != http.MethodGet {
			out = append(out, s)
		}
	}
	return out
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, body)
		}
	}
}

func mustNotContain(t *testing.T, what, body string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if strings.Contains(body, u) {
			t.Errorf("%s holds %q:\n%s", what, u, body)
		}
	}
}

// TestReportForms: a report button on others' articles and comments only, its outcome as a notice, and a report
// the service refuses shown on a form with the text kept.
func TestReportForms(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)

	// Article 1 is alice's, comment 100 on it is bob's and 101 hers.
	page := get(t, h, "/articles/1", alice).Body.String()
	mustContain(t, "alice's article page", page, `id="report-comment-100"`, `<option value="off-topic">`)
	mustNotContain(t, "alice's article page", page, `id="report-article-1"`, `id="report-comment-101"`)
	mustContain(t, "bob's article page seen by alice", get(t, h, "/articles/2", alice).Body.String(), `id="report-article-2"`,
		`action="/articles/2/report"`)
	mustNotContain(t, "a signed-out page", get(t, h, "/articles/2", "").Body.String(), `class="report"`)

	w := post(t, h, "/articles/2/report", url.Values{"targetType": {"article"}, "targetId": {"2"}, "reason": {"spam"}}, alice)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != "/articles/2?notice=reported" {
		t.Errorf("report: status %d to %q, want 303 to /articles/2?notice=reported", w.Code, loc)
	}
	reqs := f.writes("moderation")
	if len(reqs) != 1 || reqs[0].Path != "/v1/reports" || reqs[0].Auth != "Bearer "+alice ||
		!strings.Contains(reqs[0].Body, `"targetType":"article"`) || !strings.Contains(reqs[0].Body, `"targetId":"2"`) ||
		!strings.Contains(reqs[0].Body, `"reason":"spam"`) || strings.Contains(reqs[0].Body, `"text"`) {
		t.Errorf("the moderation service received %+v", reqs)
	}
	mustContain(t, "the page after reporting", get(t, h, "/articles/2?notice=reported", alice).Body.String(), "your report was sent")

	// The same again: already reported is done, not an error. The form's own article id is the one reported.
	w = post(t, h, "/articles/2/report", url.Values{"targetType": {"article"}, "targetId": {"1"}, "reason": {"abuse"}}, alice)
	if loc := w.Header().Get("Location"); loc != "/articles/2?notice=alreadyreported" {
		t.Errorf("a second report: status %d to %q, want /articles/2?notice=alreadyreported", w.Code, loc)
	}
	mustContain(t, "the page after reporting again", get(t, h, "/articles/2?notice=alreadyreported", alice).Body.String(),
		"You have reported this already")

	w = post(t, h, "/articles/1/report", url.Values{"targetType": {"comment"}, "targetId": {"100"}, "reason": {"other"},
		"text": {"Not what it says"}, "cpage": {"2"}}, alice)
	if loc := w.Header().Get("Location"); loc != "/articles/1?notice=reported&cpage=2#c-100" {
		t.Errorf("a comment's report: status %d to %q", w.Code, loc)
	}
	if reqs := f.writes("moderation"); !strings.Contains(reqs[len(reqs)-1].Body, `"text":"Not what it says"`) {
		t.Errorf("the report's text was not sent: %+v", reqs[len(reqs)-1])
	}

	// Refused: its reason on the form, with what was written kept.
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"own content", url.Values{"targetType": {"comment"}, "targetId": {"101"}, "reason": {"spam"}, "text": {"mine <b>"}},
			http.StatusBadRequest, "you cannot report what you wrote"},
		{"other without text", url.Values{"targetType": {"article"}, "reason": {"other"}}, http.StatusBadRequest, "needs a text"},
	} {
		w := post(t, h, "/articles/1/report", tc.form, f.token(t, 10, auth.RoleUser))
		body := w.Body.String()
		if w.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.status)
		}
		mustContain(t, tc.name, body, `id="form-error"`, tc.want, `<form id="report-form"`)
		if tc.form.Get("text") != "" {
			mustContain(t, tc.name, body, "mine &lt;b&gt;</textarea>", `<option value="spam" selected>`)
		}
	}
	if w := post(t, h, "/articles/1/report", url.Values{"targetType": {"comment"}, "targetId": {"999"}, "reason": {"spam"}}, alice); w.Code != http.StatusNotFound {
		t.Errorf("a missing comment: status %d, want 404", w.Code)
	}
	if w := post(t, h, "/articles/1/report", url.Values{"targetType": {"user"}, "reason": {"spam"}}, alice); w.Code != http.StatusBadRequest {
		t.Errorf("a bad target type: status %d, want 400", w.Code)
	}
	// Signed out: the text is kept, with a way to sign in.
	w = post(t, h, "/articles/2/report", url.Values{"targetType": {"article"}, "reason": {"other"}, "text": {"keep me"}}, "")
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "keep me</textarea>") {
		t.Errorf("signed out: status %d, want 401 with the text kept\n%s", w.Code, w.Body)
	}
}

// TestHiddenContent: a hidden article or comment shows its reason in its place; its writer and moderators see it
// too, marked.
func TestHiddenContent(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 2, Board: 1, Writer: 11, Title: "Second post", Content: "The real words.", Created: t0, Modified: t0,
		Hidden: "removed", RemovedReason: "Spam, removed <b>"})
	f.mu.Lock()
	f.comments[1][0].Hidden, f.comments[1][0].RemovedReason = "pending", "Reported by several readers"
	f.mu.Unlock()
	h := f.handler(t)

	for _, tc := range []struct {
		who   string
		token string
		sees  bool
	}{
		{"signed out", "", false},
		{"alice", f.token(t, 10, auth.RoleUser), false},
		{"bob, its writer", f.token(t, 11, auth.RoleUser), true},
		{"mia, a moderator", f.token(t, 12, auth.RoleModerator), true},
	} {
		t.Run(tc.who, func(t *testing.T) {
			body := get(t, h, "/articles/2", tc.token).Body.String()
			mustContain(t, "the page", body, `id="hidden-reason"`, "Removed by a moderator:", "Spam, removed &lt;b&gt;")
			if tc.sees {
				mustContain(t, "the page", body, `id="hidden-note"`, `class="content hidden-content"><p>The real words.</p>`,
					`<h1 id="article-title">Second post</h1>`)
			} else {
				mustNotContain(t, "the page", body, "The real words.", `id="article-content"`, "Second post")
			}
			// Comment 100 is bob's, hidden pending review.
			thread := get(t, h, "/articles/1", tc.token).Body.String()
			mustContain(t, "the thread", thread, "Hidden until a moderator looks at it:", "Reported by several readers")
			if shown := strings.Contains(thread, `<div class="comment-content hidden-content"><p>Nice post</p>`); shown != tc.sees {
				t.Errorf("the hidden comment shown: %v, want %v\n%s", shown, tc.sees, thread)
			}
		})
	}
	// The writer's and the moderator's reads carried their token to the article service.
	var authed int
	for _, s := range f.requests("article") {
		if s.Path == "/v1/articles/2" && s.Auth != "" {
			authed++
		}
	}
	if authed != 2 {
		t.Errorf("the article service was asked for the hidden article %d times with a token, want 2: %v", authed, f.requests("article"))
	}
}

// TestLockedAndPinned: a locked article says so and has no comment form but for moderators; the comment service's
// LOCKED is said on the form; a pinned article is marked on its board.
func TestLockedAndPinned(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 2, Board: 1, Writer: 11, Title: "Second post", Content: "Another one.", Created: t0, Modified: t0,
		Locked: true, Pinned: true})
	h := f.handler(t)
	alice, mia := f.token(t, 10, auth.RoleUser), f.token(t, 12, auth.RoleModerator)

	body := get(t, h, "/articles/2", alice).Body.String()
	mustContain(t, "a locked article", body, `id="locked"`, `id="article-locked"`, `id="article-pinned"`)
	mustNotContain(t, "a locked article", body, `id="comment-form"`, `class="reply"`)
	mustContain(t, "a locked article for a moderator", get(t, h, "/articles/2", mia).Body.String(), `id="comment-form"`, `id="locked"`)
	mustNotContain(t, "a locked article signed out", get(t, h, "/articles/2", "").Body.String(), "to comment.")

	w := post(t, h, "/articles/2/comments", url.Values{"content": {"Sent from an old tab"}}, alice)
	if w.Code != http.StatusForbidden {
		t.Errorf("a comment on a locked article: status %d, want 403", w.Code)
	}
	mustContain(t, "the refused comment", w.Body.String(), "This article is locked", "Sent from an old tab</textarea>")

	board := get(t, h, "/boards/1", alice).Body.String()
	mustContain(t, "the board", board, `<span class="badge pinned">Pinned</span> <a class="title" href="/articles/2">`)
	if strings.Count(board, "badge pinned") != 1 {
		t.Errorf("more than the pinned article is marked:\n%s", board)
	}
}

// TestModeratorButtons: lock and pin for moderators only, each one call to moderation and back with a notice.
func TestModeratorButtons(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice, mia := f.token(t, 10, auth.RoleUser), f.token(t, 12, auth.RoleModerator)

	mustNotContain(t, "alice's view", get(t, h, "/articles/1", alice).Body.String(), `id="moderate"`, `id="nav-reports"`)
	mustContain(t, "mia's view", get(t, h, "/articles/1", mia).Body.String(), `id="moderate"`, `action="/articles/1/lock"`,
		`action="/articles/1/pin"`, `id="nav-reports"`, `id="nav-modlog"`)

	for _, tc := range []struct{ form, method, path, notice string }{
		{"lock", "PUT", "/v1/articles/1/lock", "locked"},
		{"unlock", "DELETE", "/v1/articles/1/lock", "unlocked"},
		{"pin", "PUT", "/v1/articles/1/pin", "pinned"},
		{"unpin", "DELETE", "/v1/articles/1/pin", "unpinned"},
	} {
		before := len(f.writes("moderation"))
		w := post(t, h, "/articles/1/"+tc.form, nil, mia)
		if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != "/articles/1?notice="+tc.notice {
			t.Errorf("%s: status %d to %q", tc.form, w.Code, loc)
		}
		reqs := f.writes("moderation")[before:]
		if len(reqs) != 1 || reqs[0].Method != tc.method || reqs[0].Path != tc.path || reqs[0].Auth != "Bearer "+mia {
			t.Errorf("%s: moderation received %+v, want %s %s", tc.form, reqs, tc.method, tc.path)
		}
		if !strings.Contains(get(t, h, "/articles/1?notice="+tc.notice, mia).Body.String(), notices[tc.notice]) {
			t.Errorf("%s: the notice is not shown", tc.form)
		}
	}
	before := len(f.requests("moderation"))
	if w := post(t, h, "/articles/1/lock", nil, alice); w.Code != http.StatusForbidden {
		t.Errorf("alice locks: status %d, want 403", w.Code)
	}
	if w := post(t, h, "/articles/1/pin", nil, ""); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/signin") {
		t.Errorf("signed out pins: status %d to %q, want the sign-in page", w.Code, w.Header().Get("Location"))
	}
	if n := len(f.requests("moderation")) - before; n != 0 {
		t.Errorf("refused forms made %d calls to moderation", n)
	}
	// The service's refusal (the pin limit) is said.
	f.override("moderation", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusConflict, "PIN_LIMIT", "a board has at most 3 pinned articles")
	})
	w := post(t, h, "/articles/2/pin", nil, mia)
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "at most 3 pinned articles") {
		t.Errorf("over the pin limit: status %d\n%s", w.Code, w.Body)
	}
}

// TestQueue: the moderators' queue lists what was reported, and dismisses or removes it.
func TestQueue(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice, carol, mia := f.token(t, 10, auth.RoleUser), f.token(t, 13, auth.RoleUser), f.token(t, 12, auth.RoleModerator)
	post(t, h, "/articles/2/report", url.Values{"targetType": {"article"}, "reason": {"spam"}}, alice)
	post(t, h, "/articles/2/report", url.Values{"targetType": {"article"}, "reason": {"off-topic"}}, carol)
	post(t, h, "/articles/1/report", url.Values{"targetType": {"comment"}, "targetId": {"100"}, "reason": {"abuse"}}, alice)

	if w := get(t, h, "/moderation/reports", alice); w.Code != http.StatusForbidden {
		t.Errorf("alice opens the queue: status %d, want 403", w.Code)
	}
	if w := get(t, h, "/moderation/reports", ""); w.Code != http.StatusSeeOther {
		t.Errorf("signed out: status %d, want 303 to sign in", w.Code)
	}
	w := get(t, h, "/moderation/reports", mia)
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("mia opens the queue: status %d\n%s", w.Code, body)
	}
	mustContain(t, "the queue", body, `id="r-article-2"`, `href="/articles/2">Second post</a>`, `<span class="writer">bob</span>`,
		`<strong class="report-count">2</strong> reports`, "Spam 1 · Off-topic 1", `id="r-comment-100"`, `href="/articles/1#c-100"`,
		"Abuse or harassment 1", `id="remove-reason-article-2"`)
	if q := f.requests("moderation"); q[len(q)-1].Auth != "Bearer "+mia {
		t.Errorf("the queue was read without mia's token: %+v", q[len(q)-1])
	}

	if w := post(t, h, "/moderation/reports/resolve", url.Values{"targetType": {"article"}, "targetId": {"2"}, "action": {"remove"}}, mia); w.Code != http.StatusBadRequest {
		t.Errorf("a removal without a reason: status %d, want 400", w.Code)
	}
	if w := post(t, h, "/moderation/reports/resolve", url.Values{"targetType": {"article"}, "targetId": {"2"}, "action": {"remove"}, "reason": {"x"}}, alice); w.Code != http.StatusForbidden {
		t.Errorf("alice removes: status %d, want 403", w.Code)
	}
	w = post(t, h, "/moderation/reports/resolve", url.Values{"targetType": {"article"}, "targetId": {"2"}, "action": {"remove"},
		"reason": {" Spam "}, "page": {"1"}}, mia)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != "/moderation/reports?notice=removed" {
		t.Errorf("remove: status %d to %q", w.Code, loc)
	}
	reqs := f.writes("moderation")
	if last := reqs[len(reqs)-1]; last.Path != "/v1/reports/resolutions" || !strings.Contains(last.Body, `"action":"remove"`) ||
		!strings.Contains(last.Body, `"reason":"Spam"`) || !strings.Contains(last.Body, `"targetId":"2"`) {
		t.Errorf("the removal sent %+v", last)
	}
	w = post(t, h, "/moderation/reports/resolve", url.Values{"targetType": {"comment"}, "targetId": {"100"}, "action": {"dismiss"}}, mia)
	if loc := w.Header().Get("Location"); loc != "/moderation/reports?notice=dismissed" {
		t.Errorf("dismiss: status %d to %q", w.Code, loc)
	}
	body = get(t, h, "/moderation/reports?notice=dismissed", mia).Body.String()
	mustContain(t, "the empty queue", body, `id="empty"`, "The reports were dismissed.")
	mustContain(t, "the removed article", get(t, h, "/articles/2", "").Body.String(), "Removed by a moderator:", "Spam")
}

// TestUserPage: a user's name and ban, with ban and unban for moderators.
func TestUserPage(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice, mia := f.token(t, 10, auth.RoleUser), f.token(t, 12, auth.RoleModerator)

	body := get(t, h, "/users/11", alice).Body.String()
	mustContain(t, "bob's page", body, `<h1 id="user-name">bob</h1>`, `id="not-banned"`)
	mustNotContain(t, "bob's page for alice", body, `id="ban-form"`)
	mustContain(t, "bob's page for mia", get(t, h, "/users/11", mia).Body.String(), `id="ban-form"`, `<option value="forever">`)
	mustNotContain(t, "mia's own page", get(t, h, "/users/12", mia).Body.String(), `id="ban-form"`)
	mustContain(t, "mia's page", get(t, h, "/users/12", "").Body.String(), `id="user-moderator"`)
	// Another moderator's page has no ban form, and says why; a ban sent all the same says the service's reason.
	f.mu.Lock()
	f.users[14] = &fakeUser{ID: 14, Name: "max", Role: auth.RoleModerator}
	f.mu.Unlock()
	body = get(t, h, "/users/14", mia).Body.String()
	mustContain(t, "another moderator's page", body, `id="no-ban"`)
	mustNotContain(t, "another moderator's page", body, `id="ban-form"`)
	if w := post(t, h, "/users/14/ban", url.Values{"reason": {"x"}, "duration": {"1d"}}, mia); w.Code != http.StatusForbidden ||
		!strings.Contains(w.Body.String(), "a moderator cannot ban a moderator") {
		t.Errorf("a moderator bans a moderator: status %d\n%s", w.Code, w.Body)
	}
	mustContain(t, "the article page links its writer", get(t, h, "/articles/1", "").Body.String(), `<a class="user" href="/users/10">`)

	if w := post(t, h, "/users/11/ban", url.Values{"reason": {"Spam"}, "duration": {"7d"}}, alice); w.Code != http.StatusForbidden {
		t.Errorf("alice bans: status %d, want 403", w.Code)
	}
	if w := post(t, h, "/users/11/ban", url.Values{"reason": {"Spam"}, "duration": {"1y"}}, mia); w.Code != http.StatusBadRequest {
		t.Errorf("a ban of a length not offered: status %d, want 400", w.Code)
	}
	if w := post(t, h, "/users/11/ban", url.Values{"reason": {"  "}, "duration": {"1d"}}, mia); w.Code != http.StatusBadRequest {
		t.Errorf("a ban without a reason: status %d, want 400", w.Code)
	}
	w := post(t, h, "/users/11/ban", url.Values{"reason": {"Spam links"}, "duration": {"7d"}}, mia)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || loc != "/users/11?notice=banned" {
		t.Errorf("ban: status %d to %q", w.Code, loc)
	}
	reqs := f.writes("moderation")
	if last := reqs[len(reqs)-1]; last.Method != "PUT" || last.Path != "/v1/bans/11" ||
		!strings.Contains(last.Body, `"until":"2026-11-29T12:00:00.000Z"`) || !strings.Contains(last.Body, `"reason":"Spam links"`) {
		t.Errorf("the ban sent %+v", last)
	}
	body = get(t, h, "/users/11?notice=banned", mia).Body.String()
	mustContain(t, "bob's page banned", body, "The user is banned.", `id="ban"`, `Banned until <time datetime="2026-11-29T12:00:00.000Z">29 Nov 2026 12:00 UTC</time>: Spam links`,
		`id="unban-form"`, "Change the ban")

	post(t, h, "/users/11/ban", url.Values{"reason": {"For good"}, "duration": {"forever"}}, mia)
	if last := f.writes("moderation"); strings.Contains(last[len(last)-1].Body, "until") {
		t.Errorf("a ban for good sent an end: %+v", last[len(last)-1])
	}
	mustContain(t, "bob's page banned for good", get(t, h, "/users/11", "").Body.String(), "Banned for good: For good")

	w = post(t, h, "/users/11/unban", nil, mia)
	if loc := w.Header().Get("Location"); loc != "/users/11?notice=unbanned" {
		t.Errorf("unban: status %d to %q", w.Code, loc)
	}
	mustContain(t, "bob's page unbanned", get(t, h, "/users/11", "").Body.String(), `id="not-banned"`)
	// Lifting a ban that is gone is done.
	if w := post(t, h, "/users/11/unban", nil, mia); w.Code != http.StatusSeeOther {
		t.Errorf("a second unban: status %d, want 303", w.Code)
	}

	for _, target := range []string{"/users/999", "/users/abc", "/users/-1"} {
		if w := get(t, h, target, ""); w.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", target, w.Code)
		}
	}
	// Without moderation the page is shown, the ban unknown.
	f.override("moderation", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "down")
	})
	if w := get(t, h, "/users/11", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="ban-unknown"`) {
		t.Errorf("moderation down: status %d\n%s", w.Code, w.Body)
	}
}

// TestModlog: the log, newest first, paged, with links to what was acted on.
func TestModlog(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	mia := f.token(t, 12, auth.RoleModerator)
	post(t, h, "/articles/1/lock", nil, mia)
	post(t, h, "/users/11/ban", url.Values{"reason": {"Spam <i>links</i>"}, "duration": {"forever"}}, mia)
	f.mu.Lock()
	f.logAction("hide", "comment", 100, 1, 0, "Reported by several readers")
	f.mu.Unlock()

	body := get(t, h, "/modlog", "").Body.String()
	mustContain(t, "the log", body, `<a class="user log-moderator" href="/users/12">mia</a>`, `<span class="log-action">locked</span>`,
		`<a class="log-target" href="/articles/1">article 1</a>`, `<a class="log-target" href="/users/11">bob</a>`,
		"Spam &lt;i&gt;links&lt;/i&gt;", `<span class="log-moderator">Reports</span>`, `href="/articles/1#c-100"`)
	if hide, lock := strings.Index(body, `data-action="hide"`), strings.Index(body, `data-action="lock"`); hide < 0 || lock < hide {
		t.Errorf("the log is not newest first:\n%s", body)
	}
	mustNotContain(t, "one page of log", body, `id="next-page"`, `id="prev-page"`)

	f.mu.Lock()
	for i := range 60 {
		f.logAction("pin", "article", int64(1000+i), int64(1000+i), 12, "")
	}
	f.mu.Unlock()
	body = get(t, h, "/modlog", "").Body.String()
	if n := strings.Count(body, `class="log-entry"`); n != logSize {
		t.Errorf("page 1 has %d entries, want %d", n, logSize)
	}
	mustContain(t, "page 1 of 63 entries", body, `<a id="next-page" href="/modlog?page=2"`)
	body = get(t, h, "/modlog?page=2", "").Body.String()
	mustContain(t, "page 2", body, `<a id="prev-page" href="/modlog?page=1"`, `data-action="lock"`)
	mustNotContain(t, "page 2", body, `id="next-page"`)
	if w := get(t, h, "/modlog?page=0", ""); w.Code != http.StatusBadRequest {
		t.Errorf("page 0: status %d, want 400", w.Code)
	}
}

// TestBanned: a banned reader's writes and sign-in say the ban, its end and reason.
func TestBanned(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	until := today.Add(48 * time.Hour)
	f.mu.Lock()
	f.bans[11] = fakeBan{Reason: "Spam <links>", Until: &until}
	f.mu.Unlock()
	h := f.handler(t)
	bob := f.token(t, 11, auth.RoleUser)
	const said = "You are banned until 24 Nov 2026 12:00 UTC: Spam &lt;links&gt;."

	w := post(t, h, "/articles/1/comments", url.Values{"content": {"Still here"}}, bob)
	if w.Code != http.StatusForbidden {
		t.Errorf("a banned comment: status %d, want 403", w.Code)
	}
	mustContain(t, "a banned comment", w.Body.String(), said, "Still here</textarea>")

	w = post(t, h, "/articles/2/report", url.Values{"targetType": {"article"}, "reason": {"spam"}}, bob)
	if w.Code != http.StatusForbidden {
		t.Errorf("a banned report: status %d, want 403", w.Code)
	}
	mustContain(t, "a banned report", w.Body.String(), said)

	w = post(t, h, "/signin", url.Values{"username": {"bob"}, "password": {"battery staple"}}, "")
	if w.Code != http.StatusForbidden || sessionCookieOf(w) != nil {
		t.Errorf("a banned sign-in: status %d, cookie %v; want 403 and none", w.Code, sessionCookieOf(w))
	}
	mustContain(t, "a banned sign-in", w.Body.String(), said, `<form id="signin"`)

	f.mu.Lock()
	f.bans[11] = fakeBan{Reason: "Gone"}
	f.mu.Unlock()
	f.override("like", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, map[string]any{"code": "BANNED", "message": "banned", "reason": "Gone", "until": nil})
	})
	w = post(t, h, "/articles/1/like", nil, bob)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "You are banned for good: Gone.") {
		t.Errorf("a banned like: status %d\n%s", w.Code, w.Body)
	}
}
