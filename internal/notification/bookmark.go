package notification

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// Bookmarks (SPEC §3.13) live here because this service already keeps, from the events, the record of every article
// and comment that it needs to show a bookmark's title and excerpt, and to leave out one whose target is deleted or
// hidden, with no call to another service when the list is read (docs/notifications.md, "Bookmarks").

// BookmarkTarget is what a bookmark points at.
type BookmarkTarget string

const (
	BookmarkArticle BookmarkTarget = "article"
	BookmarkComment BookmarkTarget = "comment"
)

func parseBookmarkTarget(s string) (BookmarkTarget, error) {
	switch t := BookmarkTarget(s); t {
	case BookmarkArticle, BookmarkComment:
		return t, nil
	}
	return "", fault.Invalidf("INVALID_TARGET_TYPE", "targetType must be article or comment, not %q", s)
}

// Bookmark is one of a user's bookmarks.
type Bookmark struct {
	ID         int64 // a Snowflake id: the list's order
	TargetType BookmarkTarget
	TargetID   int64
	ArticleID  int64 // the target's article (the target itself for an article)
	CreatedAt  time.Time
	// Title and Excerpt are the list's: the article's title, and the start of the target's text.
	Title, Excerpt string
}

// excerptRunes bounds the excerpt of an article or comment kept for the list of bookmarks: a line or two.
const excerptRunes = 200

// refExcerpt is the start of a post's plain text, its runs of white space made single spaces, cut after
// excerptRunes runes with an ellipsis.
func refExcerpt(text string) string {
	var b strings.Builder
	runes := 0
	for _, word := range strings.FieldsFunc(text, unicode.IsSpace) {
		if runes > 0 {
			b.WriteByte(' ')
			runes++
		}
		for _, r := range word {
			if runes == excerptRunes {
				return strings.TrimRight(b.String(), " ") + "…"
			}
			b.WriteRune(r)
			runes++
		}
	}
	return b.String()
}

var errTargetNotFound = fault.NotFoundf("TARGET_NOT_FOUND", "no such article or comment")

// AddBookmark bookmarks a target for the user; a target bookmarked already keeps its bookmark (and its createdAt).
// A target that does not exist, or is deleted or hidden, is TARGET_NOT_FOUND. An article or comment the events have
// not told of yet is looked up at its service.
func (s *Service) AddBookmark(ctx context.Context, userID int64, typ BookmarkTarget, targetID int64) (Bookmark, error) {
	articleID := targetID
	if typ == BookmarkComment {
		c, ok, err := s.bookmarkableComment(ctx, targetID)
		if err != nil {
			return Bookmark{}, err
		} else if !ok {
			return Bookmark{}, errTargetNotFound
		}
		articleID = c
	}
	if _, ok, err := s.article(ctx, articleID); err != nil {
		return Bookmark{}, err
	} else if !ok {
		return Bookmark{}, errTargetNotFound
	}
	var hidden bool
	if err := s.db.QueryRowContext(ctx, "SELECT hidden FROM article_ref WHERE article_id = ?", articleID).Scan(&hidden); err != nil {
		return Bookmark{}, err
	} else if hidden {
		return Bookmark{}, errTargetNotFound
	}
	id, err := s.ids.Next()
	if err != nil {
		return Bookmark{}, snowflake.Unavailable(err)
	}
	if _, err := s.db.ExecContext(ctx, s.insertIgnore()+" bookmark (user_id, bookmark_id, target_type, target_id, article_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
		userID, id, string(typ), targetID, articleID, millis(snowflake.Timestamp(id))); err != nil {
		return Bookmark{}, err
	}
	return s.GetBookmark(ctx, userID, typ, targetID)
}

// bookmarkableComment returns the article of a comment that is there (not deleted nor hidden); ok is false for one
// that is not. A comment the events have not told of (its create not read yet, or older than the topic's retention
// when the service started) is looked up at the comment service, and recorded as a comment hidden before its create
// is read would be (commentModerated): not created, so that its COMMENT_CREATED still notifies.
func (s *Service) bookmarkableComment(ctx context.Context, id int64) (articleID int64, ok bool, err error) {
	var deleted, hidden bool
	err = s.db.QueryRowContext(ctx, "SELECT article_id, deleted, hidden FROM comment_ref WHERE comment_id = ?", id).
		Scan(&articleID, &deleted, &hidden)
	if !errors.Is(err, sql.ErrNoRows) {
		return articleID, err == nil && !deleted && !hidden, err
	}
	c, ok, err := s.lookUpComment(ctx, id)
	if err != nil || !ok {
		return 0, false, err
	}
	_, err = s.db.ExecContext(ctx, s.insertIgnore()+" comment_ref (article_id, comment_id, path, parent_id, writer_id, excerpt, created) VALUES (?, ?, ?, ?, ?, ?, FALSE)",
		c.articleID, c.id, c.path, c.parentID, c.writerID, c.excerpt)
	return c.articleID, true, err
}

// lookUpComment GETs a comment at the comment service: as a v2 comment, else as a v1 comment (their ids are
// apart). ok is false when neither is found, or the comment is deleted or hidden.
func (s *Service) lookUpComment(ctx context.Context, id int64) (comment, bool, error) {
	for _, path := range []string{"/v2/comments/", "/v1/comments/"} {
		var p struct {
			event.Comment
			Hidden event.Hidden `json:"hidden"`
		}
		found, err := s.lookUp(ctx, "comment", s.cfg.CommentOrigin, path+strconv.FormatInt(id, 10), &p)
		if err != nil {
			return comment{}, false, err
		} else if !found {
			continue
		}
		if p.Deleted || p.Hidden != event.Visible {
			return comment{}, false, nil
		}
		c, err := commentOf(event.Envelope{Type: event.CommentCreated}, p.Comment)
		if err != nil { // an answer without the ids: not the client's fault
			return comment{}, false, fault.Unavailablef(err, "COMMENT_SERVICE_UNAVAILABLE", "the comment service answered without ids")
		}
		return c, true, nil
	}
	return comment{}, false, nil
}

// RemoveBookmark removes the user's bookmark of a target, if there is one.
func (s *Service) RemoveBookmark(ctx context.Context, userID int64, typ BookmarkTarget, targetID int64) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM bookmark WHERE user_id = ? AND target_type = ? AND target_id = ?", userID, string(typ), targetID)
	return err
}

// GetBookmark returns the user's bookmark of a target, whatever became of the target: BOOKMARK_NOT_FOUND without one.
func (s *Service) GetBookmark(ctx context.Context, userID int64, typ BookmarkTarget, targetID int64) (Bookmark, error) {
	bs, err := s.bookmarks(ctx, "WHERE user_id = ? AND target_type = ? AND target_id = ?", userID, string(typ), targetID)
	if err != nil {
		return Bookmark{}, err
	}
	if len(bs) == 0 {
		return Bookmark{}, fault.NotFoundf("BOOKMARK_NOT_FOUND", "you have not bookmarked %s %d", typ, targetID)
	}
	return bs[0], nil
}

// bookmarkRounds bounds the batches one list reads to fill a page past bookmarks whose targets are gone: a user
// with thousands of those gets a short page and a cursor, not a request that reads them all.
const bookmarkRounds = 10

// Bookmarks returns up to n of the user's bookmarks older than bookmark before (0: from the newest), newest first,
// with their titles and excerpts. A bookmark whose target is deleted or hidden is left out, and the next ones are
// read in its place, for bookmarkRounds batches at most: scannedTo is then the last bookmark read (0 when the
// answer is whole), from which a next page goes on.
func (s *Service) Bookmarks(ctx context.Context, userID, before int64, n int) (bs []Bookmark, scannedTo int64, err error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	var out []Bookmark
	for round := 0; len(out) < n; round++ {
		if round == bookmarkRounds {
			return out, before, nil
		}
		batch, err := s.bookmarks(ctx, "WHERE user_id = ? AND bookmark_id < ? ORDER BY bookmark_id DESC LIMIT ?", userID, before, n)
		if err != nil || len(batch) == 0 {
			return out, 0, err
		}
		before = batch[len(batch)-1].ID
		shown, err := s.shown(ctx, batch)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, shown...)
		if len(batch) < n {
			break
		}
	}
	return out[:min(len(out), n)], 0, nil
}

func (s *Service) bookmarks(ctx context.Context, where string, args ...any) ([]Bookmark, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT bookmark_id, target_type, target_id, article_id, created_at FROM bookmark "+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Bookmark
	for rows.Next() {
		var b Bookmark
		var typ string
		if err := rows.Scan(&b.ID, &typ, &b.TargetID, &b.ArticleID, &b.CreatedAt); err != nil {
			return nil, err
		}
		b.TargetType, b.CreatedAt = BookmarkTarget(typ), b.CreatedAt.UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// refState is what the list shows of a bookmark's article or comment, and whether it is out of sight.
type refState struct {
	title, excerpt string
	gone           bool // deleted or hidden
}

// shown returns the bookmarks whose targets are there, with their titles and excerpts: an article neither deleted
// nor hidden, a comment neither deleted nor hidden in such an article. The records of articles and comments live on
// their article's shard: one query each, for the whole batch.
func (s *Service) shown(ctx context.Context, bs []Bookmark) ([]Bookmark, error) {
	var articleIDs, commentIDs []int64
	for _, b := range bs {
		articleIDs = append(articleIDs, b.ArticleID)
		if b.TargetType == BookmarkComment {
			commentIDs = append(commentIDs, b.TargetID)
		}
	}
	articles := map[int64]refState{}
	in, args := sqldb.In("article_id", distinct(articleIDs, 0))
	if err := s.refStates(ctx, "SELECT article_id, title, excerpt, deleted OR hidden FROM article_ref WHERE "+in, args, articles); err != nil {
		return nil, err
	}
	comments := map[int64]refState{}
	if len(commentIDs) > 0 {
		inComments, commentArgs := sqldb.In("comment_id", commentIDs)
		if err := s.refStates(ctx, "SELECT comment_id, '', excerpt, deleted OR hidden FROM comment_ref WHERE "+in+" AND "+inComments,
			append(args, commentArgs...), comments); err != nil {
			return nil, err
		}
	}
	out := bs[:0]
	for _, b := range bs {
		a, ok := articles[b.ArticleID]
		if !ok || a.gone {
			continue
		}
		b.Title, b.Excerpt = a.title, a.excerpt
		if b.TargetType == BookmarkComment {
			c, ok := comments[b.TargetID]
			if !ok || c.gone {
				continue
			}
			b.Excerpt = c.excerpt
		}
		out = append(out, b)
	}
	return out, nil
}

// refStates reads rows of (id, title, excerpt, gone) into into.
func (s *Service) refStates(ctx context.Context, query string, args []any, into map[int64]refState) error {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var r refState
		if err := rows.Scan(&id, &r.title, &r.excerpt, &r.gone); err != nil {
			return err
		}
		into[id] = r
	}
	return rows.Err()
}

// articleHidden records whether moderation hides an article (ARTICLE_MODERATED): its bookmarks drop out of the
// list while it is. The moderation topic is read apart from the article topic: an article not told of yet is
// looked up first, so that its record has its title.
func (s *Service) articleHidden(ctx context.Context, p event.ArticleModeration) error {
	id, hidden := int64(p.ArticleID), p.Hidden != event.Visible
	for looked := false; ; looked = true {
		res, err := s.db.ExecContext(ctx, "UPDATE article_ref SET hidden = ? WHERE article_id = ?", hidden, id)
		if err != nil {
			return err
		}
		// MySQL counts the rows changed, not those found: a row that says so already is found below, with no call.
		if n, err := res.RowsAffected(); err != nil || n > 0 || looked {
			return err
		}
		if _, ok, err := s.article(ctx, id); err != nil || !ok {
			return err
		}
	}
}
