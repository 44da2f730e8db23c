package web

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"board/internal/auth"
)

var formKeys = regexp.MustCompile(`<form ([^>]*)>\s*<input type="hidden" name="idempotencyKey" value="([^"]+)"`)

// keysOf returns the Idempotency-Keys of a page's forms, in order, and the first of each form whose attributes
// hold a word.
func keysOf(t *testing.T, body string) (keys []string, of func(word string) string) {
	t.Helper()
	ms := formKeys.FindAllStringSubmatch(body, -1)
	for _, m := range ms {
		keys = append(keys, m[2])
	}
	return keys, func(word string) string {
		for _, m := range ms {
			if strings.Contains(m[1], word) {
				return m[2]
			}
		}
		t.Fatalf("no form with %q has a key", word)
		return ""
	}
}

// TestDoubleSubmitWritesOnce: every form that writes content carries an Idempotency-Key of its own, fresh at each
// rendering, which the pages send on with the write; so a form sent twice (a double click, a reload that posts
// again) reaches the service twice with one key and writes once. A form that comes back after a failure keeps it.
func TestDoubleSubmitWritesOnce(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)
	bob := f.token(t, 11, auth.RoleUser)

	// The article page, to bob: the comment form, a reply form per comment, the like button, a like button per
	// comment, the report forms of the article and of alice's comment.
	page, keyOf := keysOf(t, get(t, h, "/articles/1", bob).Body.String())
	again, _ := keysOf(t, get(t, h, "/articles/1", bob).Body.String())
	if len(page) != 8 || len(again) != len(page) {
		t.Fatalf("the article page has keys %v, then %v: want one per form (comment, 2 replies, like, 2 comment likes, 2 reports)", page, again)
	}
	if all := append(slices.Clone(page), again...); len(slices.Compact(slices.Sorted(slices.Values(all)))) != len(all) {
		t.Errorf("keys repeat across forms or renderings: %v and %v", page, again)
	}
	writeKeys, _ := keysOf(t, get(t, h, "/boards/1/write", alice).Body.String())
	if len(writeKeys) != 1 {
		t.Fatalf("the write page has keys %v, want one", writeKeys)
	}

	twice := func(what, service, target string, form url.Values, token string) {
		t.Helper()
		before := len(f.writes(service))
		var locations []string
		for range 2 {
			w := post(t, h, target, form, token)
			if w.Code != http.StatusSeeOther {
				t.Fatalf("%s: status %d, want 303\n%s", what, w.Code, w.Body)
			}
			locations = append(locations, w.Header().Get("Location"))
		}
		sent := f.writes(service)[before:]
		if len(sent) != 2 || sent[0].Key != form.Get("idempotencyKey") || sent[1].Key != sent[0].Key {
			t.Errorf("%s: the %s service received %+v, want the form's key %q twice", what, service, sent, form.Get("idempotencyKey"))
		}
		if locations[0] != locations[1] {
			t.Errorf("%s: the second send went to %s, the first to %s", what, locations[1], locations[0])
		}
	}
	articles := len(f.source)
	twice("write", "article", "/boards/1/write", url.Values{"title": {"Once"}, "content": {"Body"}, "idempotencyKey": {writeKeys[0]}}, alice)
	comments := len(f.comments[1])
	twice("comment", "comment", "/articles/1/comments", url.Values{"content": {"Once"}, "idempotencyKey": {keyOf(`id="comment-form"`)}}, bob)
	twice("like", "like", "/articles/1/like", url.Values{"idempotencyKey": {keyOf(`id="like"`)}}, bob)
	twice("report", "moderation", "/articles/1/report", url.Values{"targetType": {"article"}, "reason": {"spam"},
		"idempotencyKey": {keyOf(`class="report-form"`)}}, bob)
	f.mu.Lock()
	gotArticles, gotComments, reports := len(f.source)-articles, len(f.comments[1])-comments, len(f.reports)
	f.mu.Unlock()
	if gotArticles != 1 || gotComments != 1 || reports != 1 {
		t.Errorf("after each form sent twice: %d articles, %d comments, %d reports written; want 1 each", gotArticles, gotComments, reports)
	}

	// A form the service refused comes back with the key it was sent with, so that sending it again is safe.
	f.override("comment", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "DATABASE_UNAVAILABLE", "down")
	})
	w := post(t, h, "/articles/1/comments", url.Values{"content": {"Later"}, "idempotencyKey": {"kept-key"}}, bob)
	if keys, _ := keysOf(t, w.Body.String()); w.Code != http.StatusServiceUnavailable || !slices.Equal(keys, []string{"kept-key"}) {
		t.Errorf("a refused comment: status %d with keys %v, want 503 with the form's own key", w.Code, keys)
	}
}
