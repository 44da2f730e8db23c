package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"board/internal/auth"
)

// editableComments is the fake comment service with comment 101 (alice's reply, "Thanks") editable: PUT changes it
// and keeps what it replaced, GET .../revisions lists that newest first. Everything else is the fleet's fake.
type editableComments struct {
	f         *fakes
	mu        sync.Mutex
	content   string
	modified  time.Time
	revisions []map[string]any // newest first
	puts      []string         // the bodies of the PUTs
	hidden    bool             // comment 101 is removed by a moderator
}

func newEditableComments(f *fakes) *editableComments {
	e := &editableComments{f: f, content: "Thanks"}
	mux := http.NewServeMux()
	mux.Handle("/", f.commentMux())
	mux.HandleFunc("GET /v2/comments", func(w http.ResponseWriter, r *http.Request) {
		rec := &captured{header: http.Header{}}
		f.commentMux().ServeHTTP(rec, r)
		var page struct {
			Comments     []map[string]any `json:"comments"`
			CommentCount int64            `json:"commentCount"`
		}
		_ = json.Unmarshal([]byte(rec.body.String()), &page)
		for _, c := range page.Comments {
			if c["commentId"] == "101" {
				e.fill(c)
			}
		}
		writeJSON(w, http.StatusOK, page)
	})
	mux.HandleFunc("GET /v2/comments/{commentId}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("commentId") != "101" {
			writeError(w, http.StatusNotFound, "COMMENT_NOT_FOUND", "no such comment")
			return
		}
		c := commentJSON(fakeComment{ID: 101, Article: 1, Writer: 10, Path: "0000000000", Created: t0.Add(2 * time.Hour)})
		e.fill(c)
		writeJSON(w, http.StatusOK, c)
	})
	mux.HandleFunc("PUT /v2/comments/{commentId}", func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.acting(w, r)
		if !ok {
			return
		}
		var in struct{ Content string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Content == "" {
			writeError(w, http.StatusBadRequest, "INVALID_CONTENT", "content must not be empty")
			return
		}
		if p.UserID != 10 && p.Role != auth.RoleModerator {
			writeError(w, http.StatusForbidden, "FORBIDDEN", "only its writer or a moderator may change this")
			return
		}
		e.mu.Lock()
		e.puts = append(e.puts, in.Content)
		at := f.clock.now()
		e.revisions = append([]map[string]any{{"revision": len(e.revisions) + 1, "editorId": wireID(p.UserID),
			"content": e.content, "createdAt": wireTime(at), "moderator": p.UserID != 10}}, e.revisions...)
		e.content, e.modified = in.Content, at
		e.mu.Unlock()
		c := commentJSON(fakeComment{ID: 101, Article: 1, Writer: 10, Path: "0000000000", Created: t0.Add(2 * time.Hour)})
		e.fill(c)
		writeJSON(w, http.StatusOK, c)
	})
	mux.HandleFunc("GET /v2/comments/{commentId}/revisions", func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		writeJSON(w, http.StatusOK, e.revisions)
	})
	f.override("comment", mux.ServeHTTP)
	return e
}

// fill sets comment 101's content and edit state in its JSON form c.
func (e *editableComments) fill(c map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c["content"], c["edited"], c["modifiedAt"] = e.content, len(e.revisions) > 0, wireTime(e.modified)
	if e.hidden {
		c["hidden"], c["removedReason"] = "removed", "spam"
	}
}

// captured is a response written in memory.
type captured struct {
	header http.Header
	status int
	body   strings.Builder
}

func (c *captured) Header() http.Header         { return c.header }
func (c *captured) WriteHeader(status int)      { c.status = status }
func (c *captured) Write(b []byte) (int, error) { return c.body.Write(b) }

// TestCommentEdit: a comment's edit form shows to its writer and to moderators (on a locked article, to moderators
// only); saving it sends the new content and goes back to the comment, which then reads edited, linking to its
// history; the history shows each edit as an escaped diff, a moderator's marked.
func TestCommentEdit(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	e := newEditableComments(f)
	h := f.handler(t)
	alice, bob, mia := f.token(t, 10, auth.RoleUser), f.token(t, 11, auth.RoleUser), f.token(t, 12, auth.RoleModerator)

	for _, tc := range []struct {
		who   string
		token string
		edits int // of comment 100 by bob and its reply 101 by alice
	}{{"signed out", "", 0}, {"alice", alice, 1}, {"bob", bob, 1}, {"a moderator", mia, 2}} {
		if n := strings.Count(get(t, h, "/articles/1", tc.token).Body.String(), `class="edit-comment"`); n != tc.edits {
			t.Errorf("%s sees %d comment edit forms, want %d", tc.who, n, tc.edits)
		}
	}
	if body := get(t, h, "/articles/1", alice).Body.String(); !strings.Contains(body, `action="/articles/1/comments/101/edit"`) ||
		strings.Contains(body, "comment-edited") {
		t.Errorf("alice's page: no edit form for her reply, or an edited mark before any edit:\n%s", body)
	}

	f.clock.advance(time.Minute)
	w := post(t, h, "/articles/1/comments/101/edit", url.Values{"content": {"Thanks <script>alert(1)</script>"}}, alice)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/articles/1#c-101" {
		t.Fatalf("edit: %d to %q, want 303 to the comment\n%s", w.Code, w.Header().Get("Location"), w.Body)
	}
	f.clock.advance(time.Minute)
	if w := post(t, h, "/articles/1/comments/101/edit", url.Values{"content": {"Thanks a lot"}}, mia); w.Code != http.StatusSeeOther {
		t.Fatalf("a moderator's edit: %d\n%s", w.Code, w.Body)
	}
	if len(e.puts) != 2 || e.puts[0] != "Thanks <script>alert(1)</script>" {
		t.Errorf("the comment service got %q", e.puts)
	}

	body := get(t, h, "/articles/1", "").Body.String()
	if !strings.Contains(body, `<a class="comment-edited" href="/articles/1/comments/101/revisions">edited`) {
		t.Errorf("an edited comment without its mark:\n%s", body)
	}
	history := get(t, h, "/articles/1/comments/101/revisions", "")
	hb := history.Body.String()
	for _, want := range []string{
		`<div id="current-content" class="content">Thanks a lot</div>`,
		`id="r-2"`, `id="r-1"`,
		`<span class="badge moderator-edit">Moderator</span>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
		`<del class="diff-del"><span class="visually-hidden">[removed: </span>`,
		`<ins class="diff-ins"><span class="visually-hidden">[added: </span>`,
	} {
		if !strings.Contains(hb, want) {
			t.Errorf("the history lacks %s:\n%s", want, hb)
		}
	}
	if history.Code != http.StatusOK || strings.Contains(hb, "<script>alert") || strings.Count(hb, "badge moderator-edit") != 1 {
		t.Errorf("history: status %d, an unescaped script, or not exactly one moderator's edit:\n%s", history.Code, hb)
	}

	if w := get(t, h, "/articles/2/comments/101/revisions", ""); w.Code != http.StatusNotFound {
		t.Errorf("a comment's history under another article: %d, want 404", w.Code)
	}
	if w := post(t, h, "/articles/1/comments/101/edit", url.Values{"content": {"mine now"}}, bob); w.Code != http.StatusForbidden {
		t.Errorf("bob editing alice's comment: %d, want 403", w.Code)
	}

	f.mu.Lock()
	f.read[1].Locked = true
	f.mu.Unlock()
	for _, tc := range []struct {
		who   string
		token string
		edits int
	}{{"alice", alice, 0}, {"a moderator", mia, 2}} {
		if n := strings.Count(get(t, h, "/articles/1", tc.token).Body.String(), `class="edit-comment"`); n != tc.edits {
			t.Errorf("locked: %s sees %d comment edit forms, want %d", tc.who, n, tc.edits)
		}
	}
}

// TestArticleHistory: an edited article links to its history, which shows the title's change too.
func TestArticleHistory(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	f.putArticle(&fakeArticle{ID: 3, Board: 1, Writer: 10, Title: "New title", Content: "Body, edited.", Created: t0,
		Modified: t0.Add(time.Hour)})
	mux := http.NewServeMux()
	mux.Handle("/", f.articleMux())
	mux.HandleFunc("GET /v1/articles/{articleId}/revisions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []map[string]any{{"revision": 1, "editorId": "10", "title": "Old title", "content": "Body.",
			"createdAt": wireTime(t0.Add(time.Hour)), "moderator": false}})
	})
	f.override("article", mux.ServeHTTP)
	h := f.handler(t)
	if body := get(t, h, "/articles/3", "").Body.String(); !strings.Contains(body, `<a id="article-edited" href="/articles/3/revisions">edited`) {
		t.Errorf("an edited article without the link to its history:\n%s", body)
	}
	body := get(t, h, "/articles/3/revisions", "").Body.String()
	for _, want := range []string{`class="diff diff-title"`, `[removed: </span>Old<`, `[added: </span>New<`, `<span class="editor">alice</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the article's history lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "badge moderator-edit") {
		t.Errorf("a writer's edit marked as a moderator's")
	}
}

// The history's diff is by words: a changed word is the old word out and the new one in.
func TestTextDiffByWords(t *testing.T) {
	t.Parallel()
	var got []string
	for _, d := range textDiff("A quick fox, 여우가 jumped.", "The quick brown fox, 여우는 jumped!") {
		got = append(got, diffClass(d.Op)+":"+d.Text)
	}
	want := "diff-del:A|diff-ins:The|diff-same: quick |diff-ins:brown |diff-same:fox, |diff-del:여우가|diff-ins:여우는|diff-same: jumped|diff-del:.|diff-ins:!"
	if strings.Join(got, "|") != want {
		t.Errorf("diff:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

// A hidden comment's history is hidden with it, but from its writer and moderators.
func TestHiddenHistory(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	e := newEditableComments(f)
	h := f.handler(t)
	alice, bob := f.token(t, 10, auth.RoleUser), f.token(t, 11, auth.RoleUser)
	if w := post(t, h, "/articles/1/comments/101/edit", url.Values{"content": {"Thanks, secretly"}}, alice); w.Code != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", w.Code, w.Body)
	}
	f.mu.Lock()
	f.comments[1][1].Hidden, f.comments[1][1].RemovedReason = "removed", "spam"
	f.mu.Unlock()
	e.hidden = true
	for who, token := range map[string]string{"signed out": "", "bob": bob} {
		body := get(t, h, "/articles/1/comments/101/revisions", token).Body.String()
		if !strings.Contains(body, `id="history-hidden"`) || strings.Contains(body, "secretly") || strings.Contains(body, "Thanks") {
			t.Errorf("%s reads a hidden comment's history:\n%s", who, body)
		}
	}
	if body := get(t, h, "/articles/1/comments/101/revisions", alice).Body.String(); !strings.Contains(body, "Thanks, secretly") ||
		strings.Contains(body, `id="history-hidden"`) {
		t.Errorf("its writer does not read a hidden comment's history:\n%s", body)
	}
}
