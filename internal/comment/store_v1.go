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

// v1: the adjacency list (table comment).

const columnsV1 = "comment_id, content, article_id, parent_comment_id, writer_id, deleted, created_at, content_html, content_text"

// readV1 is what reads of whole v1 comments select (scanV1): the columns written at create, the edits' ones and
// the like count.
const readV1 = columnsV1 + ", version, modified_at, like_count"

// byParent names the index every v1 list query, and the purge, walks.
const byParent = "idx_article_id_parent_comment_id_comment_id"

// Create inserts a v1 comment, counts it and records COMMENT_CREATED, in one transaction that starts with Require
// (package comment), so it runs through the registry's Write. A reply's parent must be a root comment of the same
// article that is not deleted. A locked article refuses it (LOCKED) unless passLock. It records key's answer (nil
// for none) on the article's shard, claimed first (see idempotency.Write.Claim).
func (s *Store) Create(ctx context.Context, c Comment, passLock bool, key *idempotency.Write) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := key.Claim(ctx, tx, c.ArticleID); err != nil {
			return err
		}
		if err := s.articles.Require(ctx, tx, c.ArticleID); err != nil {
			return err
		}
		count, err := s.changeCount(ctx, tx, c.ArticleID, +1)
		if err != nil {
			return err
		}
		if !passLock {
			if err := s.checkUnlocked(ctx, tx, c.ArticleID); err != nil {
				return err
			}
		}
		if c.ParentID != c.ID {
			if err := s.checkParent(ctx, tx, c); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO comment ("+columnsV1+") VALUES (?, ?, ?, ?, ?, FALSE, ?, ?, ?)",
			c.ID, c.Content, c.ArticleID, c.ParentID, c.WriterID, c.CreatedAt, c.ContentHTML, c.ContentText); err != nil {
			return err
		}
		if err := emit(event.CommentCreated, c.ArticleID, payload(c, count)); err != nil {
			return err
		}
		return key.Record(ctx, tx, toV1(c))
	})
}

func (s *Store) checkParent(ctx context.Context, tx *sql.Tx, c Comment) error {
	parent, err := scanV1(tx.QueryRowContext(ctx, "SELECT "+readV1+" FROM comment WHERE comment_id = ?"+s.db.ForUpdate(), c.ParentID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fault.NotFoundf("PARENT_COMMENT_NOT_FOUND", "parent comment %d does not exist", c.ParentID)
	case err != nil:
		return err
	case parent.ArticleID != c.ArticleID:
		return fault.Invalidf("PARENT_IN_OTHER_ARTICLE", "parent comment %d belongs to another article", c.ParentID)
	case parent.ParentID != parent.ID:
		return fault.Invalidf("DEPTH_EXCEEDED", "v1 comments nest two levels: reply to the root comment %d instead",
			parent.ParentID)
	case parent.Deleted:
		return fault.Invalidf("PARENT_COMMENT_DELETED", "parent comment %d is deleted", c.ParentID)
	}
	return nil
}

// Get returns a v1 comment.
func (s *Store) Get(ctx context.Context, id int64) (Comment, error) {
	c, err := scanV1(s.db.QueryRowContext(ctx, "SELECT "+readV1+" FROM comment WHERE comment_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Comment{}, notFound(id)
	}
	return c, err
}

// Delete soft-deletes v1 comment id, with replies, or removes it; removing the last reply of a deleted root removes
// the root too. Deleting a comment already marked deleted changes nothing. articleID is the comment's article, read
// before the transaction (articleOf); the transaction starts with Require, so it runs through the registry's Write.
func (s *Store) Delete(ctx context.Context, articleID, id int64) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.articles.Require(ctx, tx, articleID); err != nil {
			return err
		}
		return s.deleteV1(ctx, tx, emit, articleID, id)
	})
}

// deleteV1 is Delete within tx, after Require: tx may delete other comments of the same article (leaving.go).
func (s *Store) deleteV1(ctx context.Context, tx *sql.Tx, emit outbox.Emit, articleID, id int64) error {
	count, err := s.lockCount(ctx, tx, articleID)
	if err != nil {
		return err
	}
	c, err := s.lockV1(ctx, tx, id)
	if err != nil || c.Deleted {
		return err
	}
	if c.ParentID == c.ID {
		replied, err := s.hasReplies(ctx, tx, c)
		if err != nil {
			return err
		}
		if replied {
			return s.markDeleted(ctx, tx, emit, "comment", c, count)
		}
	}
	if err := s.removeOne(ctx, tx, emit, "comment", c); err != nil || c.ParentID == c.ID {
		return err
	}
	root, err := s.lockV1(ctx, tx, c.ParentID)
	if err != nil || !root.Deleted { // a reply's root outlives it: a root with replies is never removed
		return err
	}
	if replied, err := s.hasReplies(ctx, tx, root); err != nil || replied {
		return err
	}
	return s.removeOne(ctx, tx, emit, "comment", root)
}

// lockV1 reads and locks a v1 comment inside a write transaction.
func (s *Store) lockV1(ctx context.Context, tx *sql.Tx, id int64) (Comment, error) {
	c, err := scanV1(tx.QueryRowContext(ctx, "SELECT "+readV1+" FROM comment WHERE comment_id = ?"+s.db.ForUpdate(), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Comment{}, notFound(id)
	}
	return c, err
}

// hasReplies reports whether a root comment has replies left, deleted ones included. It is a plain read (see
// rangeRead).
func (s *Store) hasReplies(ctx context.Context, tx *sql.Tx, root Comment) (bool, error) {
	var one int
	err := tx.QueryRowContext(ctx, "SELECT 1 FROM comment WHERE article_id = ? AND parent_comment_id = ? AND comment_id <> ? LIMIT 1",
		root.ArticleID, root.ID, root.ID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Page returns one page of an article's v1 comments in list order. It walks the index alone to skip the offset and
// joins only the page's rows.
func (s *Store) Page(ctx context.Context, articleID, offset, limit int64) ([]Comment, error) {
	return list(ctx, s.db, scanV1, `SELECT c.comment_id, c.content, c.article_id, c.parent_comment_id, c.writer_id,
			c.deleted, c.created_at, c.content_html, c.content_text, c.version, c.modified_at, c.like_count
		FROM (SELECT comment_id FROM comment`+s.db.ForceIndex(byParent)+`
			WHERE article_id = ? ORDER BY parent_comment_id, comment_id LIMIT ? OFFSET ?) page
		JOIN comment c ON c.comment_id = page.comment_id
		ORDER BY c.parent_comment_id, c.comment_id`, articleID, limit, offset)
}

// CountAfter counts an article's v1 comments after c in list order (all of them when c is nil), stopping at limit.
func (s *Store) CountAfter(ctx context.Context, articleID int64, c *Comment, limit int64) (int64, error) {
	var parentID, id int64
	if c != nil {
		parentID, id = c.ParentID, c.ID
	}
	after, args := s.db.After("parent_comment_id", "comment_id", parentID, id)
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT comment_id FROM comment"+s.db.ForceIndex(byParent)+
		" WHERE article_id = ? AND "+after+" LIMIT ?) capped", append(append([]any{articleID}, args...), limit)...).Scan(&n)
	return n, err
}

// Scroll returns up to limit v1 comments of an article after (lastParentID, lastID) in list order.
func (s *Store) Scroll(ctx context.Context, articleID, limit, lastParentID, lastID int64) ([]Comment, error) {
	after, args := s.db.After("parent_comment_id", "comment_id", lastParentID, lastID)
	return list(ctx, s.db, scanV1, "SELECT "+readV1+" FROM comment"+s.db.ForceIndex(byParent)+
		" WHERE article_id = ? AND "+after+" ORDER BY parent_comment_id, comment_id LIMIT ?",
		append(append([]any{articleID}, args...), limit)...)
}

func scanV1(row interface{ Scan(...any) error }) (Comment, error) {
	var c Comment
	var contentHTML, contentText sql.NullString
	var modified sql.NullTime
	err := row.Scan(&c.ID, &c.Content, &c.ArticleID, &c.ParentID, &c.WriterID, &c.Deleted, &c.CreatedAt, &contentHTML, &contentText,
		&c.Version, &modified, &c.LikeCount)
	rendered(&c, contentHTML, contentText)
	return edited(c, modified), err
}
