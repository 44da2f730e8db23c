package media

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"regexp"
	"slices"
	"time"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
)

// What holds an image: a post, or a user's avatar.
const (
	refArticle = "article"
	refComment = "comment"
	refAvatar  = "avatar"
)

// mediaURL finds the images a post shows: any URL path /media/KEY in its Markdown source, relative or absolute.
var mediaURL = regexp.MustCompile(`/media/([0-9a-f]{64}\.(?:png|jpg|gif|webp))`)

// Keys returns the blob keys of the images content shows, each once.
func Keys(content string) []string {
	var keys []string
	for _, m := range mediaURL.FindAllStringSubmatch(content, -1) {
		keys = append(keys, m[1])
	}
	return slices.Compact(slices.Sorted(slices.Values(keys)))
}

// Handlers are the service's consumer of the article and comment topics: each post's references follow its
// content, and a deleted post's are dropped.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	article := func(ctx context.Context, env event.Envelope) error {
		p, err := event.Payload[event.Article](env)
		if err != nil {
			return err
		}
		if p.ArticleID <= 0 {
			return fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
		}
		content := p.Content
		if env.Type == event.ArticleDeleted {
			content = ""
		}
		return s.postChanged(ctx, refArticle, int64(p.ArticleID), p.ArticleVersion, Keys(content))
	}
	comment := func(ctx context.Context, env event.Envelope) error {
		p, err := event.Payload[event.Comment](env)
		if err != nil {
			return err
		}
		if p.CommentID <= 0 {
			return fault.Invalidf("INVALID_COMMENT_ID", "%s without a valid commentId", env.Type)
		}
		// A comment's edits count up from 1 (0 in events from before comments were editable); its delete is final,
		// so it outranks every edit.
		version, content := max(p.CommentVersion, 1), p.Content
		if env.Type == event.CommentDeleted || p.Deleted {
			version, content = math.MaxInt64, ""
		}
		return s.postChanged(ctx, refComment, int64(p.CommentID), version, Keys(content))
	}
	return map[event.Type]kafka.Handler{event.ArticleCreated: article, event.ArticleUpdated: article,
		event.ArticleDeleted: article, event.CommentCreated: comment, event.CommentUpdated: comment, event.CommentDeleted: comment}
}

// postChanged records that version of a post shows keys, unless a version as new is recorded already.
func (s *Service) postChanged(ctx context.Context, postType string, postID, version int64, keys []string) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		var have int64
		err := tx.QueryRowContext(ctx, "SELECT version FROM media_post WHERE post_type = ? AND post_id = ?"+s.db.ForUpdate(),
			postType, postID).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.ExecContext(ctx, "INSERT INTO media_post (post_type, post_id, version) VALUES (?, ?, ?)",
				postType, postID, version); err != nil {
				return err
			}
		case err != nil:
			return err
		case have >= version:
			return nil
		default:
			if _, err := tx.ExecContext(ctx, "UPDATE media_post SET version = ? WHERE post_type = ? AND post_id = ?",
				version, postType, postID); err != nil {
				return err
			}
		}
		return s.setRefs(ctx, tx, postType, postID, keys)
	})
}

// setRefs makes the references of a post (or avatar) exactly keys. Each blob whose reference is added or dropped is
// locked first, so that a collection of it happens wholly before or after; a dropped one is leased anew, which
// starts its day unreferenced.
func (s *Service) setRefs(ctx context.Context, tx *sql.Tx, postType string, postID int64, keys []string) error {
	rows, err := tx.QueryContext(ctx, "SELECT blob_key FROM media_ref WHERE post_type = ? AND post_id = ?", postType, postID)
	if err != nil {
		return err
	}
	var have []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return err
		}
		have = append(have, k)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	var added, dropped []string
	for _, k := range keys {
		if !slices.Contains(have, k) {
			added = append(added, k)
		}
	}
	for _, k := range have {
		if !slices.Contains(keys, k) {
			dropped = append(dropped, k)
		}
	}
	if len(added)+len(dropped) == 0 {
		return nil
	}
	if _, err := s.lockBlobs(ctx, tx, append(slices.Clone(added), dropped...)...); err != nil {
		return err
	}
	for _, k := range dropped {
		if _, err := tx.ExecContext(ctx, "DELETE FROM media_ref WHERE post_type = ? AND post_id = ? AND blob_key = ?",
			postType, postID, k); err != nil {
			return err
		}
		var one int
		switch err := tx.QueryRowContext(ctx, "SELECT 1 FROM media_ref WHERE blob_key = ? LIMIT 1", k).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows): // the last reference: the blob's day unreferenced starts now
			if _, err := tx.ExecContext(ctx, "UPDATE media_blob SET leased_at = ? WHERE blob_key = ?", s.now(), k); err != nil {
				return err
			}
		case err != nil:
			return err
		}
	}
	for _, k := range added {
		if _, err := tx.ExecContext(ctx, "INSERT INTO media_ref (post_type, post_id, blob_key) VALUES (?, ?, ?)",
			postType, postID, k); err != nil {
			return err
		}
		if err := s.markReferenced(ctx, tx, k); err != nil {
			return err
		}
	}
	return nil
}

// referencedLease is the lease of a blob a post shows: never stale, so that the collection does not visit the
// blobs that posts show, however many, every time it runs. An upload of the same bytes leases it to now again;
// the collection, finding it referenced then, puts this back.
var referencedLease = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

func (s *Service) markReferenced(ctx context.Context, tx *sql.Tx, key string) error {
	_, err := tx.ExecContext(ctx, "UPDATE media_blob SET leased_at = ? WHERE blob_key = ?", referencedLease, key)
	return err
}
