package moderation

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
)

// Lock locks (on) or unlocks an article and returns its moderation state. Locking a locked article, or unlocking
// one that is not, changes nothing and writes no event.
func (s *Service) Lock(ctx context.Context, moderatorID, articleID int64, on bool) (ArticleState, error) {
	return s.moderateArticle(ctx, articleID, on, func(ctx context.Context, tx *sql.Tx, emit outbox.Emit, t *targetRow) error {
		if t.locked == on {
			return nil
		}
		t.locked = on
		action := event.ActionUnlock
		if on {
			action = event.ActionLock
		}
		return s.change(ctx, tx, emit, t, action, "", moderatorID, 0)
	})
}

// Pin pins (on) or unpins an article and returns its moderation state: PIN_LIMIT when its board has PinLimit pinned
// already. Pinning a pinned article, or unpinning one that is not, changes nothing and writes no event.
func (s *Service) Pin(ctx context.Context, moderatorID, articleID int64, on bool) (ArticleState, error) {
	apply := func(ctx context.Context, tx *sql.Tx, emit outbox.Emit, t *targetRow) error {
		if t.pinned == on {
			return nil
		}
		action := event.ActionUnpin
		if on {
			// One conditional UPDATE takes a place: under its row lock, concurrent pins of a board cannot pass the limit.
			res, err := tx.ExecContext(ctx, "UPDATE board_pin SET pin_count = pin_count + 1 WHERE board_id = ? AND pin_count < ?", t.boardID, PinLimit)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				var rows int64
				if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM board_pin WHERE board_id = ?", t.boardID).Scan(&rows); err != nil {
					return err
				}
				if rows == 0 {
					return noBoardPin{t.boardID}
				}
				return fault.Conflictf("PIN_LIMIT", "board %d has %d pinned articles already; unpin one first", t.boardID, PinLimit)
			}
			action = event.ActionPin
		} else if err := unpinOne(ctx, tx, t.boardID); err != nil {
			return err
		}
		t.pinned = on
		return s.change(ctx, tx, emit, t, action, "", moderatorID, 0)
	}
	state, err := s.moderateArticle(ctx, articleID, on, apply)
	var missing noBoardPin
	if !errors.As(err, &missing) {
		return state, err
	}
	// The board's first pin: its count row is made on its own, like a target's row (see the package doc), and the
	// pin tried again, finding it.
	if _, err := s.db.ExecContext(ctx, "INSERT INTO board_pin (board_id, pin_count) VALUES (?, 0)"+
		s.db.OnConflictUpdate("board_id", "pin_count = pin_count"), missing.boardID); err != nil {
		return ArticleState{}, err
	}
	return s.moderateArticle(ctx, articleID, on, apply)
}

// noBoardPin says a board has no pin count row yet.
type noBoardPin struct{ boardID int64 }

func (e noBoardPin) Error() string { return fmt.Sprintf("board %d has no pin count row", e.boardID) }

func unpinOne(ctx context.Context, tx *sql.Tx, boardID int64) error {
	_, err := tx.ExecContext(ctx, "UPDATE board_pin SET pin_count = pin_count - 1 WHERE board_id = ? AND pin_count > 0", boardID)
	return err
}

// moderateArticle runs apply on an article's row, locked, in a transaction, and returns the state it leaves. An
// article without a row is looked up first, to create its row, unless the change is an undo (on false): an article
// moderation never knew has nothing to undo.
func (s *Service) moderateArticle(ctx context.Context, articleID int64, on bool,
	apply func(context.Context, *sql.Tx, outbox.Emit, *targetRow) error) (ArticleState, error) {
	board, err := s.boardOf(ctx, Article, articleID)
	switch {
	case errors.Is(err, errNoTarget):
		if !on {
			return ArticleState{}, nil
		}
		a, err := s.lookUpArticle(ctx, articleID)
		if fault.KindOf(err) == fault.NotFound {
			return ArticleState{}, articleNotFound(articleID)
		} else if err != nil {
			return ArticleState{}, err
		}
		if err := s.ensureTarget(ctx, a); err != nil {
			return ArticleState{}, err
		}
		board = a.boardID
	case err != nil:
		return ArticleState{}, err
	}
	var t targetRow
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if t, err = s.lockTarget(ctx, tx, Article, articleID, board); errors.Is(err, errNoTarget) {
			if !on {
				return nil
			}
			return articleNotFound(articleID) // deleted meanwhile
		} else if err != nil {
			return err
		}
		return apply(ctx, tx, emit, &t)
	})
	if err != nil {
		return ArticleState{}, err
	}
	return ArticleState{ArticleID: t.id, BoardID: t.boardID, WriterID: t.writerID, Hidden: t.hidden, RemovedReason: t.removedReason,
		Locked: t.locked, Pinned: t.pinned, ModerationVersion: t.version}, nil
}

func articleNotFound(id int64) error {
	return fault.NotFoundf("ARTICLE_NOT_FOUND", "article %d does not exist", id)
}

// Ban bans a user until a time (nil: for good) with a reason, shown to them. A ban of a banned user replaces it.
//
// A moderator cannot ban a moderator (403): the role is given and taken from the shell (`board user grant`), by the
// operators, and a moderator's standing is theirs to judge; two moderators could otherwise ban each other. The
// operators take the role back first, which reaches every service within a second, and a moderator may then ban.
func (s *Service) Ban(ctx context.Context, moderatorID, userID int64, reason string, until *time.Time) (Ban, error) {
	now := s.now()
	if until != nil {
		u := apijson.Millis(*until)
		if !u.After(now) {
			return Ban{}, fault.Invalidf("BAD_UNTIL", "until must be in the future; leave it out for a ban for good")
		}
		until = &u
	}
	if userID == moderatorID {
		return Ban{}, fault.Invalidf("CANNOT_BAN_SELF", "you cannot ban yourself")
	}
	role, err := s.userRole(ctx, userID)
	if err != nil {
		return Ban{}, err
	}
	if role == string(auth.RoleModerator) {
		return Ban{}, fault.Forbiddenf("a moderator cannot ban a moderator: take the role back first with board user grant")
	}
	b := Ban{UserID: userID, Reason: reason, Until: until, ModeratorID: moderatorID, CreatedAt: now}
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		version, exists, err := s.lockBan(ctx, tx, userID)
		if err != nil {
			return err
		}
		version++
		if exists {
			_, err = tx.ExecContext(ctx, "UPDATE ban SET reason = ?, until = ?, moderator_id = ?, created_at = ?, ban_version = ?, active = TRUE WHERE user_id = ?",
				reason, nullTime(until), moderatorID, now, version, userID)
		} else {
			_, err = tx.ExecContext(ctx, "INSERT INTO ban (user_id, reason, until, moderator_id, created_at, ban_version, active) VALUES (?, ?, ?, ?, ?, ?, TRUE)",
				userID, reason, nullTime(until), moderatorID, now, version)
		}
		if err != nil {
			return err
		}
		if err := emit(event.UserBanned, userID, banPayload(b, true, version)); err != nil {
			return err
		}
		return s.log(ctx, tx, userID, LogEntry{Action: event.ActionBan, TargetType: User, TargetID: userID, ModeratorID: moderatorID, Reason: reason})
	})
	if err != nil {
		return Ban{}, err
	}
	return b, nil
}

// Unban lifts a user's ban: BAN_NOT_FOUND when they are not banned (a ban past its end included).
func (s *Service) Unban(ctx context.Context, moderatorID, userID int64) error {
	return s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		b, version, err := s.readBan(ctx, tx, userID, s.db.ForUpdate())
		if err != nil {
			return err
		}
		version++
		if _, err := tx.ExecContext(ctx, "UPDATE ban SET active = FALSE, ban_version = ? WHERE user_id = ?", version, userID); err != nil {
			return err
		}
		b.ModeratorID, b.CreatedAt = moderatorID, s.now()
		if err := emit(event.UserUnbanned, userID, banPayload(b, false, version)); err != nil {
			return err
		}
		return s.log(ctx, tx, userID, LogEntry{Action: event.ActionUnban, TargetType: User, TargetID: userID, ModeratorID: moderatorID})
	})
}

// GetBan returns a user's ban in force: BAN_NOT_FOUND when there is none.
func (s *Service) GetBan(ctx context.Context, userID int64) (Ban, error) {
	b, _, err := s.readBan(ctx, nil, userID, "")
	return b, err
}

// lockBan locks a user's ban row and returns its version, and whether it exists.
func (s *Service) lockBan(ctx context.Context, tx *sql.Tx, userID int64) (version int64, exists bool, err error) {
	err = tx.QueryRowContext(ctx, "SELECT ban_version FROM ban WHERE user_id = ?"+s.db.ForUpdate(), userID).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return version, err == nil, err
}

// readBan reads a user's ban in force, in tx (with lock) or outside any when tx is nil, and its version.
func (s *Service) readBan(ctx context.Context, tx *sql.Tx, userID int64, lock string) (Ban, int64, error) {
	query := "SELECT reason, until, moderator_id, created_at, ban_version, active FROM ban WHERE user_id = ?" + lock
	var row interface{ Scan(...any) error }
	if tx != nil {
		row = tx.QueryRowContext(ctx, query, userID)
	} else {
		row = s.db.QueryRowContext(ctx, query, userID)
	}
	b := Ban{UserID: userID}
	var until sql.NullTime
	var version int64
	var active bool
	err := row.Scan(&b.Reason, &until, &b.ModeratorID, &b.CreatedAt, &version, &active)
	notFound := fault.NotFoundf("BAN_NOT_FOUND", "user %d is not banned", userID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Ban{}, 0, notFound
	case err != nil:
		return Ban{}, 0, err
	case !active || until.Valid && !until.Time.After(s.now()):
		return Ban{}, version, notFound
	}
	b.CreatedAt = b.CreatedAt.UTC()
	if until.Valid {
		u := until.Time.UTC()
		b.Until = &u
	}
	return b, version, nil
}

func banPayload(b Ban, banned bool, version int64) event.Ban {
	p := event.Ban{UserID: apijson.ID(b.UserID), Banned: banned, Reason: b.Reason, ModeratorID: apijson.ID(b.ModeratorID),
		At: apijson.Time(b.CreatedAt), BanVersion: version}
	if b.Until != nil {
		u := apijson.Time(*b.Until)
		p.Until = &u
	}
	return p
}

func nullTime(t *time.Time) sql.NullTime {
	if t == nil {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: *t, Valid: true}
}
