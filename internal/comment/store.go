package comment

import (
	"context"
	"database/sql"
	"embed"
	"errors"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/existence"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/markdown"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the comment schema, its outbox, its record of which articles exist and its
// Idempotency-Keys.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	if err := idempotency.Migrate(ctx, db); err != nil {
		return err
	}
	if err := existence.Migrate(ctx, db); err != nil {
		return err
	}
	if err := sqldb.Migrate(ctx, db, "comment", migrations); err != nil {
		return err
	}
	// The rendered content's columns (migration 003), the edits' (005) and the like counts' (006), which behind
	// Vitess are usable a moment after they are added.
	for _, table := range []string{"comment", "comment_v2"} {
		if err := db.AwaitColumns(ctx, table, "content_html", "content_text", "version", "modified_at", "like_count",
			"like_count_version"); err != nil {
			return err
		}
	}
	return nil
}

// Store keeps both versions' comments and the per-article count in SQL, and writes an event to the outbox with every
// change. Every query carries article_id (the shard key) or comment_id.
type Store struct {
	db       *sqldb.DB
	ob       *outbox.Outbox
	articles *existence.Registry
}

// NewStore returns a store over db, whose schema Migrate has prepared, writing events to ob. Its writes refuse
// articles that articles, the service's record of which articles exist in the same database, does not hold live.
func NewStore(db *sqldb.DB, ob *outbox.Outbox, articles *existence.Registry) *Store {
	return &Store{db: db, ob: ob, articles: articles}
}

// commentCount is an article's comment count row as of a transaction.
type commentCount struct{ count, version int64 }

// changeCount adds delta to an article's comment count and returns the row as this transaction leaves it. The
// upsert also takes the row's lock, which every write of the article's comments takes right after Require (package
// comment).
func (s *Store) changeCount(ctx context.Context, tx *sql.Tx, articleID, delta int64) (commentCount, error) {
	if _, err := tx.ExecContext(ctx, "INSERT INTO article_comment_count (article_id, comment_count, version) VALUES (?, ?, 1)"+
		s.db.OnConflictUpdate("article_id", "comment_count = comment_count + ?, version = version + 1"),
		articleID, delta, delta); err != nil {
		return commentCount{}, err
	}
	return s.lockCount(ctx, tx, articleID)
}

// lockCount locks an article's count row, serializing the writes of its comments, and returns it. The row exists
// once the article has had a comment.
//
// rangeRead: after this lock, the range reads of a write (the largest path under a parent, whether a comment has
// replies) are plain reads, not locking ones. They still see every earlier write of the article: those committed
// before this lock was granted, and an InnoDB transaction's snapshot starts at its first plain read, which comes
// after it. A locking range read would take gap locks on MariaDB, and for an article without comments that gap
// is shared with the neighbouring articles: two new articles' first comments would deadlock inserting into it.
func (s *Store) lockCount(ctx context.Context, tx *sql.Tx, articleID int64) (commentCount, error) {
	var c commentCount
	err := tx.QueryRowContext(ctx, "SELECT comment_count, version FROM article_comment_count WHERE article_id = ?"+
		s.db.ForUpdate(), articleID).Scan(&c.count, &c.version)
	if errors.Is(err, sql.ErrNoRows) {
		return commentCount{}, nil
	}
	return c, err
}

// ArticleCount returns how many comments an article has, as kept by every create and removal, and the version of
// that count row: the articleCommentCountVersion of the article's latest comment event. Both come from one read of
// the row, so they agree; an article that never had a comment has neither (0, 0).
func (s *Store) ArticleCount(ctx context.Context, articleID int64) (count, version int64, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT comment_count, version FROM article_comment_count WHERE article_id = ?", articleID).
		Scan(&count, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	return count, version, err
}

// removeOne deletes a comment's row from table, its moderation state and its revisions, uncounts it and records its
// COMMENT_DELETED.
func (s *Store) removeOne(ctx context.Context, tx *sql.Tx, emit outbox.Emit, table string, c Comment) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE comment_id = ?", c.ID); err != nil {
		return err
	}
	route, routeArgs := s.db.RouteBy("article_id", c.ArticleID)
	if _, err := tx.ExecContext(ctx, "DELETE FROM comment_moderation WHERE "+route+"comment_id = ?", append(routeArgs, c.ID)...); err != nil {
		return err
	}
	if err := deleteRevisions(ctx, tx, c); err != nil {
		return err
	}
	count, err := s.changeCount(ctx, tx, c.ArticleID, -1)
	if err != nil {
		return err
	}
	c.Deleted = true
	c.clearContent()
	return emit(event.CommentDeleted, c.ArticleID, payload(c, count))
}

// markDeleted soft-deletes a comment that still has replies, dropping its content and its revisions, and records its
// COMMENT_DELETED; the count is unchanged.
func (s *Store) markDeleted(ctx context.Context, tx *sql.Tx, emit outbox.Emit, table string, c Comment, count commentCount) error {
	if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET deleted = TRUE, content = '', content_html = '', content_text = '' WHERE comment_id = ?", c.ID); err != nil {
		return err
	}
	if err := deleteRevisions(ctx, tx, c); err != nil { // the history goes with the content
		return err
	}
	c.Deleted = true
	c.clearContent()
	return emit(event.CommentDeleted, c.ArticleID, payload(c, count))
}

func payload(c Comment, count commentCount) event.Comment {
	p := event.Comment{CommentID: apijson.ID(c.ID), Content: c.Content, ContentHTML: c.ContentHTML, ContentText: c.ContentText, Path: c.Path, ArticleID: apijson.ID(c.ArticleID),
		WriterID: apijson.ID(c.WriterID), Deleted: c.Deleted, CreatedAt: apijson.Time(c.CreatedAt),
		ArticleCommentCount: count.count, ArticleCommentCountVersion: count.version, CommentVersion: c.Version,
		ModifiedAt: apijson.Time(c.ModifiedAt)}
	if c.Path == "" {
		p.ParentCommentID = apijson.ID(c.ParentID)
	}
	return p
}

// articleOf returns the article a comment of table belongs to, read outside any transaction: a write transaction
// must lock the article (its existence row, then its count row) before it reads the comment (package comment).
func (s *Store) articleOf(ctx context.Context, table string, id int64) (int64, error) {
	var articleID int64
	err := s.db.QueryRowContext(ctx, "SELECT article_id FROM "+table+" WHERE comment_id = ?", id).Scan(&articleID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound(id)
	}
	return articleID, err
}

// list runs a query for whole comments and scans them with scan.
func list(ctx context.Context, db *sqldb.DB, scan func(row interface{ Scan(...any) error }) (Comment, error), query string,
	args ...any) ([]Comment, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Comment{}
	for rows.Next() {
		c, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// rendered fills in c's rendered content from its row's columns, NULL for a comment written before Markdown: that
// reads as the plain text it was written as, never as Markdown.
func rendered(c *Comment, contentHTML, contentText sql.NullString) {
	switch {
	case contentHTML.Valid:
		c.ContentHTML, c.ContentText = contentHTML.String, contentText.String
	case !c.Deleted:
		r := markdown.Legacy(c.Content)
		c.ContentHTML, c.ContentText = r.HTML, r.Text
	}
}

func notFound(id int64) error {
	return fault.NotFoundf("COMMENT_NOT_FOUND", "comment %d does not exist", id)
}
