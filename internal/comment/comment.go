// Package comment is the comment service (SPEC §3.2): comments on articles in two designs side by side.
//
//   - v1 nests two levels as an adjacency list: a reply names its root comment; a root names itself. Listing order
//     is (parent_comment_id, comment_id), which puts each root's replies right after it.
//   - v2 nests up to MaxDepth levels by path enumeration (path.go): listing order is the path.
//
// Both keep one per-article count of the comments not yet removed, and both delete the same way: a comment with
// replies is only marked deleted (it stays in the tree, without content); otherwise it is removed, and so is every
// deleted ancestor that this leaves without replies.
//
// Comments are only written on articles that exist (internal/existence): every write transaction on an article's
// comments starts with Require, which reads the article's existence row under a shared lock, so the article cannot
// be recorded deleted before the write commits. A write on an article unknown here yet looks it up at the article
// service once (Registry.Write); a write on a deleted one, a delete of its comments included, is ARTICLE_NOT_FOUND.
//
// Next, every write locks the article's count row, so writes within one article are serialized on both engines
// while different articles proceed in parallel. This is what lets a new v2 path be "the next after the largest
// sibling" without two concurrent replies picking the same one. The lock order is therefore existence row (shared),
// count row, comment rows; a write that needs a comment's article reads it before its transaction.
//
// Comments are edited in place by their writer or a moderator, and every edit keeps the content it replaced as a
// revision (edit.go, internal/revision); deletes and the purge take a comment's revisions with it.
//
// The comments of a deleted article are purged in batches (Purge), each a short transaction that locks the count
// row first and keeps it equal to what is left, until neither comments nor count row remain. The purge writes no
// COMMENT_DELETED events: consumers drop an article's comments on its ARTICLE_DELETED already, and an event per
// purged comment would flood the topic.
package comment

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/markdown"
	"board/internal/snowflake"
)

// Limits on input (SPEC §2).
const (
	MaxContentChars = 3000
	// pageLinks is how many page links a list page shows; the capped count looks that far ahead.
	pageLinks = 10
)

// Comment is a comment of either version: v1 comments have a ParentID (their own id for a root), v2 comments a
// Path.
type Comment struct {
	ID      int64
	Content string // the Markdown source; "" once deleted
	// ContentHTML and ContentText are Content rendered when it was written (internal/markdown); for a comment
	// written before Markdown, its text escaped (markdown.Legacy). Both "" once deleted.
	ContentHTML string
	ContentText string
	ArticleID   int64
	WriterID    int64
	ParentID    int64
	Path        string
	Deleted     bool
	CreatedAt   time.Time
	// Version counts the comment's edits (1 as written, +1 per edit: edit.go); ModifiedAt is the last edit's time,
	// CreatedAt for a comment never edited.
	Version    int64
	ModifiedAt time.Time
	// LikeCount is the comment's likes, as the like service's latest event of them said (likes.go).
	LikeCount int64
	// Hidden and RemovedReason are the comment's moderation state, filled in by reads.
	Hidden        event.Hidden
	RemovedReason string
}

// IDGenerator issues unique ids (a Snowflake generator in production).
type IDGenerator interface {
	Next() (int64, error)
}

// Service holds the comment rules over a Store. Who may write, and whether what a request carries is well-formed
// (content, paths), are the HTTP layer's checks (Routes), made before anything is read: a Service writes what it is
// given for whoever calls it. One rule needs the article's state and so is the Service's: a locked article takes
// new comments from moderators only (the principal ctx carries), and LOCKED from anyone else.
type Service struct {
	store *Store
	ids   IDGenerator
	now   func() time.Time
	keys  *idempotency.Store // the Idempotency-Keys of creates
}

// NewService returns the comment service. now is injected so tests control time.
func NewService(store *Store, ids IDGenerator, now func() time.Time) *Service {
	return &Service{store: store, ids: ids, now: now, keys: idempotency.New(store.db, now)}
}

// Page is one offset page and the count that its page links need.
type Page struct {
	Comments []Comment
	// Count is capped: at most the comments needed to show the next block of page links, plus one to tell whether
	// there is more (as for articles, SPEC §3.1).
	Count int64
}

// CountLimit is how far a list counts for page: to the end of the block of pageLinks pages holding it, plus one.
func CountLimit(page, pageSize int64) int64 {
	return ((page-1)/pageLinks+1)*pageSize*pageLinks + 1
}

// validateContent checks a new comment's content.
func validateContent(content string) error {
	switch {
	case strings.TrimSpace(content) == "":
		return fault.Invalidf("INVALID_CONTENT", "content must not be empty")
	case utf8.RuneCountInString(content) > MaxContentChars:
		return fault.Invalidf("INVALID_CONTENT", "content must be at most %d characters", MaxContentChars)
	}
	return nil
}

// validateParentPath checks the parentPath of a new v2 comment ("" for a root comment).
func validateParentPath(parentPath string) error {
	if parentPath != "" && !validPath(parentPath) {
		return invalidPath("INVALID_PARENT_PATH", "parentPath")
	}
	return nil
}

// newComment gives a new comment an id and a creation time.
func (s *Service) newComment(articleID, writerID int64, content string) (Comment, error) {
	id, err := s.ids.Next()
	if err != nil {
		return Comment{}, snowflake.Unavailable(err)
	}
	now := apijson.Millis(s.now())
	c := Comment{ID: id, ArticleID: articleID, WriterID: writerID, CreatedAt: now, Version: 1, ModifiedAt: now}
	c.setContent(content)
	return c, nil
}

// setContent gives c new content, rendered: what every write of a comment's content stores.
func (c *Comment) setContent(content string) {
	r := markdown.Render(content)
	c.Content, c.ContentHTML, c.ContentText = content, r.HTML, r.Text
}

// clearContent empties c's content, as a deleted or hidden comment shows it.
func (c *Comment) clearContent() { c.Content, c.ContentHTML, c.ContentText = "", "", "" }

// Create adds a v1 comment: a root when parentID is 0, else a reply to the root comment parentID.
func (s *Service) Create(ctx context.Context, articleID, writerID, parentID int64, content string) (Comment, error) {
	return s.create(ctx, articleID, writerID, parentID, content, nil)
}

// create is Create recording its answer for key (nil for none) in the same transaction.
func (s *Service) create(ctx context.Context, articleID, writerID, parentID int64, content string, key *idempotency.Write) (Comment, error) {
	c, err := s.newComment(articleID, writerID, content)
	if err != nil {
		return Comment{}, err
	}
	c.ParentID = c.ID
	if parentID != 0 {
		c.ParentID = parentID
	}
	passLock := mayPassLock(ctx)
	if err := s.store.articles.Write(ctx, articleID, func() error { return s.store.Create(ctx, c, passLock, key) }); err != nil {
		return Comment{}, err
	}
	return c, nil
}

// CreateV2 adds a v2 comment under the comment at parentPath ("" for a root comment); the store picks its path.
func (s *Service) CreateV2(ctx context.Context, articleID, writerID int64, parentPath, content string) (Comment, error) {
	return s.createV2(ctx, articleID, writerID, parentPath, content, nil)
}

// createV2 is CreateV2 recording its answer for key (nil for none) in the same transaction.
func (s *Service) createV2(ctx context.Context, articleID, writerID int64, parentPath, content string, key *idempotency.Write) (Comment, error) {
	c, err := s.newComment(articleID, writerID, content)
	if err != nil {
		return Comment{}, err
	}
	var created Comment
	passLock := mayPassLock(ctx)
	err = s.store.articles.Write(ctx, articleID, func() error {
		created, err = s.store.CreateV2(ctx, c, parentPath, passLock, key)
		return err
	})
	return created, err
}

// Get returns a v1 comment with its moderation state.
func (s *Service) Get(ctx context.Context, id int64) (Comment, error) {
	c, err := s.store.Get(ctx, id)
	return s.store.withModerationOne(ctx, c, err)
}

// GetV2 returns a v2 comment with its moderation state.
func (s *Service) GetV2(ctx context.Context, id int64) (Comment, error) {
	c, err := s.store.GetV2(ctx, id)
	return s.store.withModerationOne(ctx, c, err)
}

// Delete deletes a v1 comment by the rules in the package comment.
func (s *Service) Delete(ctx context.Context, id int64) error {
	return s.delete(ctx, "comment", id, s.store.Delete)
}

// DeleteV2 deletes a v2 comment by the rules in the package comment.
func (s *Service) DeleteV2(ctx context.Context, id int64) error {
	return s.delete(ctx, "comment_v2", id, s.store.DeleteV2)
}

// delete runs del on comment id of table, once its article is known: a comment of a deleted article is
// ARTICLE_NOT_FOUND until the purge has removed it, and COMMENT_NOT_FOUND after.
func (s *Service) delete(ctx context.Context, table string, id int64, del func(ctx context.Context, articleID, id int64) error) error {
	articleID, err := s.store.articleOf(ctx, table, id)
	if err != nil {
		return err
	}
	return s.store.articles.Write(ctx, articleID, func() error { return del(ctx, articleID, id) })
}

// List returns page (from 1) of an article's v1 comments, pageSize of them, roots each followed by their replies;
// List, ListV2, Scroll, ScrollV2, Get and GetV2 return comments with their moderation state.
func (s *Service) List(ctx context.Context, articleID, page, pageSize int64) (Page, error) {
	return s.list(ctx, s.store.Page, s.store.CountAfter, articleID, page, pageSize)
}

// ListV2 returns page (from 1) of an article's v2 comments, pageSize of them, in tree order.
func (s *Service) ListV2(ctx context.Context, articleID, page, pageSize int64) (Page, error) {
	return s.list(ctx, s.store.PageV2, s.store.CountAfterV2, articleID, page, pageSize)
}

// list is List for either version: pageOf reads a page, countAfter counts the comments after a given one (after
// none when it is nil), stopping at a limit.
func (s *Service) list(ctx context.Context, pageOf func(ctx context.Context, articleID, offset, limit int64) ([]Comment, error),
	countAfter func(ctx context.Context, articleID int64, after *Comment, limit int64) (int64, error),
	articleID, page, pageSize int64) (Page, error) {
	offset := (page - 1) * pageSize
	comments, err := pageOf(ctx, articleID, offset, pageSize)
	if err == nil {
		err = s.store.withModeration(ctx, articleID, comments)
	}
	if err != nil {
		return Page{}, err
	}
	limit := CountLimit(page, pageSize)
	var count int64
	switch n := int64(len(comments)); {
	case n == pageSize:
		// Count on from the page's last comment instead of walking the offset again.
		var more int64
		more, err = countAfter(ctx, articleID, &comments[n-1], limit-offset-n)
		count = offset + n + more
	case n > 0:
		count = offset + n // the page reached the end
	default:
		count, err = countAfter(ctx, articleID, nil, limit) // past the end: there are fewer than offset
	}
	return Page{Comments: comments, Count: count}, err
}

// Scroll returns the next pageSize v1 comments after the one at (lastParentID, lastID); from the first when both
// are 0.
func (s *Service) Scroll(ctx context.Context, articleID, pageSize, lastParentID, lastID int64) ([]Comment, error) {
	comments, err := s.store.Scroll(ctx, articleID, pageSize, lastParentID, lastID)
	if err == nil {
		err = s.store.withModeration(ctx, articleID, comments)
	}
	return comments, err
}

// ScrollV2 returns the next pageSize v2 comments after lastPath ("" for the first).
func (s *Service) ScrollV2(ctx context.Context, articleID, pageSize int64, lastPath string) ([]Comment, error) {
	comments, err := s.store.ScrollV2(ctx, articleID, pageSize, lastPath)
	if err == nil {
		err = s.store.withModeration(ctx, articleID, comments)
	}
	return comments, err
}

// ArticleCount returns how many comments of both versions an article has (deleted ones still count until removed).
func (s *Service) ArticleCount(ctx context.Context, articleID int64) (int64, error) {
	count, _, err := s.store.ArticleCount(ctx, articleID)
	return count, err
}

// VersionedArticleCount returns an article's comment count and the version of that count, the
// articleCommentCountVersion its COMMENT_* events carry (0 for an article that never had a comment).
func (s *Service) VersionedArticleCount(ctx context.Context, articleID int64) (count, version int64, err error) {
	return s.store.ArticleCount(ctx, articleID)
}

func invalidPath(code, field string) error {
	return fault.Invalidf(code, "%s must be 1 to %d segments of %d characters from 0-9, A-Z, a-z", field,
		MaxDepth, SegmentLen)
}
