package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"board/internal/event"
)

// The leaving suite (issue 41 item 5, SPEC §3.14, docs/identity.md "Leaving"): a user's export, through every
// service's part, and the deletion of their account with content=remove, which the article and comment services act
// on from USER_DELETED, and which holds the username for --username-grace.

// usernameGrace is short, so that the suite sees a name held and then freed.
const usernameGrace = 4 * time.Second

func TestLeaving(t *testing.T) {
	t.Parallel()
	p := startProgram(t, append(testFlags(t, t.TempDir()), "--username-grace", usernameGrace.String()))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the board's log:\n%s", p.logs)
		}
	})
	leaver := newFollower(t, p, "lv_leaver")
	stayer := newFollower(t, p, "lv_stayer")
	theirs := stayer.article(t, p, 51, "a stayer's", "stays")
	mine := []string{leaver.article(t, p, 51, "first", "one"), leaver.article(t, p, 52, "second", "two")}
	onTheirs := leaver.comment(t, p, theirs, "the leaver's comment", "")
	onMine := leaver.comment(t, p, mine[0], "on my own", "")
	for _, a := range []authAnswer{
		leaver.send(t, "POST", p.urls["like"]+"/v1/article-likes/articles/"+theirs+"/users/"+leaver.idStr, nil),
		leaver.send(t, "PUT", p.urls["notification"]+"/v1/bookmarks/article/"+theirs, nil),
	} {
		if a.status/100 != 2 {
			t.Fatalf("a like or bookmark: %d %s", a.status, a.body)
		}
	}

	// The parts of the services this branch has: each the user's own rows, newest first.
	var articles []struct{ ArticleID, BoardID, Title, Content, CreatedAt, ModifiedAt string }
	leaver.must(t, http.StatusOK, "GET", p.urls["article"]+"/v1/exports/articles", nil, &articles)
	if len(articles) != 2 || articles[0].ArticleID != mine[1] || articles[1].ArticleID != mine[0] || articles[0].Title != "second" {
		t.Errorf("exported articles = %+v, want %v newest first", articles, mine)
	}
	var comments []struct{ CommentID, ArticleID, Path, Content string }
	leaver.must(t, http.StatusOK, "GET", p.urls["comment"]+"/v1/exports/comments", nil, &comments)
	if len(comments) != 2 || comments[0].CommentID != onMine.CommentID || comments[1].CommentID != onTheirs.CommentID {
		t.Errorf("exported comments = %+v, want %s and %s", comments, onMine.CommentID, onTheirs.CommentID)
	}

	t.Run("archive", func(t *testing.T) {
		// The like and notification services' parts come with other work of issue 41: without them the archive
		// is cut short by design, which TestExport in internal/user checks.
		var missing []string
		for _, u := range []string{p.urls["like"] + "/v1/exports/likes", p.urls["notification"] + "/v1/exports/bookmarks"} {
			if a := leaver.send(t, "GET", u, nil); a.status == http.StatusNotFound {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			t.Skipf("export parts not served yet: %v", missing)
		}
		var archive map[string]json.RawMessage
		leaver.must(t, http.StatusOK, "GET", p.urls["user"]+"/v1/users/me/export", nil, &archive)
		var profile struct{ UserID, Username string }
		if err := json.Unmarshal(archive["profile"], &profile); err != nil || profile.UserID != leaver.idStr || profile.Username != leaver.name {
			t.Errorf("profile = %s", archive["profile"])
		}
		counts := map[string]int{"articles": 2, "comments": 2, "likes": 1, "bookmarks": 1}
		for _, part := range []string{"articles", "comments", "likes", "bookmarks", "notifications", "watches", "blocks"} {
			var rows []map[string]any
			if err := json.Unmarshal(archive[part], &rows); err != nil {
				t.Errorf("%s = %s: %v", part, archive[part], err)
			} else if want, ok := counts[part]; ok && len(rows) != want {
				t.Errorf("%s = %s, want %d rows", part, archive[part], want)
			}
		}
	})

	// Leaving, with what they wrote.
	wantError(t, "a deletion with the wrong password", leaver.send(t, "DELETE", p.urls["user"]+"/v1/users/me",
		map[string]any{"password": "not it", "content": "remove"}), http.StatusUnauthorized, "BAD_CREDENTIALS")
	deleted := time.Now()
	leaver.must(t, http.StatusAccepted, "DELETE", p.urls["user"]+"/v1/users/me",
		map[string]any{"password": leaver.name + "-password", "content": "remove"}, nil)
	// The name is held: a sign-up for it within the grace is refused (checked only while the grace surely lasts).
	a := sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": leaver.name, "password": "another-password"})
	if time.Since(deleted) < usernameGrace {
		wantError(t, "a sign-up for a deleted user's name within the grace", a, http.StatusConflict, "USERNAME_TAKEN")
	}

	isDeletion := func(env event.Envelope) bool {
		d, err := event.Payload[event.UserDeletion](env)
		return err == nil && env.Type == event.UserDeleted && int64(d.UserID) == leaver.id && d.Content == event.DeleteRemove
	}
	rec := findRecord(t, p, "board-session", isDeletion)
	handledBy(t, p, "article", rec)
	handledBy(t, p, "comment", rec)
	for _, id := range mine {
		wantError(t, "a deleted user's article", sendAs(t, "", "GET", p.urls["article"]+"/v1/articles/"+id, nil),
			http.StatusNotFound, "ARTICLE_NOT_FOUND")
	}
	wantError(t, "a deleted user's comment", sendAs(t, "", "GET", p.urls["comment"]+"/v2/comments/"+onTheirs.CommentID, nil),
		http.StatusNotFound, "COMMENT_NOT_FOUND")
	if a := sendAs(t, "", "GET", p.urls["article"]+"/v1/articles/"+theirs, nil); a.status != http.StatusOK {
		t.Errorf("another's article after the deletion: %d %s", a.status, a.body)
	}
	var u struct {
		UserID, Username string
		Deleted          bool
	}
	stayer.must(t, http.StatusOK, "GET", p.urls["user"]+"/v1/users/"+leaver.idStr, nil, &u)
	if u.Username != "[deleted]" || !u.Deleted {
		t.Errorf("a deleted user reads as %+v", u)
	}
	if a := sendAs(t, "", "POST", p.urls["user"]+"/v1/tokens", map[string]any{"username": leaver.name, "password": leaver.name + "-password"}); a.status != http.StatusUnauthorized {
		t.Errorf("sign-in of a deleted user: %d %s, want 401", a.status, a.body)
	}

	// After the grace the name is free for someone new.
	time.Sleep(time.Until(deleted.Add(usernameGrace + 100*time.Millisecond)))
	if a.status != http.StatusCreated {
		a = sendAs(t, "", "POST", p.urls["user"]+"/v1/users", map[string]any{"username": leaver.name, "password": "another-password"})
	}
	var fresh struct{ UserID string }
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &fresh) != nil || fresh.UserID == leaver.idStr {
		t.Errorf("a sign-up for the name after the grace: %d %s", a.status, a.body)
	}
}
