package sqlindex_test

import (
	"context"
	"testing"

	"board/internal/search"
	"board/internal/search/sqlindex"
)

// Two instances share the index, each with its own read of a document: one applies an edit, the other a removal,
// and whichever writes last, neither change is lost (the reviewer's case: a removed article stayed searchable).
func TestSharedIndexLosesNoWrite(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ctx := context.Background()
		ix := openIndex(t, e, "shared")
		base := article(1, "original words")
		if err := ix.Put(ctx, []search.Doc{base}); err != nil {
			t.Fatal(err)
		}
		edited := base // instance A, from its read of base
		edited.Title, edited.Content, edited.Version = "edited", "fresh words", 2
		removed := base // instance B, from the same read
		removed.Moderation, removed.Hidden = 1, true
		for _, d := range []search.Doc{removed, edited} {
			if err := ix.Put(ctx, []search.Doc{d}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ix.Get(ctx, []string{base.Key()})
		if err != nil {
			t.Fatal(err)
		}
		if d := got[base.Key()]; d.Title != "edited" || !d.Hidden || d.Version != 2 || d.Moderation != 1 {
			t.Errorf("after both writes: %+v", d)
		}
		res, err := ix.Search(ctx, search.Query{Terms: search.Terms("fresh"), Limit: 10, CountLimit: 10})
		if err != nil || res.Count != 0 {
			t.Errorf("the removed article is found: %d, %v", res.Count, err)
		}
	})
}
