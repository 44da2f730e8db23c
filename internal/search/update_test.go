package search_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/search"
	"board/internal/search/bleveindex"
)

var created = apijson.Time(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

func envelope(t *testing.T, id int64, typ event.Type, payload any) event.Envelope {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return event.Envelope{EventID: apijson.ID(id), Type: typ, Payload: b}
}

func articleEvent(t *testing.T, typ event.Type, version int64, title string) event.Envelope {
	return envelope(t, version, typ, event.Article{ArticleID: 10, Title: title, Content: "body words", BoardID: 3, WriterID: 7,
		CreatedAt: created, ArticleVersion: version})
}

func commentEvent(t *testing.T, typ event.Type, id int64, content string) event.Envelope {
	return envelope(t, id, typ, event.Comment{CommentID: apijson.ID(id), ArticleID: 10, WriterID: 8, Content: content,
		CreatedAt: created, Deleted: typ == event.CommentDeleted})
}

func moderationEvent(t *testing.T, version int64, hidden event.Hidden) event.Envelope {
	return envelope(t, 100+version, event.ArticleModerated, event.ArticleModeration{ArticleID: 10, BoardID: 3, WriterID: 7,
		Hidden: hidden, ModerationVersion: version})
}

func newUpdater(t *testing.T) (*search.Updater, search.Indexer) {
	t.Helper()
	ix, err := bleveindex.New(t.TempDir()).Open(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return search.NewUpdater(ix), ix
}

func apply(t *testing.T, u *search.Updater, envs ...event.Envelope) {
	t.Helper()
	ctx := context.Background()
	handlers := u.Handlers()
	for _, env := range envs {
		if err := handlers[env.Type](ctx, env); err != nil {
			t.Fatalf("%s: %v", env.Type, err)
		}
	}
}

func flush(t *testing.T, u *search.Updater) {
	t.Helper()
	if err := u.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Three streams, each in order as its partition delivers it but interleaved at random across topics, with flushes
// at random points and the whole stream delivered again: every run ends in the same index.
func TestUpdaterAnyInterleaving(t *testing.T) {
	t.Parallel()
	streams := func() [][]event.Envelope {
		return [][]event.Envelope{
			{articleEvent(t, event.ArticleCreated, 1, "first title"), articleEvent(t, event.ArticleUpdated, 2, "second title")},
			{commentEvent(t, event.CommentCreated, 20, "kept comment"), commentEvent(t, event.CommentCreated, 21, "gone comment"),
				commentEvent(t, event.CommentDeleted, 21, "")},
			{moderationEvent(t, 1, event.Pending), moderationEvent(t, 2, event.Visible)},
		}
	}
	for run := range 20 {
		rng := rand.New(rand.NewPCG(uint64(run), 1))
		u, ix := newUpdater(t)
		for range 2 { // the second time, every event is a duplicate
			s := streams()
			for len(s[0])+len(s[1])+len(s[2]) > 0 {
				i := rng.IntN(3)
				if len(s[i]) == 0 {
					continue
				}
				apply(t, u, s[i][0])
				s[i] = s[i][1:]
				if rng.IntN(3) == 0 {
					flush(t, u)
				}
			}
			flush(t, u)
		}
		got, err := ix.Get(context.Background(), []string{"a10", "c20", "c21"})
		if err != nil {
			t.Fatal(err)
		}
		a, kept, gone := got["a10"], got["c20"], got["c21"]
		if a.Title != "second title" || a.Version != 2 || a.Hidden || a.Moderation != 2 || a.State() != search.Live {
			t.Errorf("run %d: article %+v", run, a)
		}
		if kept.BoardID != 3 || kept.State() != search.Live || kept.Content != "kept comment" {
			t.Errorf("run %d: kept comment %+v", run, kept)
		}
		if gone.State() != search.Deleted || gone.Content != "" {
			t.Errorf("run %d: deleted comment %+v", run, gone)
		}
		res, err := ix.Search(context.Background(), search.Query{Terms: search.Terms("comment"), Limit: 10, CountLimit: 10})
		if err != nil || res.Count != 1 {
			t.Errorf("run %d: search comment: %d, %v", run, res.Count, err)
		}
	}
}

// A deleted article stays deleted whatever arrives late, and takes its comments with it, even one whose own event
// arrives after the delete.
func TestUpdaterDeleteIsFinal(t *testing.T) {
	t.Parallel()
	u, ix := newUpdater(t)
	apply(t, u, articleEvent(t, event.ArticleCreated, 1, "doomed"), commentEvent(t, event.CommentCreated, 20, "early comment"))
	flush(t, u)
	apply(t, u, articleEvent(t, event.ArticleDeleted, 3, "doomed"))
	flush(t, u)
	apply(t, u, articleEvent(t, event.ArticleUpdated, 2, "late update"), commentEvent(t, event.CommentCreated, 21, "late comment"),
		moderationEvent(t, 1, event.Visible))
	flush(t, u)
	got, err := ix.Get(context.Background(), []string{"a10", "c20", "c21"})
	if err != nil {
		t.Fatal(err)
	}
	for k, d := range got {
		if d.State() != search.Deleted || d.Title != "" || d.Content != "" {
			t.Errorf("%s after the delete: %+v", k, d)
		}
	}
	if len(got) != 3 {
		t.Errorf("want three tombstones, got %v", got)
	}
	for _, q := range []string{"doomed", "late", "comment"} {
		if res, err := ix.Search(context.Background(), search.Query{Terms: search.Terms(q), Limit: 10, CountLimit: 10}); err != nil || res.Count != 0 {
			t.Errorf("search %q after the delete: %d, %v", q, res.Count, err)
		}
	}
}

// Events that break the rules are refused as invalid, which the consumer dead-letters at once.
func TestUpdaterRefusesBadEvents(t *testing.T) {
	t.Parallel()
	u, _ := newUpdater(t)
	h := u.Handlers()
	for _, env := range []event.Envelope{
		envelope(t, 1, event.ArticleCreated, event.Article{Title: "no id", BoardID: 1}),
		envelope(t, 2, event.CommentCreated, event.Comment{CommentID: 5}),
		envelope(t, 3, event.ArticleModerated, event.ArticleModeration{}),
		{EventID: 4, Type: event.ArticleCreated, Payload: json.RawMessage(`{"articleId": []}`)},
	} {
		if err := h[env.Type](context.Background(), env); err == nil {
			t.Errorf("%s %s accepted", env.Type, env.Payload)
		}
	}
}

// An index that cannot be read is a dependency that is down, which the consumer waits on, not a bad event to
// dead-letter.
func TestUpdaterIndexDownIsUnavailable(t *testing.T) {
	t.Parallel()
	u, ix := newUpdater(t)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	err := u.Handlers()[event.ArticleCreated](context.Background(), articleEvent(t, event.ArticleCreated, 1, "t"))
	if fault.KindOf(err) != fault.Unavailable {
		t.Errorf("a handler on a closed index: %v (kind %v), want unavailable", err, fault.KindOf(err))
	}
}

// Two instances that wrote the same document from their own reads lose nothing of each other's change once merged.
func TestMerge(t *testing.T) {
	t.Parallel()
	base := search.Doc{Type: search.TypeArticle, ArticleID: 1, BoardID: 3, Title: "old", Content: "old text", Version: 1}
	edited := base
	edited.Title, edited.Content, edited.Version = "new", "new text", 2
	hidden := base
	hidden.Moderation, hidden.Hidden = 1, true
	for _, c := range []struct {
		name      string
		cur, next search.Doc
	}{{"edit then hide", edited, hidden}, {"hide then edit", hidden, edited}} {
		got := search.Merge(c.cur, c.next)
		if got.Title != "new" || got.Version != 2 || !got.Hidden || got.Moderation != 1 {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
	deleted := base
	deleted.Deleted, deleted.Title, deleted.Content, deleted.Version = true, "", "", 3
	if got := search.Merge(deleted, edited); !got.Deleted || got.Title != "" || got.Version != 3 {
		t.Errorf("an edit over a delete: %+v", got)
	}
	orphan := search.Doc{Type: search.TypeComment, CommentID: 5, ArticleID: 1, Content: "c", Version: 1}
	boarded := orphan
	boarded.BoardID = 3
	if got := search.Merge(boarded, orphan); got.BoardID != 3 {
		t.Errorf("a board lost: %+v", got)
	}
	if got := search.Merge(base, edited); got != edited {
		t.Errorf("a write made from the first: %+v, want %+v", got, edited)
	}
}

// TestUpdaterIndexesPlainText checks that documents hold a post's plain text, never its Markdown source, and that
// events from before posts had one index their content, plain text then.
func TestUpdaterIndexesPlainText(t *testing.T) {
	t.Parallel()
	u, ix := newUpdater(t)
	apply(t, u,
		envelope(t, 1, event.ArticleCreated, event.Article{ArticleID: 10, Title: "t", Content: "**bold** [link](https://example.com)",
			ContentHTML: `<p><strong>bold</strong> <a href="https://example.com">link</a></p>`, ContentText: "bold link", BoardID: 3,
			WriterID: 7, CreatedAt: created, ArticleVersion: 1}),
		envelope(t, 20, event.CommentCreated, event.Comment{CommentID: 20, ArticleID: 10, WriterID: 8, Content: "from before",
			CreatedAt: created}))
	flush(t, u)
	got, err := ix.Get(context.Background(), []string{"a10", "c20"})
	if err != nil {
		t.Fatal(err)
	}
	if got["a10"].Content != "bold link" || got["c20"].Content != "from before" {
		t.Errorf("contents indexed: %q, %q; want the plain text", got["a10"].Content, got["c20"].Content)
	}
}

// editEvent is COMMENT_UPDATED of comment id at commentVersion version.
func editEvent(t *testing.T, id, version int64, content string) event.Envelope {
	return envelope(t, 1000+version, event.CommentUpdated, event.Comment{CommentID: apijson.ID(id), ArticleID: 10, WriterID: 8,
		Content: content, CreatedAt: created, CommentVersion: version})
}

// A comment's edits apply by commentVersion, in any order and twice over: the index ends with the newest content,
// an edit that overtakes the create is not undone by it, and an edit that arrives after the delete does not bring the
// comment back.
func TestUpdaterCommentEdits(t *testing.T) {
	t.Parallel()
	for run, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}} {
		u, ix := newUpdater(t)
		events := []event.Envelope{commentEvent(t, event.CommentCreated, 20, "zebra typo"), editEvent(t, 20, 2, "giraffe"),
			editEvent(t, 20, 3, "pelican")}
		for range 2 {
			for _, i := range order {
				apply(t, u, events[i])
				flush(t, u)
			}
		}
		got, err := ix.Get(context.Background(), []string{"c20"})
		if err != nil {
			t.Fatal(err)
		}
		if c := got["c20"]; c.Content != "pelican" || c.Version != 3 || c.State() != search.Live {
			t.Errorf("run %d: comment %+v", run, c)
		}
		for q, want := range map[string]int{"pelican": 1, "zebra": 0, "giraffe": 0} {
			if res, err := ix.Search(context.Background(), search.Query{Terms: search.Terms(q), Limit: 10, CountLimit: 10}); err != nil || res.Count != want {
				t.Errorf("run %d: search %q: %d, %v; want %d", run, q, res.Count, err, want)
			}
		}
	}

	u, ix := newUpdater(t)
	apply(t, u, commentEvent(t, event.CommentCreated, 21, "soon gone"), commentEvent(t, event.CommentDeleted, 21, ""),
		editEvent(t, 21, 2, "late edit"))
	flush(t, u)
	if res, err := ix.Search(context.Background(), search.Query{Terms: search.Terms("late"), Limit: 10, CountLimit: 10}); err != nil || res.Count != 0 {
		t.Errorf("an edit after the delete is found: %d, %v", res.Count, err)
	}
}
