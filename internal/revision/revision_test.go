package revision

import (
	"context"
	"testing"
	"time"

	"board/internal/auth"
)

// TestKept: a revision names its editor, an edit without a principal is its writer's, and only a moderator editing
// someone else's post is marked.
func TestKept(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		ctx           context.Context
		wantEditor    int64
		wantModerator bool
	}{
		{"no principal", context.Background(), 7, false},
		{"the writer", auth.NewContext(context.Background(), auth.Principal{UserID: 7, Role: auth.RoleUser}), 7, false},
		{"a moderator, their own post", auth.NewContext(context.Background(), auth.Principal{UserID: 7, Role: auth.RoleModerator}), 7, false},
		{"a moderator, someone else's", auth.NewContext(context.Background(), auth.Principal{UserID: 9, Role: auth.RoleModerator}), 9, true},
	} {
		r := EditorOf(tc.ctx).Kept(3, 7, "title", "content", at)
		want := Revision{Number: 3, EditorID: tc.wantEditor, Title: "title", Content: "content", CreatedAt: at, Moderator: tc.wantModerator}
		if r != want {
			t.Errorf("%s: %+v, want %+v", tc.name, r, want)
		}
	}
}
