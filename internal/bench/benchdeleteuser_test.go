package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The bench runs end to end on the embedded SQLite with a small user: every export read whole, the user service's
// archive of them checked whole, the floor, and the four services' departures, whose rows, counts and events it
// checks (an error otherwise).
func TestBenchDeleteUserRuns(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Command(context.Background(), append([]string{"delete-user", "--articles", "3", "--comments", "250", "--likes", "1200",
		"--notifications", "20", "--data-dir", t.TempDir()}, embeddedAddrs(t)...), func(string) string { return "" }, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench delete-user: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := strings.Join(strings.Fields(stdout.String()), " ") // the columns' padding aside
	for _, want := range []string{"GET /v1/exports/articles 3", "GET /v1/exports/comments 250", "GET /v1/exports/likes 1200",
		"GET /v1/exports/notifications 20", "GET /v1/users/me/export 1493", "floor: article 3", "floor: comment 250",
		"floor: like 1200", "USER_DELETED: article 3", "USER_DELETED: comment 250", "USER_DELETED: like 1200",
		"USER_DELETED: notification 61"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
