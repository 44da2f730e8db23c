package article

import (
	"context"
	"database/sql"
	"errors"
	"unicode/utf8"

	"board/internal/event"
	"board/internal/fault"
	"board/internal/kafka"
	"board/internal/sqldb"
)

// Moderation is what moderation has made of an article (SPEC §3.9), as the latest ARTICLE_MODERATED applied here
// says; the zero value is an article never moderated.
type Moderation struct {
	Hidden        event.Hidden
	RemovedReason string // shown in place of the content while hidden
	Locked        bool   // no new comments (the comment service enforces it)
	Pinned        bool
}

// maxReasonChars bounds a stored removedReason (the column's size); a longer one is cut, not refused, so that one
// long reason cannot hold up the topic.
const maxReasonChars = 1000

// Handlers are the article service's handlers of the moderation topic and of USER_DELETED (leaving.go), for its own
// consumer group.
func (s *Service) Handlers() map[event.Type]kafka.Handler {
	return map[event.Type]kafka.Handler{event.ArticleModerated: s.applyModerated, event.UserDeleted: s.applyUserDeleted}
}

func (s *Service) applyModerated(ctx context.Context, env event.Envelope) error {
	p, err := event.Payload[event.ArticleModeration](env)
	if err != nil {
		return err
	}
	switch {
	case p.ArticleID <= 0:
		return fault.Invalidf("INVALID_ARTICLE_ID", "%s without a valid articleId", env.Type)
	case p.ModerationVersion <= 0:
		return fault.Invalidf("INVALID_VERSION", "%s without a positive moderationVersion", env.Type)
	case p.Hidden != event.Visible && p.Hidden != event.Pending && p.Hidden != event.Removed:
		return fault.Invalidf("INVALID_HIDDEN", "%s with hidden %q", env.Type, p.Hidden)
	}
	reason := p.RemovedReason
	if utf8.RuneCountInString(reason) > maxReasonChars {
		reason = string([]rune(reason)[:maxReasonChars])
	}
	return s.store.ApplyModeration(ctx, int64(p.ArticleID),
		Moderation{Hidden: p.Hidden, RemovedReason: reason, Locked: p.Locked, Pinned: p.Pinned}, p.ModerationVersion)
}

// ApplyModeration records an article's moderation state at version, unless the state recorded is as new or newer
// (a duplicate or a late event) or the article is gone. The article's row is read under a shared lock first, which
// its delete, taking the row exclusively, waits for or makes this wait for: either the state is recorded before the
// delete, which removes it, or the delete comes first and a late event finds no article and changes nothing.
func (s *Store) ApplyModeration(ctx context.Context, id int64, m Moderation, version int64) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		var boardID int64
		err := tx.QueryRowContext(ctx, "SELECT board_id FROM article WHERE article_id = ?"+s.db.ForShare(), id).Scan(&boardID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		// Insert the state if the article has none; an upsert that changes nothing sets a column to itself (Vitess
		// refuses any update of the shard key). Then replace an older state.
		if _, err := tx.ExecContext(ctx, `INSERT INTO article_moderation (article_id, board_id, hidden, removed_reason, locked,
				pinned, moderation_version) VALUES (?, ?, ?, ?, ?, ?, ?)`+s.db.OnConflictUpdate("article_id", "moderation_version = moderation_version"),
			id, boardID, m.Hidden, m.RemovedReason, m.Locked, m.Pinned, version); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE article_moderation SET hidden = ?, removed_reason = ?, locked = ?, pinned = ?,
				moderation_version = ? WHERE board_id = ? AND article_id = ? AND moderation_version < ?`,
			m.Hidden, m.RemovedReason, m.Locked, m.Pinned, version, boardID, id, version)
		return err
	})
}

// deleteModeration removes an article's moderation state, in the transaction that deletes the article.
func deleteModeration(ctx context.Context, tx *sql.Tx, a Article) error {
	_, err := tx.ExecContext(ctx, "DELETE FROM article_moderation WHERE board_id = ? AND article_id = ?", a.BoardID, a.ID)
	return err
}

// withModeration fills in the moderation state of articles of one board, with one query for them all.
func (s *Store) withModeration(ctx context.Context, boardID int64, articles []Article) error {
	if len(articles) == 0 {
		return nil
	}
	ids := make([]int64, len(articles))
	for i, a := range articles {
		ids[i] = a.ID
	}
	in, args := sqldb.In("article_id", ids)
	rows, err := s.db.QueryContext(ctx, "SELECT article_id, hidden, removed_reason, locked, pinned FROM article_moderation WHERE board_id = ? AND "+in,
		append([]any{boardID}, args...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	states := make(map[int64]Moderation)
	for rows.Next() {
		var id int64
		var m Moderation
		if err := rows.Scan(&id, &m.Hidden, &m.RemovedReason, &m.Locked, &m.Pinned); err != nil {
			return err
		}
		states[id] = m
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range articles {
		articles[i].Moderation = states[articles[i].ID]
	}
	return nil
}
