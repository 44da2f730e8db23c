package bleveindex

import (
	"context"
	"strings"
	"testing"

	"board/internal/search"
	"board/internal/search/searchtest"
)

func TestSuite(t *testing.T) {
	t.Parallel()
	searchtest.Run(t, func(t *testing.T) search.Engine { return New(t.TempDir()) })
}

// An index that another process holds open is an error, not a wait without end.
func TestOpenLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := New(dir).Open(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := New(dir).Open(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("a second open: %v", err)
	}
}
