package article

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"math"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/markdown"
	"board/internal/outbox"
	"board/internal/revision"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the article schema, its outbox and its Idempotency-Keys.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if err := idempotency.Migrate(ctx, db); err != nil {
		return err
	}
	if err := sqldb.Migrate(ctx, db, "article", migrations); err != nil {
		return err
	}
	// The rendered content's columns (migration 003), which behind Vitess are usable a moment after they are added.
	return db.AwaitColumns(ctx, "article", "content_html", "content_text")
}

// Store keeps articles and per-board counts in SQL, and writes an event to the outbox with every change. Every
// query carries board_id or article_id (the shard key and the primary key), so the tables can be split by board.
type Store struct {
	db *sqldb.DB
	ob *outbox.Outbox
}

// NewStore returns a store over db, whose schema Migrate has prepared, writing events to ob.
func NewStore(db *sqldb.DB, ob *outbox.Outbox) *Store { return &Store{db: db, ob: ob} }

const columns = "article_id, title, content, board_id, writer_id, created_at, modified_at, version, content_html, content_text"

// Create inserts a, counts it on its board and records ARTICLE_CREATED, in one transaction, with key's answer (nil
// for none) on the board's shard.
func (s *Store) Create(ctx context.Context, a Article, key *idempotency.Write) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := key.Claim(ctx, tx, a.BoardID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO article ("+columns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			a.ID, a.Title, a.Content, a.BoardID, a.WriterID, a.CreatedAt, a.ModifiedAt, a.Version, a.ContentHTML, a.ContentText); err != nil {
			return err
		}
		count, err := s.changeBoardCount(ctx, tx, a.BoardID, +1)
		if err != nil {
			return err
		}
		if err := emit(event.ArticleCreated, a.BoardID, payload(a, count)); err != nil {
			return err
		}
		return key.Record(ctx, tx, wire(a)) // a new article is visible: its answer is the same to everyone
	})
}

// boardCount is a board's article count row as of a transaction.
type boardCount struct{ count, version int64 }

// changeBoardCount adds delta to a board's count and returns the row as this transaction leaves it.
func (s *Store) changeBoardCount(ctx context.Context, tx *sql.Tx, boardID, delta int64) (boardCount, error) {
	if _, err := tx.ExecContext(ctx, "INSERT INTO board_article_count (board_id, article_count, version) VALUES (?, ?, 1)"+
		s.db.OnConflictUpdate("board_id", "article_count = article_count + ?, version = version + 1"),
		boardID, delta, delta); err != nil {
		return boardCount{}, err
	}
	return readBoardCount(ctx, tx, boardID)
}

func readBoardCount(ctx context.Context, tx *sql.Tx, boardID int64) (boardCount, error) {
	var c boardCount
	err := tx.QueryRowContext(ctx, "SELECT article_count, version FROM board_article_count WHERE board_id = ?", boardID).
		Scan(&c.count, &c.version)
	if errors.Is(err, sql.ErrNoRows) {
		return boardCount{}, nil
	}
	return c, err
}

func payload(a Article, c boardCount) event.Article {
	return event.Article{ArticleID: apijson.ID(a.ID), Title: a.Title, Content: a.Content, ContentHTML: a.ContentHTML,
		ContentText: a.ContentText, BoardID: apijson.ID(a.BoardID),
		WriterID: apijson.ID(a.WriterID), CreatedAt: apijson.Time(a.CreatedAt), ModifiedAt: apijson.Time(a.ModifiedAt),
		BoardArticleCount: c.count, ArticleVersion: a.Version, BoardArticleCountVersion: c.version}
}

// Get returns one article.
func (s *Store) Get(ctx context.Context, id int64) (Article, error) {
	a, err := scanArticle(s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM article WHERE article_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Article{}, notFound(id)
	}
	return a, err
}

// Update replaces the title and content of an article, with the content rendered, keeps what they replace as a
// revision by editor, records ARTICLE_UPDATED and returns the article as stored.
func (s *Store) Update(ctx context.Context, id int64, title, content string, rendered markdown.Rendered, now time.Time, editor revision.Editor) (Article, error) {
	var a Article
	err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		old, err := scanArticle(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM article WHERE article_id = ?"+s.db.ForUpdate(), id))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		if err := s.keepRevision(ctx, tx, old, editor, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE article SET title = ?, content = ?, content_html = ?, content_text = ?, modified_at = ?, version = version + 1 WHERE article_id = ?",
			title, content, rendered.HTML, rendered.Text, now, id); err != nil {
			return err
		}
		if a, err = scanArticle(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM article WHERE article_id = ?", id)); err != nil {
			return err
		}
		count, err := readBoardCount(ctx, tx, a.BoardID)
		if err != nil {
			return err
		}
		return emit(event.ArticleUpdated, a.BoardID, payload(a, count))
	})
	return a, err
}

// Delete removes an article, its moderation state and its revisions, uncounts it from its board and records
// ARTICLE_DELETED, in one transaction.
func (s *Store) Delete(ctx context.Context, id int64) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error { return s.delete(ctx, tx, emit, id) })
}

// delete is Delete within tx, which may delete other articles of the same board (DeleteWrittenBy).
func (s *Store) delete(ctx context.Context, tx *sql.Tx, emit outbox.Emit, id int64) error {
	a, err := scanArticle(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM article WHERE article_id = ?"+s.db.ForUpdate(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM article WHERE article_id = ?", id); err != nil {
		return err
	}
	if err := deleteModeration(ctx, tx, a); err != nil {
		return err
	}
	if err := deleteRevisions(ctx, tx, a); err != nil {
		return err
	}
	a.Version++ // the deletion is the article's last change
	count, err := s.changeBoardCount(ctx, tx, a.BoardID, -1)
	if err != nil {
		return err
	}
	return emit(event.ArticleDeleted, a.BoardID, payload(a, count))
}

// byBoard names the index every list query walks; see migrations for why it is ascending.
const byBoard = "idx_board_id_article_id"

// Page returns one page of a board, newest first. It walks the (board_id, article_id) index alone to skip the
// offset — no row is read for the skipped entries — and joins only the page's rows.
func (s *Store) Page(ctx context.Context, boardID, offset, limit int64) ([]Article, error) {
	return s.list(ctx, `SELECT a.article_id, a.title, a.content, a.board_id, a.writer_id, a.created_at, a.modified_at,
			a.version, a.content_html, a.content_text
		FROM (SELECT article_id FROM article`+s.db.ForceIndex(byBoard)+`
			WHERE board_id = ? ORDER BY article_id DESC LIMIT ? OFFSET ?) page
		JOIN article a ON a.article_id = page.article_id
		ORDER BY a.article_id DESC`, boardID, limit, offset)
}

// CountOlder counts a board's articles older than beforeID (all of them when beforeID is 0), stopping at limit.
func (s *Store) CountOlder(ctx context.Context, boardID, beforeID, limit int64) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT article_id FROM article"+s.db.ForceIndex(byBoard)+
		" WHERE board_id = ? AND article_id < ? LIMIT ?) capped", boardID, cursor(beforeID), limit).Scan(&n)
	return n, err
}

// Scroll returns up to limit articles of a board older than lastID (from the newest when lastID is 0).
func (s *Store) Scroll(ctx context.Context, boardID, limit, lastID int64) ([]Article, error) {
	return s.list(ctx, "SELECT "+columns+" FROM article"+s.db.ForceIndex(byBoard)+
		" WHERE board_id = ? AND article_id < ? ORDER BY article_id DESC LIMIT ?", boardID, cursor(lastID), limit)
}

// cursor maps "no cursor" (0) to an id above every issued one, so one query shape serves both cases.
// (Snowflake ids reach math.MaxInt64 only in 2093.)
func cursor(beforeID int64) int64 {
	if beforeID == 0 {
		return math.MaxInt64
	}
	return beforeID
}

// BoardCount returns the number of articles on a board, as kept by Create and Delete, and the version of that count
// row: the BoardArticleCountVersion of the board's latest event. Both come from one read of the row, so they agree;
// a board that never had an article has neither (0, 0).
func (s *Store) BoardCount(ctx context.Context, boardID int64) (count, version int64, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT article_count, version FROM board_article_count WHERE board_id = ?", boardID).
		Scan(&count, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return count, version, err
}

// Boards lists the boards whose count is above zero, by id. Boards are few (a site configures them), so they come
// in one answer.
func (s *Store) Boards(ctx context.Context) ([]Board, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT board_id, article_count FROM board_article_count WHERE article_count > 0 ORDER BY board_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Board{}
	for rows.Next() {
		var b Board
		if err := rows.Scan(&b.BoardID, &b.ArticleCount); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func (s *Store) list(ctx context.Context, query string, args ...any) ([]Article, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Article{}
	for rows.Next() {
		a, err := scanArticle(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func scanArticle(row interface{ Scan(...any) error }) (Article, error) {
	var a Article
	var contentHTML, contentText sql.NullString
	err := row.Scan(&a.ID, &a.Title, &a.Content, &a.BoardID, &a.WriterID, &a.CreatedAt, &a.ModifiedAt, &a.Version,
		&contentHTML, &contentText)
	a.CreatedAt, a.ModifiedAt = a.CreatedAt.UTC(), a.ModifiedAt.UTC()
	a.ContentHTML, a.ContentText = contentHTML.String, contentText.String
	if !contentHTML.Valid {
		// Written before Markdown: it reads as the plain text it was written as, never as Markdown.
		r := markdown.Legacy(a.Content)
		a.ContentHTML, a.ContentText = r.HTML, r.Text
	}
	return a, err
}

func notFound(id int64) error {
	return fault.NotFoundf("ARTICLE_NOT_FOUND", "article %d does not exist", id)
}
