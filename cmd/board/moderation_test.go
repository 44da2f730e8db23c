package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"board/internal/auth"
)

// moderated is what the tests read of an article's moderation state, from article-read or the article service.
type moderated struct {
	ArticleID, Title, Content, Hidden, RemovedReason string
	Locked, Pinned                                   bool
}

// grant runs `board user grant` beside a program, as an operator would, and signs the user in again.
func grant(t *testing.T, p *program, name, role string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{"user", "grant", "--username", name, "--role", role, "--kafka-brokers", strings.Join(p.logs.kafkaAddrs(), ",")},
		engineArgs(p.flags)...)
	if err := run(context.Background(), args, noEnv, &out, &errOut); err != nil {
		t.Fatalf("board user grant: %v\n%s", err, errOut.String())
	}
	return signIn(t, p, name)
}

// writeArticle writes an article as the token's user and returns its id.
func writeArticle(t *testing.T, p *program, token string, board int, title string) string {
	t.Helper()
	a := sendAs(t, bearer(token), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": title, "content": title + " content", "boardId": board})
	var art articleOut
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &art) != nil {
		t.Fatalf("write %q: %d %s", title, a.status, a.body)
	}
	return art.ArticleID
}

// getAs reads url with the token (none when ""), and decodes a 200 answer into out.
func getAs(t *testing.T, token, url string, out any) authAnswer {
	t.Helper()
	auth := ""
	if token != "" {
		auth = bearer(token)
	}
	a := sendAs(t, auth, "GET", url, nil)
	if a.status == http.StatusOK && out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			t.Fatalf("GET %s: %s: %v", url, a.body, err)
		}
	}
	return a
}

// The moderation flow through the running services: reports and their bad inputs, the hide at the threshold, the
// queue, a removal and what each reader then sees, the log without reporters, locks, pins and their limit, and a
// deleted article's reports gone.
func TestModerationFlow(t *testing.T) {
	t.Parallel()
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--report-threshold", "2"))
	alice, aliceToken := signUp(t, p, "alice")
	bob, bobToken := signUp(t, p, "bob")
	_, carolToken := signUp(t, p, "carol")
	signUp(t, p, "mod")
	modToken := grant(t, p, "mod", "moderator")
	const board = 5
	spam := writeArticle(t, p, aliceToken, board, "buy cheap watches")
	kept := writeArticle(t, p, aliceToken, board, "a fine article")
	mod := p.urls["moderation"]

	report := func(token, targetType, target, reason, text string) authAnswer {
		return sendAs(t, bearer(token), "POST", mod+"/v1/reports",
			map[string]any{"targetType": targetType, "targetId": target, "reason": reason, "text": text})
	}
	if a := report(bobToken, "article", spam, "spam", ""); a.status != http.StatusCreated {
		t.Fatalf("bob reports: %d %s", a.status, a.body)
	}
	bad := []struct {
		what       string
		answer     authAnswer
		status     int
		code       string
		anyCodeFor bool
	}{
		{what: "the same report again", answer: report(bobToken, "article", spam, "abuse", ""), status: 409, code: "REPORT_EXISTS"},
		{what: "a report of one's own article", answer: report(aliceToken, "article", spam, "spam", ""), status: 400, code: "OWN_CONTENT"},
		{what: "a report of a missing article", answer: report(bobToken, "article", "12345", "spam", ""), status: 404, code: "TARGET_NOT_FOUND"},
		{what: "a report of a missing comment", answer: report(bobToken, "comment", "12345", "spam", ""), status: 404, code: "TARGET_NOT_FOUND"},
		{what: "an unknown reason", answer: report(carolToken, "article", kept, "boring", ""), status: 400, anyCodeFor: true},
		{what: "an unknown target type", answer: report(carolToken, "user", kept, "spam", ""), status: 400, anyCodeFor: true},
		{what: "a reason's text over 500 characters", answer: report(carolToken, "article", kept, "other", strings.Repeat("가", 501)), status: 400, anyCodeFor: true},
		{what: "a report without a token", answer: sendAs(t, "", "POST", mod+"/v1/reports", map[string]any{"targetType": "article", "targetId": kept, "reason": "spam"}), status: 401, code: "UNAUTHENTICATED"},
		{what: "the queue for a user", answer: sendAs(t, bearer(bobToken), "GET", mod+"/v1/reports", nil), status: 403, code: "FORBIDDEN"},
		{what: "the queue without a token", answer: sendAs(t, "", "GET", mod+"/v1/reports", nil), status: 401, code: "UNAUTHENTICATED"},
		{what: "a lock by a user", answer: sendAs(t, bearer(bobToken), "PUT", mod+"/v1/articles/"+kept+"/lock", nil), status: 403, code: "FORBIDDEN"},
		{what: "a ban by a user", answer: sendAs(t, bearer(bobToken), "PUT", mod+"/v1/bans/"+strconv.FormatInt(alice, 10), map[string]any{"reason": "x"}), status: 403, code: "FORBIDDEN"},
		{what: "a ban that ended already", answer: sendAs(t, bearer(modToken), "PUT", mod+"/v1/bans/"+strconv.FormatInt(alice, 10),
			map[string]any{"reason": "x", "until": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}), status: 400, anyCodeFor: true},
	}
	for _, b := range bad {
		var e struct{ Code, Message string }
		_ = json.Unmarshal(b.answer.body, &e)
		if b.answer.status != b.status || e.Message == "" || !b.anyCodeFor && e.Code != b.code || e.Code == "" {
			t.Errorf("%s: %d %s, want %d %s with a message", b.what, b.answer.status, b.answer.body, b.status, b.code)
		}
	}

	// The second distinct report hides the article at once, pending review: article-read drops it from the board
	// and shows the reason in place of it; its writer still reads it from the article service.
	if a := report(carolToken, "article", spam, "other", "it is an advert"); a.status != http.StatusCreated {
		t.Fatalf("carol reports: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		var m moderated
		getAs(t, "", p.urls["article-read"]+"/v1/articles/"+spam, &m)
		if m.Hidden != "pending" || m.Content != "" || m.RemovedReason == "" {
			return fmt.Sprintf("article-read shows the reported article as %+v, want it hidden pending review", m)
		}
		var page struct{ Articles []moderated }
		getAs(t, "", fmt.Sprintf("%s/v1/articles?boardId=%d&page=1&pageSize=10", p.urls["article-read"], board), &page)
		for _, a := range page.Articles {
			if a.ArticleID == spam {
				return "the hidden article is still listed"
			}
		}
		return ""
	})
	// The article service learns it from the moderation topic by a consumer of its own, which may be behind
	// article-read's.
	eventually(t, func() string {
		var own, public moderated
		getAs(t, aliceToken, p.urls["article"]+"/v1/articles/"+spam, &own)
		getAs(t, "", p.urls["article"]+"/v1/articles/"+spam, &public)
		if own.Content == "" || own.Hidden != "pending" || public.Content != "" || public.RemovedReason == "" {
			return fmt.Sprintf("the article service shows its writer %+v and the public %+v", own, public)
		}
		return ""
	})

	// The queue lists it with its two reports; a removal resolves both.
	var queue struct {
		Targets []struct {
			TargetType, TargetID, WriterID, Excerpt string
			ReportCount                             int
			Reasons                                 map[string]int
		}
		Count int
	}
	if a := getAs(t, modToken, mod+"/v1/reports?page=1&pageSize=10", &queue); a.status != http.StatusOK || len(queue.Targets) != 1 ||
		queue.Targets[0].TargetID != spam || queue.Targets[0].ReportCount != 2 || queue.Targets[0].Reasons["spam"] != 1 || queue.Targets[0].Reasons["other"] != 1 {
		t.Errorf("the queue: %d %s", a.status, a.body)
	}
	a := sendAs(t, bearer(modToken), "POST", mod+"/v1/reports/resolutions",
		map[string]any{"targetType": "article", "targetId": spam, "action": "remove", "reason": "adverts are not welcome"})
	var resolved struct{ Resolved int }
	if a.status != http.StatusOK || json.Unmarshal(a.body, &resolved) != nil || resolved.Resolved != 2 {
		t.Errorf("remove: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		var m moderated
		getAs(t, "", p.urls["article-read"]+"/v1/articles/"+spam, &m)
		if m.Hidden != "removed" || m.RemovedReason != "adverts are not welcome" || m.Content != "" {
			return fmt.Sprintf("article-read shows the removed article as %+v", m)
		}
		return ""
	})
	if a := getAs(t, modToken, mod+"/v1/reports", &queue); a.status != http.StatusOK || len(queue.Targets) != 0 {
		t.Errorf("the queue after the removal: %d %s", a.status, a.body)
	}

	// The log is public, newest first, and never names a reporter.
	var log []struct{ Action, TargetType, TargetID, ModeratorID, Reason string }
	la := getAs(t, "", mod+"/v1/modlog?page=1&pageSize=10", &log)
	if la.status != http.StatusOK || len(log) != 2 || log[0].Action != "remove" || log[0].TargetID != spam || log[1].Action != "hide" {
		t.Errorf("the log: %d %s", la.status, la.body)
	}
	if id := strconv.FormatInt(bob, 10); bytes.Contains(la.body, []byte(id)) {
		t.Errorf("the public log names reporter %s: %s", id, la.body)
	}
	// Moderators see it complete: who reported what the removal closed.
	var full []struct {
		Action  string
		Reports []struct{ ReporterID, Reason string }
	}
	if a := getAs(t, modToken, mod+"/v1/modlog?page=1&pageSize=10", &full); a.status != http.StatusOK || len(full) != 2 ||
		len(full[0].Reports) != 2 || full[0].Reports[0].ReporterID != strconv.FormatInt(bob, 10) || full[0].Reports[0].Reason != "spam" {
		t.Errorf("the log for moderators: %d %s", a.status, a.body)
	}

	// A lock keeps new comments out, on both comment versions, until it is lifted.
	if a := sendAs(t, bearer(modToken), "PUT", mod+"/v1/articles/"+kept+"/lock", nil); a.status != http.StatusOK {
		t.Fatalf("lock: %d %s", a.status, a.body)
	}
	for _, path := range []string{"/v1/comments", "/v2/comments"} {
		eventually(t, func() string {
			if a := sendAs(t, bearer(bobToken), "POST", p.urls["comment"]+path, map[string]any{"articleId": kept, "content": "hi"}); a.status != http.StatusForbidden || a.code() != "LOCKED" {
				return fmt.Sprintf("a comment (%s) on a locked article: %d %s", path, a.status, a.body)
			}
			return ""
		})
	}
	if a := sendAs(t, bearer(modToken), "DELETE", mod+"/v1/articles/"+kept+"/lock", nil); a.status != http.StatusNoContent {
		t.Fatalf("unlock: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		if a := sendAs(t, bearer(bobToken), "POST", p.urls["comment"]+"/v2/comments", map[string]any{"articleId": kept, "content": "hi"}); a.status != http.StatusCreated {
			return fmt.Sprintf("a comment after the unlock: %d %s", a.status, a.body)
		}
		return ""
	})

	// Pins: the pinned article comes first on page 1, marked; three per board, the fourth is refused.
	older := writeArticle(t, p, aliceToken, board, "an older article")
	writeArticle(t, p, aliceToken, board, "the newest article")
	if a := sendAs(t, bearer(modToken), "PUT", mod+"/v1/articles/"+older+"/pin", nil); a.status != http.StatusOK {
		t.Fatalf("pin: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		var page struct{ Articles []moderated }
		getAs(t, "", fmt.Sprintf("%s/v1/articles?boardId=%d&page=1&pageSize=10", p.urls["article-read"], board), &page)
		if len(page.Articles) == 0 || page.Articles[0].ArticleID != older || !page.Articles[0].Pinned {
			return fmt.Sprintf("page 1 is %+v, want the pinned article first", page.Articles)
		}
		return ""
	})
	for i := range 2 {
		id := writeArticle(t, p, aliceToken, board, "pinned "+strconv.Itoa(i))
		if a := sendAs(t, bearer(modToken), "PUT", mod+"/v1/articles/"+id+"/pin", nil); a.status != http.StatusOK {
			t.Fatalf("pin %d: %d %s", i, a.status, a.body)
		}
	}
	if a := sendAs(t, bearer(modToken), "PUT", mod+"/v1/articles/"+kept+"/pin", nil); a.status != http.StatusConflict || a.code() != "PIN_LIMIT" {
		t.Errorf("a fourth pin: %d %s", a.status, a.body)
	}

	// A deleted article's reports go with it.
	if a := report(bobToken, "article", kept, "off-topic", ""); a.status != http.StatusCreated {
		t.Fatalf("report: %d %s", a.status, a.body)
	}
	if a := sendAs(t, bearer(aliceToken), "DELETE", p.urls["article"]+"/v1/articles/"+kept, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		if a := getAs(t, modToken, mod+"/v1/reports", &queue); a.status != http.StatusOK || len(queue.Targets) != 0 {
			return fmt.Sprintf("the queue after the article's delete: %d %s", a.status, a.body)
		}
		return ""
	})
}

// A ban made through one instance refuses the user's writes and sign-in on another, without waiting for their token
// to expire; an unban lets them in again; a role taken back with `board user grant` ends moderator powers of a token
// that still claims them. How long each took to arrive is logged, not asserted (the machine is shared).
func TestBanAndRoleReachEveryInstance(t *testing.T) {
	t.Parallel()
	first := startProgram(t, testFlags(t, t.TempDir()))
	second := secondInstance(t, first)
	alice, aliceToken := signUp(t, first, "alice")
	signUp(t, first, "mod")
	modToken := grant(t, first, "mod", "moderator")
	writeArticle(t, second, aliceToken, 3, "before the ban")
	aliceID := strconv.FormatInt(alice, 10)

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	a := sendAs(t, bearer(modToken), "PUT", first.urls["moderation"]+"/v1/bans/"+aliceID,
		map[string]any{"reason": "flooding", "until": until.Format(time.RFC3339)})
	if a.status != http.StatusOK {
		t.Fatalf("ban: %d %s", a.status, a.body)
	}
	banned := time.Now()
	eventually(t, func() string {
		a := sendAs(t, bearer(aliceToken), "POST", second.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3})
		var e struct{ Code, Message, Reason, Until string }
		_ = json.Unmarshal(a.body, &e)
		if a.status != http.StatusForbidden || e.Code != "BANNED" || e.Reason != "flooding" || e.Until == "" {
			return fmt.Sprintf("a banned user's write on the other instance: %d %s", a.status, a.body)
		}
		if got, err := time.Parse(time.RFC3339, e.Until); err != nil || !got.Equal(until) {
			return fmt.Sprintf("the ban's end is %q, want %s", e.Until, until)
		}
		return ""
	})
	t.Logf("the ban refused writes on the other instance %v after it was made", time.Since(banned).Round(time.Millisecond))
	for _, w := range []struct{ service, path string }{{"comment", "/v2/comments"}, {"like", "/v1/article-likes/articles/1/users/" + aliceID}} {
		if a := sendAs(t, bearer(aliceToken), "POST", second.urls[w.service]+w.path, map[string]any{"articleId": "1", "content": "c"}); a.status != http.StatusForbidden || a.code() != "BANNED" {
			t.Errorf("a banned user's write to %s: %d %s", w.service, a.status, a.body)
		}
	}
	if a := sendAs(t, "", "POST", second.urls["user"]+"/v1/tokens", map[string]any{"username": "alice", "password": "alice-password"}); a.status != http.StatusForbidden || a.code() != "BANNED" {
		t.Errorf("a banned user's sign-in: %d %s", a.status, a.body)
	}
	var ban struct{ UserID, Reason, Until string }
	if a := getAs(t, "", second.urls["moderation"]+"/v1/bans/"+aliceID, &ban); a.status != http.StatusOK || ban.Reason != "flooding" {
		t.Errorf("the ban, read by anyone: %d %s", a.status, a.body)
	}

	if a := sendAs(t, bearer(modToken), "DELETE", second.urls["moderation"]+"/v1/bans/"+aliceID, nil); a.status != http.StatusNoContent {
		t.Fatalf("unban: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		a := sendAs(t, bearer(aliceToken), "POST", first.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 3})
		if a.status != http.StatusCreated {
			return fmt.Sprintf("an unbanned user's write: %d %s", a.status, a.body)
		}
		return ""
	})

	// The moderator's token still says moderator once the role is taken back; neither instance believes it.
	grant(t, first, "mod", "user")
	demoted := time.Now()
	for _, p := range []*program{first, second} {
		eventually(t, func() string {
			if a := sendAs(t, bearer(modToken), "GET", p.urls["moderation"]+"/v1/reports", nil); a.status != http.StatusForbidden {
				return fmt.Sprintf("a demoted moderator's old token reads the queue: %d %s", a.status, a.body)
			}
			return ""
		})
	}
	t.Logf("the role change reached both instances %v after the command", time.Since(demoted).Round(time.Millisecond))
}

// Reports and a ban acknowledged before a SIGKILL are there after the restart: every acknowledged report is in the
// queue, and the ban, whose event may not have left the outbox when the process died, reaches the services' guards.
func TestModerationSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	args := allServicesArgs(t, "--report-threshold", "1000")
	p := startProcess(t, args...)
	var art articleOut
	call(t, "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "writerId": 1, "boardId": 1},
		http.StatusCreated, &art)
	a := sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": "dave", "password": "dave-password"})
	var dave struct{ UserID string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &dave) != nil {
		t.Fatalf("sign up: %d %s", a.status, a.body)
	}
	m, _ := minters.Load(strings.TrimPrefix(p.urls["article"], "http://"))
	mint := func(id int64, role auth.Role) string {
		return m.(*minter).token(t, auth.Principal{UserID: id, Role: role})
	}
	modToken := mint(testModerator.UserID, auth.RoleModerator)
	if a := sendAs(t, bearer(modToken), "PUT", p.urls["moderation"]+"/v1/bans/"+dave.UserID, map[string]any{"reason": "flooding"}); a.status != http.StatusOK {
		t.Fatalf("ban: %d %s", a.status, a.body)
	}

	// Reporters, each once, until the process dies under them.
	var next, acked atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				reporter := 1000 + next.Add(1)
				req := jsonRequest(t, "POST", p.urls["moderation"]+"/v1/reports", map[string]any{"targetType": "article", "targetId": art.ArticleID, "reason": "spam"})
				req.Header.Set("Authorization", bearer(mint(reporter, auth.RoleUser)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // killed
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					return
				}
				acked.Add(1)
			}
		})
	}
	for acked.Load() < 100 {
		time.Sleep(time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait()
	wg.Wait()
	waitGone(t, p.redisPid)

	p = startProcess(t, args...)
	var queue struct {
		Targets []struct {
			TargetID    string
			ReportCount int64
		}
	}
	getAs(t, modToken, p.urls["moderation"]+"/v1/reports", &queue)
	if len(queue.Targets) != 1 || queue.Targets[0].ReportCount < acked.Load() || queue.Targets[0].ReportCount > next.Load() {
		t.Fatalf("after the restart the queue holds %+v; %d reports were acknowledged, %d sent", queue.Targets, acked.Load(), next.Load())
	}
	t.Logf("%d reports acknowledged, %d sent, %d in the queue after the restart", acked.Load(), next.Load(), queue.Targets[0].ReportCount)
	daveID, _ := strconv.ParseInt(dave.UserID, 10, 64)
	daveToken := mint(daveID, auth.RoleUser)
	eventually(t, func() string {
		a := sendAs(t, bearer(daveToken), "POST", p.urls["article"]+"/v1/articles", map[string]any{"title": "t", "content": "c", "boardId": 1})
		if a.code() != "BANNED" {
			return fmt.Sprintf("a write of the user banned before the kill: %d %s", a.status, a.body)
		}
		return ""
	})
}
