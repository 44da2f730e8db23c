package app

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"board/internal/blob"
	"board/internal/httpio"
	"board/internal/media"
)

// The media service's wiring (SPEC §3.12).

// blobTimeout bounds opening the blob store, and each readiness probe of it.
const blobTimeout = 5 * time.Second

// openBlobs opens the store of the images: the S3-compatible store --media-s3-endpoint names, else a directory
// under the data directory.
func openBlobs(ctx context.Context, c *Config) (blob.Store, error) {
	if c.MediaS3.Endpoint == "" {
		return blob.NewDir(filepath.Join(c.DataDir, "media"))
	}
	ctx, cancel := context.WithTimeout(ctx, blobTimeout)
	defer cancel()
	return blob.NewS3(ctx, c.MediaS3)
}

// buildMedia builds the service, starts its consumer of the article and comment topics (which posts show which
// images) and, among the workers, its collection of unreferenced images.
func buildMedia(ctx context.Context, e *Engines, r deps) (*http.ServeMux, []httpio.Check, error) {
	blobs, err := openBlobs(ctx, e.Config)
	if err != nil {
		return nil, nil, err
	}
	cfg := media.Config{PublicURL: e.Config.MediaPublicURL, UnreferencedFor: e.Config.MediaUnreferencedFor,
		GCInterval: e.Config.MediaGCInterval, DailyQuota: e.Config.MediaDailyQuotaMB << 20,
		TotalQuota: e.Config.MediaTotalQuotaMB << 20, Now: time.Now}
	if limiter := rateLimiter(e); limiter != nil {
		cfg.Limiter = limiter
	}
	svc := media.New(r.db, r.ob, blobs, r.ids, cfg)
	if err := startConsumer(ctx, e, r, svc.Handlers(), ""); err != nil {
		return nil, nil, err
	}
	r.workers.run(ctx, func(ctx context.Context) { svc.Run(ctx, e.Logger) })
	blobCheck := httpio.Check{Name: "blobs", Ping: func(ctx context.Context) error {
		// A key no upload has: the store answers that it is missing, or is down.
		if _, err := blobs.Stat(ctx, "readiness-probe"); err != nil && !errors.Is(err, blob.ErrNotFound) {
			return err
		}
		return nil
	}}
	return media.Routes(svc, e.Logger), append(r.checks(e), blobCheck), nil
}
