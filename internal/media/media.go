// Package media is the media service (SPEC §3.12): signed-in users upload images (PNG, JPEG, GIF, WebP, told from
// the bytes), which it checks, strips of their metadata, thumbnails and keeps in a blob store; it serves them with
// long-lived caching; it learns from the article and comment events which images posts show, and collects the images
// no post has shown for a day. Users' avatars are uploads too.
//
// Blobs and rows. The bytes live in a blob.Store under content-addressed keys (sha256 of the bytes, then the
// extension): equal images share one blob. The rows live in the service's SQL database: media (one per upload),
// media_blob (one per blob, the lock of everything done to it), media_ref (which post shows which blob), and the
// avatars and quotas.
//
// Nothing acknowledged is lost, nothing referenced is collected, and both hold across a kill -9:
//   - an upload leases its blobs first (media_blob.leased_at = now, committed), then writes them (durable when Put
//     returns), then commits its media row, and only then answers 201;
//   - a collection locks the blob's media_blob row, checks that no post references the blob and that its lease is a
//     day old, deletes the media rows and commits; then, in a second transaction under the same lock, deletes the blob
//     and its media_blob row if no media row uses it any more. An upload of the same bytes meanwhile waits on the
//     lock, and leases the blob anew. A crash between the two leaves a media_blob row without media, which the next
//     collection finishes; a crash after an upload's Put and before its row leaves a leased blob without media, which
//     a collection removes a day later.
package media

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"

	"board/internal/blob"
	"board/internal/outbox"
	"board/internal/sqldb"
)

// Limits and defaults.
const (
	// MaxBytes is the largest upload.
	MaxBytes = 10 << 20
	// MaxPixels is the most pixels of an image, all frames of a GIF together.
	MaxPixels = 40_000_000
	// DefaultUnreferencedFor is how long an image no post shows is kept.
	DefaultUnreferencedFor = 24 * time.Hour
	// DefaultGCInterval is how often the collection runs.
	DefaultGCInterval = 10 * time.Minute
	// DefaultDailyQuota and DefaultTotalQuota bound the bytes a user uploads per UTC day and keeps in all.
	DefaultDailyQuota = 200 << 20
	DefaultTotalQuota = 2 << 30
	// DefaultUploadTimeout bounds an upload, from its first byte to its answer.
	DefaultUploadTimeout = time.Minute
	// DefaultBodyBudget bounds the bytes of the upload bodies held in memory at once, DefaultDecodeBudget those of
	// the decoded images (4 per pixel): uploads past them wait their turn, so that memory stays bounded however many
	// arrive together.
	DefaultBodyBudget   = 64 << 20
	DefaultDecodeBudget = 4 * MaxPixels
	// blobGrace is how long a blob of a deleted upload is kept at least after its last lease, beyond any upload
	// that leased it and is still writing.
	blobGrace = time.Hour
	// UploadLimit is the name of the per-user rate limit on uploads.
	UploadLimit = "media-upload"
)

// IDGenerator issues unique ids (a Snowflake generator in production).
type IDGenerator interface {
	Next() (int64, error)
}

// Limiter takes one request from a named limit's budget (internal/ratelimit).
type Limiter interface {
	Allow(ctx context.Context, limit, key string) error
}

// Config configures a Service.
type Config struct {
	// PublicURL is put in front of /media/KEY in the URLs the API answers; "" leaves them relative, for a site that
	// routes /media/ to this service.
	PublicURL       string
	UnreferencedFor time.Duration
	GCInterval      time.Duration
	DailyQuota      int64
	TotalQuota      int64
	UploadTimeout   time.Duration
	BodyBudget      int64
	DecodeBudget    int64
	// Limiter, when not nil, holds each user's uploads to the UploadLimit.
	Limiter Limiter
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Service is the media service over its database and blob store.
type Service struct {
	db     *sqldb.DB
	ob     *outbox.Outbox
	blobs  blob.Store
	ids    IDGenerator
	cfg    Config
	bodies *semaphore.Weighted
	pixels *semaphore.Weighted
}

// New returns the service over db, whose schema Migrate has prepared, writing its events to ob.
func New(db *sqldb.DB, ob *outbox.Outbox, blobs blob.Store, ids IDGenerator, cfg Config) *Service {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.DailyQuota, DefaultDailyQuota)
	def(&cfg.TotalQuota, DefaultTotalQuota)
	def(&cfg.BodyBudget, DefaultBodyBudget)
	def(&cfg.DecodeBudget, DefaultDecodeBudget)
	if cfg.UnreferencedFor <= 0 {
		cfg.UnreferencedFor = DefaultUnreferencedFor
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = DefaultGCInterval
	}
	if cfg.UploadTimeout <= 0 {
		cfg.UploadTimeout = DefaultUploadTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{db: db, ob: ob, blobs: blobs, ids: ids, cfg: cfg,
		bodies: semaphore.NewWeighted(cfg.BodyBudget), pixels: semaphore.NewWeighted(cfg.DecodeBudget)}
}

// Media is one upload.
type Media struct {
	ID          int64
	OwnerID     int64
	Key         string // the image's blob key
	ThumbKey    string // its thumbnail's
	ContentType string
	Width       int
	Height      int
	Bytes       int64
	CreatedAt   time.Time
}

func (s *Service) url(key string) string { return s.cfg.PublicURL + "/media/" + key }
