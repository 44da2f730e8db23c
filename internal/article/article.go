// Package article is the article service (SPEC §3.1): articles on boards, the per-board article count, and
// newest-first listing by offset pages or by infinite scroll.
package article

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"board/internal/apijson"
	"board/internal/boardpage"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/markdown"
	"board/internal/revision"
	"board/internal/snowflake"
)

// Limits on input (SPEC §2).
const (
	MaxTitleChars   = 100
	MaxContentChars = 3000
)

// Article is a post on a board.
type Article struct {
	ID      int64
	Title   string
	Content string // the Markdown source, as written
	// ContentHTML and ContentText are Content rendered when it was written (internal/markdown); for an article
	// written before Markdown, its text escaped (markdown.Legacy).
	ContentHTML string
	ContentText string
	BoardID     int64
	WriterID    int64
	CreatedAt   time.Time
	ModifiedAt  time.Time
	Version     int64 // changes so far: 1 at create, +1 per update (see internal/event)
	// Moderation is filled in by reads (Get, List, Scroll) and Update; it is not part of Version.
	Moderation
}

// IDGenerator issues unique ids (a Snowflake generator in production).
type IDGenerator interface {
	Next() (int64, error)
}

// Service holds the article rules over a Store. Who may write, and whether a title and content are acceptable
// (validate), are the HTTP layer's checks (Routes), made before anything is read: a Service writes what it is given
// for whoever calls it.
type Service struct {
	store *Store
	ids   IDGenerator
	now   func() time.Time
	keys  *idempotency.Store // the Idempotency-Keys of creates
}

// NewService returns the article service. now is injected so tests control time.
func NewService(store *Store, ids IDGenerator, now func() time.Time) *Service {
	return &Service{store: store, ids: ids, now: now, keys: idempotency.New(store.db, now)}
}

// Create stores a new article.
func (s *Service) Create(ctx context.Context, title, content string, boardID, writerID int64) (Article, error) {
	return s.create(ctx, title, content, boardID, writerID, nil)
}

// create is Create recording its answer for key (nil for none) in the same transaction.
func (s *Service) create(ctx context.Context, title, content string, boardID, writerID int64, key *idempotency.Write) (Article, error) {
	id, err := s.ids.Next()
	if err != nil {
		return Article{}, snowflake.Unavailable(err)
	}
	// An article is created at the time in its id, so that consumers know an article's day from its id alone
	// (hot-article keys its state by it before the article's own event arrives).
	createdAt := snowflake.Timestamp(id)
	r := markdown.Render(content)
	a := Article{ID: id, Title: title, Content: content, ContentHTML: r.HTML, ContentText: r.Text, BoardID: boardID, WriterID: writerID,
		CreatedAt: createdAt, ModifiedAt: createdAt, Version: 1}
	if err := s.store.Create(ctx, a, key); err != nil {
		return Article{}, err
	}
	return a, nil
}

// Get returns one article with its moderation state.
func (s *Service) Get(ctx context.Context, id int64) (Article, error) {
	a, err := s.store.Get(ctx, id)
	if err != nil {
		return Article{}, err
	}
	one := []Article{a}
	err = s.store.withModeration(ctx, a.BoardID, one)
	return one[0], err
}

// Update replaces an article's title and content, keeping what they replace as a revision edited by the principal
// of ctx. Its moderation state stays: the writer of a hidden article may still edit it (to mend what got it
// hidden, say), and it stays hidden until a moderator restores it.
func (s *Service) Update(ctx context.Context, id int64, title, content string) (Article, error) {
	a, err := s.store.Update(ctx, id, title, content, markdown.Render(content), apijson.Millis(s.now()), revision.EditorOf(ctx))
	if err != nil {
		return Article{}, err
	}
	one := []Article{a}
	err = s.store.withModeration(ctx, a.BoardID, one)
	return one[0], err
}

// Delete removes an article.
func (s *Service) Delete(ctx context.Context, id int64) error { return s.store.Delete(ctx, id) }

// Page is one offset page and the count that its page links need.
type Page struct {
	Articles []Article
	// Count is capped: at most the articles needed to show the next block of page links, plus one to tell
	// whether there is more (boardpage.CountLimit).
	Count int64
}

// List returns page (from 1) of a board, pageSize articles, newest first, with their moderation state.
func (s *Service) List(ctx context.Context, boardID, page, pageSize int64) (Page, error) {
	offset := (page - 1) * pageSize
	articles, err := s.store.Page(ctx, boardID, offset, pageSize)
	if err == nil {
		err = s.store.withModeration(ctx, boardID, articles)
	}
	if err != nil {
		return Page{}, err
	}
	limit := boardpage.CountLimit(page, pageSize)
	var count int64
	switch n := int64(len(articles)); {
	case n == pageSize:
		// The page's last article sits at position offset+n: count on from it instead of walking the offset again.
		var older int64
		older, err = s.store.CountOlder(ctx, boardID, articles[n-1].ID, limit-offset-n)
		count = offset + n + older
	case n > 0:
		count = offset + n // the page reached the end of the board
	default:
		count, err = s.store.CountOlder(ctx, boardID, 0, limit) // past the end: there are fewer than offset
	}
	return Page{Articles: articles, Count: count}, err
}

// Scroll returns the next pageSize articles of a board older than lastID (0: from the newest), with their
// moderation state.
func (s *Service) Scroll(ctx context.Context, boardID, pageSize, lastID int64) ([]Article, error) {
	articles, err := s.store.Scroll(ctx, boardID, pageSize, lastID)
	if err == nil {
		err = s.store.withModeration(ctx, boardID, articles)
	}
	return articles, err
}

// BoardCount returns the number of articles on a board.
func (s *Service) BoardCount(ctx context.Context, boardID int64) (int64, error) {
	count, _, err := s.store.BoardCount(ctx, boardID)
	return count, err
}

// Board is a board that has articles, and how many.
type Board struct {
	BoardID      int64
	ArticleCount int64
}

// Boards lists the boards that have articles, by id: what a rebuild from the articles (the search index's) walks.
func (s *Service) Boards(ctx context.Context) ([]Board, error) { return s.store.Boards(ctx) }

// VersionedBoardCount returns the number of articles on a board and the version of that count, the
// BoardArticleCountVersion its events carry (0 for a board that never had an article).
func (s *Service) VersionedBoardCount(ctx context.Context, boardID int64) (count, version int64, err error) {
	return s.store.BoardCount(ctx, boardID)
}

// validate checks the title and content of an article to be created or updated (SPEC §2).
func validate(title, content string) error {
	switch {
	case strings.TrimSpace(title) == "":
		return fault.Invalidf("INVALID_TITLE", "title must not be empty")
	case utf8.RuneCountInString(title) > MaxTitleChars:
		return fault.Invalidf("INVALID_TITLE", "title must be at most %d characters", MaxTitleChars)
	case strings.TrimSpace(content) == "":
		return fault.Invalidf("INVALID_CONTENT", "content must not be empty")
	case utf8.RuneCountInString(content) > MaxContentChars:
		return fault.Invalidf("INVALID_CONTENT", "content must be at most %d characters", MaxContentChars)
	}
	return nil
}
