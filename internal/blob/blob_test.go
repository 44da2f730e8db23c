package blob_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"board/internal/blob"
	"board/internal/blob/blobtest"
)

func TestDir(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, err := blob.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A Put that a crash interrupted leaves a temporary file, which the next NewDir removes and List never shows.
func TestDirRemovesInterruptedPuts(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(root, "ab", ".put-123")
	if err := os.WriteFile(left, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.NewDir(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the interrupted put's file is still there: %v", err)
	}
}

// TestS3 runs the suite against a real S3-compatible server (scripts/s3 starts one): BOARD_TEST_S3_ENDPOINT is its
// URL, BOARD_TEST_S3_ACCESS_KEY and BOARD_TEST_S3_SECRET_KEY its credentials. Each subtest gets a bucket of its own.
func TestS3(t *testing.T) {
	endpoint := os.Getenv("BOARD_TEST_S3_ENDPOINT")
	if endpoint == "" {
		t.Skip("BOARD_TEST_S3_ENDPOINT is not set (scripts/s3 start prints it)")
	}
	blobtest.Run(t, func(t *testing.T) blob.Store {
		s, err := blob.NewS3(t.Context(), blob.S3Config{Endpoint: endpoint, Bucket: "board-test-" + strings.ToLower(rand.Text()[:12]),
			AccessKey: os.Getenv("BOARD_TEST_S3_ACCESS_KEY"), SecretKey: os.Getenv("BOARD_TEST_S3_SECRET_KEY")})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
