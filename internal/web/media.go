package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Images. The editor's script uploads an image (picked, pasted or dropped) to POST /media, which passes it on to the
// media service with the reader's token, and inserts the Markdown of the URL it answers; GET /media/{key} passes
// the image through from the media service, so that the relative URLs posts carry show on the site.

// uploadTimeout bounds an upload passed on: 10 MiB on a slow link, and the media service's checks.
const uploadTimeout = time.Minute

// maxUploadBody is the media service's limit and room for a form's boundaries; past it the media service refuses.
const maxUploadBody = 10<<20 + 64<<10

// mediaRoutes adds the image routes to pages, when the site has a media service.
func (s *Service) mediaRoutes(pages *http.ServeMux) {
	if s.cfg.Origins.Media == "" {
		return
	}
	origin, err := url.Parse(s.cfg.Origins.Media)
	if err != nil {
		s.cfg.Logger.Error("the media origin is not a URL; images are not served", "origin", s.cfg.Origins.Media, "err", err)
		return
	}
	images := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(origin)
			r.Out.Header.Del("Cookie") // the session is the site's, not the media service's business
		},
		Transport: s.cfg.Client.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.cfg.Logger.WarnContext(r.Context(), "an image could not be fetched", "path", r.URL.Path, "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	pages.Handle("GET /media/{key}", images)
	pages.Handle("POST /media", http.HandlerFunc(s.upload))
}

// upload passes the body on to the media service as the signed-in reader's, and its answer (201 with the image's
// URLs, or its {code, message}) back to the script.
func (s *Service) upload(w http.ResponseWriter, r *http.Request) {
	v, err := s.viewer(w, r)
	switch {
	case err != nil:
		writeJSONError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Your session cannot be checked right now; try again.")
		return
	case v == nil:
		writeJSONError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Sign in to add images.")
		return
	}
	if r.ContentLength > maxUploadBody {
		writeJSONError(w, http.StatusRequestEntityTooLarge, "MEDIA_TOO_LARGE", "The image is over 10 MiB.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), uploadTimeout)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Origins.Media+"/v1/media",
		http.MaxBytesReader(w, r.Body, maxUploadBody))
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "INTERNAL", "The upload could not be sent.")
		return
	}
	out.ContentLength = r.ContentLength
	out.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	out.Header.Set("Authorization", "Bearer "+v.Token())
	resp, err := s.cfg.Client.Do(out)
	if err != nil {
		s.cfg.Logger.WarnContext(r.Context(), "an upload could not be passed on", "err", err)
		writeJSONError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "Images cannot be added right now; try again in a few seconds.")
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxReplySize))
}

func writeJSONError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"code":"`+code+`","message":"`+message+`"}`)
}
