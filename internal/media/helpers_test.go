package media

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"board/internal/blob"
	"board/internal/httpio/httpiotest"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/snowflake/snowflaketest"
	"board/internal/sqldb"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

const (
	firstID = 1<<60 + 1
	alice   = 7
	bob     = 8
	mod     = 9
)

var eventIDs = func() *snowflake.Generator {
	g, err := snowflake.New(6, nil)
	if err != nil {
		panic(err)
	}
	return g
}()

type fixture struct {
	db    *sqldb.DB
	svc   *Service
	blobs blob.Store
	clock *snowflaketest.Clock
	h     http.Handler
}

func newFixture(t testing.TB, db *sqldb.DB, cfg Config) *fixture {
	t.Helper()
	blobs, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureOn(t, db, blobs, cfg)
}

func newFixtureOn(t testing.TB, db *sqldb.DB, blobs blob.Store, cfg Config) *fixture {
	t.Helper()
	clock := snowflaketest.NewClock(t0)
	cfg.Now = clock.Now
	ob := outbox.New(db, outbox.DefaultShards, eventIDs, time.Now, nil, nil)
	svc := New(db, ob, blobs, snowflaketest.NewIDs(firstID), cfg)
	return &fixture{db: db, svc: svc, blobs: blobs, clock: clock, h: httpiotest.Handler("media", Routes(svc, httpiotest.Logger))}
}

// reply is an answer of the service.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (f *fixture) do(user int64, req *http.Request) reply {
	h := f.h
	switch user {
	case 0:
	case mod:
		h = httpiotest.AsModerator(h, user)
	default:
		h = httpiotest.As(h, user)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return reply{w.Code, w.Header(), w.Body.Bytes()}
}

// upload posts data as a raw body.
func (f *fixture) upload(user int64, data []byte) reply {
	req := httptest.NewRequest(http.MethodPost, "/v1/media", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/octet-stream")
	return f.do(user, req)
}

// uploadMultipart posts data as the file part of a form, named and typed as something else to show neither counts.
func (f *fixture) uploadMultipart(user int64, data []byte) reply {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("alt", "a picture")
	part, _ := mw.CreateFormFile("file", "notes.txt")
	_, _ = part.Write(data)
	_ = mw.Close()
	req := httptest.NewRequest(http.MethodPost, "/v1/media", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return f.do(user, req)
}

func (f *fixture) get(path string, header ...string) reply {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return f.do(0, req)
}

func (f *fixture) call(user int64, method, target, body string) reply {
	return f.do(user, httptest.NewRequest(method, target, bytes.NewReader([]byte(body))))
}

type uploaded struct {
	MediaID      string `json:"mediaId"`
	URL          string `json:"url"`
	ThumbnailURL string `json:"thumbnailUrl"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	ContentType  string `json:"contentType"`
	Bytes        int64  `json:"bytes"`
}

func mustUpload(t testing.TB, f *fixture, user int64, data []byte) uploaded {
	t.Helper()
	r := f.upload(user, data)
	if r.status != http.StatusCreated {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	var u uploaded
	if err := json.Unmarshal(r.body, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

func wantError(t testing.TB, r reply, status int, code string) {
	t.Helper()
	var e struct{ Code, Message string }
	if r.status != status || json.Unmarshal(r.body, &e) != nil || e.Code != code || e.Message == "" {
		t.Fatalf("got %d %s, want %d %s", r.status, r.body, status, code)
	}
}

func count(t testing.TB, db *sqldb.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Images the tests upload, made here.

func gradient(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	return img
}

func pngOf(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, gradient(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegOf(t testing.TB, w, h int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, gradient(w, h), &jpeg.Options{Quality: 80}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gpsLatitude is what the test EXIF says where the photo was taken; stripped, it is nowhere in the stored bytes.
const gpsLatitude = "GPS-N-37-33-59"

// withGPSExif puts an APP1 Exif segment with a GPS IFD right after a JPEG's SOI, as cameras and phones do.
func withGPSExif(jpg []byte) []byte {
	var tiff bytes.Buffer
	tiff.WriteString("MM\x00\x2a\x00\x00\x00\x08")                      // big-endian TIFF, IFD0 at 8
	tiff.Write([]byte{0, 1, 0x88, 0x25, 0, 4, 0, 0, 0, 1, 0, 0, 0, 26}) // one entry: GPSInfo (LONG) -> 26
	tiff.Write([]byte{0, 0, 0, 0})                                      // no next IFD
	tiff.Write([]byte{0, 1, 0, 2, 0, 2, 0, 0, 0, byte(len(gpsLatitude) + 1), 0, 0, 0, 44, 0, 0, 0, 0})
	tiff.WriteString(gpsLatitude + "\x00")
	payload := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	out := append([]byte{}, jpg[:2]...)
	out = append(out, seg...)
	out = append(out, payload...)
	// A comment segment, which goes too.
	com := "COM: shot by alice"
	out = append(out, 0xFF, 0xFE, 0, byte(len(com)+2))
	out = append(out, com...)
	return append(out, jpg[2:]...)
}

// pngWithText adds a tEXt chunk (a PNG's comment) before IEND.
func pngWithText(p []byte, text string) []byte {
	chunk := make([]byte, 8, 12+len(text))
	binary.BigEndian.PutUint32(chunk, uint32(len(text)))
	copy(chunk[4:], "tEXt")
	chunk = append(chunk, text...)
	chunk = append(chunk, 0, 0, 0, 0) // the CRC is not checked by the stripper, and the chunk goes
	iend := len(p) - 12
	return append(append(append([]byte{}, p[:iend]...), chunk...), p[iend:]...)
}

func gifOf(t testing.TB, w, h, frames int) []byte {
	g := &gif.GIF{LoopCount: 0}
	for i := range frames {
		img := image.NewPaletted(image.Rect(0, 0, w, h), palette.Plan9)
		img.Pix[0] = uint8(i)
		g.Image = append(g.Image, img)
		g.Delay = append(g.Delay, 10)
	}
	var b bytes.Buffer
	if err := gif.EncodeAll(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func webpFile(t testing.TB) []byte {
	b, err := os.ReadFile("testdata/blue-purple-pink.lossy.webp")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// webpWithExif wraps a simple lossy WebP in the extended format with an EXIF chunk.
func webpWithExif(t testing.TB, simple []byte) []byte {
	cfg, err := formatWebP.decodeConfig(bytes.NewReader(simple))
	if err != nil {
		t.Fatal(err)
	}
	vp8x := []byte("VP8X\x0a\x00\x00\x00\x08\x00\x00\x00")
	le24 := func(v int) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }
	vp8x = append(append(vp8x, le24(cfg.Width-1)...), le24(cfg.Height-1)...)
	exif := []byte("EXIF\x0e\x00\x00\x00" + gpsLatitude)
	body := append(append(append([]byte("WEBP"), vp8x...), simple[12:]...), exif...)
	out := []byte("RIFF\x00\x00\x00\x00")
	binary.LittleEndian.PutUint32(out[4:], uint32(len(body)))
	return append(out, body...)
}

func idOf(u uploaded) int64 {
	id, _ := strconv.ParseInt(u.MediaID, 10, 64)
	return id
}

type blobInfo = blob.Info

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }

// withOrientation puts an Exif segment saying orientation o after a JPEG's SOI, little-endian as most phones write.
func withOrientation(jpg []byte, o byte) []byte {
	tiff := []byte("II\x2a\x00\x08\x00\x00\x00")
	tiff = append(tiff, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, o, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	payload := append([]byte("Exif\x00\x00"), tiff...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	out := append(append(append([]byte{}, jpg[:2]...), seg...), payload...)
	return append(out, jpg[2:]...)
}
