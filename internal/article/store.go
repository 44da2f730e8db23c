package article

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"io/fs"
	"math"
	"time"

	"board/internal/fault"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the article schema.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, sub)
}

// Store keeps articles and per-board counts in SQL. Every query carries board_id or article_id (the shard key and
// the primary key), so the tables can be split by board.
type Store struct {
	db *sqldb.DB
}

// NewStore returns a store over db, whose schema Migrate has prepared.
func NewStore(db *sqldb.DB) *Store { return &Store{db: db} }

const columns = "article_id, title, content, board_id, writer_id, created_at, modified_at"

// Create inserts a and counts it on its board, in one transaction.
func (s *Store) Create(ctx context.Context, a Article) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO article ("+columns+") VALUES (?, ?, ?, ?, ?, ?, ?)",
			a.ID, a.Title, a.Content, a.BoardID, a.WriterID, a.CreatedAt, a.ModifiedAt); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO board_article_count (board_id, article_count) VALUES (?, 1)"+
			s.db.OnConflictUpdate("board_id", "article_count = article_count + 1"), a.BoardID)
		return err
	})
}

// Get returns one article.
func (s *Store) Get(ctx context.Context, id int64) (Article, error) {
	a, err := scanArticle(s.db.QueryRowContext(ctx, "SELECT "+columns+" FROM article WHERE article_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Article{}, notFound(id)
	}
	return a, err
}

// Update replaces the title and content of an article and returns it as stored.
func (s *Store) Update(ctx context.Context, id int64, title, content string, now time.Time) (Article, error) {
	var a Article
	err := s.db.Transact(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE article SET title = ?, content = ?, modified_at = ? WHERE article_id = ?",
			title, content, now, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, notFound(id))
		}
		a, err = scanArticle(tx.QueryRowContext(ctx, "SELECT "+columns+" FROM article WHERE article_id = ?", id))
		return err
	})
	return a, err
}

// Delete removes an article and uncounts it from its board, in one transaction.
func (s *Store) Delete(ctx context.Context, id int64) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		var boardID int64
		err := tx.QueryRowContext(ctx, "SELECT board_id FROM article WHERE article_id = ?"+s.db.ForUpdate(), id).Scan(&boardID)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM article WHERE article_id = ?", id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE board_article_count SET article_count = article_count - 1 WHERE board_id = ?", boardID)
		return err
	})
}

// byBoard names the index every list query walks; see migrations for why it is ascending.
const byBoard = "idx_board_id_article_id"

// Page returns one page of a board, newest first. It walks the (board_id, article_id) index alone to skip the
// offset — no row is read for the skipped entries — and joins only the page's rows.
func (s *Store) Page(ctx context.Context, boardID, offset, limit int64) ([]Article, error) {
	return s.list(ctx, `SELECT a.article_id, a.title, a.content, a.board_id, a.writer_id, a.created_at, a.modified_at
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

// BoardCount returns the number of articles on a board, as kept by Create and Delete.
func (s *Store) BoardCount(ctx context.Context, boardID int64) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT article_count FROM board_article_count WHERE board_id = ?", boardID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
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
	err := row.Scan(&a.ID, &a.Title, &a.Content, &a.BoardID, &a.WriterID, &a.CreatedAt, &a.ModifiedAt)
	a.CreatedAt, a.ModifiedAt = a.CreatedAt.UTC(), a.ModifiedAt.UTC()
	return a, err
}

func notFound(id int64) error {
	return fault.NotFoundf("ARTICLE_NOT_FOUND", "article %d does not exist", id)
}
