package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// revisionOut is one revision as GET .../revisions answers it.
type revisionOut struct {
	Revision  int64
	EditorID  string
	Title     string
	Content   string
	Moderator bool
}

// revisionsOf reads the revisions at url (newest first), expecting 200.
func revisionsOf(t *testing.T, url string) []revisionOut {
	t.Helper()
	var out []revisionOut
	if a := getAs(t, "", url, &out); a.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, a.status, a.body)
	}
	return out
}

// Edits through the running services (SPEC §3.12): a comment's writer and a moderator edit it on both versions,
// someone else may not, a locked article's comments are the moderators' alone; COMMENT_UPDATED reaches search, which
// finds the new text and not the old; every edit keeps a revision, a moderator's marked; deletes take them along.
func TestEditsAndRevisions(t *testing.T) {
	t.Parallel()
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--search-engine", "bleve"))
	aliceID, aliceToken := signUp(t, p, "alice")
	bobID, bobToken := signUp(t, p, "bob")
	signUp(t, p, "mod")
	modToken := grant(t, p, "mod", "moderator")
	article := writeArticle(t, p, aliceToken, 3, "an article about zebras")
	comments := p.urls["comment"]

	type commentOut struct {
		CommentID, Content string
		Edited             bool
	}
	post := func(version, content string) string {
		t.Helper()
		var c commentOut
		a := sendAs(t, bearer(bobToken), "POST", comments+"/"+version+"/comments", map[string]any{"articleId": article, "content": content})
		if a.status != http.StatusCreated || json.Unmarshal(a.body, &c) != nil {
			t.Fatalf("comment: %d %s", a.status, a.body)
		}
		return c.CommentID
	}
	edit := func(token, version, id, content string) authAnswer {
		t.Helper()
		return sendAs(t, bearer(token), "PUT", comments+"/"+version+"/comments/"+id, map[string]any{"content": content})
	}
	v1, v2 := post("v1", "a quagga grazes"), post("v2", "an okapi naps")
	search := p.urls["search"]
	waitFound(t, search, "okapi", []string{"c" + v2})

	// The writer edits; the event carries the new text to search.
	for _, c := range [][2]string{{"v1", v1}, {"v2", v2}} {
		a := edit(bobToken, c[0], c[1], "a pelican "+c[0])
		var out commentOut
		if a.status != http.StatusOK || json.Unmarshal(a.body, &out) != nil || !out.Edited || out.Content != "a pelican "+c[0] {
			t.Fatalf("%s edit by its writer: %d %s", c[0], a.status, a.body)
		}
	}
	waitFound(t, search, "pelican", []string{"c" + v2, "c" + v1})
	waitFound(t, search, "okapi", nil)

	// Someone else may not; a moderator may, and is marked.
	if a := edit(aliceToken, "v2", v2, "not mine"); a.status != http.StatusForbidden || a.code() != "FORBIDDEN" {
		t.Errorf("an edit of someone else's comment: %d %s, want 403 FORBIDDEN", a.status, a.body)
	}
	if a := edit(modToken, "v2", v2, "a pelican, tidied"); a.status != http.StatusOK {
		t.Fatalf("a moderator's edit: %d %s", a.status, a.body)
	}
	revs := revisionsOf(t, comments+"/v2/comments/"+v2+"/revisions")
	if len(revs) != 2 || !revs[0].Moderator || revs[0].Content != "a pelican v2" || revs[1].Moderator ||
		revs[1].Content != "an okapi naps" || revs[1].EditorID != fmt.Sprint(bobID) {
		t.Errorf("v2 revisions: %+v", revs)
	}
	if revs := revisionsOf(t, comments+"/v1/comments/"+v1+"/revisions"); len(revs) != 1 || revs[0].Content != "a quagga grazes" {
		t.Errorf("v1 revisions: %+v", revs)
	}

	// A locked article's comments are edited by moderators only.
	mod := p.urls["moderation"]
	if a := sendAs(t, bearer(modToken), "PUT", mod+"/v1/articles/"+article+"/lock", nil); a.status != http.StatusOK {
		t.Fatalf("lock: %d %s", a.status, a.body)
	}
	eventually(t, func() string {
		if a := edit(bobToken, "v1", v1, "while locked"); a.status != http.StatusForbidden || a.code() != "LOCKED" {
			return fmt.Sprintf("an edit on a locked article: %d %s, want 403 LOCKED", a.status, a.body)
		}
		return ""
	})
	if a := edit(modToken, "v1", v1, "locked: see the rules"); a.status != http.StatusOK {
		t.Errorf("a moderator's edit on a locked article: %d %s", a.status, a.body)
	}

	// The article keeps its revisions too.
	if a := sendAs(t, bearer(aliceToken), "PUT", p.urls["article"]+"/v1/articles/"+article,
		map[string]any{"title": "an article about pelicans", "content": "rewritten"}); a.status != http.StatusOK {
		t.Fatalf("article update: %d %s", a.status, a.body)
	}
	if revs := revisionsOf(t, p.urls["article"]+"/v1/articles/"+article+"/revisions"); len(revs) != 1 ||
		revs[0].Title != "an article about zebras" || revs[0].EditorID != fmt.Sprint(aliceID) {
		t.Errorf("article revisions: %+v", revs)
	}

	// A deleted comment takes its revisions along; a deleted article takes its own and, by the purge, its comments'.
	if a := sendAs(t, bearer(bobToken), "DELETE", comments+"/v1/comments/"+v1, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete v1: %d %s", a.status, a.body)
	}
	if a := getAs(t, "", comments+"/v1/comments/"+v1+"/revisions", nil); a.status != http.StatusNotFound {
		t.Errorf("revisions of a deleted comment: %d %s, want 404", a.status, a.body)
	}
	if a := sendAs(t, bearer(aliceToken), "DELETE", p.urls["article"]+"/v1/articles/"+article, nil); a.status != http.StatusNoContent {
		t.Fatalf("delete the article: %d %s", a.status, a.body)
	}
	if a := getAs(t, "", p.urls["article"]+"/v1/articles/"+article+"/revisions", nil); a.status != http.StatusNotFound {
		t.Errorf("revisions of a deleted article: %d %s, want 404", a.status, a.body)
	}
	eventually(t, func() string {
		if a := getAs(t, "", comments+"/v2/comments/"+v2+"/revisions", nil); a.status != http.StatusNotFound {
			return fmt.Sprintf("revisions of a comment of a deleted article: %d %s, want 404 once purged", a.status, a.body)
		}
		return ""
	})
	if a := edit(bobToken, "v2", v2, "too late"); a.status != http.StatusNotFound {
		t.Errorf("an edit of a comment of a deleted article: %d %s, want 404", a.status, a.body)
	}
}
