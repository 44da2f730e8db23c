package markdown

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestMentionsLink(t *testing.T) {
	for _, tc := range []struct{ name, source, wantHTML, wantText string }{
		{"a mention", "hi @Bob_1!", `<p>hi <a href="/u/bob_1">@Bob_1</a>!</p>`, "hi @Bob_1!"},
		{"at a line's head", "@bob", `<p><a href="/u/bob">@bob</a></p>`, "@bob"},
		{"after punctuation", "(@bob)", `<p>(<a href="/u/bob">@bob</a>)</p>`, "(@bob)"},
		{"an e-mail address is none", "mail me: bob@example.com", `<p>mail me: <a href="mailto:bob@example.com">bob@example.com</a></p>`, "mail me: bob@example.com"},
		{"after a word character is none", "x@bob é@bob", "<p>x@bob é@bob</p>", "x@bob é@bob"},
		{"too short", "@bo", "<p>@bo</p>", "@bo"},
		{"too long", "@" + strings.Repeat("a", 31), "<p>@" + strings.Repeat("a", 31) + "</p>", "@" + strings.Repeat("a", 31)},
		{"thirty is long enough", "@" + strings.Repeat("a", 30), `<p><a href="/u/` + strings.Repeat("a", 30) + `">@` + strings.Repeat("a", 30) + "</a></p>", "@" + strings.Repeat("a", 30)},
		{"not in a code span", "`@bob`", "<p><code>@bob</code></p>", "@bob"},
		{"not in a code block", "```\n@bob\n```", "<pre><code>@bob\n</code></pre>", "@bob"},
		{"not in a link's text", "[hi @bob](/x)", `<p><a href="/x">hi @bob</a></p>`, "hi @bob"},
		{"not in a URL", "https://example.com/@bob", `<p><a href="https://example.com/@bob" rel="nofollow ugc noopener">https://example.com/@bob</a></p>`, "https://example.com/@bob"},
		{"not in an image's alt", "![@bob](/media/a.png)", `<p><img src="/media/a.png" alt="@bob"></p>`, "@bob"},
		{"in emphasis", "*@bob*", `<p><em><a href="/u/bob">@bob</a></em></p>`, "@bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Render(tc.source)
			if strings.TrimSpace(got.HTML) != tc.wantHTML {
				t.Errorf("HTML of %q\n got %q\nwant %q", tc.source, got.HTML, tc.wantHTML)
			}
			if got.Text != tc.wantText {
				t.Errorf("Text of %q = %q, want %q", tc.source, got.Text, tc.wantText)
			}
			if Sanitize(got.HTML) != got.HTML {
				t.Errorf("the sanitizer changes %q", got.HTML)
			}
		})
	}
}

func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		source string
		want   []string
	}{
		{"no one", nil},
		{"@Alice and @bob, again @ALICE; `@carol` [@dave](/x) x@erin", []string{"alice", "bob"}},
		{"> @zed\n\n- @amy", []string{"zed", "amy"}},
	} {
		if got := Mentions(tc.source); !slices.Equal(got, tc.want) {
			t.Errorf("Mentions(%q) = %q, want %q", tc.source, got, tc.want)
		}
	}
	var many strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&many, "@user%03d ", i)
	}
	got := Mentions(many.String())
	if len(got) != MaxMentions || got[0] != "user000" || got[MaxMentions-1] != "user019" {
		t.Errorf("1000 mentions gave %d: %q; want the first %d", len(got), got, MaxMentions)
	}
}
