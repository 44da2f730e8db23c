package comment

import (
	"context"
	"database/sql"
	"errors"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/outbox"
)

// v2: path enumeration (table comment_v2).

const columnsV2 = "comment_id, content, article_id, writer_id, path, deleted, created_at, content_html, content_text"

// readV2 is what reads of whole v2 comments select (scanV2): the columns written at create, the edits' ones and
// the like count.
const readV2 = columnsV2 + ", version, modified_at, like_count"

// byPath names the index every v2 query that is not by id walks.
const byPath = "idx_article_id_path"

// CreateV2 inserts a v2 comment under the comment at parentPath ("" for a root), counts it and records
// COMMENT_CREATED, in one transaction, and returns it with its path: the next after its parent's largest child.
// The transaction starts with Require (package comment), so it runs through the registry's Write. The parent must
// exist in the same article and not be deleted. A locked article refuses it (LOCKED) unless passLock. It records
// key's answer (nil for none) on the article's shard, claimed first (see idempotency.Write.Claim).
func (s *Store) CreateV2(ctx context.Context, c Comment, parentPath string, passLock bool, key *idempotency.Write) (Comment, error) {
	err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := key.Claim(ctx, tx, c.ArticleID); err != nil {
			return err
		}
		if err := s.articles.Require(ctx, tx, c.ArticleID); err != nil {
			return err
		}
		count, err := s.changeCount(ctx, tx, c.ArticleID, +1) // locks the article: no other reply can take the path
		if err != nil {
			return err
		}
		if !passLock {
			if err := s.checkUnlocked(ctx, tx, c.ArticleID); err != nil {
				return err
			}
		}
		top, err := s.topDescendant(ctx, tx, c.ArticleID, parentPath)
		if err != nil {
			return err
		}
		if c.Path, err = childPath(parentPath, top); err != nil {
			return err
		}
		if parentPath != "" {
			parent, found, err := s.lockByPath(ctx, tx, c.ArticleID, parentPath)
			switch {
			case err != nil:
				return err
			case !found:
				return fault.NotFoundf("PARENT_COMMENT_NOT_FOUND", "article %d has no comment at path %s", c.ArticleID, parentPath)
			case parent.Deleted:
				return fault.Invalidf("PARENT_COMMENT_DELETED", "the comment at path %s is deleted", parentPath)
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO comment_v2 ("+columnsV2+") VALUES (?, ?, ?, ?, ?, FALSE, ?, ?, ?)",
			c.ID, c.Content, c.ArticleID, c.WriterID, c.Path, c.CreatedAt, c.ContentHTML, c.ContentText); err != nil {
			return err
		}
		if err := emit(event.CommentCreated, c.ArticleID, payload(c, count)); err != nil {
			return err
		}
		return key.Record(ctx, tx, toV2(c))
	})
	return c, err
}

// topDescendant returns the largest path under parent in an article ("" when there is none), with one backward
// step into the (article_id, path) index. It is a plain read (see rangeRead).
func (s *Store) topDescendant(ctx context.Context, tx *sql.Tx, articleID int64, parent string) (string, error) {
	low, high := descendantBounds(parent)
	var top string
	err := tx.QueryRowContext(ctx, "SELECT path FROM comment_v2"+s.db.ForceIndex(byPath)+
		" WHERE article_id = ? AND path > ? AND path <= ? ORDER BY path DESC LIMIT 1", articleID, low, high).Scan(&top)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return top, err
}

// GetV2 returns a v2 comment.
func (s *Store) GetV2(ctx context.Context, id int64) (Comment, error) {
	c, err := scanV2(s.db.QueryRowContext(ctx, "SELECT "+readV2+" FROM comment_v2 WHERE comment_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Comment{}, notFound(id)
	}
	return c, err
}

// DeleteV2 soft-deletes v2 comment id, with replies, or removes it together with every deleted ancestor that this
// leaves without replies. Deleting a comment already marked deleted changes nothing. articleID is the comment's
// article, read before the transaction (articleOf); the transaction starts with Require, so it runs through the
// registry's Write.
func (s *Store) DeleteV2(ctx context.Context, articleID, id int64) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.articles.Require(ctx, tx, articleID); err != nil {
			return err
		}
		return s.deleteV2(ctx, tx, emit, articleID, id)
	})
}

// deleteV2 is DeleteV2 within tx, after Require: tx may delete other comments of the same article (leaving.go).
func (s *Store) deleteV2(ctx context.Context, tx *sql.Tx, emit outbox.Emit, articleID, id int64) error {
	count, err := s.lockCount(ctx, tx, articleID)
	if err != nil {
		return err
	}
	c, err := scanV2(tx.QueryRowContext(ctx, "SELECT "+readV2+" FROM comment_v2 WHERE comment_id = ?"+s.db.ForUpdate(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(id)
	}
	if err != nil || c.Deleted {
		return err
	}
	replied, err := s.hasDescendants(ctx, tx, c)
	if err != nil {
		return err
	}
	if replied {
		return s.markDeleted(ctx, tx, emit, "comment_v2", c, count)
	}
	for {
		if err := s.removeOne(ctx, tx, emit, "comment_v2", c); err != nil || depth(c.Path) == 1 {
			return err
		}
		parent, found, err := s.lockByPath(ctx, tx, c.ArticleID, parentPath(c.Path))
		if err != nil || !found || !parent.Deleted {
			return err
		}
		if replied, err := s.hasDescendants(ctx, tx, parent); err != nil || replied {
			return err
		}
		c = parent
	}
}

// lockByPath reads and locks the comment at path in an article inside a write transaction.
func (s *Store) lockByPath(ctx context.Context, tx *sql.Tx, articleID int64, path string) (Comment, bool, error) {
	c, err := scanV2(tx.QueryRowContext(ctx, "SELECT "+readV2+" FROM comment_v2 WHERE article_id = ? AND path = ?"+
		s.db.ForUpdate(), articleID, path))
	if errors.Is(err, sql.ErrNoRows) {
		return Comment{}, false, nil
	}
	return c, err == nil, err
}

// hasDescendants reports whether a v2 comment has replies left, deleted ones included. It is a plain read (see
// rangeRead).
func (s *Store) hasDescendants(ctx context.Context, tx *sql.Tx, c Comment) (bool, error) {
	low, high := descendantBounds(c.Path)
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM comment_v2"+s.db.ForceIndex(byPath)+
		" WHERE article_id = ? AND path > ? AND path <= ? LIMIT 1", c.ArticleID, low, high).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// PageV2 returns one page of an article's v2 comments in path order, walking the index alone to skip the offset.
func (s *Store) PageV2(ctx context.Context, articleID, offset, limit int64) ([]Comment, error) {
	return list(ctx, s.db, scanV2, `SELECT c.comment_id, c.content, c.article_id, c.writer_id, c.path, c.deleted,
			c.created_at, c.content_html, c.content_text, c.version, c.modified_at, c.like_count
		FROM (SELECT comment_id FROM comment_v2`+s.db.ForceIndex(byPath)+`
			WHERE article_id = ? ORDER BY path LIMIT ? OFFSET ?) page
		JOIN comment_v2 c ON c.comment_id = page.comment_id
		ORDER BY c.path`, articleID, limit, offset)
}

// CountAfterV2 counts an article's v2 comments after c in path order (all of them when c is nil), stopping at limit.
func (s *Store) CountAfterV2(ctx context.Context, articleID int64, c *Comment, limit int64) (int64, error) {
	var path string
	if c != nil {
		path = c.Path
	}
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT comment_id FROM comment_v2"+s.db.ForceIndex(byPath)+
		" WHERE article_id = ? AND path > ? LIMIT ?) capped", articleID, path, limit).Scan(&n)
	return n, err
}

// ScrollV2 returns up to limit v2 comments of an article after lastPath in path order.
func (s *Store) ScrollV2(ctx context.Context, articleID, limit int64, lastPath string) ([]Comment, error) {
	return list(ctx, s.db, scanV2, "SELECT "+readV2+" FROM comment_v2"+s.db.ForceIndex(byPath)+
		" WHERE article_id = ? AND path > ? ORDER BY path LIMIT ?", articleID, lastPath, limit)
}

func scanV2(row interface{ Scan(...any) error }) (Comment, error) {
	var c Comment
	var contentHTML, contentText sql.NullString
	var modified sql.NullTime
	err := row.Scan(&c.ID, &c.Content, &c.ArticleID, &c.WriterID, &c.Path, &c.Deleted, &c.CreatedAt, &contentHTML, &contentText,
		&c.Version, &modified, &c.LikeCount)
	rendered(&c, contentHTML, contentText)
	return edited(c, modified), err
}
