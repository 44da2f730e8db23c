package media

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"

	"board/internal/event"
	"board/internal/outbox"
)

// gcBatch bounds the blobs one query of a collection looks at.
const gcBatch = 200

// Run collects unreferenced images every GCInterval until ctx ends.
func (s *Service) Run(ctx context.Context, logger *slog.Logger) {
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		if n, err := s.Collect(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("media collection failed; it runs again later", "err", err)
		} else if n > 0 {
			logger.Info("media collected", "uploads", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Collect removes the uploads of every blob no post or avatar has referenced for UnreferencedFor, then the blobs no
// upload uses; it returns how many uploads it removed.
func (s *Service) Collect(ctx context.Context) (int, error) {
	cutoff := s.now().Add(-s.cfg.UnreferencedFor)
	removed, after := 0, ""
	for {
		keys, err := s.staleBlobs(ctx, cutoff, after)
		if err != nil || len(keys) == 0 {
			return removed, err
		}
		for _, k := range keys {
			thumbs, err := s.collectUploads(ctx, k, cutoff)
			if err != nil {
				return removed, err
			}
			removed += len(thumbs)
			for _, key := range append(thumbs, k) {
				if err := s.collectBlob(ctx, key, cutoff); err != nil {
					return removed, err
				}
			}
		}
		after = keys[len(keys)-1]
	}
}

// staleBlobs lists, in key order after after, the blobs last leased before cutoff.
func (s *Service) staleBlobs(ctx context.Context, cutoff time.Time, after string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT blob_key FROM media_blob WHERE leased_at < ? AND blob_key > ? ORDER BY blob_key LIMIT ?",
		cutoff, after, gcBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// collectUploads deletes the uploads of the blob key when nothing references it and its lease is older than cutoff,
// all under the blob's lock; it returns their thumbnails' keys.
func (s *Service) collectUploads(ctx context.Context, key string, cutoff time.Time) ([]string, error) {
	var thumbs []string
	err := s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		thumbs = thumbs[:0]
		leases, err := s.lockBlobs(ctx, tx, key)
		if err != nil {
			return err
		}
		if leased, ok := leases[key]; !ok || !leased.Before(cutoff) {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, "SELECT 1 FROM media_ref WHERE blob_key = ? LIMIT 1", key).Scan(&one)
		if err == nil {
			return s.markReferenced(ctx, tx, key) // leased anew by an upload of the same bytes
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT "+mediaColumns+" FROM media WHERE blob_key = ?", key)
		if err != nil {
			return err
		}
		var uploads []Media
		for rows.Next() {
			m, err := scanMedia(rows)
			if err != nil {
				rows.Close()
				return err
			}
			uploads = append(uploads, m)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, m := range uploads {
			if _, err := tx.ExecContext(ctx, "DELETE FROM media WHERE media_id = ?", m.ID); err != nil {
				return err
			}
			if err := release(ctx, tx, m.OwnerID, m.Bytes); err != nil {
				return err
			}
			if err := emit(event.MediaDeleted, m.OwnerID, s.payload(m)); err != nil {
				return err
			}
			thumbs = append(thumbs, m.ThumbKey)
		}
		return nil
	})
	return thumbs, err
}
