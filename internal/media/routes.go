package media

import (
	"context"
	"embed"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"board/internal/apijson"
	"board/internal/auth"
	"board/internal/blob"
	"board/internal/fault"
	"board/internal/httpio"
	"board/internal/outbox"
	"board/internal/sqldb"
)

//go:embed migrations
var migrations embed.FS

// Migrate creates or upgrades the media schema and its outbox.
func Migrate(ctx context.Context, db *sqldb.DB) error {
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	return sqldb.Migrate(ctx, db, "media", migrations)
}

// UploadPath is the route of uploads, which run under the service's own deadline (Config.UploadTimeout) rather than
// the port's: a 10 MiB body on a slow link, and a turn waited under the memory budget, take longer than a read.
const UploadPath = "/v1/media"

// BlobPrefix is where stored images are served, under their keys.
const BlobPrefix = "/media/"

// Routes returns the whole HTTP API of the media service (SPEC §3.12). Writes need a signed-in user (httpio.Guard);
// reads are public.
func Routes(svc *Service, logger *slog.Logger) *http.ServeMux {
	h := handlers{svc: svc}
	mux := http.NewServeMux()
	handle := func(pattern string, fn httpio.HandlerFunc) { mux.Handle(pattern, httpio.Handle(logger, fn)) }
	handle("POST "+UploadPath, h.upload)
	handle("DELETE /v1/media/{mediaId}", h.delete)
	handle("GET "+BlobPrefix+"{key}", h.serve)
	handle("PUT /v1/users/me/avatar", h.setAvatar)
	handle("DELETE /v1/users/me/avatar", h.removeAvatar)
	handle("GET /v1/avatars/{userId}", h.avatar)
	return mux
}

type handlers struct {
	svc *Service
}

type mediaJSON struct {
	MediaID      apijson.ID `json:"mediaId"`
	URL          string     `json:"url"`
	ThumbnailURL string     `json:"thumbnailUrl"`
	Width        int        `json:"width"`
	Height       int        `json:"height"`
	ContentType  string     `json:"contentType"`
	Bytes        int64      `json:"bytes"`
}

func (h handlers) json(m Media) mediaJSON {
	return mediaJSON{MediaID: apijson.ID(m.ID), URL: h.svc.url(m.Key), ThumbnailURL: h.svc.url(m.ThumbKey), Width: m.Width,
		Height: m.Height, ContentType: m.ContentType, Bytes: m.Bytes}
}

// multipartSlack is what a multipart body may hold besides its file: boundaries, part headers, small fields.
const multipartSlack = 64 << 10

// upload takes the image as the whole body, or as the first file part of a multipart/form-data body. The body is
// read through a bounded reader: a client that sends more than the limit gets 413 without it being read.
func (h handlers) upload(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.svc.cfg.UploadTimeout)
	defer cancel()
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(h.svc.cfg.UploadTimeout)
	_ = rc.SetReadDeadline(deadline) // the port's read timeout is for small bodies; not every writer can move it
	_ = rc.SetWriteDeadline(deadline.Add(5 * time.Second))

	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	limit := int64(MaxBytes)
	if mediaType == "multipart/form-data" {
		limit += multipartSlack
	}
	if r.ContentLength > limit {
		return errTooLarge
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+1)
	var body io.Reader = r.Body
	size := r.ContentLength
	if mediaType == "multipart/form-data" {
		if body, err = filePart(r); err != nil {
			return err
		}
		size = -1
	}
	m, err := h.svc.Upload(ctx, p.UserID, body, size)
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusCreated, h.json(m))
	return nil
}

// filePart returns the first part of a multipart body that is a file.
func filePart(r *http.Request) (io.Reader, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, fault.Invalidf("INVALID_BODY", "malformed multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			return nil, errTooLarge
		} else if err != nil {
			return nil, fault.Invalidf("INVALID_IMAGE", "the multipart body has no file part")
		}
		if part.FileName() != "" {
			return part, nil
		}
	}
}

func (h handlers) delete(w http.ResponseWriter, r *http.Request) error {
	id, err := httpio.PathID(r, "mediaId")
	if err != nil {
		return err
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.Delete(r.Context(), p, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// serve answers a blob the way http.ServeContent does (ranges, conditional requests), with its content hash as the
// ETag and a year's immutable caching: a key names one content for good. A revalidation whose ETag matches is
// answered from the key alone, without the store.
func (h handlers) serve(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	hash, ext, _ := strings.Cut(key, ".")
	contentType := contentTypeOf(ext)
	if contentType == "" || len(hash) != 64 || !blob.KeyOK(key) {
		return fault.NotFoundf("MEDIA_NOT_FOUND", "no such image")
	}
	header := w.Header()
	header.Set("ETag", `"`+hash+`"`)
	header.Set("Cache-Control", "public, max-age=31536000, immutable")
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == "*" || strings.Contains(inm, `"`+hash+`"`)) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	obj, err := h.svc.blobs.Open(r.Context(), key)
	if errors.Is(err, blob.ErrNotFound) {
		header.Del("ETag")
		header.Del("Cache-Control")
		return fault.NotFoundf("MEDIA_NOT_FOUND", "no such image")
	} else if err != nil {
		header.Del("Cache-Control")
		return blobUnavailable(err)
	}
	defer obj.Close()
	header.Set("Content-Type", contentType)
	header.Set("X-Content-Type-Options", "nosniff")
	header.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	var content io.ReadSeeker = obj
	if f, ok := obj.(interface{ OSFile() *os.File }); ok {
		content = f.OSFile() // net/http sends an *os.File with sendfile, and only an *os.File
	}
	http.ServeContent(w, r, "", obj.Info().ModTime, content)
	return nil
}

type avatarJSON struct {
	MediaID apijson.ID `json:"mediaId"`
}

type avatarOutJSON struct {
	UserID apijson.ID `json:"userId"`
	mediaJSON
}

func (h handlers) setAvatar(w http.ResponseWriter, r *http.Request) error {
	var in avatarJSON
	if err := httpio.Decode(w, r, &in); err != nil {
		return err
	}
	if in.MediaID <= 0 {
		return fault.Invalidf("INVALID_MEDIA_ID", "mediaId is required")
	}
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	m, err := h.svc.SetAvatar(r.Context(), p.UserID, int64(in.MediaID))
	if err != nil {
		return err
	}
	httpio.Write(w, http.StatusOK, avatarOutJSON{UserID: apijson.ID(p.UserID), mediaJSON: h.json(m)})
	return nil
}

func (h handlers) removeAvatar(w http.ResponseWriter, r *http.Request) error {
	p, err := auth.Acting(r.Context())
	if err != nil {
		return err
	}
	if err := h.svc.RemoveAvatar(r.Context(), p.UserID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// avatar redirects to the user's avatar's thumbnail, so that a page shows it with <img src="/v1/avatars/ID">; the
// redirect is cached a minute, as the avatar may change.
func (h handlers) avatar(w http.ResponseWriter, r *http.Request) error {
	user, err := httpio.PathID(r, "userId")
	if err != nil {
		return err
	}
	m, err := h.svc.Avatar(r.Context(), user)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "public, max-age=60")
	http.Redirect(w, r, h.svc.url(m.ThumbKey), http.StatusFound)
	return nil
}
