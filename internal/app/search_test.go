package app

import (
	"testing"
	"time"

	"board/internal/search/bleveindex"
)

// Index names sort as the indexes were made, also within one second, and are names every engine takes.
func TestSearchIndexNamesSortByCreation(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 2, 31, 8, 0, time.UTC)
	prev := NewSearchIndexName(at)
	for i := 1; i < 1000; i++ {
		name := NewSearchIndexName(at.Add(time.Duration(i) * time.Microsecond))
		if name <= prev {
			t.Fatalf("%q made after %q sorts before it", name, prev)
		}
		prev = name
	}
	if _, err := bleveindex.New(t.TempDir()).Open(t.Context(), prev); err != nil {
		t.Errorf("bleve refuses the name %q: %v", prev, err)
	}
	if len(prev) > 53 {
		t.Errorf("%q is longer than the SQL engine's 53 characters", prev)
	}
}
