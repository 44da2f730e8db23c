package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"board/internal/auth"
)

// The editor's uploads go to the media service as the signed-in reader's, and images come back through the site,
// with the media service's caching, and without the reader's cookie.
func TestImagesPassThrough(t *testing.T) {
	f := newFakes(t)
	var gotAuth, gotBody, gotType, gotCookie string
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/media":
			b, _ := io.ReadAll(r.Body)
			gotAuth, gotBody, gotType = r.Header.Get("Authorization"), string(b), r.Header.Get("Content-Type")
			if gotBody == "not an image" {
				writeError(w, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE", "the file is not an image")
				return
			}
			writeJSON(w, http.StatusCreated, map[string]any{"mediaId": "5", "url": "/media/abc.png", "thumbnailUrl": "/media/def.png"})
		case r.Method == http.MethodGet && r.URL.Path == "/media/abc.png":
			gotCookie = r.Header.Get("Cookie")
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			w.Header().Set("ETag", `"abc"`)
			w.Header().Set("Content-Type", "image/png")
			_, _ = io.WriteString(w, "png bytes")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(media.Close)
	h := f.handler(t, func(c *Config) { c.Origins.Media = media.URL })
	token := f.token(t, 10, auth.RoleUser)
	upload := func(token, body, site string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/media", strings.NewReader(body))
		r.Header.Set("Content-Type", "image/png")
		r.Header.Set("Sec-Fetch-Site", site)
		if token != "" {
			r.AddCookie(&http.Cookie{Name: sessionCookie, Value: token})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := upload(token, "png bytes", "same-origin"); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `"url":"/media/abc.png"`) {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	if gotAuth != "Bearer "+token || gotBody != "png bytes" || gotType != "image/png" {
		t.Fatalf("the media service got %q, %q, %q", gotAuth, gotBody, gotType)
	}
	if w := upload(token, "not an image", "same-origin"); w.Code != http.StatusUnsupportedMediaType ||
		!strings.Contains(w.Body.String(), "UNSUPPORTED_MEDIA_TYPE") {
		t.Fatalf("a refused upload: %d %s", w.Code, w.Body)
	}
	if w := upload("", "png bytes", "same-origin"); w.Code != http.StatusUnauthorized {
		t.Fatalf("signed out: %d %s", w.Code, w.Body)
	}
	gotBody = ""
	if w := upload(token, "png bytes", "cross-site"); w.Code != http.StatusForbidden || gotBody != "" {
		t.Fatalf("from another site: %d, passed on %q", w.Code, gotBody)
	}
	w := get(t, h, "/media/abc.png", token)
	if w.Code != http.StatusOK || w.Body.String() != "png bytes" || w.Header().Get("ETag") != `"abc"` ||
		w.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("image: %d %v %q", w.Code, w.Header(), w.Body)
	}
	if gotCookie != "" {
		t.Fatalf("the session cookie went to the media service: %q", gotCookie)
	}
}
