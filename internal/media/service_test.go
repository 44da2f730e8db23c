package media

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net/http"
	"strings"
	"testing"
	"time"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// decoded decodes what the service serves at url.
func decoded(t *testing.T, f *fixture, url string) (image.Image, string, []byte) {
	t.Helper()
	r := f.get(url)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, r.status, r.body)
	}
	img, format, err := image.Decode(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return img, format, r.body
}

func TestUploadEachFormat(t *testing.T) {
	sqldbtest.RunIn(t, "media", Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, Config{})
		for _, c := range []struct {
			name, contentType string
			data              []byte
			w, h              int
			multipart         bool
		}{
			{"png", "image/png", pngOf(t, 640, 480), 640, 480, false},
			{"jpeg", "image/jpeg", jpegOf(t, 1000, 300), 1000, 300, true},
			{"gif", "image/gif", gifOf(t, 50, 40, 3), 50, 40, false},
			{"webp", "image/webp", webpFile(t), 0, 0, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				upload := f.upload
				if c.multipart {
					upload = f.uploadMultipart
				}
				r := upload(alice, c.data)
				if r.status != http.StatusCreated {
					t.Fatalf("%d %s", r.status, r.body)
				}
				u := mustUploadReply(t, r)
				if u.ContentType != c.contentType || c.w != 0 && (u.Width != c.w || u.Height != c.h) || u.Bytes <= 0 {
					t.Fatalf("answer %+v", u)
				}
				if !strings.HasPrefix(u.URL, "/media/") || !strings.HasSuffix(u.URL, "."+formatExt(c.contentType)) {
					t.Fatalf("url %s", u.URL)
				}
				img, _, _ := decoded(t, f, u.URL)
				if img.Bounds().Dx() != u.Width || img.Bounds().Dy() != u.Height {
					t.Fatalf("served %v, answered %dx%d", img.Bounds(), u.Width, u.Height)
				}
				thumb, _, _ := decoded(t, f, u.ThumbnailURL)
				if b := thumb.Bounds(); b.Dx() > ThumbnailSize || b.Dy() > ThumbnailSize || b.Dx() == 0 {
					t.Fatalf("thumbnail %v", b)
				}
			})
		}
		if n := count(t, db, "SELECT COUNT(*) FROM outbox WHERE event_type = ?", string(event.MediaUploaded)); n != 4 {
			t.Fatalf("%d MEDIA_UPLOADED events, want 4", n)
		}
	})
}

func formatExt(contentType string) string {
	for _, f := range formats {
		if f.ContentType == contentType {
			return f.Ext
		}
	}
	return ""
}

func mustUploadReply(t *testing.T, r reply) uploaded {
	t.Helper()
	var u uploaded
	if err := jsonUnmarshal(r.body, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestMetadataIsStripped(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), Config{})
	for name, data := range map[string][]byte{
		"jpeg with GPS Exif": withGPSExif(jpegOf(t, 64, 48)),
		"png with a comment": pngWithText(pngOf(t, 64, 48), "Comment\x00"+gpsLatitude),
		"webp with Exif":     webpWithExif(t, webpFile(t)),
		"gif with a comment": gifWithComment(t, gifOf(t, 20, 20, 2), gpsLatitude),
	} {
		t.Run(name, func(t *testing.T) {
			if !bytes.Contains(data, []byte(gpsLatitude)) {
				t.Fatal("the test image carries no metadata")
			}
			u := mustUpload(t, f, alice, data)
			_, _, served := decoded(t, f, u.URL)
			if bytes.Contains(served, []byte(gpsLatitude)) || bytes.Contains(served, []byte("Exif\x00")) {
				t.Fatal("the served image still carries its metadata")
			}
			if u.Bytes != int64(len(served)) {
				t.Fatalf("bytes %d, served %d", u.Bytes, len(served))
			}
		})
	}
}

// gifWithComment adds a comment extension after the header and colour table.
func gifWithComment(t *testing.T, g []byte, text string) []byte {
	i := 13
	if g[10]&0x80 != 0 {
		i += 3 << (g[10]&7 + 1)
	}
	ext := append([]byte{0x21, 0xFE, byte(len(text))}, text...)
	ext = append(ext, 0)
	return append(append(append([]byte{}, g[:i]...), ext...), g[i:]...)
}

func TestBadFiles(t *testing.T) {
	sqldbtest.RunIn(t, "media", Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, Config{})
		jpg := jpegOf(t, 200, 200)
		p := pngOf(t, 200, 200)
		// A PNG header that claims 100,000 x 100,000 pixels: a decompression bomb, refused before any decoding.
		bomb := append([]byte{}, p...)
		copy(bomb[16:24], []byte{0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0})
		// A header that claims fewer pixels than the data holds, and one that claims more.
		small := append([]byte{}, p...)
		copy(small[16:24], []byte{0, 0, 0, 10, 0, 0, 0, 10})
		for _, c := range []struct {
			name   string
			data   []byte
			status int
			code   string
		}{
			{"text named as an image", []byte("hello, this is not an image at all"), 415, "UNSUPPORTED_MEDIA_TYPE"},
			{"an SVG", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), 415, "UNSUPPORTED_MEDIA_TYPE"},
			{"a BMP", append([]byte("BM"), make([]byte, 100)...), 415, "UNSUPPORTED_MEDIA_TYPE"},
			{"empty", nil, 400, "INVALID_IMAGE"},
			{"truncated JPEG", jpg[:len(jpg)/2], 400, "INVALID_IMAGE"},
			{"truncated PNG", p[:len(p)/2], 400, "INVALID_IMAGE"},
			{"JPEG magic then garbage", append([]byte{0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0}, make([]byte, 50)...), 400, "INVALID_IMAGE"},
			{"PNG bomb header", bomb, 400, "INVALID_IMAGE"},
			{"PNG header lying small", small, 400, "INVALID_IMAGE"},
			{"GIF whose frames pass the pixel limit", gifOf(t, 2000, 2000, 11), 400, "INVALID_IMAGE"},
			{"truncated GIF", func() []byte { g := gifOf(t, 30, 30, 3); return g[:len(g)-20] }(), 400, "INVALID_IMAGE"},
			{"over 10 MiB", append(append([]byte{}, jpg...), make([]byte, MaxBytes)...), 413, "MEDIA_TOO_LARGE"},
		} {
			t.Run(c.name, func(t *testing.T) {
				wantError(t, f.upload(alice, c.data), c.status, c.code)
			})
		}
		if n := count(t, f.db, "SELECT COUNT(*) FROM media"); n != 0 {
			t.Fatalf("%d uploads stored from bad files", n)
		}
		wantError(t, f.upload(0, jpg), http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}

func TestServe(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), Config{})
	u := mustUpload(t, f, alice, pngOf(t, 100, 100))
	r := f.get(u.URL)
	etag := r.header.Get("ETag")
	hash := strings.TrimSuffix(strings.TrimPrefix(u.URL, "/media/"), ".png")
	if r.status != 200 || etag != `"`+hash+`"` || r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("%d %v", r.status, r.header)
	}
	if r := f.get(u.URL, "If-None-Match", etag); r.status != http.StatusNotModified || len(r.body) != 0 {
		t.Fatalf("revalidation: %d", r.status)
	}
	if r := f.get(u.URL, "Range", "bytes=0-9"); r.status != http.StatusPartialContent || len(r.body) != 10 ||
		r.header.Get("Content-Range") == "" {
		t.Fatalf("range: %d %d bytes", r.status, len(r.body))
	}
	for _, path := range []string{"/media/" + strings.Repeat("0", 64) + ".png", "/media/nothing.png", "/media/" + hash + ".exe",
		"/media/" + hash} {
		wantError(t, f.get(path), http.StatusNotFound, "MEDIA_NOT_FOUND")
	}
}

// Equal images share one blob; each upload is still its own, deleted on its own.
func TestEqualImagesShareABlob(t *testing.T) {
	sqldbtest.RunIn(t, "media", Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, Config{})
		data := jpegOf(t, 300, 200)
		a, b := mustUpload(t, f, alice, data), mustUpload(t, f, bob, withGPSExif(data))
		if a.URL != b.URL || a.MediaID == b.MediaID {
			t.Fatalf("uploads %+v and %+v", a, b)
		}
		if n := blobCount(t, f); n != 2 {
			t.Fatalf("%d blobs, want the image and its thumbnail", n)
		}
		wantError(t, f.call(bob, "DELETE", "/v1/media/"+a.MediaID, ""), http.StatusForbidden, "FORBIDDEN")
		if r := f.call(alice, "DELETE", "/v1/media/"+a.MediaID, ""); r.status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		f.clock.Add(2 * blobGrace)
		if r := f.call(mod, "DELETE", "/v1/media/"+b.MediaID, ""); r.status != http.StatusNoContent {
			t.Fatalf("moderator's delete: %d %s", r.status, r.body)
		}
		if n := blobCount(t, f); n != 0 {
			t.Fatalf("%d blobs left after both uploads were deleted", n)
		}
		wantError(t, f.call(alice, "DELETE", "/v1/media/"+a.MediaID, ""), http.StatusNotFound, "MEDIA_NOT_FOUND")
	})
}

func blobCount(t *testing.T, f *fixture) int {
	n := 0
	if err := f.blobs.List(t.Context(), func(i blobInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestQuota(t *testing.T) {
	sqldbtest.RunIn(t, "media", Migrate, func(t *testing.T, db *sqldb.DB) {
		img := pngOf(t, 300, 300)
		f := newFixture(t, db, Config{DailyQuota: int64(len(img)) * 5 / 2, TotalQuota: int64(len(img)) * 7 / 2})
		mustUpload(t, f, alice, img)
		mustUpload(t, f, alice, pngOf(t, 301, 300))
		wantError(t, f.upload(alice, pngOf(t, 302, 300)), http.StatusTooManyRequests, "QUOTA_EXCEEDED")
		mustUpload(t, f, bob, img) // another user's quota
		f.clock.Add(25 * time.Hour)
		third := mustUpload(t, f, alice, pngOf(t, 303, 300))                                            // a new day
		wantError(t, f.upload(alice, pngOf(t, 304, 300)), http.StatusTooManyRequests, "QUOTA_EXCEEDED") // the total
		if r := f.call(alice, "DELETE", "/v1/media/"+third.MediaID, ""); r.status != http.StatusNoContent {
			t.Fatal(r.status)
		}
		mustUpload(t, f, alice, pngOf(t, 305, 300)) // a delete gives its bytes back
	})
}

// The collection keeps what posts show, and what was uploaded or shown within the day; it collects the rest.
func TestCollection(t *testing.T) {
	sqldbtest.RunIn(t, "media", Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, Config{})
		ctx := t.Context()
		shown := mustUpload(t, f, alice, pngOf(t, 90, 90))
		orphan := mustUpload(t, f, alice, pngOf(t, 91, 90))
		inComment := mustUpload(t, f, bob, jpegOf(t, 92, 90))
		avatar := mustUpload(t, f, bob, jpegOf(t, 93, 90))
		articleEvent(t, f, event.ArticleCreated, 100, 1, "look: ![a cat]("+shown.URL+") and text")
		commentEvent(t, f, event.CommentCreated, 200, "reply ![](http://example.test"+inComment.URL+")")
		if r := f.call(bob, "PUT", "/v1/users/me/avatar", `{"mediaId":"`+avatar.MediaID+`"}`); r.status != 200 {
			t.Fatalf("avatar: %d %s", r.status, r.body)
		}
		// The blobs posts show are never stale: the collection does not visit them each time it runs.
		referenced := func(u uploaded) bool {
			return count(t, db, "SELECT COUNT(*) FROM media_blob WHERE blob_key = ? AND leased_at > ?",
				strings.TrimPrefix(u.URL, "/media/"), t0.AddDate(100, 0, 0)) == 1
		}
		for _, u := range []uploaded{shown, inComment, avatar} {
			if !referenced(u) {
				t.Fatalf("%s: not marked referenced", u.URL)
			}
		}
		// An upload of the same bytes leases the blob again; the collection finds it referenced and marks it so.
		mustUpload(t, f, bob, pngOf(t, 90, 90))
		if referenced(shown) {
			t.Fatal("an upload of the same bytes did not lease the blob")
		}
		f.clock.Add(23 * time.Hour)
		collect(t, f, 0)
		f.clock.Add(2 * time.Hour)
		collect(t, f, 1)
		wantGone(t, f, orphan)
		for _, u := range []uploaded{shown, inComment, avatar} {
			wantKept(t, f, u)
		}
		if !referenced(shown) {
			t.Fatal("the collection did not mark the referenced blob again")
		}
		if r := f.get("/v1/avatars/" + fmt.Sprint(bob)); r.status != http.StatusFound || r.header.Get("Location") != avatar.ThumbnailURL {
			t.Fatalf("avatar redirect: %d %v", r.status, r.header)
		}

		// The article is edited to show another image: the first is unreferenced from now, and goes a day later.
		articleEvent(t, f, event.ArticleUpdated, 100, 2, "no picture now")
		articleEvent(t, f, event.ArticleUpdated, 100, 1, "![late, older version]("+orphan.URL+")") // ignored
		// The comment is edited to drop its image; an older edit arriving late does not bring it back.
		commentEditEvent(t, f, 200, 3, "no picture here either")
		commentEditEvent(t, f, 200, 2, "![late, older edit]("+inComment.URL+")") // ignored
		if n := count(t, db, "SELECT COUNT(*) FROM media_ref WHERE post_type = 'comment'"); n != 0 {
			t.Fatalf("%d references of an edited comment that shows no image", n)
		}
		commentEvent(t, f, event.CommentDeleted, 200, "")
		f.clock.Add(12 * time.Hour)
		collect(t, f, 0)
		f.clock.Add(13 * time.Hour)
		collect(t, f, 3) // the article's image (uploaded twice) and the comment's
		wantGone(t, f, shown)
		wantGone(t, f, inComment)
		wantKept(t, f, avatar)
		// A comment's creation arriving after its delete adds nothing.
		commentEvent(t, f, event.CommentCreated, 200, "reply ![]("+avatar.URL+")")
		if n := count(t, db, "SELECT COUNT(*) FROM media_ref WHERE post_type = 'comment'"); n != 0 {
			t.Fatalf("%d references of a deleted comment", n)
		}
		if r := f.call(bob, "DELETE", "/v1/users/me/avatar", ""); r.status != http.StatusNoContent {
			t.Fatal(r.status)
		}
		f.clock.Add(25 * time.Hour)
		collect(t, f, 1)
		wantGone(t, f, avatar)
		if n := blobCount(t, f); n != 0 {
			t.Fatalf("%d blobs left", n)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM outbox WHERE event_type = ?", string(event.MediaDeleted)); n != 5 {
			t.Fatalf("%d MEDIA_DELETED events, want 5", n)
		}
		_ = ctx
	})
}

func collect(t *testing.T, f *fixture, want int) {
	t.Helper()
	n, err := f.svc.Collect(t.Context())
	if err != nil || n != want {
		t.Fatalf("Collect = %d, %v; want %d", n, err, want)
	}
}

func wantGone(t *testing.T, f *fixture, u uploaded) {
	t.Helper()
	wantError(t, f.get(u.URL), http.StatusNotFound, "MEDIA_NOT_FOUND")
	if n := count(t, f.db, "SELECT COUNT(*) FROM media WHERE media_id = ?", idOf(u)); n != 0 {
		t.Fatalf("upload %s kept", u.MediaID)
	}
}

func wantKept(t *testing.T, f *fixture, u uploaded) {
	t.Helper()
	decoded(t, f, u.URL)
	decoded(t, f, u.ThumbnailURL)
}

func articleEvent(t *testing.T, f *fixture, typ event.Type, id, version int64, content string) {
	t.Helper()
	handle(t, f, typ, event.Article{ArticleID: apijson.ID(id), Content: content, BoardID: 1, WriterID: alice, ArticleVersion: version})
}

func commentEvent(t *testing.T, f *fixture, typ event.Type, id int64, content string) {
	t.Helper()
	handle(t, f, typ, event.Comment{CommentID: apijson.ID(id), Content: content, ArticleID: 100, WriterID: bob,
		Deleted: typ == event.CommentDeleted})
}

func commentEditEvent(t *testing.T, f *fixture, id, version int64, content string) {
	t.Helper()
	handle(t, f, event.CommentUpdated, event.Comment{CommentID: apijson.ID(id), Content: content, ArticleID: 100, WriterID: bob,
		CommentVersion: version})
}

func handle(t *testing.T, f *fixture, typ event.Type, payload any) {
	t.Helper()
	raw, err := jsonMarshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Handlers()[typ](context.Background(), event.Envelope{EventID: 1, Type: typ, Payload: raw}); err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
}

func TestKeys(t *testing.T) {
	k := strings.Repeat("ab", 32)
	got := Keys("![x](/media/" + k + ".png) ![y](https://cdn.example/media/" + k + ".png) [z](/media/" + k + ".jpg) /media/" +
		strings.Repeat("z", 64) + ".png /media/" + k + ".svg")
	if fmt.Sprint(got) != fmt.Sprint([]string{k + ".jpg", k + ".png"}) {
		t.Fatalf("Keys = %v", got)
	}
}

// A photo whose Exif says it is turned is stored turned, as it was meant to be seen, and without its Exif.
func TestExifOrientationIsApplied(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), Config{})
	// 64 x 32: the left half red, the right half blue.
	src := image.NewRGBA(image.Rect(0, 0, 64, 32))
	for y := range 32 {
		for x := range 64 {
			c := color.RGBA{255, 0, 0, 255}
			if x >= 32 {
				c = color.RGBA{0, 0, 255, 255}
			}
			src.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, src, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	red := func(c color.Color) bool { r, _, bl, _ := c.RGBA(); return r > 0xA000 && bl < 0x6000 }
	blue := func(c color.Color) bool { r, _, bl, _ := c.RGBA(); return bl > 0xA000 && r < 0x6000 }
	for _, c := range []struct {
		o             byte
		w, h          int
		redAt, blueAt image.Point
	}{
		{1, 64, 32, image.Pt(8, 16), image.Pt(56, 16)},
		{3, 64, 32, image.Pt(56, 16), image.Pt(8, 16)}, // turned half round: red on the right
		{6, 32, 64, image.Pt(16, 8), image.Pt(16, 56)}, // a quarter clockwise: the left half on top
		{8, 32, 64, image.Pt(16, 56), image.Pt(16, 8)}, // a quarter anticlockwise: the left half below
	} {
		u := mustUpload(t, f, alice, withOrientation(b.Bytes(), c.o))
		img, _, served := decoded(t, f, u.URL)
		if u.Width != c.w || u.Height != c.h || img.Bounds().Dx() != c.w || img.Bounds().Dy() != c.h {
			t.Fatalf("orientation %d: answered %dx%d, served %v; want %dx%d", c.o, u.Width, u.Height, img.Bounds(), c.w, c.h)
		}
		if !red(img.At(c.redAt.X, c.redAt.Y)) || !blue(img.At(c.blueAt.X, c.blueAt.Y)) {
			t.Fatalf("orientation %d: not turned as it says", c.o)
		}
		if bytes.Contains(served, []byte("Exif\x00")) {
			t.Fatalf("orientation %d: the Exif is still there", c.o)
		}
	}
}

// An upload of announced size is read into one buffer of that size, not one that doubled on the way.
func TestReadBoundedKeepsToTheAnnouncedSize(t *testing.T) {
	const size = 3 << 20
	data, err := readBounded(bytes.NewReader(make([]byte, size)), size)
	if err != nil || len(data) != size || cap(data) > size+4096 {
		t.Fatalf("read %d bytes into a buffer of %d (%v)", len(data), cap(data), err)
	}
}

// A moderator's delete of an image that posts show takes it off them: the blob goes with its last upload.
func TestDeleteTakesAShownImageOffItsPosts(t *testing.T) {
	sqldbtest.RunIn(t, "media", Migrate, func(t *testing.T, db *sqldb.DB) {
		f := newFixture(t, db, Config{})
		u := mustUpload(t, f, alice, pngOf(t, 70, 70))
		articleEvent(t, f, event.ArticleCreated, 300, 1, "![abuse]("+u.URL+")")
		if r := f.call(mod, "DELETE", "/v1/media/"+u.MediaID, ""); r.status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		wantGone(t, f, u)
		// Its thumbnail, leased by the upload within the hour, goes with the collection.
		f.clock.Add(25 * time.Hour)
		collect(t, f, 0)
		wantError(t, f.get(u.ThumbnailURL), http.StatusNotFound, "MEDIA_NOT_FOUND")
		if n := blobCount(t, f); n != 0 {
			t.Fatalf("%d blobs left", n)
		}
	})
}
