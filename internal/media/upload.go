package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"image"
	"io"
	"net/http"
	"slices"
	"strconv"

	"golang.org/x/sync/semaphore"

	"board/internal/apijson"
	"board/internal/blob"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/outbox"
)

var errTooLarge = &fault.Error{Kind: fault.TooLarge, Code: "MEDIA_TOO_LARGE", Message: "the image is over 10 MiB"}

func quotaExceeded(what string) error {
	return &fault.Error{Kind: fault.RateLimited, Code: "QUOTA_EXCEEDED", Message: "this upload would pass your " + what}
}

// acquire takes n of sem's budget, at most all of it, and returns its release.
func acquire(ctx context.Context, sem *semaphore.Weighted, n, budget int64) (func(), error) {
	n = min(max(n, 1), budget)
	if err := sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { sem.Release(n) }, nil
}

// Upload takes an image of owner's from body, whose size is sizeHint when known (else -1). It answers 413
// MEDIA_TOO_LARGE past MaxBytes, 415 UNSUPPORTED_MEDIA_TYPE for anything but the four formats, 400 INVALID_IMAGE for
// a file that is not a whole image of its format or is over MaxPixels, 429 for a user over a quota or the rate limit.
func (s *Service) Upload(ctx context.Context, owner int64, body io.Reader, sizeHint int64) (Media, error) {
	if sizeHint > MaxBytes {
		return Media{}, errTooLarge
	}
	if s.cfg.Limiter != nil {
		if err := s.cfg.Limiter.Allow(ctx, UploadLimit, strconv.FormatInt(owner, 10)); err != nil {
			return Media{}, err
		}
	}
	if err := s.checkQuota(ctx, owner, max(sizeHint, 0)); err != nil {
		return Media{}, err
	}
	want := sizeHint
	if want < 0 {
		want = MaxBytes
	}
	release, err := acquire(ctx, s.bodies, want, s.cfg.BodyBudget)
	if err != nil {
		return Media{}, err
	}
	defer release()
	data, err := readBounded(body, sizeHint)
	if err != nil {
		return Media{}, err
	}
	img, err := s.process(ctx, data)
	if err != nil {
		return Media{}, err
	}
	return s.store(ctx, owner, img)
}

// readBounded reads at most MaxBytes from r into one buffer of the announced size (and the room bytes.Buffer wants
// free for its last read, without which it would double the buffer to read nothing).
func readBounded(r io.Reader, sizeHint int64) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(max(sizeHint, 0), MaxBytes)+bytes.MinRead+1))
	if _, err := buf.ReadFrom(io.LimitReader(r, MaxBytes+1)); err != nil {
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			return nil, errTooLarge
		}
		return nil, fault.Invalidf("INVALID_BODY", "the request body could not be read: %v", err)
	}
	if buf.Len() > MaxBytes {
		return nil, errTooLarge
	}
	if buf.Len() == 0 {
		return nil, fault.Invalidf("INVALID_IMAGE", "the request carries no image")
	}
	return buf.Bytes(), nil
}

// processed is an image ready to store: stripped, measured and thumbnailed.
type processed struct {
	format        Format
	data          []byte
	width, height int
	thumb         []byte
	thumbFormat   Format
}

// process checks data from its header before decoding anything, strips its metadata (in data's own array), decodes
// it under the decode budget and makes its thumbnail.
func (s *Service) process(ctx context.Context, data []byte) (processed, error) {
	f, err := sniff(data)
	if err != nil {
		return processed{}, err
	}
	cfg, err := f.decodeConfig(bytes.NewReader(data))
	if err != nil {
		return processed{}, errNotImage(err)
	}
	pixels := int64(cfg.Width) * int64(cfg.Height)
	if f.Name == "gif" {
		_, all, err := gifFrames(data, false)
		if err != nil {
			return processed{}, err
		}
		pixels = max(pixels, all)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return processed{}, invalid("the image has no pixels")
	}
	if pixels > MaxPixels {
		return processed{}, invalid("the image has %d pixels, over the limit of %d", pixels, MaxPixels)
	}
	orientation := 1
	if f.Name == "jpeg" {
		orientation = jpegOrientation(data)
	}
	data, err = f.strip(data)
	if err != nil {
		return processed{}, err
	}
	perPixel := int64(4)
	if orientation > 1 {
		perPixel = 12 // the decoded image, and two RGBA copies to turn it
	}
	release, err := acquire(ctx, s.pixels, perPixel*int64(cfg.Width)*int64(cfg.Height), s.cfg.DecodeBudget)
	if err != nil {
		return processed{}, err
	}
	defer release()
	img, err := f.decode(bytes.NewReader(data))
	if err != nil {
		return processed{}, errNotImage(err)
	}
	if img.Bounds().Size() != (image.Point{X: cfg.Width, Y: cfg.Height}) {
		return processed{}, invalid("the image's pixels do not match its header")
	}
	if orientation > 1 {
		turned := orient(img, orientation)
		img = nil // the decoded image is garbage from here
		if data, err = encodeJPEG(turned); err != nil {
			return processed{}, err
		}
		img = turned
		cfg.Width, cfg.Height = turned.Bounds().Dx(), turned.Bounds().Dy()
	}
	thumb, tf, err := thumbnail(img, f)
	if err != nil {
		return processed{}, err
	}
	return processed{format: f, data: data, width: cfg.Width, height: cfg.Height, thumb: thumb, thumbFormat: tf}, nil
}

func contentKey(data []byte, f Format) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]) + "." + f.Ext
}

// store leases the blobs, writes them, and commits the upload's row under owner's quota.
func (s *Service) store(ctx context.Context, owner int64, p processed) (Media, error) {
	m := Media{OwnerID: owner, Key: contentKey(p.data, p.format), ThumbKey: contentKey(p.thumb, p.thumbFormat),
		ContentType: p.format.ContentType, Width: p.width, Height: p.height, Bytes: int64(len(p.data))}
	if err := s.lease(ctx, m.Key, m.ThumbKey); err != nil {
		return Media{}, err
	}
	if err := s.putIfMissing(ctx, m.Key, p.data); err != nil {
		return Media{}, err
	}
	if err := s.putIfMissing(ctx, m.ThumbKey, p.thumb); err != nil {
		return Media{}, err
	}
	id, err := s.ids.Next()
	if err != nil {
		return Media{}, err
	}
	m.ID, m.CreatedAt = id, s.now()
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := s.charge(ctx, tx, owner, m.Bytes); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO media (media_id, owner_id, blob_key, thumb_key, content_type, width, height,
			bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, m.ID, m.OwnerID, m.Key, m.ThumbKey, m.ContentType, m.Width,
			m.Height, m.Bytes, m.CreatedAt); err != nil {
			return err
		}
		return emit(event.MediaUploaded, m.OwnerID, s.payload(m))
	})
	if err != nil {
		return Media{}, err
	}
	return m, nil
}

func (s *Service) payload(m Media) event.Media {
	return event.Media{MediaID: apijson.ID(m.ID), OwnerID: apijson.ID(m.OwnerID), Key: m.Key, ThumbnailKey: m.ThumbKey,
		ContentType: m.ContentType, Width: m.Width, Height: m.Height, Bytes: m.Bytes, CreatedAt: apijson.Time(m.CreatedAt)}
}

// lease marks keys as being written now, so that no collection removes them until an upload's row holds them.
func (s *Service) lease(ctx context.Context, keys ...string) error {
	keys = slices.Compact(slices.Sorted(slices.Values(keys))) // one lock order for all
	now := s.now()
	return s.db.Transact(ctx, func(tx *sql.Tx) error {
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, "INSERT INTO media_blob (blob_key, leased_at) VALUES (?, ?)"+
				s.db.OnConflictUpdate("blob_key", "leased_at = ?"), k, now, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// putIfMissing writes data under its content key unless the store has it already: the lease keeps it there.
func (s *Service) putIfMissing(ctx context.Context, key string, data []byte) error {
	if info, err := s.blobs.Stat(ctx, key); err == nil && info.Size == int64(len(data)) {
		return nil
	} else if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return blobUnavailable(err)
	}
	if err := s.blobs.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return blobUnavailable(err)
	}
	return nil
}
