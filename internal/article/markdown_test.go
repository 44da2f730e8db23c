package article

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/event"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// TestContentRenderedWhenWritten checks that a create and an update store the content's HTML and plain text beside
// its source, that reads and events carry them as stored, and that an article written before Markdown (no HTML in
// its row) reads as its text escaped, never as Markdown.
func TestContentRenderedWhenWritten(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := newTestService(db)
		type content struct{ Source, HTML, Text string }
		of := func(a Article) content { return content{a.Content, a.ContentHTML, a.ContentText} }

		a, err := svc.Create(ctx, "t", "# Hi\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1))", 7, 9)
		if err != nil {
			t.Fatal(err)
		}
		created := content{"# Hi\n\n**bold** <script>alert(1)</script> [x](javascript:alert(1))",
			"<h1>Hi</h1>\n<p><strong>bold</strong> &lt;script&gt;alert(1)&lt;/script&gt; x</p>\n",
			"Hi\nbold <script>alert(1)</script> x"}
		if diff := cmp.Diff(created, of(a)); diff != "" {
			t.Errorf("Create (-want +got):\n%s", diff)
		}
		updated := content{"- [ ] <https://example.com>",
			"<ul>\n<li><input type=\"checkbox\" disabled=\"\" aria-label=\"to do\"> <a href=\"https://example.com\" rel=\"nofollow ugc noopener\">https://example.com</a></li>\n</ul>\n",
			"https://example.com"}
		if a, err = svc.Update(ctx, a.ID, "t", updated.Source); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(updated, of(a)); diff != "" {
			t.Errorf("Update (-want +got):\n%s", diff)
		}
		if a, err = svc.Get(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(updated, of(a)); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
		var events []content
		for _, env := range outboxRows(t, db) {
			p, err := event.Payload[event.Article](env)
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, content{p.Content, p.ContentHTML, p.ContentText})
		}
		if diff := cmp.Diff([]content{created, updated}, events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}

		// A row from before Markdown.
		if _, err := db.ExecContext(ctx, `INSERT INTO article (article_id, title, content, board_id, writer_id, created_at,
			modified_at, version) VALUES (5, 'old', ?, 7, 9, ?, ?, 1)`, "line one\n  **not bold** <b>&amp;", t0ms, t0ms); err != nil {
			t.Fatal(err)
		}
		old, err := svc.Get(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		want := content{"line one\n  **not bold** <b>&amp;", "<p>line one\n  **not bold** &lt;b&gt;&amp;amp;</p>",
			"line one\n  **not bold** <b>&amp;"}
		if diff := cmp.Diff(want, of(old)); diff != "" {
			t.Errorf("an article from before Markdown (-want +got):\n%s", diff)
		}
	})
}
