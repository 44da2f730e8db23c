package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The bench runs end to end on the embedded SQLite with a small user: every export read whole, the floor, and both
// services' departures, whose rows, counts and events it checks (an error otherwise).
func TestBenchDeleteUserRuns(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Command(context.Background(), []string{"delete-user", "--likes", "1200", "--notifications", "20", "--data-dir", t.TempDir()},
		func(string) string { return "" }, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench delete-user: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := strings.Join(strings.Fields(stdout.String()), " ") // the columns' padding aside
	for _, want := range []string{"GET /v1/exports/likes 1200", "GET /v1/exports/notifications 20", "floor: like 1200",
		"USER_DELETED: like 1200", "USER_DELETED: notification 61"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
