// Package sqlindex is the SQL engine of search: each index is a table of documents in the service's SQL database,
// searched with the SQL engine's own full-text index, SQLite's FTS5 or MariaDB's InnoDB FULLTEXT. On MariaDB the
// instances of the service share it, where the embedded engine (bleveindex) keeps a full index per instance.
//
// # Words, not text
//
// The full-text index never sees the documents' text. It holds board's analyzed terms (search.Analyze: the same
// analyzer bleve uses), each written as an ASCII word, and a query asks for the words of its terms: the SQL engine
// only finds documents that hold all of a query's words, and so finds exactly what bleve finds. Its own tokenizers
// would not: neither knows Korean bigrams or Porter stems, and InnoDB drops words shorter than
// innodb_ft_min_token_size (3 by default, and set only at server start: a Hangul bigram is 2 characters), longer than
// innodb_ft_max_token_size (84) and its stop words. A term's word is "w" and the hex of its bytes
// (weab28cec8b9c for 게시): letters and digits that every parser keeps whole, 3 characters at the least, and none of
// InnoDB's stop words (no stop word is a w or an h followed by hex digits alone). A term longer than maxTermBytes is
// written "h" and the hex of its SHA-256 instead, so that no word passes 84 characters and a long term still
// matches only itself, where cutting it short would let it match every term it begins. FTS5's unicode61 tokenizer
// takes the same words, for one code path.
//
// Only those words ever reach a MATCH expression, which is itself a bound parameter like every other value: what a
// user types cannot be query syntax. The index names are the one part of the SQL built from input, and they are
// checked against validName first.
//
// # Tables
//
// Each index has a table of documents, search_<name>_doc: the whole document (Get and Comments read it back), the
// filters' columns, and terms, the words of a live document's title and content, in order and repeated, so that the
// engine's ranking can count them. A hidden or deleted document keeps its row with terms empty: it cannot match, a
// restore brings it back from the stored title and content, and a deleted one is a tombstone (see search.State).
// On MariaDB terms carries a FULLTEXT index. On SQLite an FTS5 table, search_<name>_fts, indexes terms as external
// content (it stores no copy of the words), kept in step by triggers on the documents table, in the statement that
// changes a row and so in Put's transaction; only rows with words enter it, so that its statistics (the number of
// documents and their mean length) count the searchable documents alone. Rows are never deleted: Drop drops the
// tables. search_current, made by Migrate, holds the name of the current index.
//
// The one secondary index is on article_id, for Comments. The filters (board, writer, type) have none: every search
// starts from the full-text index, on both engines, and tests the filters on the rows it finds, since the ranking
// needs every match anyway; an index on board_id would only help a planner that walked a board and tested each row
// against the full-text query, which neither does.
//
// # Ranking and counting
//
// Relevance is the engine's own: FTS5's bm25() on SQLite, InnoDB's TF-IDF score (MATCH ... AGAINST in boolean mode)
// on MariaDB. The engines agree on what the suite asks (more occurrences rank higher, equal documents tie), not on
// every order. Ties, and Newest, go by created_at and then key, descending. Either way a page sorts every match, so a
// word that most documents hold costs a pass over all of them: the price of the engine's own ranking. The count
// stops at the query's CountLimit: a subquery with that LIMIT.
//
// # Vitess
//
// Not run behind Vitess's vtgate: the search service refuses --search-engine sql there. A sharded keyspace would not do: every new index's table would need its
// VSchema, and a search would scatter to every shard, each ranking with its own statistics, for vtgate to merge by
// scores that do not compare. An unsharded keyspace of its own might: vtgate passes its DDL and queries through to
// its one shard.
package sqlindex

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"board/internal/search"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the engine's own schema: the table of the current index's name. The indexes' tables
// are made by Engine.Open.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	return sqldb.Migrate(ctx, db, "search_sql", migrations)
}

// validName is what an index name may be: the characters the embedded engine's names may have, and short enough
// that the longest table name made of it, search_<name>_doc, stays within MySQL's 64 characters. A name is quoted
// wherever it is used, so a hyphen is harmless.
var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,53}$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("sql search index name %q: want 1-53 letters, digits, - or _", name)
	}
	return nil
}

// Engine keeps its indexes as tables of one database.
type Engine struct {
	db *sqldb.DB
}

// New returns the engine whose indexes live in db, which Migrate has prepared.
func New(db *sqldb.DB) *Engine { return &Engine{db: db} }

// Open opens the named index, creating its tables if they do not exist.
func (e *Engine) Open(ctx context.Context, name string) (search.Indexer, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	schema := mysqlSchema
	if e.db.Dialect == sqldb.SQLite {
		schema = sqliteSchema
	}
	names := tableNames(name)
	err := e.db.Transact(ctx, func(tx *sql.Tx) error {
		for _, stmt := range schema {
			if _, err := tx.ExecContext(ctx, names.Replace(stmt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open sql search index %s: %w", name, err)
	}
	return newIndex(e.db, name), nil
}

// Current returns the name search_current holds; "" when it holds none.
func (e *Engine) Current(ctx context.Context) (string, error) {
	var name string
	err := e.db.QueryRowContext(ctx, "SELECT name FROM search_current WHERE singleton = 1").Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return name, err
}

// SetCurrent writes name into search_current.
func (e *Engine) SetCurrent(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	_, err := e.db.ExecContext(ctx, "INSERT INTO search_current (singleton, name) VALUES (1, ?)"+
		e.db.OnConflictUpdate("singleton", "name = ?"), name, name)
	return err
}

// Drop drops the named index's tables (on SQLite, its triggers go with them).
func (e *Engine) Drop(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	names := tableNames(name)
	return e.db.Transact(ctx, func(tx *sql.Tx) error {
		stmts := []string{"DROP TABLE IF EXISTS {doc}"}
		if e.db.Dialect == sqldb.SQLite {
			stmts = []string{"DROP TABLE IF EXISTS {fts}", "DROP TABLE IF EXISTS {doc}"}
		}
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, names.Replace(stmt)); err != nil {
				return fmt.Errorf("drop sql search index %s: %w", name, err)
			}
		}
		return nil
	})
}

// List returns the names of the indexes whose documents tables the database holds.
func (e *Engine) List(ctx context.Context) ([]string, error) {
	// "!" escapes LIKE's "_" the same way on both engines (a backslash is also a string escape on MySQL).
	query := "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '!'"
	if e.db.Dialect == sqldb.MySQL {
		query = "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ? ESCAPE '!'"
	}
	rows, err := e.db.QueryContext(ctx, query, "search!_%!_doc")
	if err != nil {
		return nil, fmt.Errorf("list sql search indexes: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			return nil, err
		}
		if name := strings.TrimSuffix(strings.TrimPrefix(table, "search_"), "_doc"); validName.MatchString(name) {
			names = append(names, name)
		}
	}
	return names, rows.Err()
}

// tableNames replaces the placeholders of the schema and queries with the quoted names of index name's tables,
// triggers and indexes: {doc}, {fts}, and {doc_name}, the documents table's bare name, for FTS5's content option.
// Every name ends in a suffix that no other index's names end in (_doc, _fts, FTS5's _fts_data and the like,
// _by_article, _insert, _update), so two indexes' names never meet, whatever their own names.
func tableNames(name string) *strings.Replacer {
	table := func(suffix string) string { return sqldb.QuoteIdent("search_" + name + suffix) }
	return strings.NewReplacer(
		"{doc}", table("_doc"),
		"{fts}", table("_fts"),
		"{doc_name}", "search_"+name+"_doc",
		"{by_article}", table("_doc_by_article"),
		"{insert}", table("_doc_insert"),
		"{update}", table("_doc_update"),
	)
}

// mysqlSchema makes an index's table on MySQL/MariaDB. terms is ASCII (the words are), with a binary collation:
// the words are compared as bytes.
var mysqlSchema = []string{`CREATE TABLE IF NOT EXISTS {doc} (
    doc_key    VARCHAR(24) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    type       VARCHAR(8)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    article_id BIGINT      NOT NULL,
    comment_id BIGINT      NOT NULL,
    board_id   BIGINT      NOT NULL,
    writer_id  BIGINT      NOT NULL,
    title      TEXT        NOT NULL,
    content    MEDIUMTEXT  NOT NULL,
    created_at BIGINT      NOT NULL,
    version    BIGINT      NOT NULL,
    moderation BIGINT      NOT NULL,
    hidden     BOOLEAN     NOT NULL,
    deleted    BOOLEAN     NOT NULL,
    terms      MEDIUMTEXT  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    KEY by_article (article_id),
    FULLTEXT KEY terms (terms)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci`}

// sqliteSchema makes an index's tables on SQLite: the documents, with id the FTS5 rowid of their words, and the FTS5
// table over terms, which the triggers keep in step. The update trigger fires only when the words change, so that a
// change of a document's other columns (a comment's board filled in) leaves the full-text index alone.
var sqliteSchema = []string{`CREATE TABLE IF NOT EXISTS {doc} (
    id         INTEGER NOT NULL PRIMARY KEY,
    doc_key    TEXT    NOT NULL UNIQUE,
    type       TEXT    NOT NULL,
    article_id INTEGER NOT NULL,
    comment_id INTEGER NOT NULL,
    board_id   INTEGER NOT NULL,
    writer_id  INTEGER NOT NULL,
    title      TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    moderation INTEGER NOT NULL,
    hidden     BOOLEAN NOT NULL,
    deleted    BOOLEAN NOT NULL,
    terms      TEXT    NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS {by_article} ON {doc} (article_id)`,
	`CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(terms, content='{doc_name}', content_rowid='id')`,
	`CREATE TRIGGER IF NOT EXISTS {insert} AFTER INSERT ON {doc} WHEN new.terms <> '' BEGIN
    INSERT INTO {fts} (rowid, terms) VALUES (new.id, new.terms);
END`,
	`CREATE TRIGGER IF NOT EXISTS {update} AFTER UPDATE OF terms ON {doc} WHEN old.terms <> new.terms BEGIN
    INSERT INTO {fts} ({fts}, rowid, terms) SELECT 'delete', old.id, old.terms WHERE old.terms <> '';
    INSERT INTO {fts} (rowid, terms) SELECT new.id, new.terms WHERE new.terms <> '';
END`,
}
