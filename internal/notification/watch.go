package notification

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// Watches (SPEC §3.13). A user's watch lives twice: in watch, on the user's shard, which is the truth and is read in
// the inbox transactions it decides for (a muted article, a watcher still watching), and in watcher, on the target's
// shard, the index that tells a fan-out whom to consider. The index is written before a watch is made and after one
// is removed, each write in its own single-shard transaction and idempotent, so it always holds every watch, and
// after a failure between the two writes perhaps one that is gone, which the fan-out drops when it reads the truth;
// the user's next PUT or DELETE of that watch mends it. docs/notifications.md argues the choice.

// Target types and levels.
const (
	TargetArticle = "article"
	TargetBoard   = "board"
	LevelWatching = "watching"
	LevelMuted    = "muted"
)

// Watch is a user's watch of an article or a board.
type Watch struct {
	TargetType string
	TargetID   int64
	Level      string
	id         int64 // orders the user's list, newest first
	CreatedAt  time.Time
}

// PutWatch watches or mutes a target for the user; a second PUT changes the level and keeps the first createdAt.
// An article must exist (TARGET_NOT_FOUND); a board is any positive id.
func (s *Service) PutWatch(ctx context.Context, userID int64, targetType string, targetID int64, level string) (Watch, error) {
	if targetType == TargetArticle {
		_, ok, err := s.article(ctx, targetID)
		if err != nil {
			return Watch{}, err
		}
		if !ok {
			return Watch{}, fault.NotFoundf("TARGET_NOT_FOUND", "article %d does not exist", targetID)
		}
	}
	if err := s.indexWatcher(ctx, userID, targetType, targetID); err != nil {
		return Watch{}, err
	}
	var w Watch
	err := s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := s.insertWatch(ctx, tx, userID, targetType, targetID, level); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE watch SET level = ? WHERE user_id = ? AND target_type = ? AND target_id = ?",
			level, userID, targetType, targetID); err != nil {
			return err
		}
		var err error
		w, err = scanWatch(tx.QueryRowContext(ctx, "SELECT "+watchColumns+" FROM watch WHERE user_id = ? AND target_type = ? AND target_id = ?",
			userID, targetType, targetID))
		return err
	})
	if err != nil {
		return w, err
	}
	// Again once the watch is in: a DELETE between the first entry and the watch may have taken the entry away.
	return w, s.indexWatcher(ctx, userID, targetType, targetID)
}

// indexWatcher puts the user in the index of the target's watchers.
func (s *Service) indexWatcher(ctx context.Context, userID int64, targetType string, targetID int64) error {
	_, err := s.db.ExecContext(ctx, s.insertIgnore()+" watcher (target_id, target_type, user_id) VALUES (?, ?, ?)", targetID, targetType, userID)
	return err
}

// insertWatch adds the user's watch of the target at level unless the user has one; the inbox row is made too, so
// that a fan-out finds it (and need not make it).
func (s *Service) insertWatch(ctx context.Context, tx *sql.Tx, userID int64, targetType string, targetID int64, level string) (bool, error) {
	id, err := s.ids.Next()
	if err != nil {
		return false, snowflake.Unavailable(err)
	}
	if _, err := tx.ExecContext(ctx, s.insertIgnore()+" inbox (user_id) VALUES (?)", userID); err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, s.insertIgnore()+" watch (user_id, target_type, target_id, level, watch_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
		userID, targetType, targetID, level, id, millis(s.cfg.Now()))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// DeleteWatch ends the user's watch of the target, if any: the truth first, the index after. A watch made again
// meanwhile (a PUT, or a comment's autoWatch, between the two) gets its entry back: the index stays a superset.
func (s *Service) DeleteWatch(ctx context.Context, userID int64, targetType string, targetID int64) error {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM watch WHERE user_id = ? AND target_type = ? AND target_id = ?",
		userID, targetType, targetID); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "DELETE FROM watcher WHERE target_id = ? AND target_type = ? AND user_id = ?", targetID, targetType, userID); err != nil {
		return err
	}
	var one int
	err := s.db.QueryRowContext(ctx, "SELECT 1 FROM watch WHERE user_id = ? AND target_type = ? AND target_id = ?",
		userID, targetType, targetID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.indexWatcher(ctx, userID, targetType, targetID)
}

// GetWatch returns the user's watch of the target: WATCH_NOT_FOUND when there is none.
func (s *Service) GetWatch(ctx context.Context, userID int64, targetType string, targetID int64) (Watch, error) {
	w, err := scanWatch(s.db.QueryRowContext(ctx, "SELECT "+watchColumns+" FROM watch WHERE user_id = ? AND target_type = ? AND target_id = ?",
		userID, targetType, targetID))
	if errors.Is(err, sql.ErrNoRows) {
		return w, fault.NotFoundf("WATCH_NOT_FOUND", "you do not watch %s %d", targetType, targetID)
	}
	return w, err
}

// Watches returns up to n of the user's watches made before the one whose id is before (0: from the newest),
// newest first.
func (s *Service) Watches(ctx context.Context, userID, before int64, n int) ([]Watch, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+watchColumns+" FROM watch WHERE user_id = ? AND watch_id < ? ORDER BY watch_id DESC LIMIT ?",
		userID, before, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Watch
	for rows.Next() {
		w, err := scanWatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

const watchColumns = "target_type, target_id, level, watch_id, created_at"

func scanWatch(row interface{ Scan(...any) error }) (Watch, error) {
	var w Watch
	err := row.Scan(&w.TargetType, &w.TargetID, &w.Level, &w.id, &w.CreatedAt)
	return w, err
}

// watchers returns the users the index says may watch the target, in id order.
func (s *Service) watchers(ctx context.Context, targetType string, targetID int64) ([]int64, error) {
	return sqldb.IDs(s.db.QueryContext(ctx, "SELECT user_id FROM watcher WHERE target_id = ? AND target_type = ? ORDER BY user_id",
		targetID, targetType))
}

// autoWatch has a writer watch the article they wrote on, unless they turned autoWatch off or have a watch of it
// already (muted, say, which it keeps).
func (s *Service) autoWatch(ctx context.Context, userID, articleID int64) error {
	if userID <= 0 || s.deleted(userID) {
		return nil
	}
	prefs, err := s.Preferences(ctx, userID)
	if err != nil || !prefs.AutoWatch {
		return err
	}
	if err := s.indexWatcher(ctx, userID, TargetArticle, articleID); err != nil {
		return err
	}
	if err := s.db.Transact(ctx, func(tx *sql.Tx) error {
		// Looked at again where it counts: turned off since, it leaves only an index entry, which the truth drops.
		var auto bool
		err := tx.QueryRowContext(ctx, "SELECT auto_watch FROM inbox WHERE user_id = ?"+s.db.ForShare(), userID).Scan(&auto)
		if err != nil && !errors.Is(err, sql.ErrNoRows) || err == nil && !auto {
			return err
		}
		_, err = s.insertWatch(ctx, tx, userID, TargetArticle, articleID, LevelWatching)
		return err
	}); err != nil {
		return err
	}
	// Again once the watch is in, as PutWatch does.
	return s.indexWatcher(ctx, userID, TargetArticle, articleID)
}

// Wire forms and handlers.

type watchJSON struct {
	TargetType string       `json:"targetType"`
	TargetID   apijson.ID   `json:"targetId"`
	Level      string       `json:"level"`
	CreatedAt  apijson.Time `json:"createdAt"`
}

func watchToJSON(w Watch) watchJSON {
	return watchJSON{w.TargetType, apijson.ID(w.TargetID), w.Level, apijson.Time(w.CreatedAt)}
}

// watchTarget reads the acting user and the target of a watch route.
func watchTarget(r *http.Request) (user int64, targetType string, targetID int64, err error) {
	targetType = r.PathValue("targetType")
	if targetType != TargetArticle && targetType != TargetBoard {
		return 0, "", 0, fault.Invalidf("INVALID_TARGET_TYPE", "targetType must be article or board, not %q", targetType)
	}
	if targetID, err = httpio.PathID(r, "targetId"); err != nil {
		return 0, "", 0, err
	}
	if targetID <= 0 {
		return 0, "", 0, fault.Invalidf("INVALID_TARGET_ID", "targetId must be positive")
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return 0, "", 0, err
	}
	return p.UserID, targetType, targetID, nil
}

func (h handlers) putWatch(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Level *string `json:"level"`
	}
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if err := httpio.Required(httpio.Has("level", in.Level != nil)); err != nil {
		return err
	}
	if *in.Level != LevelWatching && *in.Level != LevelMuted {
		return fault.Invalidf("INVALID_LEVEL", "level must be watching or muted, not %q", *in.Level)
	}
	user, targetType, targetID, err := watchTarget(r)
	if err != nil {
		return err
	}
	watch, err := h.svc.PutWatch(r.Context(), user, targetType, targetID, *in.Level)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, watchToJSON(watch))
	return nil
}

func (h handlers) deleteWatch(w http.ResponseWriter, r *http.Request) error {
	user, targetType, targetID, err := watchTarget(r)
	if err != nil {
		return err
	}
	if err := h.svc.DeleteWatch(r.Context(), user, targetType, targetID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h handlers) getWatch(w http.ResponseWriter, r *http.Request) error {
	user, targetType, targetID, err := watchTarget(r)
	if err != nil {
		return err
	}
	watch, err := h.svc.GetWatch(r.Context(), user, targetType, targetID)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, watchToJSON(watch))
	return nil
}

func (h handlers) listWatches(w http.ResponseWriter, r *http.Request) error {
	pageSize, err := httpio.QueryInt(r, "pageSize", 20, 1, 100)
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	before, err := parseCursor(r.URL.Query().Get("cursor"), p.UserID)
	if err != nil {
		return err
	}
	ws, err := h.svc.Watches(r.Context(), p.UserID, before, int(pageSize)+1)
	if err != nil {
		return err
	}
	out := struct {
		Watches    []watchJSON `json:"watches"`
		NextCursor string      `json:"nextCursor"`
	}{Watches: make([]watchJSON, 0, len(ws))}
	if len(ws) > int(pageSize) {
		ws = ws[:pageSize]
		out.NextCursor = cursor(p.UserID, ws[len(ws)-1].id)
	}
	for _, watch := range ws {
		out.Watches = append(out.Watches, watchToJSON(watch))
	}
	httpio.Write(w, http.StatusOK, out)
	return nil
}
