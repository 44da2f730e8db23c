// Package searchtest is the suite every search engine passes: what one engine finds, the others find.
package searchtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"board/internal/search"
)

// Run runs the suite against the engine that open returns; each call of open must return an engine of its own,
// empty, that the test's cleanup removes.
func Run(t *testing.T, open func(t *testing.T) search.Engine) {
	t.Run("GetAndPut", func(t *testing.T) { testGetAndPut(t, openIndex(t, open)) })
	t.Run("KoreanInsideLongerWords", func(t *testing.T) { testKorean(t, openIndex(t, open)) })
	t.Run("EnglishStems", func(t *testing.T) { testStems(t, openIndex(t, open)) })
	t.Run("AllTermsMustMatch", func(t *testing.T) { testAllTerms(t, openIndex(t, open)) })
	t.Run("Filters", func(t *testing.T) { testFilters(t, openIndex(t, open)) })
	t.Run("OnlyLiveDocuments", func(t *testing.T) { testOnlyLive(t, openIndex(t, open)) })
	t.Run("Order", func(t *testing.T) { testOrder(t, openIndex(t, open)) })
	t.Run("PagesAndCount", func(t *testing.T) { testPages(t, openIndex(t, open)) })
	t.Run("Comments", func(t *testing.T) { testComments(t, openIndex(t, open)) })
	t.Run("QuerySyntaxIsText", func(t *testing.T) { testSyntax(t, openIndex(t, open)) })
	t.Run("Engine", func(t *testing.T) { testEngine(t, open(t)) })
}

var base = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// article returns a live article created n minutes after base.
func article(id int64, board int64, title, content string) search.Doc {
	return search.Doc{Type: search.TypeArticle, ArticleID: id, BoardID: board, WriterID: 100 + id%3, Title: title,
		Content: content, CreatedAt: base.Add(time.Duration(id) * time.Minute), Version: 1}
}

func comment(id, articleID, board int64, content string) search.Doc {
	return search.Doc{Type: search.TypeComment, CommentID: id, ArticleID: articleID, BoardID: board, WriterID: 200,
		Content: content, CreatedAt: base.Add(time.Duration(id) * time.Minute), Version: 1}
}

func openIndex(t *testing.T, open func(t *testing.T) search.Engine) search.Indexer {
	t.Helper()
	e := open(t)
	ix, err := e.Open(context.Background(), "suite")
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

func put(t *testing.T, ix search.Indexer, docs ...search.Doc) {
	t.Helper()
	if err := ix.Put(context.Background(), docs); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// find returns the keys a query for text finds, in order, and the count.
func find(t *testing.T, ix search.Indexer, text string, q search.Query) ([]string, int) {
	t.Helper()
	q.Terms = search.Terms(text)
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.CountLimit == 0 {
		q.CountLimit = 1000
	}
	res, err := ix.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	keys := make([]string, 0, len(res.Docs))
	for _, d := range res.Docs {
		keys = append(keys, d.Key())
	}
	return keys, res.Count
}

func wantFound(t *testing.T, ix search.Indexer, text string, q search.Query, want ...string) {
	t.Helper()
	got, _ := find(t, ix, text, q)
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("search %q %+v found %v, want %v", text, q, got, want)
	}
}

func testGetAndPut(t *testing.T, ix search.Indexer) {
	ctx := context.Background()
	a := article(1, 7, "제목 title", "본문 <b>content</b> & more")
	a.Moderation, a.Hidden = 3, true
	c := comment(2, 1, 7, "a comment")
	c.Deleted, c.Version, c.Content = true, 2, ""
	put(t, ix, a, c)
	got, err := ix.Get(ctx, []string{a.Key(), c.Key(), search.ArticleKey(99)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("Get found %d documents, want 2: %+v", len(got), got)
	}
	for _, want := range []search.Doc{a, c} {
		d := got[want.Key()]
		if !d.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("%s: created %v, want %v", want.Key(), d.CreatedAt, want.CreatedAt)
		}
		d.CreatedAt = want.CreatedAt
		if d != want {
			t.Errorf("Get %s = %+v, want %+v", want.Key(), d, want)
		}
	}
	// A put replaces the document of its key.
	a.Title, a.Version, a.Hidden = "new title", 2, false
	put(t, ix, a)
	got, err = ix.Get(ctx, []string{a.Key()})
	if err != nil {
		t.Fatal(err)
	}
	if d := got[a.Key()]; d.Title != "new title" || d.Version != 2 || d.Hidden {
		t.Errorf("after a second put: %+v", d)
	}
	wantFound(t, ix, "new", search.Query{}, a.Key())
	wantFound(t, ix, "제목", search.Query{})
}

func testKorean(t *testing.T, ix search.Indexer) {
	put(t, ix,
		article(1, 1, "자유게시판에 처음 글을 씁니다", "안녕하세요. 잘 부탁드립니다."),
		article(2, 1, "게시물 작성 규칙", "제목과 본문을 꼭 적어 주세요."),
		article(3, 1, "mixed 한국어와 English", "Go언어로 만든 board게시판"),
	)
	wantFound(t, ix, "게시판", search.Query{}, "a3", "a1") // inside 자유게시판에 and board게시판
	wantFound(t, ix, "게시", search.Query{}, "a3", "a2", "a1")
	wantFound(t, ix, "부탁", search.Query{}, "a1")
	wantFound(t, ix, "언어", search.Query{}, "a3")
	wantFound(t, ix, "한국어 english", search.Query{}, "a3")
	wantFound(t, ix, "게시판 규칙", search.Query{})
}

func testStems(t *testing.T, ix search.Indexer) {
	put(t, ix,
		article(1, 1, "Why I liked this board", "Many people like it."),
		article(2, 1, "Running notes", "She runs every day; the runner ran."),
		article(3, 1, "Nothing here", "unrelated words"),
	)
	wantFound(t, ix, "like", search.Query{}, "a1")
	wantFound(t, ix, "likes", search.Query{}, "a1")
	wantFound(t, ix, "LIKED", search.Query{}, "a1")
	wantFound(t, ix, "run", search.Query{}, "a2")
	wantFound(t, ix, "boards", search.Query{}, "a1")
}

func testAllTerms(t *testing.T, ix search.Indexer) {
	put(t, ix,
		article(1, 1, "apple banana", "cherry"),
		article(2, 1, "apple", "durian"),
	)
	wantFound(t, ix, "apple cherry", search.Query{}, "a1")
	wantFound(t, ix, "apple", search.Query{Newest: true}, "a2", "a1")
	wantFound(t, ix, "apple fig", search.Query{})
	wantFound(t, ix, "fig", search.Query{})
}

func testFilters(t *testing.T, ix search.Indexer) {
	a1 := article(1, 1, "kimchi recipe", "cabbage")
	a2 := article(2, 2, "kimchi stew", "pork")
	a2.WriterID = 500
	put(t, ix, a1, a2, comment(3, 1, 1, "my kimchi is better"), comment(4, 2, 2, "kimchi again"))
	wantFound(t, ix, "kimchi", search.Query{Newest: true}, "c4", "c3", "a2", "a1")
	wantFound(t, ix, "kimchi", search.Query{Newest: true, BoardID: 1}, "c3", "a1")
	wantFound(t, ix, "kimchi", search.Query{Newest: true, WriterID: 500}, "a2")
	wantFound(t, ix, "kimchi", search.Query{Newest: true, Type: search.TypeComment}, "c4", "c3")
	wantFound(t, ix, "kimchi", search.Query{Newest: true, Type: search.TypeArticle, BoardID: 2}, "a2")
	wantFound(t, ix, "kimchi", search.Query{BoardID: 3})
}

func testOnlyLive(t *testing.T, ix search.Indexer) {
	hidden := article(1, 1, "secret plan", "hidden words")
	hidden.Hidden, hidden.Moderation = true, 1
	deleted := comment(2, 3, 1, "")
	deleted.Deleted, deleted.Version = true, 2
	put(t, ix, hidden, deleted, article(3, 1, "public plan", "visible words"))
	wantFound(t, ix, "plan", search.Query{}, "a3")
	wantFound(t, ix, "secret", search.Query{})
	wantFound(t, ix, "words", search.Query{}, "a3")
	// Restored, the hidden article is found again.
	hidden.Hidden, hidden.Moderation = false, 2
	put(t, ix, hidden)
	wantFound(t, ix, "secret", search.Query{}, "a1")
	_, count := find(t, ix, "plan", search.Query{})
	if count != 2 {
		t.Errorf("count of plan = %d, want 2", count)
	}
}

func testOrder(t *testing.T, ix search.Indexer) {
	put(t, ix,
		article(1, 1, "garden", "tomato tomato tomato in the tomato garden"),
		article(2, 1, "notes", "a tomato"),
		article(3, 1, "tomato", "tomato soup with tomato"),
	)
	got, _ := find(t, ix, "tomato", search.Query{})
	if len(got) != 3 || got[2] != "a2" {
		t.Errorf("by relevance: %v, want the article that says tomato once last", got)
	}
	wantFound(t, ix, "tomato", search.Query{Newest: true}, "a3", "a2", "a1")
	// Equal relevance: newest first.
	put(t, ix, article(4, 2, "same", "zucchini"), article(5, 2, "same", "zucchini"), article(6, 2, "same", "zucchini"))
	wantFound(t, ix, "zucchini", search.Query{}, "a6", "a5", "a4")
}

func testPages(t *testing.T, ix search.Indexer) {
	var docs []search.Doc
	for i := int64(1); i <= 30; i++ {
		docs = append(docs, article(i, 1, fmt.Sprintf("post %d", i), "paging test"))
	}
	put(t, ix, docs...)
	got, count := find(t, ix, "paging", search.Query{Newest: true, Offset: 10, Limit: 5, CountLimit: 1000})
	if !slices.Equal(got, []string{"a20", "a19", "a18", "a17", "a16"}) || count != 30 {
		t.Errorf("page 3 of 5: %v count %d", got, count)
	}
	if _, count := find(t, ix, "paging", search.Query{Limit: 5, CountLimit: 11}); count != 11 {
		t.Errorf("count with limit 11 = %d", count)
	}
	if got, count := find(t, ix, "paging", search.Query{Offset: 100, Limit: 10}); len(got) != 0 || count != 30 {
		t.Errorf("past the end: %v count %d", got, count)
	}
}

func testComments(t *testing.T, ix search.Indexer) {
	unknown := comment(3, 1, 0, "before its article")
	put(t, ix, article(1, 1, "a", "b"), comment(2, 1, 1, "x"), unknown, comment(4, 9, 1, "other article"))
	got, err := ix.Comments(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range got {
		keys = append(keys, d.Key())
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"c2", "c3"}) {
		t.Errorf("Comments(1) = %v, want c2 c3", keys)
	}
}

func testSyntax(t *testing.T, ix search.Indexer) {
	put(t, ix, article(1, 1, "c++ and AND OR NOT", `quotes " and 'single' (parens) * + - ~ : ^ \ % _ ; --`))
	for _, text := range []string{`"`, `*`, `c++`, `AND OR`, `(parens)`, `'single'`, `-- ;`, `%`, `_`, `\`, `NOT`,
		`title:single`, `+single -parens`} {
		if _, _, err := searchText(ix, text); err != nil {
			t.Errorf("search %q: %v", text, err)
		}
	}
	wantFound(t, ix, "(parens)", search.Query{}, "a1")
	wantFound(t, ix, "'single'", search.Query{}, "a1")
}

func searchText(ix search.Indexer, text string) ([]search.Doc, int, error) {
	terms := search.Terms(text)
	if len(terms) == 0 {
		return nil, 0, nil
	}
	res, err := ix.Search(context.Background(), search.Query{Terms: terms, Limit: 10, CountLimit: 100})
	return res.Docs, res.Count, err
}

func testEngine(t *testing.T, e search.Engine) {
	ctx := context.Background()
	if cur, err := e.Current(ctx); err != nil || cur != "" {
		t.Fatalf("Current of a new engine = %q, %v", cur, err)
	}
	ix, err := e.Open(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	put(t, ix, article(1, 1, "durable words", "kept across a reopen"))
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.SetCurrent(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	second, err := e.Open(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	put(t, second, article(2, 1, "other words", "only in the second"))
	wantFound(t, second, "words", search.Query{}, "a2")
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = e.Open(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	wantFound(t, ix, "words", search.Query{}, "a1")
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.Current(ctx); err != nil || cur != "first" {
		t.Fatalf("Current = %q, %v; want first", cur, err)
	}
	if err := e.SetCurrent(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	if names, err := e.List(ctx); err != nil || !slices.Equal(slices.Sorted(slices.Values(names)), []string{"first", "second"}) {
		t.Fatalf("List = %v, %v; want first and second", names, err)
	}
	if err := e.Drop(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	if names, err := e.List(ctx); err != nil || !slices.Equal(names, []string{"second"}) {
		t.Fatalf("List after a drop = %v, %v; want second", names, err)
	}
	if cur, err := e.Current(ctx); err != nil || cur != "second" {
		t.Fatalf("Current = %q, %v; want second", cur, err)
	}
	ix, err = e.Open(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	wantFound(t, ix, "words", search.Query{}) // dropped: opened again, it is empty
}
