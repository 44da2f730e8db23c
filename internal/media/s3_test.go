package media

import (
	"crypto/rand"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"board/internal/blob"
	"board/internal/event"
	"board/internal/sqldb/sqldbtest"
)

// The service on a real S3-compatible store (scripts/s3 starts one; BOARD_TEST_S3_ENDPOINT names it): uploads,
// serving with ranges and revalidation, and the collection, whose deletes reach the bucket.
func TestOnS3(t *testing.T) {
	endpoint := os.Getenv("BOARD_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("BOARD_TEST_S3_ENDPOINT is not set (scripts/s3 start prints it)")
	}
	store, err := blob.NewS3(t.Context(), blob.S3Config{Endpoint: endpoint, Bucket: "board-media-" + strings.ToLower(rand.Text()[:12]),
		AccessKey: os.Getenv("BOARD_TEST_S3_ACCESS_KEY"), SecretKey: os.Getenv("BOARD_TEST_S3_SECRET_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOn(t, sqldbtest.OpenSQLite(t, Migrate), store, Config{})
	shown := mustUpload(t, f, alice, withGPSExif(jpegOf(t, 640, 480)))
	orphan := mustUpload(t, f, bob, pngOf(t, 100, 80))
	_, _, served := decoded(t, f, shown.URL)
	if strings.Contains(string(served), gpsLatitude) {
		t.Fatal("the GPS position went to the bucket")
	}
	if r := f.get(shown.URL, "Range", "bytes=10-19"); r.status != http.StatusPartialContent || string(r.body) != string(served[10:20]) {
		t.Fatalf("range: %d", r.status)
	}
	if r := f.get(shown.URL, "If-None-Match", f.get(shown.URL).header.Get("ETag")); r.status != http.StatusNotModified {
		t.Fatalf("revalidation: %d", r.status)
	}
	articleEvent(t, f, event.ArticleCreated, 100, 1, "![]("+shown.URL+")")
	f.clock.Add(25 * time.Hour)
	collect(t, f, 1)
	wantGone(t, f, orphan)
	wantKept(t, f, shown)
	if n := blobCount(t, f); n != 2 {
		t.Fatalf("%d objects in the bucket, want the shown image and its thumbnail", n)
	}
}
