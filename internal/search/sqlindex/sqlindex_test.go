package sqlindex_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"board/internal/fault"
	"board/internal/polltest"
	"board/internal/search"
	"board/internal/search/searchtest"
	"board/internal/search/sqlindex"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// backends returns the databases the tests run on, each opening a fresh, migrated database of its own per call.
func backends() map[string]func(testing.TB) *sqldb.DB {
	b := map[string]func(testing.TB) *sqldb.DB{
		"sqlite": func(t testing.TB) *sqldb.DB { return sqldbtest.OpenSQLite(t, sqlindex.Migrate) },
	}
	if os.Getenv(sqldbtest.MySQLDSNEnv) != "" {
		b["mysql"] = func(t testing.TB) *sqldb.DB { return sqldbtest.OpenMySQL(t, sqlindex.Migrate) }
	}
	return b
}

// each runs fn in a subtest per backend with a fresh engine.
func each(t *testing.T, fn func(t *testing.T, e *sqlindex.Engine)) {
	for name, open := range backends() {
		t.Run(name, func(t *testing.T) { fn(t, sqlindex.New(open(t))) })
	}
}

func TestSuite(t *testing.T) {
	for name, open := range backends() {
		t.Run(name, func(t *testing.T) {
			searchtest.Run(t, func(t *testing.T) search.Engine { return sqlindex.New(open(t)) })
		})
	}
}

func openIndex(t *testing.T, e *sqlindex.Engine, name string) search.Indexer {
	t.Helper()
	ix, err := e.Open(context.Background(), name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

func article(id int64, content string) search.Doc {
	return search.Doc{Type: search.TypeArticle, ArticleID: id, BoardID: 1, WriterID: 2, Title: "title",
		Content: content, CreatedAt: time.UnixMilli(1_800_000_000_000 + id).UTC(), Version: 1}
}

func put(t *testing.T, ix search.Indexer, docs ...search.Doc) {
	t.Helper()
	if err := ix.Put(context.Background(), docs); err != nil {
		t.Fatalf("put: %v", err)
	}
}

// found returns the keys a search for text finds, in order, and the count.
func found(t *testing.T, ix search.Indexer, text string) ([]string, int) {
	t.Helper()
	res, err := ix.Search(context.Background(), search.Query{Terms: search.Terms(text), Limit: 1000, CountLimit: 1000})
	if err != nil {
		t.Fatalf("search %q: %v", text, err)
	}
	var keys []string
	for _, d := range res.Docs {
		keys = append(keys, d.Key())
	}
	return keys, res.Count
}

// Index names become table names: only letters, digits, - and _ pass, and a refused name makes no table.
func TestIndexNames(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ctx := context.Background()
		long := strings.Repeat("n", 54)
		for _, name := range []string{"", "a b", "a;DROP TABLE search_current", "a`b", `a"b`, "a.b", "검색", long} {
			if _, err := e.Open(ctx, name); err == nil {
				t.Errorf("Open(%q) succeeded", name)
			}
			if err := e.SetCurrent(ctx, name); err == nil {
				t.Errorf("SetCurrent(%q) succeeded", name)
			}
			if err := e.Drop(ctx, name); err == nil {
				t.Errorf("Drop(%q) succeeded", name)
			}
		}
		if cur, err := e.Current(ctx); err != nil || cur != "" {
			t.Errorf("Current after refused names = %q, %v", cur, err)
		}
		// The longest name and one with a hyphen work, and stay apart from a name they would meet unquoted.
		for _, name := range []string{long[1:], "search-2026", "search_2026"} {
			ix := openIndex(t, e, name)
			put(t, ix, article(1, "only in "+name))
			if keys, _ := found(t, ix, name); !slices.Equal(keys, []string{"a1"}) {
				t.Errorf("index %s found %v for its own name", name, keys)
			}
		}
		if keys, _ := found(t, openIndex(t, e, "search_2026"), "search-2026"); keys != nil {
			t.Errorf("search_2026 holds search-2026's document: %v", keys)
		}
	})
}

// A term longer than the words InnoDB indexes (84 characters) is found, and only by itself, not by another term
// that begins the same way.
func TestLongTerms(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ix := openIndex(t, e, "long")
		long := strings.Repeat("x", 100)
		put(t, ix, article(1, "a "+long+" word"), article(2, long+"x"), article(3, "게시판"+long))
		for text, want := range map[string][]string{long: {"a1", "a3"}, long + "x": {"a2"}, long[1:]: nil} {
			keys, _ := found(t, ix, text)
			slices.Sort(keys)
			if !slices.Equal(keys, want) {
				t.Errorf("search for %d x found %v, want %v", len(text), keys, want)
			}
		}
	})
}

// Put writes a batch of several statements in one transaction, and a key written twice in a batch ends as its last
// document.
func TestPutBatches(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ix := openIndex(t, e, "batch")
		var docs []search.Doc
		var keys []string
		for i := int64(1); i <= 250; i++ {
			docs = append(docs, article(i, fmt.Sprintf("batch %d", i)))
			keys = append(keys, search.ArticleKey(i))
		}
		changed := docs[0]
		changed.Content, changed.Version = "replaced", 2
		docs = append(docs, changed)
		put(t, ix, docs...)
		got, err := ix.Get(context.Background(), append(keys, keys...))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 250 {
			t.Errorf("Get found %d documents, want 250", len(got))
		}
		if d := got["a1"]; d.Content != "replaced" || d.Version != 2 {
			t.Errorf("a1 = %+v, want its last put", d)
		}
		if _, count := found(t, ix, "batch"); count != 249 {
			t.Errorf("count of batch = %d, want 249", count)
		}
		if keys, _ := found(t, ix, "replaced"); !slices.Equal(keys, []string{"a1"}) {
			t.Errorf("search for replaced found %v", keys)
		}
	})
}

// A document's words change with its state, however often: hidden, restored, edited, deleted.
func TestStateChanges(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ix := openIndex(t, e, "states")
		a := article(1, "first words")
		put(t, ix, a, article(2, "other words"))
		a.Hidden, a.Moderation = true, 1
		put(t, ix, a)
		a.Hidden, a.Moderation = false, 2
		put(t, ix, a)
		a.Content, a.Version = "second words", 2
		put(t, ix, a)
		for text, want := range map[string][]string{"first": nil, "second": {"a1"}, "words": {"a2", "a1"}} {
			if keys, _ := found(t, ix, text); !slices.Equal(keys, want) {
				t.Errorf("after edits, search %q found %v, want %v", text, keys, want)
			}
		}
		a.Deleted, a.Version, a.Content = true, 3, ""
		put(t, ix, a)
		if keys, count := found(t, ix, "words"); !slices.Equal(keys, []string{"a2"}) || count != 1 {
			t.Errorf("after the delete, search words found %v count %d", keys, count)
		}
	})
}

// A query with no terms (all stop words) finds nothing, and bounds below zero are no bounds at all.
func TestEmptyAndNegative(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ix := openIndex(t, e, "bounds")
		put(t, ix, article(1, "the words"))
		res, err := ix.Search(context.Background(), search.Query{Limit: 10, CountLimit: 10})
		if err != nil || len(res.Docs) != 0 || res.Count != 0 {
			t.Errorf("search without terms = %+v, %v", res, err)
		}
		res, err = ix.Search(context.Background(), search.Query{Terms: search.Terms("words"), Limit: -1, Offset: -1, CountLimit: -1})
		if err != nil || len(res.Docs) != 0 || res.Count != 0 {
			t.Errorf("search with negative bounds = %+v, %v", res, err)
		}
	})
}

// Every call runs under the caller's context: past its deadline, none reaches the database, and the error is the
// database fault the edge answers with 503.
func TestContext(t *testing.T) {
	each(t, func(t *testing.T, e *sqlindex.Engine) {
		ix := openIndex(t, e, "ctx")
		put(t, ix, article(1, "words"))
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		q := search.Query{Terms: search.Terms("words"), Limit: 10, CountLimit: 10}
		calls := map[string]error{
			"Search": func() error { _, err := ix.Search(ctx, q); return err }(),
			"Get":    func() error { _, err := ix.Get(ctx, []string{"a1"}); return err }(),
			"Put":    ix.Put(ctx, []search.Doc{article(2, "more")}),
		}
		for call, err := range calls {
			if fe, ok := fault.As(err); !ok || fe.Kind != fault.Unavailable {
				t.Errorf("%s past its deadline: %v, want the database unavailable", call, err)
			}
		}
		if _, err := e.Open(ctx, "other"); err == nil {
			t.Error("Open past its deadline succeeded")
		}
	})
}

// A Put that loses a deadlock runs again from its first row, and writes every document. Another transaction holds a
// row that the Put's second statement writes, and asks for one its first statement wrote; having changed more rows,
// it is the heavier of the two, which InnoDB does not pick as the deadlock's victim.
func TestPutAfterDeadlock(t *testing.T) {
	if os.Getenv(sqldbtest.MySQLDSNEnv) == "" || os.Getenv(sqldbtest.VitessPrefixesEnv) != "" {
		t.Skip("needs MariaDB: set " + sqldbtest.MySQLDSNEnv)
	}
	ctx := context.Background()
	db := sqldbtest.OpenMySQL(t, sqlindex.Migrate)
	ix := openIndex(t, sqlindex.New(db), "deadlock")
	held := article(99, "held") // in the Put's second statement: its keys in order are a1, a10, a100 ... a99
	setup := []search.Doc{held}
	for i := int64(1); i <= 1000; i++ {
		setup = append(setup, search.Doc{Type: search.TypeComment, CommentID: i, ArticleID: 1, Content: "comment", Version: 1})
	}
	put(t, ix, setup...)

	other, err := sql.Open("mysql", sqldbtest.DSN(t, db.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, stmt := range []string{"UPDATE `search_deadlock_doc` SET moderation = 7 WHERE doc_key >= 'c'",
		"UPDATE `search_deadlock_doc` SET moderation = 7 WHERE doc_key = 'a99'"} {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}

	var docs []search.Doc
	for i := int64(1); i <= 150; i++ {
		docs = append(docs, article(i, "written"))
	}
	done := make(chan error, 1)
	go func() { done <- ix.Put(ctx, docs) }()
	// InnoDB's status names the lock a transaction waits for (its information_schema tables are a cache, refreshed
	// only after 100 ms without a read: a poll would keep reading the first copy).
	waiting := "`" + db.Name + "`.`search_deadlock_doc` trx id"
	polltest.Until(t, time.Minute, func() (bool, string) {
		var typ, name, status string
		if err := other.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
			return false, err.Error()
		}
		for line := range strings.Lines(status) {
			if strings.Contains(line, waiting) && strings.HasSuffix(strings.TrimSpace(line), "waiting") {
				return true, ""
			}
		}
		return false, "no transaction waits for a row of the index:\n" + status
	})
	if _, err := tx.ExecContext(ctx, "UPDATE `search_deadlock_doc` SET moderation = 7 WHERE doc_key = 'a1'"); err != nil {
		t.Fatalf("the heavier transaction lost the deadlock: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("put after a deadlock: %v", err)
	}
	var keys []string
	for _, d := range docs {
		keys = append(keys, d.Key())
	}
	got, err := ix.Get(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(docs) || got["a99"].Content != "written" {
		t.Errorf("after the deadlock, Get found %d of %d documents, a99 %+v", len(got), len(docs), got["a99"])
	}
}
