package comment

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// TestContentRenderedWhenWritten checks that creates of both versions store the content's HTML and plain text
// beside its source, that reads and events carry them, that a deleted comment keeps none, and that comments written
// before Markdown (no HTML in their rows) read as their text escaped, never as Markdown.
func TestContentRenderedWhenWritten(t *testing.T) {
	t.Parallel()
	sqldbtest.Run(t, Migrate, func(t *testing.T, db *sqldb.DB) {
		ctx := context.Background()
		svc, _, _ := testService(t, db)
		type content struct{ Source, HTML, Text string }
		of := func(c Comment) content { return content{c.Content, c.ContentHTML, c.ContentText} }
		markdown := content{"*hi* ~~there~~ <img src=x onerror=alert(1)>",
			"<p><em>hi</em> <del>there</del> &lt;img src=x onerror=alert(1)&gt;</p>\n", "hi there <img src=x onerror=alert(1)>"}

		root, err := svc.Create(ctx, 7, 9, 0, markdown.Source)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Create(ctx, 7, 9, root.ID, "reply"); err != nil {
			t.Fatal(err)
		}
		v2, err := svc.CreateV2(ctx, 7, 9, "", markdown.Source)
		if err != nil {
			t.Fatal(err)
		}
		for _, get := range []func() (Comment, error){
			func() (Comment, error) { return svc.Get(ctx, root.ID) },
			func() (Comment, error) { return svc.GetV2(ctx, v2.ID) },
		} {
			c, err := get()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(markdown, of(c)); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
		}
		if err := svc.Delete(ctx, root.ID); err != nil { // it has a reply: soft-deleted
			t.Fatal(err)
		}
		if c, err := svc.Get(ctx, root.ID); err != nil || of(c) != (content{}) {
			t.Errorf("soft-deleted: %+v, %v; want no content at all", of(c), err)
		}
		var events []content
		for _, e := range outboxEvents(t, db) {
			events = append(events, content{e.Payload.Content, e.Payload.ContentHTML, e.Payload.ContentText})
		}
		reply := content{"reply", "<p>reply</p>\n", "reply"}
		if diff := cmp.Diff([]content{markdown, reply, markdown, {}}, events); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}

		// Rows from before Markdown, and one of them soft-deleted.
		old := "line one\n  **not bold** <b>"
		for _, row := range []struct {
			query string
			args  []any
		}{
			{"INSERT INTO comment (comment_id, content, article_id, parent_comment_id, writer_id, deleted, created_at) VALUES (5, ?, 8, 5, 9, FALSE, ?)",
				[]any{old, t0ms}},
			{"INSERT INTO comment_v2 (comment_id, content, article_id, writer_id, path, deleted, created_at) VALUES (6, ?, 8, 9, '00000', FALSE, ?)",
				[]any{old, t0ms}},
			{"INSERT INTO comment_v2 (comment_id, content, article_id, writer_id, path, deleted, created_at) VALUES (7, '', 8, 9, '00001', TRUE, ?)",
				[]any{t0ms}},
		} {
			if _, err := db.ExecContext(ctx, row.query, row.args...); err != nil {
				t.Fatal(err)
			}
		}
		want := content{old, "<p>line one\n  **not bold** &lt;b&gt;</p>", old}
		if c, err := svc.Get(ctx, 5); err != nil || of(c) != want {
			t.Errorf("a v1 comment from before Markdown: %+v, %v; want %+v", of(c), err, want)
		}
		if c, err := svc.GetV2(ctx, 6); err != nil || of(c) != want {
			t.Errorf("a v2 comment from before Markdown: %+v, %v; want %+v", of(c), err, want)
		}
		if c, err := svc.GetV2(ctx, 7); err != nil || of(c) != (content{}) {
			t.Errorf("a deleted comment from before Markdown: %+v, %v; want no content at all", of(c), err)
		}
	})
}
