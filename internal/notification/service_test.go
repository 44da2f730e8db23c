package notification

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/sqldb"
	"board/internal/sqldb/sqldbtest"
)

// Ids above 2^53, so that a float64 on the way would lose digits.
const (
	a1 = 1<<60 + 1 + iota
	a2
	a3
)

// c is the id of the tests' comment n.
func c(n int64) int64 { return 1<<60 + 1000 + n }

func TestReplies(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.noAutoWatch(author, replier, other)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "Title one"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))                // a comment on author's article
		f.deliver(event.CommentCreated, commentV2(c(2), a1, other, "0000000000"))             // a reply to replier's
		f.deliver(event.CommentCreated, commentV2(c(3), a1, author, "000000000000000"))       // author replies to other
		f.deliver(event.CommentCreated, commentV2(c(4), a1, author, "00001"))                 // author's own comment
		f.deliver(event.CommentCreated, commentV2(c(5), a1, replier, "0000100000"))           // a reply to author's comment
		f.deliver(event.CommentCreated, commentV2(c(6), a1, replier, "000000000000001"))      // replier replies to other
		f.deliver(event.CommentCreated, commentV2(c(7), a1, other, "000000000000002"))        // other replies to own reply
		f.deliver(event.CommentCreated, commentV1(c(8), a1, other, 0))                        // v1 root
		f.deliver(event.CommentCreated, commentV1(c(9), a1, replier, c(8)))                   // v1 reply to other's
		f.deliver(event.CommentCreated, commentV1(c(10), a1, other, c(8)))                    // v1 reply to own
		f.deliver(event.CommentCreated, commentV2(c(11), a1, author, "00000000000000200000")) // author replies to other's c(7)

		ac := func(comment int64, actor int64) brief {
			return brief{Kind: ArticleComment, Article: idStr(a1), Comment: idStr(comment), Actors: idStr(actor), Count: 1, Title: "Title one"}
		}
		cr := func(comment int64, actor int64) brief {
			return brief{Kind: CommentReply, Article: idStr(a1), Comment: idStr(comment), Actors: idStr(actor), Count: 1, Title: "Title one"}
		}
		want := map[int64][]brief{
			// Newest first; c(5) replies to author's comment on author's article: one notification, of the reply.
			author:  {ac(c(10), other), ac(c(9), replier), ac(c(8), other), ac(c(7), other), ac(c(6), replier), cr(c(5), replier), ac(c(2), other), ac(c(1), replier)},
			replier: {cr(c(2), other)},
			other:   {cr(c(11), author), cr(c(9), replier), cr(c(6), replier), cr(c(3), author)},
		}
		for user, w := range want {
			if diff := cmp.Diff(w, briefs(f.list(user))); diff != "" {
				t.Errorf("user %d's notifications (-want +got):\n%s", user, diff)
			}
			if got := f.unread(user); got != int64(len(w)) {
				t.Errorf("user %d: unread %d, want %d", user, got, len(w))
			}
		}
		n := f.list(replier)[0]
		if n.Read || n.CreatedAt != "2026-01-02T03:04:05.006Z" || n.UpdatedAt != n.CreatedAt {
			t.Errorf("notification %+v: want unread, created and updated at the comment's time", n)
		}
	})
}

func TestLikesAreGrouped(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "Liked"))
		f.deliver(event.ArticleLiked, likeEvent(a1, 201))
		f.deliver(event.ArticleLiked, likeEvent(a1, 202))
		last := f.deliver(event.ArticleLiked, likeEvent(a1, 203))
		like := func(actors string, count int64, read bool) brief {
			return brief{Kind: ArticleLike, Article: idStr(a1), Actors: actors, Count: count, Read: read, Title: "Liked"}
		}
		if diff := cmp.Diff([]brief{like("203,202,201", 3, false)}, briefs(f.list(author))); diff != "" {
			t.Fatalf("three likes (-want +got):\n%s", diff)
		}
		before := f.state(author)
		if before.Unread != 1 {
			t.Errorf("unread %d, want 1", before.Unread)
		}

		// A duplicate, a like again after an unlike, the writer's own like: nothing changes.
		if err := f.handle(last); err != nil {
			t.Fatal(err)
		}
		f.deliver(event.ArticleUnliked, likeEvent(a1, 202))
		f.deliver(event.ArticleLiked, likeEvent(a1, 202))
		f.deliver(event.ArticleLiked, likeEvent(a1, author))
		if diff := cmp.Diff(before, f.state(author)); diff != "" {
			t.Fatalf("after a duplicate, a like again and an own like (-before +after):\n%s", diff)
		}

		// At most five actors are named; all are counted. An update is a change: the group moves to the top.
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		for u := int64(204); u <= 207; u++ {
			f.deliver(event.ArticleLiked, likeEvent(a1, u))
		}
		got := f.list(author)
		if diff := cmp.Diff(like("207,206,205,204,203", 7, false), got[0].brief()); diff != "" {
			t.Fatalf("seven likes (-want +got):\n%s", diff)
		}
		if got[0].NotificationID != before.List[0].NotificationID || f.unread(author) != 2 {
			t.Errorf("the group is not updated in place: %+v, unread %d", got, f.unread(author))
		}

		// Read, the group is closed: the next liker starts another; an earlier liker does not.
		f.markRead(author, got[0].NotificationID)
		f.deliver(event.ArticleLiked, likeEvent(a1, 208))
		f.deliver(event.ArticleLiked, likeEvent(a1, 201))
		got = f.list(author)
		if diff := cmp.Diff([]brief{like("208", 1, false), like("207,206,205,204,203", 7, true)},
			[]brief{got[0].brief(), got[1].brief()}); diff != "" {
			t.Errorf("a like after the group was read (-want +got):\n%s", diff)
		}
		if len(got) != 3 || f.unread(author) != 2 {
			t.Errorf("%d notifications, unread %d; want 3, 2", len(got), f.unread(author))
		}
	})
}

// TestEveryHandlerIsIdempotent delivers every kind of event twice in a row, and then all of them again: the second
// deliveries change nothing anyone sees, nor the inbox's sequence.
func TestEveryHandlerIsIdempotent(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.origin.add(a2, other, "Looked up")
		f.watch(replier, "board/1", "watching")
		users := []int64{author, replier, other}
		snapshot := func() map[int64]inboxState {
			m := map[int64]inboxState{}
			for _, u := range users {
				m[u] = f.state(u)
			}
			return m
		}
		script := []struct {
			typ     event.Type
			payload any
		}{
			{event.ArticleCreated, articleEvent(a1, author, "One")},
			{event.ArticleUpdated, articleEvent(a1, author, "One, edited")},
			{event.CommentCreated, commentV2(c(1), a1, replier, "00000")},
			{event.CommentCreated, commentV2(c(2), a1, other, "0000000000")},
			{event.CommentCreated, commentV1(c(3), a1, replier, 0)},
			{event.CommentCreated, commentV1(c(4), a1, other, c(3))},
			{event.CommentCreated, commentV2(c(5), a2, author, "00000")}, // a2 is looked up
			{event.CommentCreated, commentV1(c(7), a1, other, c(3))},
			{event.ArticleLiked, likeEvent(a1, replier)},
			{event.ArticleLiked, likeEvent(a1, other)},
			{event.ArticleLiked, likeEvent(a2, author)},
			{event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author, Action: event.ActionLock,
				Reason: "heated", ModeratorID: mod, ModeratedAt: apijson.Time(t0)}},
			{event.CommentModerated, event.CommentModeration{CommentID: apijson.ID(c(2)), ArticleID: a1, BoardID: 1, WriterID: other,
				Hidden: event.Removed, Action: event.ActionRemove, Reason: "rude", ModeratorID: mod, ModeratedAt: apijson.Time(t0)}},
			{event.UserBanned, event.Ban{UserID: replier, Banned: true, Reason: "spam", ModeratorID: mod, At: apijson.Time(t0)}},
			{event.UserUnbanned, event.Ban{UserID: replier, Reason: "appeal", ModeratorID: mod, At: apijson.Time(t0)}},
			// Following: a watched board's new article with a mention, a comment with one, edits that add some (one
			// turns replier's watched-article into a mention).
			{event.ArticleCreated, articleOn(a3, other, 1, "for @u101")},
			{event.CommentCreated, commentSaying(c(6), a3, author, "00000", "hi @u103")},
			{event.CommentUpdated, commentSaying(c(6), a3, author, "00000", "hi @u103 @u102")},
			{event.ArticleUpdated, articleOn(a3, other, 1, "for @u101 @u102")},
			{event.CommentDeleted, commentV1(c(4), a1, other, c(3))},
			{event.ArticleDeleted, articleEvent(a2, other, "Looked up")},
		}
		var envs []event.Envelope
		for _, step := range script {
			env := f.deliver(step.typ, step.payload)
			envs = append(envs, env)
			once := snapshot()
			if err := f.handle(env); err != nil {
				t.Fatalf("%s again: %v", step.typ, err)
			}
			if diff := cmp.Diff(once, snapshot()); diff != "" {
				t.Errorf("%s delivered twice (-once +twice):\n%s", step.typ, diff)
			}
		}
		all := snapshot()
		if all[author].Unread == 0 || all[replier].Unread == 0 || all[other].Unread == 0 {
			t.Fatalf("the script notified too little to prove anything: %+v", all)
		}
		kinds := map[Kind]bool{}
		for _, st := range all {
			for _, n := range st.List {
				kinds[n.Kind] = true
			}
		}
		for _, k := range []Kind{ArticleComment, CommentReply, ArticleLike, Moderation, Mention, WatchedComment, WatchedArticle} {
			if !kinds[k] {
				t.Errorf("the script made no %s notification", k)
			}
		}
		for _, env := range envs {
			if err := f.handle(env); err != nil {
				t.Fatalf("%s replayed: %v", env.Type, err)
			}
		}
		if diff := cmp.Diff(all, snapshot()); diff != "" {
			t.Errorf("all replayed (-once +replayed):\n%s", diff)
		}
	})
}

func TestDeletedOrHiddenBeforeRead(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.noAutoWatch(author, replier, other)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.ArticleCreated, articleEvent(a2, author, "Two"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		f.deliver(event.CommentCreated, commentV2(c(2), a1, other, "00001"))
		f.deliver(event.CommentCreated, commentV2(c(3), a1, other, "0000000000")) // replies to replier's c(1)
		f.deliver(event.CommentCreated, commentV1(c(4), a1, other, 0))
		f.deliver(event.CommentCreated, commentV1(c(5), a1, replier, c(4)))
		f.deliver(event.CommentCreated, commentV2(c(6), a2, replier, "00000"))
		kinds := func(user int64) []string {
			var out []string
			for _, n := range f.list(user) {
				out = append(out, string(n.Kind)+":"+n.CommentID+map[bool]string{true: ":read"}[n.Read])
			}
			return out
		}
		ac := func(n int64) string { return "article-comment:" + idStr(c(n)) }
		if diff := cmp.Diff([]string{ac(6), ac(5), ac(4), ac(3), ac(2), ac(1)}, kinds(author)); diff != "" {
			t.Fatalf("author (-want +got):\n%s", diff)
		}

		// A read notification stays when its comment goes.
		f.markRead(author, f.list(author)[5].NotificationID)
		f.deliver(event.CommentDeleted, commentV2(c(1), a1, replier, "00000"))
		// An unread one goes, from everyone's inbox: c(3) told author and replier, c(5) (v1) author and other.
		f.deliver(event.CommentDeleted, commentV2(c(3), a1, other, "0000000000"))
		f.deliver(event.CommentDeleted, commentV1(c(5), a1, replier, c(4)))
		// So does a hidden one; the hidden comment's writer hears of it.
		f.deliver(event.CommentModerated, event.CommentModeration{CommentID: apijson.ID(c(2)), ArticleID: a1, BoardID: 1,
			WriterID: other, Hidden: event.Pending, Action: event.ActionHide, ModeratedAt: apijson.Time(t0)})
		if diff := cmp.Diff([]string{ac(6), ac(4), ac(1) + ":read"}, kinds(author)); diff != "" {
			t.Errorf("author after the deletes (-want +got):\n%s", diff)
		}
		if got := f.unread(author); got != 2 {
			t.Errorf("author's unread %d, want 2", got)
		}
		if got := kinds(replier); len(got) != 0 || f.unread(replier) != 0 {
			t.Errorf("replier's inbox %v, unread %d: the reply was deleted", got, f.unread(replier))
		}
		if got := kinds(other); !cmp.Equal(got, []string{"moderation:" + idStr(c(2))}) || f.unread(other) != 1 {
			t.Errorf("other's inbox %v, unread %d; want only the hide", got, f.unread(other))
		}
		// A comment deleted before its create is read notifies no one.
		f.deliver(event.CommentDeleted, commentV2(c(7), a1, replier, "00002"))
		f.deliver(event.CommentCreated, commentV2(c(7), a1, replier, "00002"))
		if got := f.unread(author); got != 2 {
			t.Errorf("a deleted comment's late create: author's unread %d, want 2", got)
		}
		// So does one hidden before its create is read (the moderation topic is read apart from the comment topic).
		f.deliver(event.CommentModerated, event.CommentModeration{CommentID: apijson.ID(c(10)), ArticleID: a1, BoardID: 1,
			WriterID: other, Hidden: event.Pending, Action: event.ActionHide, ModeratedAt: apijson.Time(t0)})
		f.deliver(event.CommentCreated, commentV2(c(10), a1, other, "00004"))
		if got := f.unread(author); got != 2 {
			t.Errorf("a hidden comment's late create: author's unread %d, want 2", got)
		}

		// A restored comment does not take anything back.
		f.deliver(event.CommentModerated, event.CommentModeration{CommentID: apijson.ID(c(4)), ArticleID: a1, BoardID: 1,
			WriterID: other, Action: event.ActionRestore, ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		if got := f.unread(author); got != 2 {
			t.Errorf("after a restore: author's unread %d, want 2", got)
		}

		// An article's deletion takes back its unread comments, replies and likes, not its moderation.
		f.deliver(event.CommentCreated, commentV2(c(8), a1, other, "0000200000")) // a reply to replier's c(7)
		f.deliver(event.ArticleLiked, likeEvent(a1, other))
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Action: event.ActionLock, ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		f.deliver(event.ArticleDeleted, articleEvent(a1, author, "One"))
		if diff := cmp.Diff([]string{"moderation:", ac(6), ac(1) + ":read"}, kinds(author)); diff != "" {
			t.Errorf("author after the article's deletion (-want +got):\n%s", diff)
		}
		if got := f.unread(author); got != 2 {
			t.Errorf("author's unread %d, want 2", got)
		}
		if got := kinds(replier); len(got) != 0 {
			t.Errorf("replier's inbox %v: the article was deleted", got)
		}
		// Nothing about it comes later.
		f.deliver(event.CommentCreated, commentV2(c(9), a1, replier, "00003"))
		f.deliver(event.ArticleLiked, likeEvent(a1, replier))
		if got := f.unread(author); got != 2 {
			t.Errorf("events of a deleted article: author's unread %d, want 2", got)
		}
	})
}

// TestArticleLookedUp: a comment or a like read before its article's event looks the article up at the article
// service; an article it does not know notifies no one, and one it cannot tell of fails the event, to be retried.
func TestArticleLookedUp(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.origin.add(a1, author, "Found")
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		f.deliver(event.ArticleLiked, likeEvent(a1, replier))
		want := []brief{
			{Kind: ArticleLike, Article: idStr(a1), Actors: idStr(replier), Count: 1, Title: "Found"},
			{Kind: ArticleComment, Article: idStr(a1), Comment: idStr(c(1)), Actors: idStr(replier), Count: 1, Title: "Found"},
		}
		if diff := cmp.Diff(want, briefs(f.list(author))); diff != "" {
			t.Errorf("looked up (-want +got):\n%s", diff)
		}
		if got := f.origin.calls.Load(); got != 1 {
			t.Errorf("%d lookups, want 1: the answer is kept", got)
		}

		f.deliver(event.CommentCreated, commentV2(c(2), a2, replier, "00000")) // the article service does not know a2
		f.deliver(event.ArticleLiked, likeEvent(a2, replier))
		if got := f.unread(author); got != 2 {
			t.Errorf("unread %d, want 2: a2 is not found", got)
		}

		f.origin.add(a3, author, "Later")
		f.origin.status.Store(http.StatusServiceUnavailable)
		comment := envelope(t, event.CommentCreated, commentV2(c(3), a3, replier, "00000"))
		like := envelope(t, event.ArticleLiked, likeEvent(a3, other))
		for _, env := range []event.Envelope{comment, like} {
			if err := f.handle(env); err == nil {
				t.Errorf("%s with the article service down: no error, want one (the consumer retries)", env.Type)
			}
		}
		if got := f.unread(author); got != 2 {
			t.Errorf("unread %d, want 2", got)
		}
		f.origin.status.Store(0)
		for _, env := range []event.Envelope{comment, like} {
			if err := f.handle(env); err != nil {
				t.Fatalf("%s retried: %v", env.Type, err)
			}
		}
		if got := briefs(f.list(author)); len(got) != 4 || got[0].Article != idStr(a3) || got[1].Comment != idStr(c(3)) {
			t.Errorf("after the retries: %+v, want a3's like and comment on top", got)
		}
	})
}

func TestModeration(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000"))
		removed := f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Hidden: event.Removed, Action: event.ActionRemove, Reason: "off topic", ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		if err := f.handle(removed); err != nil {
			t.Fatal(err)
		}
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Action: event.ActionRestore, ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Hidden: event.Pending, Action: event.ActionHide, ModeratedAt: apijson.Time(t0)}) // by reports: no moderator
		f.deliver(event.CommentModerated, event.CommentModeration{CommentID: apijson.ID(c(1)), ArticleID: a1, BoardID: 1,
			WriterID: replier, Hidden: event.Removed, Action: event.ActionRemove, Reason: "rude", ModeratorID: mod,
			ModeratedAt: apijson.Time(t0)})
		f.deliver(event.UserBanned, event.Ban{UserID: other, Banned: true, Reason: "spam", ModeratorID: mod, At: apijson.Time(t0)})
		f.deliver(event.UserUnbanned, event.Ban{UserID: other, Reason: "appeal", ModeratorID: mod, At: apijson.Time(t0)})
		// A moderator's acts on their own content or account tell them nothing.
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a2, BoardID: 1, WriterID: mod,
			Action: event.ActionPin, ModeratorID: mod, ModeratedAt: apijson.Time(t0)})
		f.deliver(event.UserBanned, event.Ban{UserID: mod, Banned: true, ModeratorID: mod, At: apijson.Time(t0)})

		m := func(article, comment int64, action, reason string, title string, actors ...int64) brief {
			n := brief{Kind: Moderation, Action: action, Reason: reason, Title: title, Count: int64(len(actors))}
			if article != 0 {
				n.Article = idStr(article)
			}
			if comment != 0 {
				n.Comment = idStr(comment)
			}
			var ids []string
			for _, a := range actors {
				ids = append(ids, idStr(a))
			}
			n.Actors = strings.Join(ids, ",")
			return n
		}
		want := map[int64][]brief{
			// The hidden comment's notification is taken back.
			author:  {m(a1, 0, "hide", "", "One"), m(a1, 0, "restore", "", "One", mod), m(a1, 0, "remove", "off topic", "One", mod)},
			replier: {m(a1, c(1), "remove", "rude", "One", mod)},
			other:   {m(0, 0, "unban", "appeal", "", mod), m(0, 0, "ban", "spam", "", mod)},
			mod:     {},
		}
		for user, w := range want {
			if diff := cmp.Diff(w, briefs(f.list(user))); diff != "" {
				t.Errorf("user %d (-want +got):\n%s", user, diff)
			}
		}
		r := f.call(other, "GET", "/v1/notifications", "")
		if strings.Contains(r.Body, `"articleId"`) || strings.Contains(r.Body, `"commentId"`) {
			t.Errorf("a ban names an article or a comment: %s", r.Body)
		}
	})
}

func TestPreferences(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		all := `{"reply":true,"commentReply":true,"like":true,"moderation":true,"mention":true,"watched":true,"autoWatch":true,"email":"off"}`
		r := f.call(author, "GET", "/v1/notification-preferences", "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		if r.Body != all+"\n" && r.Body != all {
			t.Errorf("default preferences %s, want %s", r.Body, all)
		}
		for _, body := range []string{`{"reply":false,"commentReply":true,"like":false}`, `{"reply":false,"commentReply":true,"like":false,"moderation":null}`} {
			httpiotest.WantError(t, f.call(author, "PUT", "/v1/notification-preferences", body), http.StatusBadRequest, "MISSING_FIELD")
		}
		for _, body := range []string{`{"reply":"no","commentReply":true,"like":false,"moderation":false}`, `[]`, `{`} {
			if r := f.call(author, "PUT", "/v1/notification-preferences", body); r.Status != http.StatusBadRequest {
				t.Errorf("PUT %s: status %d, want 400", body, r.Status)
			}
		}
		some := `{"reply":false,"commentReply":true,"like":false,"moderation":false,"mention":true,"watched":true,"autoWatch":false,"email":"daily"}`
		for _, user := range []int64{author, other} {
			r = f.call(user, "PUT", "/v1/notification-preferences", some)
			httpiotest.WantStatus(t, r, http.StatusOK)
		}
		if got := strings.TrimSpace(f.call(author, "GET", "/v1/notification-preferences", "").Body); got != some {
			t.Errorf("preferences %s, want %s", got, some)
		}
		if got := strings.TrimSpace(f.call(replier, "GET", "/v1/notification-preferences", "").Body); got != all {
			t.Errorf("another user's preferences %s, want %s", got, all)
		}

		f.noAutoWatch(replier)
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.CommentCreated, commentV2(c(1), a1, replier, "00000")) // reply: off
		f.deliver(event.CommentCreated, commentV2(c(2), a1, author, "00001"))
		f.deliver(event.CommentCreated, commentV2(c(3), a1, replier, "0000100000"))    // commentReply: on
		f.deliver(event.CommentCreated, commentV2(c(4), a1, other, "000010000000000")) // reply to c(3): to replier
		f.deliver(event.ArticleLiked, likeEvent(a1, replier))                          // like: off
		f.deliver(event.ArticleModerated, event.ArticleModeration{ArticleID: a1, BoardID: 1, WriterID: author,
			Action: event.ActionLock, ModeratorID: mod, ModeratedAt: apijson.Time(t0)}) // moderation: off
		f.deliver(event.UserBanned, event.Ban{UserID: other, Banned: true, ModeratorID: mod, At: apijson.Time(t0)})
		want := []brief{{Kind: CommentReply, Article: idStr(a1), Comment: idStr(c(3)), Actors: idStr(replier), Count: 1, Title: "One"}}
		if diff := cmp.Diff(want, briefs(f.list(author))); diff != "" {
			t.Errorf("author (-want +got):\n%s", diff)
		}
		if got := f.list(other); len(got) != 0 {
			t.Errorf("other wants no moderation, got %+v", got)
		}
		if got := f.list(replier); len(got) != 1 || got[0].Kind != CommentReply {
			t.Errorf("replier wants all, got %+v", got)
		}

		// Wanted again, a kind is told of from then on.
		httpiotest.WantStatus(t, f.call(author, "PUT", "/v1/notification-preferences", all), http.StatusOK)
		f.deliver(event.ArticleLiked, likeEvent(a1, other))
		if got := f.list(author); len(got) != 2 || got[0].Kind != ArticleLike || got[0].ActorCount != 1 {
			t.Errorf("likes on again: %+v", got)
		}
	})
}

func TestListPaging(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		empty := f.call(author, "GET", "/v1/notifications", "")
		httpiotest.WantStatus(t, empty, http.StatusOK)
		if diff := cmp.Diff(map[string]any{"notifications": []any{}, "nextCursor": ""}, httpiotest.DecodeJSON(t, empty.Body)); diff != "" {
			t.Errorf("an empty inbox (-want +got):\n%s", diff)
		}
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		const n = 250
		for i := int64(1); i <= n; i++ {
			f.deliver(event.CommentCreated, commentV1(c(i), a1, replier, 0))
		}
		if got := f.unread(author); got != n {
			t.Fatalf("unread %d, want %d", got, n)
		}
		for _, size := range []int{1, 7, 100} {
			var want, got []string
			for _, x := range f.list(author) {
				want = append(want, x.CommentID)
			}
			for i, x := range want[len(want)-n:] {
				if x != idStr(c(n-int64(i))) {
					t.Fatalf("page size %d: the whole list %v is not newest first", size, want)
				}
			}
			cursor, pages := "", 0
			for {
				p := f.listPage(author, "?pageSize="+idStr(int64(size))+"&cursor="+cursor)
				pages++
				if len(p.Notifications) > size || len(p.Notifications) < size && p.NextCursor != "" {
					t.Fatalf("page size %d: a page of %d, next %q", size, len(p.Notifications), p.NextCursor)
				}
				for _, x := range p.Notifications {
					got = append(got, x.CommentID)
				}
				if p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
				if pages == 2 { // a new notification meanwhile goes on top, and moves nothing on the pages to come
					f.deliver(event.CommentCreated, commentV1(c(int64(1000+size)), a1, other, 0))
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("page size %d: %d notifications, want %d (-want +got):\n%s", size, len(got), len(want), diff)
			}
			if wantPages := (len(want) + size - 1) / size; pages != wantPages {
				t.Errorf("page size %d: %d pages, want %d", size, pages, wantPages)
			}
		}
		if got := f.unread(author); got != n+3 {
			t.Errorf("unread %d, want %d", got, n+3)
		}

		// Cursors are the inbox's own.
		p := f.listPage(author, "?pageSize=10")
		httpiotest.WantError(t, f.call(replier, "GET", "/v1/notifications?cursor="+p.NextCursor, ""), http.StatusBadRequest, "INVALID_CURSOR")
		for _, bad := range []string{"garbage!", "Zm9vOmJhcg", "MTAxOi0x", "MTAx"} { // foo:bar, 101:-1, 101
			httpiotest.WantError(t, f.call(author, "GET", "/v1/notifications?cursor="+bad, ""), http.StatusBadRequest, "INVALID_CURSOR")
		}
		for _, size := range []string{"0", "101", "x"} {
			httpiotest.WantError(t, f.call(author, "GET", "/v1/notifications?pageSize="+size, ""), http.StatusBadRequest, "INVALID_PAGE_SIZE")
		}
	})
}

func TestMarkRead(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		f.deliver(event.ArticleCreated, articleEvent(a1, author, "One"))
		f.deliver(event.ArticleCreated, articleEvent(a2, replier, "Two"))
		for i := int64(1); i <= 3; i++ {
			f.deliver(event.CommentCreated, commentV1(c(i), a1, other, 0))
		}
		f.deliver(event.CommentCreated, commentV1(c(4), a2, other, 0))
		mine, theirs := f.list(author), f.list(replier)

		httpiotest.WantError(t, f.call(author, "POST", "/v1/notifications/"+theirs[0].NotificationID+"/read", ""),
			http.StatusNotFound, "NOTIFICATION_NOT_FOUND")
		httpiotest.WantError(t, f.call(author, "POST", "/v1/notifications/12345/read", ""), http.StatusNotFound, "NOTIFICATION_NOT_FOUND")
		if r := f.call(author, "POST", "/v1/notifications/x/read", ""); r.Status != http.StatusBadRequest {
			t.Errorf("a bad id: status %d, want 400", r.Status)
		}
		if f.unread(replier) != 1 || f.list(replier)[0].Read {
			t.Fatal("another user's mark-read changed replier's inbox")
		}

		f.markRead(author, mine[1].NotificationID)
		f.markRead(author, mine[1].NotificationID) // again: still read, counted once
		if got := f.unread(author); got != 2 {
			t.Errorf("unread %d, want 2", got)
		}
		if got := f.list(author); got[1].Read != true || got[0].Read || got[2].Read {
			t.Errorf("after one mark-read: %+v", got)
		}

		httpiotest.WantStatus(t, f.call(author, "POST", "/v1/notifications/read-all", ""), http.StatusNoContent)
		httpiotest.WantStatus(t, f.call(author, "POST", "/v1/notifications/read-all", ""), http.StatusNoContent)
		if got := f.unread(author); got != 0 {
			t.Errorf("unread %d after read-all", got)
		}
		for _, n := range f.list(author) {
			if !n.Read {
				t.Errorf("%s unread after read-all", n.NotificationID)
			}
		}
		if f.unread(replier) != 1 {
			t.Error("read-all read another user's inbox")
		}
	})
}

func TestNeedsAToken(t *testing.T) {
	f := newFixture(t, sqldbtest.OpenSQLite(t, Migrate), redisclienttest.Mini(t), Config{})
	for _, route := range []struct{ method, target, body string }{
		{"GET", "/v1/notifications", ""},
		{"GET", "/v1/notifications/unread-count", ""},
		{"POST", "/v1/notifications/1/read", ""},
		{"POST", "/v1/notifications/read-all", ""},
		{"GET", StreamPath, ""},
		{"GET", "/v1/notification-preferences", ""},
		{"PUT", "/v1/notification-preferences", `{"reply":true,"commentReply":true,"like":true,"moderation":true}`},
	} {
		httpiotest.WantError(t, f.call(0, route.method, route.target, route.body), http.StatusUnauthorized, "UNAUTHENTICATED")
	}
}

// An article's delete and a comment or like on it, handled at once (their topics are read apart, and partitions
// side by side): no unread notification about the deleted article is left, whichever goes first.
func TestDeleteRacesCommentsAndLikes(t *testing.T) {
	run(t, func(t *testing.T, db *sqldb.DB, b redisclienttest.Backend) {
		f := newFixture(t, db, b, Config{})
		for i := range int64(40) {
			a := a1 + 1000 + i
			f.deliver(event.ArticleCreated, articleEvent(a, author, "x"))
			f.deliver(event.CommentCreated, commentV1(c(100+2*i), a, other, 0))
			var wg sync.WaitGroup
			errs := make([]error, 3)
			wg.Go(func() {
				errs[0] = f.handle(envelope(t, event.CommentCreated, commentV1(c(101+2*i), a, replier, c(100+2*i))))
			})
			wg.Go(func() { errs[1] = f.handle(envelope(t, event.ArticleLiked, likeEvent(a, replier))) })
			wg.Go(func() { errs[2] = f.handle(envelope(t, event.ArticleDeleted, articleEvent(a, author, "x"))) })
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, u := range []int64{author, other} {
			for _, n := range f.list(u) {
				if !n.Read {
					t.Errorf("user %d has an unread notification about a deleted article: %+v", u, n.brief())
				}
			}
			if got := f.unread(u); got != 0 {
				t.Errorf("user %d's unread count %d, want 0", u, got)
			}
		}
	})
}
