package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"board/internal/markdown"
)

// The bench's post is as long as asked and uses the syntax it claims to.
func TestMarkdownPost(t *testing.T) {
	post := markdownPost(3000)
	if n := utf8.RuneCountInString(post); n != 3000 {
		t.Errorf("the post has %d characters, want 3000", n)
	}
	h := markdown.Render(post).HTML
	for _, want := range []string{"<h2>", "<strong>", "<ul>", "<ol>", "<table>", "<pre><code", "<blockquote>",
		`rel="nofollow ugc noopener"`, `type="checkbox"`, "안녕하세요"} {
		if !strings.Contains(h, want) {
			t.Errorf("the post's HTML lacks %q", want)
		}
	}
}

func TestBenchMarkdownPrints(t *testing.T) {
	var out bytes.Buffer
	err := Command(context.Background(), []string{"markdown", "--duration", "1ms", "--warmup", "0s"}, func(string) string { return "" },
		&out, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"floor: html.EscapeString", "render (markdown.Render)", "target ≤ 200 µs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
