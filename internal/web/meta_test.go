package web

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/auth"
)

var metaTag = regexp.MustCompile(`<meta (?:name|property)="([a-z:_]+)" content="([^"]*)"/?>`)

// metas are a page's <meta name=... content=...> and <meta property=...>, by name, their content unescaped.
func metas(body string) map[string]string {
	out := map[string]string{}
	for _, m := range metaTag.FindAllStringSubmatch(body, -1) {
		out[m[1]] = html.UnescapeString(m[2])
	}
	return out
}

func TestPagesDescribeThemselves(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	long := strings.Repeat("Markets open early on Fridays. ", 10) + "\n\nThe end."
	f.putArticle(&fakeArticle{ID: 7, Board: 1, Writer: 10, Title: `Fridays & "markets"`, Content: "  The  first line\nof " + attrXSS + long, Created: t0, Modified: t0})
	f.putArticle(&fakeArticle{ID: 8, Board: 1, Writer: 10, Title: "Short", Content: "Just this.", Created: t0, Modified: t0})
	h := f.handler(t)

	article := metas(get(t, h, "/articles/7", "").Body.String())
	delete(article, "viewport")
	want := "The first line of " + attrXSS + "Markets open early on Fridays. Markets open early on Fridays. Markets open early on Fridays. Markets open…"
	if diff := cmp.Diff(map[string]string{
		"description":    want,
		"og:site_name":   "board",
		"og:type":        "article",
		"og:title":       `Fridays & "markets"`,
		"og:description": want,
	}, article); diff != "" {
		t.Errorf("article page metas (-want +got):\n%s", diff)
	}
	if got := metas(get(t, h, "/articles/8", "").Body.String())["description"]; got != "Just this." {
		t.Errorf("a short article's description: %q, want its whole text", got)
	}

	for target, want := range map[string]string{
		"/":                "The boards of board, and the day's hottest articles.",
		"/boards/1":        "The newest articles in General on board.",
		"/boards/1?page=2": "Articles in General on board, page 2.",
		"/search":          "Search the articles and comments of board.",
		"/hot":             "The hottest articles on board on Sunday, 22 November 2026, by likes, comments and views.",
		"/signin":          siteDescription,
	} {
		m := metas(get(t, h, target, "").Body.String())
		if m["description"] != want || m["og:description"] != want || m["og:type"] != "website" || m["og:title"] == "" {
			t.Errorf("%s: metas %q, want the description %q", target, m, want)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{" a\n\n b\tc ", "a b c"},
		{strings.Repeat("é", 200), strings.Repeat("é", summaryRunes-1) + "…"},
		{strings.Repeat("word ", 40), strings.TrimSpace(strings.Repeat("word ", 31)) + "…"},
	} {
		if got := summary(tc.in); got != tc.want {
			t.Errorf("summary(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPagesCacheOnlyPrivately: a page may be kept by the reader's browser alone, and for its back button (no
// no-store, which keeps it out of the back/forward cache); signing out tells the browser to drop what it kept.
func TestPagesCacheOnlyPrivately(t *testing.T) {
	t.Parallel()
	f := newFakes(t)
	h := f.handler(t)
	alice := f.token(t, 10, auth.RoleUser)
	for _, tc := range []struct{ target, token string }{{"/", ""}, {"/articles/1", alice}, {"/nope", alice}} {
		w := get(t, h, tc.target, tc.token)
		if cc := w.Header().Get("Cache-Control"); cc != "private, no-cache" {
			t.Errorf("%s: Cache-Control %q, want private, no-cache", tc.target, cc)
		}
	}
	w := post(t, h, "/signout", url.Values{}, alice)
	if got := w.Header().Get("Clear-Site-Data"); w.Code != http.StatusSeeOther || got != `"cache"` {
		t.Errorf("sign-out: %d, Clear-Site-Data %q; want 303 and \"cache\"", w.Code, got)
	}
}
