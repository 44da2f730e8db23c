package bleveindex

import (
	"context"
	"strings"
	"testing"
	"time"

	"board/internal/search"
	"board/internal/search/searchtest"
)

func TestSuite(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(t *testing.T) search.Engine { return New(t.TempDir()) })
}

// An index that another process holds open is an error, not a wait without end.
func TestOpenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := New(dir).Open(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := New(dir).Open(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("a second open: %v", err)
	}
}

// Search's windows give the same answers as one search of the whole index: the newest matches of a frequent word,
// its capped count, every match of a rare one, also after a reopen (the newest document's time is kept).
func TestSearchWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	ix, err := New(dir).Open(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []search.Doc
	for i := range 3000 { // one every 8 hours, over about 1000 days
		content := "common words"
		if i%100 == 0 {
			content += " rare"
		}
		docs = append(docs, search.Doc{Type: search.TypeArticle, ArticleID: int64(i + 1), BoardID: 1, WriterID: 1,
			Title: "t", Content: content, CreatedAt: start.Add(time.Duration(i) * 8 * time.Hour), Version: 1})
	}
	if err := ix.Put(ctx, docs); err != nil {
		t.Fatal(err)
	}
	check := func(ix search.Indexer) {
		t.Helper()
		res, err := ix.Search(ctx, search.Query{Terms: search.Terms("common"), Newest: true, Offset: 10, Limit: 10, CountLimit: 101})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != 101 || len(res.Docs) != 10 || res.Docs[0].ArticleID != 2990 || res.Docs[9].ArticleID != 2981 {
			t.Errorf("page 2 of the newest: count %d, %d docs from %d", res.Count, len(res.Docs), res.Docs[0].ArticleID)
		}
		res, err = ix.Search(ctx, search.Query{Terms: search.Terms("rare"), Limit: 100, CountLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != 30 || len(res.Docs) != 30 {
			t.Errorf("the rare word: count %d, %d docs", res.Count, len(res.Docs))
		}
		res, err = ix.Search(ctx, search.Query{Terms: search.Terms("common"), Limit: 10, CountLimit: 3001})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != 3000 {
			t.Errorf("the full count of the frequent word: %d", res.Count)
		}
	}
	check(ix)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if ix, err = New(dir).Open(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if got := ix.(*Index).newest.Load(); got != docs[2999].CreatedAt.UnixMilli() {
		t.Errorf("after a reopen, the newest document is at %d, want %d", got, docs[2999].CreatedAt.UnixMilli())
	}
	check(ix)
}
