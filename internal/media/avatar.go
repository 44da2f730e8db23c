package media

import (
	"context"
	"database/sql"
	"errors"

	"board/internal/fault"
)

// Avatars. A user's avatar is one of their uploads, set with PUT /v1/users/me/avatar {mediaId} and shown at
// GET /v1/avatars/{userId}, both of this service: the user service knows nothing of images. The avatar holds a
// reference to its blob (post type avatar, post id the user), like a post, so the collection keeps it.

// SetAvatar makes the upload mediaID, which must be user's, their avatar.
func (s *Service) SetAvatar(ctx context.Context, user, mediaID int64) (Media, error) {
	m, err := s.Get(ctx, mediaID)
	if errors.Is(err, errNotFound) {
		return Media{}, fault.Invalidf("INVALID_MEDIA_ID", "no upload %d", mediaID)
	} else if err != nil {
		return Media{}, err
	}
	if m.OwnerID != user {
		return Media{}, fault.Forbiddenf("an avatar must be one of your own uploads")
	}
	err = s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := s.lockBlobs(ctx, tx, m.Key); err != nil {
			return err
		}
		// Under the blob's lock, the upload is still there or gone for good.
		var one int
		if err := tx.QueryRowContext(ctx, "SELECT 1 FROM media WHERE media_id = ?", mediaID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fault.Invalidf("INVALID_MEDIA_ID", "no upload %d", mediaID)
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO avatar (user_id, media_id, set_at) VALUES (?, ?, ?)"+
			s.db.OnConflictUpdate("user_id", "media_id = ?, set_at = ?"), user, mediaID, s.now(), mediaID, s.now()); err != nil {
			return err
		}
		return s.setRefs(ctx, tx, refAvatar, user, []string{m.Key})
	})
	return m, err
}

// RemoveAvatar takes user's avatar away; the image is collected a day later unless a post shows it.
func (s *Service) RemoveAvatar(ctx context.Context, user int64) error {
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM avatar WHERE user_id = ?", user); err != nil {
			return err
		}
		return s.setRefs(ctx, tx, refAvatar, user, nil)
	})
}

// Avatar returns user's avatar.
func (s *Service) Avatar(ctx context.Context, user int64) (Media, error) {
	// Two reads, not a join: avatars and uploads are sharded by different keys.
	var id int64
	err := s.db.QueryRowContext(ctx, "SELECT media_id FROM avatar WHERE user_id = ?", user).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Media{}, fault.NotFoundf("AVATAR_NOT_FOUND", "user %d has no avatar", user)
	} else if err != nil {
		return Media{}, err
	}
	m, err := s.Get(ctx, id)
	if errors.Is(err, errNotFound) {
		return Media{}, fault.NotFoundf("AVATAR_NOT_FOUND", "user %d has no avatar", user)
	}
	return m, err
}
