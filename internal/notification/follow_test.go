package notification

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
)

// post payloads with content.
func articleOn(id, writer, board int64, content string) event.Article {
	a := articleEvent(id, writer, "T")
	a.BoardID, a.Content = apijson.ID(board), content
	return a
}

func commentSaying(id, articleID, writer int64, path, content string) event.Comment {
	c := commentV2(id, articleID, writer, path)
	c.Content = content
	return c
}

// watch PUTs user's watch of a target at level; it must be answered 200.
func (f *fixture) watch(user int64, target string, level string) {
	f.t.Helper()
	httpiotest.WantStatus(f.t, f.call(user, "PUT", "/v1/watches/"+target, `{"level":"`+level+`"}`), http.StatusOK)
}

// kinds lists user's notifications as kind:comment (newest first).
func (f *fixture) kinds(user int64) []string {
	f.t.Helper()
	out := []string{}
	for _, n := range f.list(user) {
		out = append(out, string(n.Kind)+":"+n.CommentID)
	}
	return out
}

func TestWatchAPI(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		art := "article/" + idStr(a1)

		r := f.call(replier, "PUT", "/v1/watches/"+art, `{"level":"watching"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		first := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		if first["targetType"] != "article" || first["targetId"] != idStr(a1) || first["level"] != "watching" ||
			!httpiotest.TimeFormat.MatchString(first["createdAt"].(string)) {
			t.Errorf("PUT: %s", r.Body)
		}
		r = f.call(replier, "PUT", "/v1/watches/"+art, `{"level":"muted"}`)
		httpiotest.WantStatus(t, r, http.StatusOK)
		again := httpiotest.DecodeJSON(t, r.Body).(map[string]any)
		if again["level"] != "muted" || again["createdAt"] != first["createdAt"] {
			t.Errorf("a second PUT: %s; want muted, created at %s", r.Body, first["createdAt"])
		}
		r = f.call(replier, "GET", "/v1/watches/"+art, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if diff := cmp.Diff(again, httpiotest.DecodeJSON(t, r.Body)); diff != "" {
			t.Errorf("GET (-PUT +GET):\n%s", diff)
		}
		httpiotest.WantError(t, f.call(other, "GET", "/v1/watches/"+art, ""), http.StatusNotFound, "WATCH_NOT_FOUND")

		// Boards are any positive id; the list pages newest first.
		for board := int64(1); board <= 5; board++ {
			f.watch(replier, "board/"+idStr(board), "watching")
		}
		var got []string
		for cursor := ""; ; {
			r := f.call(replier, "GET", "/v1/watches?pageSize=2&cursor="+cursor, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			var p struct {
				Watches []struct {
					TargetType, TargetID, Level string
				} `json:"watches"`
				NextCursor string `json:"nextCursor"`
			}
			decode(t, r.Body, &p)
			for _, w := range p.Watches {
				got = append(got, w.TargetType+"/"+w.TargetID+":"+w.Level)
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		want := []string{"board/5:watching", "board/4:watching", "board/3:watching", "board/2:watching", "board/1:watching", art + ":muted"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the list (-want +got):\n%s", diff)
		}

		for range 2 {
			httpiotest.WantStatus(t, f.call(replier, "DELETE", "/v1/watches/"+art, ""), http.StatusNoContent)
		}
		httpiotest.WantError(t, f.call(replier, "GET", "/v1/watches/"+art, ""), http.StatusNotFound, "WATCH_NOT_FOUND")

		httpiotest.WantError(t, f.call(replier, "PUT", "/v1/watches/article/"+idStr(a2), `{"level":"watching"}`), http.StatusNotFound, "TARGET_NOT_FOUND")
		httpiotest.WantError(t, f.call(replier, "PUT", "/v1/watches/user/1", `{"level":"watching"}`), http.StatusBadRequest, "INVALID_TARGET_TYPE")
		httpiotest.WantError(t, f.call(replier, "GET", "/v1/watches/comment/1", ""), http.StatusBadRequest, "INVALID_TARGET_TYPE")
		httpiotest.WantError(t, f.call(replier, "DELETE", "/v1/watches/thread/1", ""), http.StatusBadRequest, "INVALID_TARGET_TYPE")
		httpiotest.WantError(t, f.call(replier, "PUT", "/v1/watches/board/1", `{"level":"loud"}`), http.StatusBadRequest, "INVALID_LEVEL")
		httpiotest.WantError(t, f.call(replier, "PUT", "/v1/watches/board/1", `{}`), http.StatusBadRequest, "MISSING_FIELD")
		if r := f.call(replier, "PUT", "/v1/watches/board/0", `{"level":"watching"}`); r.Status != http.StatusBadRequest {
			t.Errorf("board 0: status %d, want 400", r.Status)
		}
		for _, route := range [][2]string{{"PUT", "/v1/watches/board/1"}, {"DELETE", "/v1/watches/board/1"}, {"GET", "/v1/watches/board/1"}, {"GET", "/v1/watches"}} {
			httpiotest.WantError(t, f.call(0, route[0], route[1], `{"level":"watching"}`), http.StatusUnauthorized, "UNAUTHENTICATED")
		}
	})
}

// TestOnePerPersonPerPost: each person is told once of a post, of the highest kind: comment-reply > article-comment >
// mention > watched-comment; watched-article for a new article, which a mention beats; never of their own.
func TestOnePerPersonPerPost(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		const board, watcher, mentioned = 7, 201, 202
		for _, u := range []int64{author, replier, other, watcher, mentioned} {
			f.watch(u, "board/7", "watching")
		}
		// The writer mentions themself, a watcher, and a name that is no one's.
		f.deliver(event.ArticleCreated, articleOn(a1, author, board, "hi @u202 @U101 and @ghost_x"))
		want := map[int64][]string{author: {}, replier: {"watched-article:"}, other: {"watched-article:"},
			watcher: {"watched-article:"}, mentioned: {"mention:"}}
		for u, w := range want {
			if diff := cmp.Diff(w, f.kinds(u)); diff != "" {
				t.Errorf("user %d after the article (-want +got):\n%s", u, diff)
			}
		}
		if n := f.list(mentioned)[0]; n.ArticleID != idStr(a1) || n.CommentID != "" || n.ActorIDs[0] != idStr(author) {
			t.Errorf("the mention: %+v", n)
		}

		f.noAutoWatch(replier, other)
		for _, u := range []int64{replier, other, watcher, mentioned} {
			f.watch(u, "article/"+idStr(a1), "watching")
		}
		f.deliver(event.CommentCreated, commentSaying(c(1), a1, replier, "00000", "first"))
		// other replies to replier, mentioning replier, author and the mentioned user: replier is told of the reply,
		// author of the comment, mentioned of the mention, watcher of a comment on a watched article.
		f.deliver(event.CommentCreated, commentSaying(c(2), a1, other, "0000000000", "@u102 @u101 @u202 @u103"))
		last := func(u int64) string { return f.kinds(u)[0] }
		for u, w := range map[int64]string{replier: "comment-reply:", author: "article-comment:", mentioned: "mention:", watcher: "watched-comment:"} {
			if got := last(u); got != w+idStr(c(2)) {
				t.Errorf("user %d told %s, want %s", u, got, w)
			}
		}
		// Not of their own comment: other has the article and replier's comment.
		for u, n := range map[int64]int{replier: 2, other: 2, author: 2, mentioned: 3, watcher: 3} {
			if got := len(f.kinds(u)); got != n {
				t.Errorf("user %d has %d notifications, want %d: %v", u, got, n, f.kinds(u))
			}
		}
	})
}

func TestMuteAndPreferences(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.noAutoWatch(replier, other)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, author, "00000"))
		f.watch(author, "article/"+idStr(a1), "muted")
		f.watch(replier, "article/"+idStr(a1), "muted")
		// A comment, a reply and a mention on the muted article, a like of it: nothing; moderation: told.
		f.deliver(event.CommentCreated, commentSaying(c(2), a1, other, "0000000000", "@u102"))
		f.deliver(event.ArticleLiked, likeEvent(a1, other))
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Action: event.ActionLock, ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		if diff := cmp.Diff([]string{"moderation:"}, f.kinds(author)); diff != "" {
			t.Errorf("the muted article's writer (-want +got):\n%s", diff)
		}
		if got := f.kinds(replier); len(got) != 0 {
			t.Errorf("replier muted the article, and is told %v", got)
		}

		// mention and watched turned off: the next kind down, or nothing.
		httpiotest.WantStatus(t, f.call(other, "PUT", "/v1/notification-preferences",
			`{"reply":true,"commentReply":true,"like":true,"moderation":true,"mention":false,"watched":false}`), http.StatusOK)
		f.deliver(event.ArticleCreated, articleEvent(a2, author, "Two"))
		f.watch(other, "article/"+idStr(a2), "watching")
		f.deliver(event.CommentCreated, commentSaying(c(3), a2, replier, "00000", "@u103"))
		if got := f.kinds(other); len(got) != 0 {
			t.Errorf("other wants no mention nor watched, and is told %v", got)
		}
		// An old client's PUT of the four first keeps the others.
		httpiotest.WantStatus(t, f.call(other, "PUT", "/v1/notification-preferences",
			`{"reply":true,"commentReply":true,"like":true,"moderation":true}`), http.StatusOK)
		r := f.call(other, "GET", "/v1/notification-preferences", "")
		if want := `{"reply":true,"commentReply":true,"like":true,"moderation":true,"mention":false,"watched":false,"autoWatch":false,"email":"off"}`; strings.TrimSpace(r.Body) != want {
			t.Errorf("preferences %s, want %s", r.Body, want)
		}
	})
}

func TestAutoWatch(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.noAutoWatch(other)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.watch(mod, "article/"+idStr(a1), "muted")
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		f.deliver(event.CommentCreated, commentV2(c(2), a1, other, "00001"))
		f.deliver(event.CommentCreated, commentV2(c(3), a1, mod, "00002"))
		for u, level := range map[int64]string{author: "watching", replier: "watching", mod: "muted"} {
			r := f.call(u, "GET", "/v1/watches/article/"+idStr(a1), "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if got := httpiotest.DecodeJSON(t, r.Body).(map[string]any)["level"]; got != level {
				t.Errorf("user %d's watch is %v, want %s", u, got, level)
			}
		}
		httpiotest.WantError(t, f.call(other, "GET", "/v1/watches/article/"+idStr(a1), ""), http.StatusNotFound, "WATCH_NOT_FOUND")
		// Watching, replier hears of the next comment; other, who did not watch, does not.
		f.deliver(event.CommentCreated, commentV2(c(4), a1, author, "00003"))
		if diff := cmp.Diff([]string{"watched-comment:" + idStr(c(4)), "watched-comment:" + idStr(c(3)), "watched-comment:" + idStr(c(2))}, f.kinds(replier)); diff != "" {
			t.Errorf("replier (-want +got):\n%s", diff)
		}
		if got := f.kinds(other); len(got) != 0 {
			t.Errorf("other, autoWatch off, is told %v", got)
		}
	})
}

func TestMentions(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.noAutoWatch(author, replier)
		f.deliver(event.ArticleCreated, articleOn(a1, author, 1, "@u301"))
		var many strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&many, "@u%d ", 1000+i)
		}
		f.deliver(event.CommentCreated, commentSaying(c(1), a1, replier, "00000", many.String()))
		for i := range int64(1000) {
			if got, want := len(f.kinds(1000+i)), map[bool]int{true: 1, false: 0}[i < 20]; got != want {
				t.Fatalf("user %d has %d notifications, want %d: 20 mentions at most, the first", 1000+i, got, want)
			}
		}

		// An edit tells only the names it adds; the edit again tells no one.
		f.deliver(event.CommentCreated, commentSaying(c(2), a1, replier, "00001", "@u301 @ghost_x"))
		edit := commentSaying(c(2), a1, replier, "00001", "@u301 @u302 @u303")
		edit.CommentVersion = 2
		f.deliver(event.CommentUpdated, edit)
		f.deliver(event.CommentUpdated, edit)
		f.deliver(event.ArticleUpdated, articleOn(a1, author, 1, "@u301 @u303 @u304"))
		want := map[int64][]string{
			301: {"mention:" + idStr(c(2)), "mention:"},
			302: {"mention:" + idStr(c(2))},
			303: {"mention:", "mention:" + idStr(c(2))},
			304: {"mention:"},
		}
		for u, w := range want {
			if diff := cmp.Diff(w, f.kinds(u)); diff != "" {
				t.Errorf("user %d (-want +got):\n%s", u, diff)
			}
		}

		// The user service down: the event fails, to be retried, and tells no one meanwhile.
		f.users.status.Store(http.StatusServiceUnavailable)
		env := envelope(t, event.CommentCreated, commentSaying(c(3), a1, replier, "00002", "@u305"))
		if err := f.handle(env); err == nil {
			t.Error("the user service down: no error, want one")
		}
		f.users.status.Store(0)
		if err := f.handle(env); err != nil {
			t.Fatal(err)
		}
		if got := f.kinds(305); len(got) != 1 {
			t.Errorf("after the retry user 305 has %v", got)
		}
	})
}

// blocker blocks every pair it lists: blocker -> blocked.
type blocker map[[2]int64]bool

func (b blocker) Blocks(user, other int64) bool { return b[[2]int64{user, other}] }

func TestBlocks(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{Blocks: blocker{{author, replier}: true, {other, replier}: true}})
		f.noAutoWatch(replier)
		f.watch(other, "board/1", "watching")
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.watch(other, "article/"+idStr(a1), "watching")
		f.deliver(event.ArticleCreated, articleOn(a2, replier, 1, "@u101")) // a mention and a watched article
		f.deliver(event.CommentCreated, commentSaying(c(1), a1, replier, "00000", "@u103"))
		f.deliver(event.ArticleLiked, likeEvent(a1, replier))
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Action: event.ActionLock, ModeratorID: replier, ModeratedAt: apijson.Time(t0)})
		if diff := cmp.Diff([]string{"moderation:"}, f.kinds(author)); diff != "" {
			t.Errorf("author blocks replier (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"watched-article:"}, f.kinds(other)); diff != "" { // author's a1; nothing of replier's
			t.Errorf("other blocks replier (-want +got):\n%s", diff)
		}
	})
}

// TestFanout tells more watchers than one batch holds, in parallel batches and one inbox per transaction (as on
// Vitess): every one once, the streams told, a delivery again (after a crash midway, say) adding nothing, and the
// article's delete taking it all back.
func TestFanout(t *testing.T) {
	for _, cfg := range []Config{{FanoutBatch: 64, FanoutWorkers: 3}, {FanoutBatch: 1, FanoutWorkers: 8}} {
		t.Run(fmt.Sprintf("batch%d", cfg.FanoutBatch), func(t *testing.T) {
			run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
				f := newFixture(t, db, b, cfg)
				const watchers = 300
				ids := make([]int64, watchers)
				for i := range ids {
					ids[i] = 5000 + int64(i)
					f.watch(ids[i], "board/9", "watching")
				}
				f.noAutoWatch(author)
				s := f.stream(ids[watchers-1], "")
				s.opened(0)
				// Half of them told before, as by a delivery cut short.
				if err := f.svc.deliver(t.Context(), post{key: articleKey(a1), n: Notification{ArticleID: a1, ArticleTitle: "T",
					ActorIDs: []int64{author}, CreatedAt: t0, UpdatedAt: t0}, board: 9},
					func() []recipient {
						rs := newRecipients(author)
						rs.add(WatchedArticle, ids[:watchers/2]...)
						return rs.list()
					}()); err != nil {
					t.Fatal(err)
				}
				env := f.deliver(event.ArticleCreated, articleOn(a1, author, 9, ""))
				if err := f.handle(env); err != nil {
					t.Fatal(err)
				}
				for _, u := range ids {
					seq, unread, err := f.svc.state(t.Context(), u)
					if err != nil || seq != 1 || unread != 1 {
						t.Fatalf("watcher %d: seq %d, unread %d, %v; want one notification", u, seq, unread, err)
					}
				}
				if _, n := s.notification(5 * time.Second); n.Kind != WatchedArticle {
					t.Errorf("the stream: %+v", n)
				}
				f.deliver(event.ArticleDeleted, articleOn(a1, author, 9, ""))
				for _, u := range ids {
					if _, unread, err := f.svc.state(t.Context(), u); err != nil || unread != 0 {
						t.Fatalf("watcher %d after the delete: unread %d, %v", u, unread, err)
					}
				}
			})
		})
	}
}

// TestHiddenBeforeItsCreate: an article whose hide is read before its create (the moderation topic ahead of the
// article topic) tells neither its board's watchers nor the names it mentions, then or at an edit.
func TestHiddenBeforeItsCreate(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.noAutoWatch(author, replier, other)
		f.watch(other, "board/1", "watching")
		f.origin.add(a1, author, "T") // the article service has it: the hide's handler looks it up
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Hidden: event.Pending, Action: event.ActionHide, ModeratedAt: apijson.Time(t0)})
		f.deliver(event.ArticleCreated, articleOn(a1, author, 1, "hello @u"+idStr(replier)))
		f.deliver(event.ArticleUpdated, articleOn(a1, author, 1, "hello @u"+idStr(replier)+" and @u"+idStr(mod)))
		for _, user := range []int64{other, replier, mod} {
			if got := f.kinds(user); len(got) != 0 {
				t.Errorf("user %d was told %v of a hidden article", user, got)
			}
		}
	})
}
