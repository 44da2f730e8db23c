package bleveindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/document"
	bsearch "github.com/blevesearch/bleve/v2/search"
	index "github.com/blevesearch/bleve_index_api"

	"board/internal/search"
)

// TestPrunedSearchesEqualFullOnes checks, on an index of Zipf-distributed words, that the searches that skip work
// (newest first by spans of days, relevance by impact levels) give exactly the page that searching and scoring
// every match gives, for frequent and rare words, pairs of them, filters and pages past the first; and that they do
// skip work for frequent words, which is what they are for.
func TestPrunedSearchesEqualFullOnes(t *testing.T) {
	ctx := context.Background()
	ix := openTestIndex(t)
	const n = 20_000
	words := make([]string, 2000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i) // no stems, no stop words: each is one term
	}
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(words)-1))
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	docs := make([]search.Doc, n)
	for i := range docs {
		var b strings.Builder
		for range 5 + r.IntN(150) { // lengths vary, so impacts do
			b.WriteString(words[zipf.Uint64()])
			b.WriteByte(' ')
		}
		docs[i] = search.Doc{Type: search.TypeArticle, ArticleID: int64(i + 1), BoardID: 1 + int64(i%7), WriterID: 1 + int64(i%500),
			Content: b.String(), CreatedAt: start.Add(time.Duration(i) * 3 * 365 * 24 * time.Hour / n), Version: 1}
	}
	for i := 0; i < n; i += 2000 {
		if err := ix.Put(ctx, docs[i:i+2000]); err != nil {
			t.Fatal(err)
		}
	}

	queries := [][]string{{words[0]}, {words[1]}, {words[3]}, {words[10]}, {words[40]}, {words[300]}, {words[1500]},
		{words[0], words[1]}, {words[1], words[5]}, {words[2], words[60]}, {words[7], words[900]}}
	var pruned, spans int
	for _, terms := range queries {
		for _, q := range []search.Query{
			{Terms: terms, Limit: 20, CountLimit: 201},
			{Terms: terms, Offset: 40, Limit: 20, CountLimit: 201},
			{Terms: terms, Offset: 200, Limit: 100, CountLimit: 2001},
			{Terms: terms, BoardID: 3, Limit: 20, CountLimit: 201},
			{Terms: terms, WriterID: 17, Limit: 20, CountLimit: 201},
		} {
			for _, newest := range []bool{false, true} {
				q.Newest = newest
				p, err := ix.plan(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				need := q.Offset + q.Limit
				order := byRelevance
				if newest {
					order = byNewest
				}
				fullHits, fullTotal, err := p.search(ctx, nil, need, order)
				if err != nil {
					t.Fatal(err)
				}
				var got bsearch.DocumentMatchCollection
				count := -1
				if newest {
					got, count, err = p.newest(ctx, need)
					if p.rarest() > wholeBelow*uint64(max(need, q.CountLimit)) {
						spans++
					}
				} else {
					var ok bool
					if got, ok, err = p.relevantByImpact(ctx, need); ok {
						pruned++
					} else if err == nil {
						got, _, err = p.ranked(ctx, nil, need)
					}
				}
				p.close()
				if err != nil {
					t.Fatal(err)
				}
				if want, have := ids(fullHits), ids(got[:min(need, len(got))]); !slices.Equal(want, have) {
					t.Errorf("%+v: pruned page differs from the full one:\n full %v\n have %v", q, want, have)
				}
				if count >= 0 && min(count, q.CountLimit) != min(int(fullTotal), q.CountLimit) {
					t.Errorf("%+v: count %d, want %d", q, min(count, q.CountLimit), min(int(fullTotal), q.CountLimit))
				}
				res, err := ix.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if want := ids(fullHits)[min(q.Offset, len(fullHits)):]; !slices.Equal(docIDs(res.Docs), want) {
					t.Errorf("%+v: Search's page differs from the full one", q)
				}
			}
		}
	}
	t.Logf("%d relevance pages by impact levels, %d newest pages by spans of days", pruned, spans)
	// Most relevance pages of frequent words come from the impact levels, and newest pages from spans of days.
	if pruned < 20 || spans < 10 {
		t.Errorf("pruned by impact %d times, by spans %d times: the test no longer tests them", pruned, spans)
	}
}

func ids(hits bsearch.DocumentMatchCollection) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func docIDs(docs []search.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Key()
	}
	return out
}

func openTestIndex(t *testing.T) *Index {
	t.Helper()
	ix, err := New(t.TempDir()).Open(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix.(*Index)
}

// Matches of equal relevance come newest first, however many there are around the page's end: fewer than ranked
// fetches (it orders them itself) or more (bleve orders them by score and time).
func TestEqualScoresNewestFirst(t *testing.T) {
	ctx := context.Background()
	ix := openTestIndex(t)
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []search.Doc
	for n := range 60 {
		content := "pumpkin"
		if n%3 == 0 {
			content = "pumpkin soup" // a longer text: a lower score
		}
		docs = append(docs, search.Doc{Type: search.TypeArticle, ArticleID: int64(n + 1), BoardID: 1, WriterID: 1,
			Content: content, CreatedAt: start.Add(time.Duration(n) * time.Hour), Version: 1})
	}
	// Oldest first, a batch each: bleve's own order of equals (the index's) is then the oldest first.
	for _, d := range docs {
		if err := ix.Put(ctx, []search.Doc{d}); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{5, 20, 40} {
		res, err := ix.Search(ctx, search.Query{Terms: search.Terms("pumpkin"), Limit: limit, CountLimit: 100})
		if err != nil {
			t.Fatal(err)
		}
		// The shorter text scores higher; among equals, the newest first.
		want := slices.SortedFunc(slices.Values(docs), func(a, b search.Doc) int {
			if len(a.Content) != len(b.Content) {
				return len(a.Content) - len(b.Content)
			}
			return b.CreatedAt.Compare(a.CreatedAt)
		})
		if got := docIDs(res.Docs); !slices.Equal(got, docIDs(want[:limit])) {
			t.Errorf("limit %d: %v, want %v", limit, got, docIDs(want[:limit]))
		}
	}
}

// Searches at once, on one index, each give the page they give alone: a sort field holds the values of the document
// it looks at, and no two searches may share one.
func TestConcurrentSearchesAgree(t *testing.T) {
	ctx := context.Background()
	ix := openTestIndex(t)
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var docs []search.Doc
	for n := range 500 {
		docs = append(docs, search.Doc{Type: search.TypeArticle, ArticleID: int64(n + 1), BoardID: 1, WriterID: 1,
			Content: strings.Repeat("melon ", 1+n%7) + "tart", CreatedAt: start.Add(time.Duration(n*37%500) * time.Hour), Version: 1})
	}
	if err := ix.Put(ctx, docs); err != nil {
		t.Fatal(err)
	}
	queries := []search.Query{
		{Terms: []string{"melon"}, Limit: 20, CountLimit: 201},
		{Terms: []string{"melon"}, Newest: true, Limit: 20, CountLimit: 201},
		{Terms: []string{"melon", "tart"}, Offset: 20, Limit: 20, CountLimit: 201},
	}
	want := make([][]string, len(queries))
	for i, q := range queries {
		res, err := ix.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = docIDs(res.Docs)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 30 {
				i := (g + k) % len(queries)
				res, err := ix.Search(ctx, queries[i])
				if err != nil {
					t.Error(err)
					return
				}
				if got := docIDs(res.Docs); !slices.Equal(got, want[i]) {
					t.Errorf("%+v at once with others: %v, alone: %v", queries[i], got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

// An index made before the day and impact fields (created a number, documents stored as JSON, no format) is
// searched whole, in the right orders, until a rebuild replaces it.
func TestIndexOfTheFormerFormat(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opened, err := New(dir).Open(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	ix := opened.(*Index)
	if err := ix.idx.DeleteInternal(formatKey); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := ix.idx.NewBatch()
	for n := range 30 {
		created := start.Add(time.Duration(n*7%30) * time.Hour).UnixMilli()
		content := "plum"
		if n%3 == 0 {
			content = "plum tart" // a longer text: a lower score
		}
		d := document.NewDocument(search.ArticleKey(int64(n + 1)))
		d.AddField(document.NewTextFieldCustom(fieldType, nil, []byte(search.TypeArticle), index.IndexField, nil))
		d.AddField(document.NewTextFieldCustom(fieldBoard, nil, []byte("1"), index.IndexField, nil))
		d.AddField(document.NewTextFieldCustom(fieldText, nil, []byte(content), index.IndexField, ix.analyzer))
		d.AddField(document.NewNumericFieldWithIndexingOptions(fieldCreated, nil, float64(created), index.IndexField|index.DocValues))
		src := fmt.Sprintf(`{"t":"article","a":%d,"b":1,"w":1,"co":%q,"cr":%d,"v":1}`, n+1, content, created)
		d.AddField(document.NewTextFieldCustom(fieldSource, nil, []byte(src), index.StoreField, nil))
		if err := b.IndexAdvanced(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.idx.Batch(b); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if opened, err = New(dir).Open(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	if opened.(*Index).prunes {
		t.Fatal("an index without a format prunes")
	}
	newest, err := opened.Search(ctx, search.Query{Terms: []string{"plum"}, Newest: true, Limit: 30, CountLimit: 31})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(newest.Docs, func(a, b search.Doc) int { return b.CreatedAt.Compare(a.CreatedAt) }) || len(newest.Docs) != 30 {
		t.Errorf("newest first: %d documents, not newest first: %v", len(newest.Docs), docIDs(newest.Docs))
	}
	best, err := opened.Search(ctx, search.Query{Terms: []string{"plum"}, Limit: 30, CountLimit: 31})
	if err != nil {
		t.Fatal(err)
	}
	// The shorter text ranks first; among equals, the newest first.
	if !slices.IsSortedFunc(best.Docs, func(a, b search.Doc) int {
		if len(a.Content) != len(b.Content) {
			return len(a.Content) - len(b.Content)
		}
		return b.CreatedAt.Compare(a.CreatedAt)
	}) || len(best.Docs) != 30 {
		t.Errorf("by relevance: %v", docIDs(best.Docs))
	}
}
