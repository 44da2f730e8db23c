package sqlindex

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"board/internal/search"
	"board/internal/sqldb"
)

// Index is one index: its documents table and the queries on it, written once with the table names in place.
type Index struct {
	db   *sqldb.DB
	name string
	// get is the head of Get's query, up to the opening parenthesis of its IN list; lockSuffix ends the same query
	// when Put reads the documents it is about to write (FOR UPDATE on MySQL; SQLite's write transactions are
	// serial already).
	get, lockSuffix, comments string
	// byRelevance, newest and count take the match expression, then the arguments of filters; byRelevance on MySQL
	// takes the match expression again, for the score it orders by (rankTakesMatch).
	byRelevance, newest, count string
	rankTakesMatch             bool
	// upsert is the head of Put's statement, up to VALUES, and onConflict its tail.
	upsert, onConflict string
}

// columns are what a document is read back from, in the order scanDocs reads them.
const columns = "d.type, d.article_id, d.comment_id, d.board_id, d.writer_id, d.title, d.content, d.created_at, d.version, " +
	"d.moderation, d.hidden, d.deleted"

// putColumns are what Put writes, in the order of a putRow's args; doc_key first, the key of the upsert.
var putColumns = []string{"doc_key", "type", "article_id", "comment_id", "board_id", "writer_id", "title", "content",
	"created_at", "version", "moderation", "hidden", "deleted", "terms"}

// The filters of a search, each "anything" when its argument is zero: one query text whatever filters are set, which
// costs nothing since every search starts from the full-text index (see the package doc), and keeps SQLite's cache
// of prepared statements to three searches per index.
const filters = " AND (? = 0 OR d.board_id = ?) AND (? = 0 OR d.writer_id = ?) AND (? = '' OR d.type = ?)"

func newIndex(db *sqldb.DB, name string) *Index {
	names := tableNames(name)
	from, match, rank := "{doc} AS d", "MATCH(d.terms) AGAINST(? IN BOOLEAN MODE)", "MATCH(d.terms) AGAINST(? IN BOOLEAN MODE) DESC"
	newValue := "VALUES(%s)"
	if db.Dialect == sqldb.SQLite {
		from, match, rank = "{fts} JOIN {doc} AS d ON d.id = {fts}.rowid", "{fts} MATCH ?", "bm25({fts})"
		newValue = "excluded.%s"
	}
	var set []string
	for _, c := range putColumns[1:] {
		set = append(set, c+" = "+fmt.Sprintf(newValue, c))
	}
	matches := "SELECT " + columns + " FROM " + from + " WHERE " + match + filters
	return &Index{
		db:             db,
		name:           name,
		get:            names.Replace("SELECT " + columns + " FROM {doc} AS d WHERE d.doc_key IN ("),
		lockSuffix:     map[bool]string{true: ") FOR UPDATE", false: ")"}[db.Dialect == sqldb.MySQL],
		comments:       names.Replace("SELECT " + columns + " FROM {doc} AS d WHERE d.article_id = ? AND d.type = 'comment'"),
		byRelevance:    names.Replace(matches + " ORDER BY " + rank + ", d.created_at DESC, d.doc_key DESC LIMIT ? OFFSET ?"),
		newest:         names.Replace(matches + " ORDER BY d.created_at DESC, d.doc_key DESC LIMIT ? OFFSET ?"),
		count:          names.Replace("SELECT COUNT(*) FROM (SELECT 1 FROM " + from + " WHERE " + match + filters + " LIMIT ?) AS matches"),
		rankTakesMatch: db.Dialect == sqldb.MySQL,
		upsert:         names.Replace("INSERT INTO {doc} (" + strings.Join(putColumns, ", ") + ") VALUES "),
		onConflict:     db.OnConflictUpdate("doc_key", strings.Join(set, ", ")),
	}
}

// getBatch bounds the keys of one Get query.
const getBatch = 500

// Get reads the documents of keys, in any state.
func (ix *Index) Get(ctx context.Context, keys []string) (map[string]search.Doc, error) {
	out := make(map[string]search.Doc, len(keys))
	for batch := range slices.Chunk(keys, getBatch) {
		args := make([]any, len(batch))
		for i, k := range batch {
			args[i] = k
		}
		docs, err := scanDocs(ix.db.QueryContext(ctx, ix.get+"?"+strings.Repeat(", ?", len(batch)-1)+")", args...))
		if err != nil {
			return nil, fmt.Errorf("sql search index %s: get: %w", ix.name, err)
		}
		for _, d := range docs {
			out[d.Key()] = d
		}
	}
	return out, nil
}

// Put writes docs in one transaction, a multi-row upsert per maxPutRows documents (or maxPutBytes). A key that docs holds twice is
// written once, as its last document, and the rows are written in key order, so that two Puts that share keys lock
// them in the same order instead of deadlocking.
//
// Several instances write one index, each with a consumer of some partitions, and the article, comment and
// moderation topics all change the same documents: each document is merged (search.Merge) with the one the index
// holds, read and locked in the same transaction, so that no instance's change is lost to another's older read.
func (ix *Index) Put(ctx context.Context, docs []search.Doc) error {
	prepared := putRows(docs)
	if len(prepared) == 0 {
		return nil
	}
	err := ix.db.Transact(ctx, func(tx *sql.Tx) error {
		// Each attempt starts over from the first row: Transact runs this again after a deadlock.
		rows, err := ix.merged(ctx, tx, prepared)
		if err != nil {
			return err
		}
		for pending := rows; len(pending) > 0; {
			n, size := 0, 0
			for n < len(pending) && n < maxPutRows && size < maxPutBytes {
				size += pending[n].size
				n++
			}
			args := make([]any, 0, n*len(putColumns))
			for _, r := range pending[:n] {
				args = append(args, r.args...)
			}
			values := "(?" + strings.Repeat(", ?", len(putColumns)-1) + ")"
			stmt := ix.upsert + values + strings.Repeat(", "+values, n-1) + ix.onConflict
			if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
				return err
			}
			pending = pending[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sql search index %s: put: %w", ix.name, err)
	}
	return nil
}

// merged returns rows with each document merged with the one the index holds, which it locks.
func (ix *Index) merged(ctx context.Context, tx *sql.Tx, rows []putRow) ([]putRow, error) {
	out := slices.Clone(rows)
	for start := 0; start < len(rows); start += getBatch {
		batch := rows[start:min(start+getBatch, len(rows))]
		args := make([]any, len(batch))
		for i, r := range batch {
			args[i] = r.key
		}
		held, err := scanDocs(tx.QueryContext(ctx, ix.get+"?"+strings.Repeat(", ?", len(batch)-1)+ix.lockSuffix, args...))
		if err != nil {
			return nil, err
		}
		byKey := make(map[string]search.Doc, len(held))
		for _, d := range held {
			byKey[d.Key()] = d
		}
		for i, r := range batch {
			if cur, ok := byKey[r.key]; ok {
				if d := search.Merge(cur, r.doc); d != r.doc {
					out[start+i] = newPutRow(d)
				}
			}
		}
	}
	return out, nil
}

// An upsert statement of Put writes at most maxPutRows documents, and stops adding documents once they hold
// maxPutBytes of text: a statement must fit MySQL's max_allowed_packet (16 MiB by default on MariaDB), and a
// document's words take about 14 bytes for each Korean character (3 bytes) of its text, a bigram's word and a space.
const (
	maxPutRows  = 100
	maxPutBytes = 1 << 20
)

// putRow is the arguments of one document's row, and the bytes of text they hold.
type putRow struct {
	key  string
	doc  search.Doc
	args []any
	size int
}

// newPutRow analyzes d into its row.
func newPutRow(d search.Doc) putRow {
	words := documentWords(d)
	return putRow{key: d.Key(), doc: d, size: len(d.Title) + len(d.Content) + len(words), args: []any{
		d.Key(), string(d.Type), d.ArticleID, d.CommentID, d.BoardID, d.WriterID, d.Title, d.Content,
		d.CreatedAt.UnixMilli(), d.Version, d.Moderation, d.Hidden, d.Deleted, words}}
}

// putRows returns the rows of docs to write, the last document of each key, in key order. Analysis happens here,
// before the transaction, which may run more than once.
func putRows(docs []search.Doc) []putRow {
	last := make(map[string]int, len(docs))
	for i, d := range docs {
		last[d.Key()] = i
	}
	rows := make([]putRow, 0, len(last))
	for _, i := range last {
		rows = append(rows, newPutRow(docs[i]))
	}
	slices.SortFunc(rows, func(a, b putRow) int { return strings.Compare(a.key, b.key) })
	return rows
}

// Comments reads the documents of an article's comments, in any state.
func (ix *Index) Comments(ctx context.Context, articleID int64) ([]search.Doc, error) {
	docs, err := scanDocs(ix.db.QueryContext(ctx, ix.comments, articleID))
	if err != nil {
		return nil, fmt.Errorf("sql search index %s: comments of %d: %w", ix.name, articleID, err)
	}
	return docs, nil
}

// Search finds the live documents that hold all of q's terms (only live documents have words; see the package doc),
// a page of them and their count up to q.CountLimit.
func (ix *Index) Search(ctx context.Context, q search.Query) (search.Result, error) {
	if len(q.Terms) == 0 {
		return search.Result{}, nil
	}
	match := matchAll(ix.db.Dialect, q.Terms)
	where := []any{match, q.BoardID, q.BoardID, q.WriterID, q.WriterID, string(q.Type), string(q.Type)}
	page, pageArgs := ix.newest, slices.Clone(where)
	if !q.Newest {
		page = ix.byRelevance
		if ix.rankTakesMatch {
			pageArgs = append(pageArgs, match)
		}
	}
	// A negative LIMIT is no limit to SQLite and an error to MySQL: neither is what a negative bound means.
	docs, err := scanDocs(ix.db.QueryContext(ctx, page, append(pageArgs, max(q.Limit, 0), max(q.Offset, 0))...))
	if err != nil {
		return search.Result{}, fmt.Errorf("sql search index %s: search: %w", ix.name, err)
	}
	var count int
	if err := ix.db.QueryRowContext(ctx, ix.count, append(where, max(q.CountLimit, 0))...).Scan(&count); err != nil {
		return search.Result{}, fmt.Errorf("sql search index %s: count: %w", ix.name, err)
	}
	return search.Result{Docs: docs, Count: count}, nil
}

// Close does nothing: the index's tables stay, and the database belongs to the caller.
func (ix *Index) Close() error { return nil }

// scanDocs reads the documents of a query that selects columns (pass the query's two results straight in), and
// closes the rows.
func scanDocs(rows *sql.Rows, err error) ([]search.Doc, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var docs []search.Doc
	for rows.Next() {
		var d search.Doc
		var created int64
		if err := rows.Scan(&d.Type, &d.ArticleID, &d.CommentID, &d.BoardID, &d.WriterID, &d.Title, &d.Content, &created,
			&d.Version, &d.Moderation, &d.Hidden, &d.Deleted); err != nil {
			return nil, err
		}
		d.CreatedAt = time.UnixMilli(created).UTC()
		docs = append(docs, d)
	}
	return docs, rows.Err()
}
