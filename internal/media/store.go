package media

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
)

func (s *Service) now() time.Time { return apijson.Millis(s.cfg.Now()).UTC() }

func blobUnavailable(err error) error {
	return fault.Unavailablef(err, "BLOB_STORE_UNAVAILABLE", "the image store is unavailable; try again later")
}

var errNotFound = fault.NotFoundf("MEDIA_NOT_FOUND", "no such media")

func day(t time.Time) int64 { return t.Unix() / 86400 }

// checkQuota answers 429 when owner's usage already leaves no room for n more bytes: an early answer, before the
// work; charge is the one that holds.
func (s *Service) checkQuota(ctx context.Context, owner, n int64) error {
	var d, dayBytes, total int64
	err := s.db.QueryRowContext(ctx, "SELECT day, day_bytes, total_bytes FROM media_usage WHERE user_id = ?", owner).
		Scan(&d, &dayBytes, &total)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	return s.within(d, dayBytes, total, n)
}

func (s *Service) within(d, dayBytes, total, n int64) error {
	if d != day(s.now()) {
		dayBytes = 0
	}
	switch {
	case dayBytes+n > s.cfg.DailyQuota:
		return quotaExceeded("daily upload quota")
	case total+n > s.cfg.TotalQuota:
		return quotaExceeded("storage quota")
	}
	return nil
}

// charge adds n bytes to owner's usage in tx, under the lock of the user's usage row.
func (s *Service) charge(ctx context.Context, tx *sql.Tx, owner, n int64) error {
	today := day(s.now())
	if _, err := tx.ExecContext(ctx, "INSERT INTO media_usage (user_id, day, day_bytes, total_bytes) VALUES (?, ?, 0, 0)"+
		s.db.OnConflictUpdate("user_id", "day = day"), owner, today); err != nil {
		return err
	}
	var d, dayBytes, total int64
	if err := tx.QueryRowContext(ctx, "SELECT day, day_bytes, total_bytes FROM media_usage WHERE user_id = ?"+s.db.ForUpdate(),
		owner).Scan(&d, &dayBytes, &total); err != nil {
		return err
	}
	if err := s.within(d, dayBytes, total, n); err != nil {
		return err
	}
	if d != today {
		dayBytes = 0
	}
	_, err := tx.ExecContext(ctx, "UPDATE media_usage SET day = ?, day_bytes = ?, total_bytes = ? WHERE user_id = ?",
		today, dayBytes+n, total+n, owner)
	return err
}

// release gives n bytes back to owner's storage quota.
func release(ctx context.Context, tx *sql.Tx, owner, n int64) error {
	_, err := tx.ExecContext(ctx, "UPDATE media_usage SET total_bytes = total_bytes - ? WHERE user_id = ?", n, owner)
	return err
}

// lockBlobs locks the media_blob rows of keys, in one order, and returns the leases of those that exist.
func (s *Service) lockBlobs(ctx context.Context, tx *sql.Tx, keys ...string) (map[string]time.Time, error) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	leases := map[string]time.Time{}
	for _, k := range keys {
		var t time.Time
		err := tx.QueryRowContext(ctx, "SELECT leased_at FROM media_blob WHERE blob_key = ?"+s.db.ForUpdate(), k).Scan(&t)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, err
		default:
			leases[k] = t.UTC()
		}
	}
	return leases, nil
}

const mediaColumns = "media_id, owner_id, blob_key, thumb_key, content_type, width, height, bytes, created_at"

func scanMedia(row interface{ Scan(...any) error }) (Media, error) {
	var m Media
	err := row.Scan(&m.ID, &m.OwnerID, &m.Key, &m.ThumbKey, &m.ContentType, &m.Width, &m.Height, &m.Bytes, &m.CreatedAt)
	m.CreatedAt = m.CreatedAt.UTC()
	return m, err
}

// Get returns one upload.
func (s *Service) Get(ctx context.Context, id int64) (Media, error) {
	m, err := scanMedia(s.db.QueryRowContext(ctx, "SELECT "+mediaColumns+" FROM media WHERE media_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Media{}, errNotFound
	}
	return m, err
}

// Delete removes an upload, for its owner or a moderator: its row at once (and the avatar it is), its blobs once no
// other upload uses them and their last lease is blobGrace old (else the collection removes them later).
func (s *Service) Delete(ctx context.Context, actor auth.Principal, id int64) error {
	m, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if m.OwnerID != actor.UserID && actor.Role != auth.RoleModerator {
		return fault.Forbiddenf("only the uploader or a moderator may delete this image")
	}
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if _, err := s.lockBlobs(ctx, tx, m.Key); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM media WHERE media_id = ?", id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errNotFound
		}
		if err := s.dropAvatarsOf(ctx, tx, m); err != nil {
			return err
		}
		if err := release(ctx, tx, m.OwnerID, m.Bytes); err != nil {
			return err
		}
		return emit(event.MediaDeleted, m.OwnerID, s.payload(m))
	})
	if err != nil {
		return err
	}
	// The upload is gone; its blobs go now if they may, else (or if the store fails now) the collection takes them.
	cutoff := s.now().Add(-blobGrace)
	_ = s.collectBlob(ctx, m.Key, cutoff)
	_ = s.collectBlob(ctx, m.ThumbKey, cutoff)
	return nil
}

// dropAvatarsOf removes the avatar that m is, if it is one, with its reference.
func (s *Service) dropAvatarsOf(ctx context.Context, tx *sql.Tx, m Media) error {
	var user int64
	err := tx.QueryRowContext(ctx, "SELECT user_id FROM avatar WHERE user_id = ? AND media_id = ?", m.OwnerID, m.ID).Scan(&user)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM avatar WHERE user_id = ?", user); err != nil {
		return err
	}
	return s.setRefs(ctx, tx, refAvatar, user, nil)
}

// collectBlob deletes the blob under key, and its media_blob row, when no upload uses it and its lease is older than
// cutoff (or it is marked referenced, which no upload in flight leaves); the blob row's lock holds off any upload of
// the same bytes meanwhile.
func (s *Service) collectBlob(ctx context.Context, key string, cutoff time.Time) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		leases, err := s.lockBlobs(ctx, tx, key)
		if err != nil {
			return err
		}
		// A blob posts show has no upload in flight: once no upload uses it (they were deleted), it goes too.
		leased, ok := leases[key]
		if !ok || !leased.Before(cutoff) && leased.Before(referencedLease) {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, "SELECT 1 FROM media WHERE blob_key = ? LIMIT 1", key).Scan(&one)
		if err == nil {
			return nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		err = tx.QueryRowContext(ctx, "SELECT 1 FROM media WHERE thumb_key = ? LIMIT 1", key).Scan(&one)
		if err == nil {
			return nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := s.blobs.Delete(ctx, key); err != nil {
			return blobUnavailable(err)
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM media_blob WHERE blob_key = ?", key)
		return err
	})
}
